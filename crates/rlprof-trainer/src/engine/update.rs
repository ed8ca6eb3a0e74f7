//! The actor's training steps: `update_actor` (PPO epochs over mini- and micro-batches with
//! gradient accumulation), the supervised warm-up step, and the helpers the critic's update
//! shares (mini-batch split, global loss denominators, the finite-loss check).

use super::grads::{Zero2, backward_into, zero_grad};
use super::ppo::{MicroBatchUpdate, PpoSchedule, for_each_micro_batch};
use super::{Engine, Sample, SeqBatch, UpdateStats, loss_module};
use crate::algo::{self, GlobalDenoms, LossInputs, LossSettings};
use crate::comm::Communicator;
use crate::error::{Result, TrainerError};
use crate::model::autograd;
use crate::traced_op;
use candle_core::{Tensor, Var};

impl<C: Communicator> Engine<C> {
    /// `update_actor`: PPO epochs over mini-batches of micro-batches with gradient accumulation;
    /// one sharded optimizer update per mini-batch. `step` names the step in errors.
    pub fn update_actor(&mut self, samples: &[Sample], step: u64) -> Result<UpdateStats> {
        let a = self.cfg.actor.clone();
        let schedule = PpoSchedule::new(
            a.ppo_epochs,
            self.cfg.data.train_batch_size,
            a.ppo_mini_batch_size,
            a.ppo_micro_batch_size_per_gpu,
        );
        let settings = LossSettings {
            clip_low: a.clip_ratio_low,
            clip_high: a.clip_ratio_high,
            kl_coef: if a.use_kl_loss { a.kl_loss_coef } else { 0.0 },
            entropy_coeff: a.entropy_coeff,
            agg: a.loss_agg_mode,
        };
        let temp = self.cfg.rollout.temperature;
        let mut update = ActorUpdate {
            engine: self,
            settings,
            temp,
            step,
            local: [0f32; 4],
        };
        let totals = for_each_micro_batch(&mut update, samples, schedule)?;
        let mut local = update.local;
        self.comm.all_reduce_sum(&mut local)?;
        let mut st = UpdateStats {
            grad_norm: totals.grad_norm,
            updates: totals.updates,
            ..UpdateStats::default()
        };
        let k = st.updates.max(1) as f64;
        st.pg_loss = local[0] as f64 / k;
        st.kl = local[1] as f64 / k;
        st.entropy = local[2] as f64 / k;
        st.clipfrac = local[3] as f64 / k;
        st.grad_norm /= k;
        Ok(st)
    }

    /// Supervised step on `(prompt, target)` token rows (the warm-up): token-mean cross-entropy
    /// over target tokens of the global batch. Returns the global loss.
    pub fn sft_step(&mut self, rows: &[(Vec<u32>, Vec<u32>)], step: u64) -> Result<f32> {
        let mut tokens = [rows.iter().map(|(_, t)| t.len() as f32).sum::<f32>()];
        self.comm.all_reduce_sum(&mut tokens)?;
        let samples: Vec<Sample> = rows
            .iter()
            .map(|(p, t)| Sample {
                group: 0,
                prompt_ids: p.clone(),
                response: t.clone(),
                score: 0.0,
                reward: 0.0,
                adv: 0.0,
                old_logp: Vec::new(),
                rollout_logp: Vec::new(),
                ref_logp: Vec::new(),
                token_adv: Vec::new(),
                values: Vec::new(),
                returns: Vec::new(),
            })
            .collect();
        let refs: Vec<&Sample> = samples.iter().collect();
        let mut grads = zero_grad(self.flat.len());
        let mut loss_sum = [0f32];
        for micro in refs.chunks(self.cfg.actor.ppo_micro_batch_size_per_gpu.max(1)) {
            let _grad = autograd::grad_enabled();
            let batch = SeqBatch::new(micro, self.tok.pad_id, &self.device)?;
            let (lp, _) = batch.logprobs(&self.train_model, 1.0)?;
            let scale = -1.0 / tokens[0].max(1.0) as f64;
            let loss = traced_op!(
                "compute_sft_loss",
                loss_module(),
                [&lp],
                0,
                autograd::region(&lp, &batch.mask, |lp, mask| lp
                    .mul(mask)?
                    .sum_all()?
                    .affine(scale, 0.0))
            )?;
            loss_sum[0] += finite_loss(&loss, step, "warm-up loss")?;
            self.accumulate_grads(&loss, &mut grads)?;
        }
        self.apply_grads(&mut grads, 1.0, step)?;
        self.comm.all_reduce_sum(&mut loss_sum)?;
        Ok(loss_sum[0])
    }

    /// Backward of `loss` (every node a recorded op, [`autograd`]), then gradient accumulation:
    /// each parameter's gradient added into the flat buffer (op `accumulate_grad` per
    /// parameter, under the parameter's module path).
    fn accumulate_grads(&self, loss: &Tensor, flat: &mut [f32]) -> Result<()> {
        let vars: Vec<&Var> = self.actor.vars().iter().collect();
        backward_into(loss, &vars, &self.param_modules, flat)
    }

