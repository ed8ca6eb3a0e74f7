//! GRPO / DAPO numerics: group-relative advantages, dynamic-sampling group filter, the PPO
//! clipped surrogate with clip-higher and dual-clip, `low_var_kl`, and loss aggregation — the
//! formulas of verl's `core_algos.py`, on candle tensors for the loss and plain slices otherwise.

use crate::config::LossAgg;
use candle_core::{Result, Tensor};

/// Numerical floor of the group std (verl's `epsilon`).
pub const ADV_EPS: f32 = 1e-6;
/// Dual-clip constant for negative advantages (verl's `clip_ratio_c`).
pub const CLIP_RATIO_C: f32 = 3.0;

/// GRPO advantages: each reward minus its group's mean, divided by the group's (unbiased) std
/// when `norm_by_std`. `rewards` holds consecutive groups of `group` samples of one prompt; a
/// group of one sample gets advantage 0.
pub fn grpo_advantages(rewards: &[f32], group: usize, norm_by_std: bool) -> Vec<f32> {
    let mut out = Vec::with_capacity(rewards.len());
    for g in rewards.chunks(group) {
        if g.len() < 2 {
            out.extend(g.iter().map(|_| 0.0));
            continue;
        }
        let n = g.len() as f32;
        let mean = g.iter().sum::<f32>() / n;
        let var = g.iter().map(|r| (r - mean).powi(2)).sum::<f32>() / (n - 1.0);
        let std = var.sqrt();
        out.extend(g.iter().map(|r| {
            let c = r - mean;
            if norm_by_std { c / (std + ADV_EPS) } else { c }
        }));
    }
    out
}

/// DAPO dynamic sampling: which groups to keep (those whose rewards are not all equal).
pub fn informative_groups(rewards: &[f32], group: usize) -> Vec<bool> {
    rewards
        .chunks(group)
        .map(|g| g.iter().any(|r| (r - g[0]).abs() > 0.0))
        .collect()
}

/// `low_var_kl` (k3 estimator, clamped to [-10, 10]) of one token.
pub fn low_var_kl(logp: f32, ref_logp: f32) -> f32 {
    let kl = ref_logp - logp;
    (kl.exp() - kl - 1.0).clamp(-10.0, 10.0)
}

/// Per-token PPO clipped surrogate loss of one token (reference for the tensor version).
pub fn ppo_token_loss(logp: f32, old: f32, adv: f32, clip_low: f32, clip_high: f32) -> f32 {
    let ratio = (logp - old).exp();
    let l1 = -adv * ratio;
    let l2 = -adv * ratio.clamp(1.0 - clip_low, 1.0 + clip_high);
    let clipped = l1.max(l2);
    if adv < 0.0 {
        clipped.min(-adv * CLIP_RATIO_C)
    } else {
        clipped
    }
}

/// The normalisers of one mini-batch across all ranks: total response tokens and sequences.
#[derive(Debug, Clone, Copy)]
pub struct GlobalDenoms {
    /// Valid response tokens in the global mini-batch.
    pub tokens: f32,
    /// Sequences in the global mini-batch.
    pub seqs: f32,
}

/// Aggregates per-token values `x` `[B, R]` under `mask` so that summing the results of all
/// micro-batches on all ranks gives the global mini-batch aggregate.
pub fn aggregate(x: &Tensor, mask: &Tensor, mode: LossAgg, d: GlobalDenoms) -> Result<Tensor> {
    let xm = x.mul(mask)?;
    match mode {
        LossAgg::TokenMean => xm.sum_all()?.affine(1.0 / d.tokens as f64, 0.0),
        LossAgg::SeqMeanTokenSum => xm.sum_all()?.affine(1.0 / d.seqs as f64, 0.0),
        LossAgg::SeqMeanTokenMean => {
            let len = mask.sum(1)?.clamp(1.0, f64::MAX)?;
            xm.sum(1)?
                .div(&len)?
                .sum_all()?
                .affine(1.0 / d.seqs as f64, 0.0)
        }
    }
}

