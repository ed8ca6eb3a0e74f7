//! Log-probs and entropies of target tokens under logits: the fused CPU kernels, or composed
//! log-softmax and gather elsewhere.

use super::kernels;
use crate::traced_op;
use candle_core::{D, Result, Tensor};

/// Log-probs (and entropies) of `targets` under `logits` `[B, T, V]` at temperature `temp`.
pub fn token_logprobs(logits: &Tensor, targets: &Tensor, temp: f32) -> Result<(Tensor, Tensor)> {
    let m = rlprof_profiler::name!("logprob");
    if kernels::supported(logits) {
        let lp = token_logprob_only(logits, targets, temp)?;
        let ent = traced_op!(
            "entropy",
            m,
            [logits],
            0,
            kernels::entropy(logits, 1.0 / temp)
        )?;
        return Ok((lp, ent));
    }
    let logits = if (temp - 1.0).abs() > f32::EPSILON {
        traced_op!("div", m, [logits], 0, logits.affine(1.0 / temp as f64, 0.0))?
    } else {
        logits.clone()
    };
    let lsm = traced_op!(
        "log_softmax",
        m,
        [&logits],
        0,
        candle_nn::ops::log_softmax(&logits, D::Minus1)
    )?;
    let idx = targets.unsqueeze(D::Minus1)?;
    let lp = traced_op!("gather", m, [&lsm, &idx], 0, lsm.gather(&idx, D::Minus1))?
        .squeeze(D::Minus1)?;
    let p = lsm.exp()?;
    let ent = traced_op!(
        "entropy",
        m,
        [&p, &lsm],
        0,
        p.mul(&lsm)?.sum(D::Minus1)?.neg()
    )?;
    Ok((lp, ent))
}

/// [`token_logprobs`] whose entropies are a metric only (no backward through them: the loss has
/// no entropy term), as verl computes them under `torch.no_grad` when `entropy_coeff` is 0.
pub fn token_logprobs_entropy_metric(
    logits: &Tensor,
    targets: &Tensor,
    temp: f32,
) -> Result<(Tensor, Tensor)> {
    let m = rlprof_profiler::name!("logprob");
    if kernels::supported(logits) {
        // the same two ops as `token_logprob_only` and `entropy_no_grad`; the entropy reuses the
        // rows' log-sum-exp of the first
        let shifts = kernels::RowShifts::default();
        super::precision::hint(|| super::precision::Hint::Temp(temp));
        let lp = traced_op!(
            "log_softmax_gather",
            m,
            [logits, targets],
            0,
            kernels::token_logprob_shifts(logits, targets, 1.0 / temp, shifts.clone())
        )?;
        let ent = traced_op!(
            "entropy",
            m,
            [logits],
            0,
            kernels::entropy_no_grad_shifted(logits, 1.0 / temp, &shifts)
        )?;
        return Ok((lp, ent));
    }
    let (lp, ent) = token_logprobs(logits, targets, temp)?;
    Ok((lp, ent.detach()))
}

/// Log-probs of `targets` under `logits` `[B, T, V]` at temperature `temp`, without the
/// entropies (the no-grad log-prob passes).
pub fn token_logprob_only(logits: &Tensor, targets: &Tensor, temp: f32) -> Result<Tensor> {
    let m = rlprof_profiler::name!("logprob");
    if kernels::supported(logits) {
        super::precision::hint(|| super::precision::Hint::Temp(temp));
        return traced_op!(
            "log_softmax_gather",
            m,
            [logits, targets],
            0,
            kernels::token_logprob(logits, targets, 1.0 / temp)
        );
    }
    Ok(token_logprobs(logits, targets, temp)?.0)
}