    /// Per-parameter gradient norms of `loss` (for the every-weight-learns test).
    pub fn grad_norms(&self, samples: &[Sample]) -> Result<Vec<(String, f32)>> {
        let refs: Vec<&Sample> = samples.iter().collect();
        let batch = SeqBatch::new(&refs, self.tok.pad_id, &self.device)?;
        let (lp, _) = batch.logprobs(&self.train_model, 1.0)?;
        let loss = lp.mul(&batch.mask)?.sum_all()?.neg()?;
        let gs = loss.backward()?;
        self.actor
            .names()
            .iter()
            .zip(self.actor.vars())
            .map(|(n, v)| {
                let norm = match gs.get(v.as_tensor()) {
                    Some(g) => g.sqr()?.sum_all()?.sqrt()?.to_scalar::<f32>()?,
                    None => 0.0,
                };
                Ok((n.clone(), norm))
            })
            .collect()
    }

    /// ZeRO-2 update: reduce-scatter gradients, clip by the global norm, AdamW on this rank's
    /// shard, all-gather the parameters. Returns the global grad norm before clipping.
    fn apply_grads(&mut self, grads: &mut [f32], max_norm: f32, step: u64) -> Result<f32> {
        let mut z = Zero2 {
            comm: &self.comm,
            opt: &mut self.opt,
            flat: &mut self.flat,
            shard: self.shard,
        };
        let actor = &self.actor;
        z.step(grads, max_norm, step, "grad_norm", |flat| {
            Ok(actor.set_flat(&flat[..actor.len()])?)
        })
    }
}

/// `update_actor`'s part of the PPO loop: the policy loss of each micro-batch, the actor's
/// ZeRO-2 update of each mini-batch.
struct ActorUpdate<'a, C: Communicator> {
    engine: &'a mut Engine<C>,
    settings: LossSettings,
    temp: f32,
    step: u64,
    /// Sums over micro-batches of pg_loss, kl, entropy and clipfrac (this rank).
    local: [f32; 4],
}

impl<C: Communicator> MicroBatchUpdate for ActorUpdate<'_, C> {
    type Comm = C;

    fn comm(&self) -> &C {
        &self.engine.comm
    }

    fn grads_len(&self) -> usize {
        self.engine.flat.len()
    }

    fn micro_batch(
        &mut self,
        micro: &[Sample],
        denoms: GlobalDenoms,
        grads: &mut [f32],
    ) -> Result<()> {
        let e = &*self.engine;
        let settings = self.settings;
        let refs: Vec<&Sample> = micro.iter().collect();
        let batch = SeqBatch::new(&refs, e.tok.pad_id, &e.device)?;
        // Without an entropy term the entropy is a metric only: no backward through it.
        let (lp, ent) = if settings.entropy_coeff == 0.0 {
            batch.logprobs_entropy_metric(&e.train_model, self.temp)?
        } else {
            batch.logprobs(&e.train_model, self.temp)?
        };
        let old = batch.per_token(&refs, |s| &s.old_logp)?;
        let refl = if settings.kl_coef != 0.0 {
            Some(batch.per_token(&refs, |s| &s.ref_logp)?)
        } else {
            None
        };
        let adv = batch.advantages(&refs)?;
        let mut stats = None;
        let loss = traced_op!("compute_policy_loss", loss_module(), [&lp, &ent], 0, {
            autograd::region(&lp, &ent, |lp, ent| {
                let out = algo::actor_loss(
                    &LossInputs {
                        logp: lp,
                        entropy: ent,
                        old_logp: &old,
                        ref_logp: refl.as_ref(),
                        adv: &adv,
                        mask: &batch.mask,
                    },
                    settings,
                    denoms,
                )?;
                let l = out.loss.clone();
                stats = Some(out);
                Ok(l)
            })
        })?;
        let out = stats.expect("the loss region ran");
        finite_loss(&loss, self.step, "actor loss")?;
        e.accumulate_grads(&loss, grads)?;
        self.local[0] += out.pg_loss;
        self.local[1] += out.kl;
        self.local[2] += out.entropy;
        self.local[3] += out.clipfrac;
        Ok(())
    }

    fn apply(&mut self, grads: &mut [f32]) -> Result<f32> {
        let max_norm = self.engine.cfg.actor.grad_clip;
        self.engine.apply_grads(grads, max_norm, self.step)
    }
}

/// Splits `v` into `k` contiguous chunks whose sizes differ by at most one.
pub(crate) fn split_even<T>(v: &[T], k: usize) -> Vec<&[T]> {
    let (q, rem) = (v.len() / k, v.len() % k);
    let mut out = Vec::with_capacity(k);
    let mut off = 0;
    for i in 0..k {
        let len = q + (i < rem) as usize;
        out.push(&v[off..off + len]);
        off += len;
    }
    out
}

/// A mini-batch's loss denominators over all ranks (response tokens, sequences), as verl's
/// global-batch loss aggregation takes them; `None` when no rank has a sequence in it. Shared by
/// `update_actor` and `update_critic`.
pub(crate) fn global_denoms<C: Communicator>(
    comm: &C,
    mini: &[Sample],
) -> Result<Option<GlobalDenoms>> {
    let mut d = [
        mini.iter().map(|s| s.response.len() as f32).sum::<f32>(),
        mini.len() as f32,
    ];
    comm.all_reduce_sum(&mut d)?;
    Ok((d[1] != 0.0).then(|| GlobalDenoms {
        tokens: d[0].max(1.0),
        seqs: d[1],
    }))
}

/// The value of a micro-batch's scalar loss; a non-finite one stops training with an error
/// naming the step and `what`.
pub(crate) fn finite_loss(loss: &Tensor, step: u64, what: &'static str) -> Result<f32> {
    let v = loss.to_scalar::<f32>()?;
    if !v.is_finite() {
        return Err(TrainerError::NonFinite {
            step,
            what,
            value: v as f64,
        });
    }
    Ok(v)
}