/// Inputs of the actor loss for one micro-batch, all `[B, R]`.
pub struct LossInputs<'a> {
    /// Current log-probs (tracked).
    pub logp: &'a Tensor,
    /// Entropy per token (tracked).
    pub entropy: &'a Tensor,
    /// Log-probs at rollout time.
    pub old_logp: &'a Tensor,
    /// Reference log-probs (KL loss only).
    pub ref_logp: Option<&'a Tensor>,
    /// Advantages broadcast over tokens.
    pub adv: &'a Tensor,
    /// 1 for response tokens, 0 for padding.
    pub mask: &'a Tensor,
}

/// Loss settings.
#[derive(Debug, Clone, Copy)]
pub struct LossSettings {
    /// Lower clip.
    pub clip_low: f32,
    /// Upper clip (DAPO clip-higher).
    pub clip_high: f32,
    /// KL coefficient (0 = no KL term).
    pub kl_coef: f32,
    /// Entropy bonus.
    pub entropy_coeff: f32,
    /// Aggregation.
    pub agg: LossAgg,
}

/// The micro-batch loss and its (aggregated, detached) statistics.
pub struct LossOut {
    /// Scalar loss to backpropagate.
    pub loss: Tensor,
    /// Policy-gradient part.
    pub pg_loss: f32,
    /// KL part (before the coefficient).
    pub kl: f32,
    /// Entropy.
    pub entropy: f32,
    /// Fraction of tokens whose ratio was clipped (mask-weighted, same aggregation).
    pub clipfrac: f32,
}

/// verl's `compute_policy_loss` (vanilla, with dual-clip) plus the KL and entropy terms.
pub fn actor_loss(x: &LossInputs, s: LossSettings, d: GlobalDenoms) -> Result<LossOut> {
    let ratio = x.logp.sub(x.old_logp)?.exp()?;
    let neg_adv = x.adv.neg()?;
    let l1 = neg_adv.mul(&ratio)?;
    let clamped = ratio.clamp(1.0 - s.clip_low, 1.0 + s.clip_high)?;
    let l2 = neg_adv.mul(&clamped)?;
    let clip1 = l1.maximum(&l2)?;
    let l3 = neg_adv.affine(CLIP_RATIO_C as f64, 0.0)?;
    let clip2 = clip1.minimum(&l3)?;
    let neg = x.adv.lt(0.0)?;
    let pg = neg.where_cond(&clip2, &clip1)?;
    let clipped = l2.gt(&l1)?.to_dtype(candle_core::DType::F32)?;
    let pg_loss = aggregate(&pg, x.mask, s.agg, d)?;
    let ent = aggregate(x.entropy, x.mask, s.agg, d)?;
    let mut loss = pg_loss.clone();
    if s.entropy_coeff != 0.0 {
        loss = loss.sub(&ent.affine(s.entropy_coeff as f64, 0.0)?)?;
    }
    let mut kl_v = 0.0;
    if let (Some(r), true) = (x.ref_logp, s.kl_coef != 0.0) {
        let kl = r.sub(x.logp)?;
        let k3 = kl.exp()?.sub(&kl)?.affine(1.0, -1.0)?.clamp(-10.0, 10.0)?;
        let kl_agg = aggregate(&k3, x.mask, s.agg, d)?;
        kl_v = kl_agg.to_scalar::<f32>()?;
        loss = loss.add(&kl_agg.affine(s.kl_coef as f64, 0.0)?)?;
    }
    Ok(LossOut {
        pg_loss: pg_loss.to_scalar::<f32>()?,
        kl: kl_v,
        entropy: ent.to_scalar::<f32>()?,
        clipfrac: aggregate(&clipped, x.mask, s.agg, d)?.to_scalar::<f32>()?,
        loss,
    })
}

/// GAE of one response (verl's `compute_gae_advantage_return`): the outcome reward on the last
/// token, `values[t]` the critic's value before token `t`. Returns (advantages, returns), with
/// `delta_t = r_t + gamma * V_{t+1} - V_t` (`V` past the end is 0) and
/// `A_t = delta_t + gamma * lam * A_{t+1}`, `returns = A + V`.
pub fn gae(reward: f32, values: &[f32], gamma: f32, lam: f32) -> (Vec<f32>, Vec<f32>) {
    let n = values.len();
    let mut adv = vec![0f32; n];
    let mut last = 0f32;
    for t in (0..n).rev() {
        let next = if t + 1 < n { values[t + 1] } else { 0.0 };
        let r = if t + 1 == n { reward } else { 0.0 };
        let delta = r + gamma * next - values[t];
        last = delta + gamma * lam * last;
        adv[t] = last;
    }
    let ret = adv.iter().zip(values).map(|(a, v)| a + v).collect();
    (adv, ret)
}

/// Inputs of the critic loss for one micro-batch, all `[B, R]`.
pub struct ValueInputs<'a> {
    /// Current value predictions (tracked).
    pub vpreds: &'a Tensor,
    /// Values at `compute_values` time.
    pub values: &'a Tensor,
    /// GAE returns.
    pub returns: &'a Tensor,
    /// 1 for response tokens.
    pub mask: &'a Tensor,
}

/// The critic micro-batch loss and its statistics.
pub struct ValueLossOut {
    /// Scalar loss to backpropagate.
    pub loss: Tensor,
    /// `critic/vf_clipfrac` part (same aggregation as the loss).
    pub clipfrac: f32,
    /// `critic/vpred_mean` part.
    pub vpred_mean: f32,
}

/// verl's `compute_value_loss`: `0.5 * agg(max((V - R)^2, (clip(V, V_old +- c) - R)^2))`.
pub fn value_loss(
    x: &ValueInputs,
    cliprange: f32,
    agg: LossAgg,
    d: GlobalDenoms,
) -> Result<ValueLossOut> {
    let c = cliprange as f64;
    let lo = x.values.affine(1.0, -c)?;
    let hi = x.values.affine(1.0, c)?;
    let clipped = x.vpreds.maximum(&lo)?.minimum(&hi)?;
    let l1 = x.vpreds.sub(x.returns)?.sqr()?;
    let l2 = clipped.sub(x.returns)?.sqr()?;
    let worst = l1.maximum(&l2)?;
    let loss = aggregate(&worst, x.mask, agg, d)?.affine(0.5, 0.0)?;
    let frac = l2.gt(&l1)?.to_dtype(candle_core::DType::F32)?;
    Ok(ValueLossOut {
        clipfrac: aggregate(&frac, x.mask, agg, d)?.to_scalar::<f32>()?,
        vpred_mean: aggregate(&x.vpreds.detach(), x.mask, agg, d)?.to_scalar::<f32>()?,
        loss,
    })
}

#[cfg(test)]
mod gae_tests {
    use super::*;

    #[test]
    fn gae_with_lambda_one_gives_the_discounted_return_minus_the_value() {
        let v = [0.5, 0.25, 0.75];
        let (adv, ret) = gae(1.0, &v, 0.9, 1.0);
        // returns: the reward discounted back from the last token
        for (t, r) in ret.iter().enumerate() {
            let expect = 0.9f32.powi((2 - t) as i32);
            assert!((r - expect).abs() < 1e-5, "{ret:?}");
            assert!((adv[t] - (expect - v[t])).abs() < 1e-5, "{adv:?}");
        }
        // lambda 0: one-step TD errors
        let (adv0, _) = gae(1.0, &v, 1.0, 0.0);
        assert!((adv0[0] - (0.25 - 0.5)).abs() < 1e-6 && (adv0[2] - (1.0 - 0.75)).abs() < 1e-6);
    }
}
