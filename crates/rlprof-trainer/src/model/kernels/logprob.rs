//! Per-token statistics of the logits over the vocabulary: the log-probability of the target
//! token ([`token_logprob`]) and the entropy ([`entropy`]), each one fused pass with a backward.

use super::simd::{scaled_exp_into, scaled_max, sum_exp, sum_exp_weighted};
use super::{F32Op1, F32Op2, Rows, f32_rows, u32_values};
use crate::model::autograd::tagged;
use candle_core::{CpuStorage, CustomOp1, CustomOp2, Layout, Result, Shape, Tensor};
use std::sync::{Arc, OnceLock};

/// The log-sum-exp of every row of `logits * inv_temp` (`max + ln(sum(exp(z - max)))`), as
/// [`token_logprob`]'s forward computed them: its backward and [`entropy_no_grad_shifted`] reuse
/// them instead of two more passes (max, exp-sum) over the vocabulary per row.
#[derive(Clone, Default)]
pub struct RowShifts(Arc<OnceLock<Vec<f32>>>);

impl RowShifts {
    /// The shifts of `rows` rows, when the forward has filled them for that many rows.
    fn get(&self, rows: usize) -> Option<&[f32]> {
        self.0.get().filter(|s| s.len() == rows).map(|s| &s[..])
    }
}

/// Log-probabilities of `targets` (u32 `[..]`) under `softmax(logits * inv_temp)` over the
/// last dimension of `logits` `[.., V]`: one pass (log-softmax and gather fused), differentiable
/// in `logits`: `dlogits = g * inv_temp * (onehot(target) - p)`.
pub fn token_logprob(logits: &Tensor, targets: &Tensor, inv_temp: f32) -> Result<Tensor> {
    token_logprob_shifts(logits, targets, inv_temp, RowShifts::default())
}

/// [`token_logprob`] that leaves the rows' log-sum-exp in `shifts` (for
/// [`entropy_no_grad_shifted`] on the same logits).
pub fn token_logprob_shifts(
    logits: &Tensor,
    targets: &Tensor,
    inv_temp: f32,
    shifts: RowShifts,
) -> Result<Tensor> {
    let targets = targets.to_dtype(candle_core::DType::U32)?.contiguous()?;
    logits
        .contiguous()?
        .apply_op2(&targets, tagged(TokenLogprob { inv_temp, shifts }))
}

/// `out[i] = exp((row[i] - max(row)) * inv_temp)`, the unnormalised sampling weights of one row
/// of logits, vectorised; returns their sum.
pub fn softmax_weights(row: &[f32], inv_temp: f32, out: &mut [f32]) -> f32 {
    let m = scaled_max(row, inv_temp);
    scaled_exp_into(row, inv_temp, m, 1.0, out)
}

struct TokenLogprob {
    inv_temp: f32,
    /// Filled by the forward; read by the backward.
    shifts: RowShifts,
}

/// Max and log-sum-exp shift of `row * inv_temp`: returns `(max, ln(sum(exp(z - max))))`.
#[inline(always)]
fn lse_parts(row: &[f32], inv_temp: f32) -> (f32, f32) {
    let m = scaled_max(row, inv_temp);
    (m, sum_exp(row, inv_temp, m).ln())
}

fn logits_rows<'a>(
    s: &'a CpuStorage,
    l: &Layout,
    targets: &[u32],
    op: &str,
) -> Result<(&'a [f32], usize)> {
    let (x, v) = f32_rows(s, l, op)?;
    if x.len() != targets.len() * v {
        candle_core::bail!("{op}: {} targets for logits {:?}", targets.len(), l.dims())
    }
    if let Some(&bad) = targets.iter().find(|&&t| t as usize >= v) {
        candle_core::bail!("{op}: target {bad} outside the vocabulary of {v}")
    }
    Ok((x, v))
}

// Not an `F32Op2` (see `kernels/mod.rs`): the second operand is u32 token ids.
impl CustomOp2 for TokenLogprob {
    fn name(&self) -> &'static str {
        "rlprof-token-logprob"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let tg = u32_values(s2, l2, "token_logprob")?;
        let (x, v) = logits_rows(s1, l1, tg, "token_logprob")?;
        let shifts: Vec<f32> = x
            .chunks_exact(v)
            .map(|row| {
                let (m, lse) = lse_parts(row, self.inv_temp);
                m + lse
            })
            .collect();
        let out = x
            .chunks_exact(v)
            .zip(tg)
            .zip(&shifts)
            .map(|((row, &t), &s)| row[t as usize] * self.inv_temp - s)
            .collect();
        // a second forward of the same op (none today) keeps the first one's shifts
        let _ = self.shifts.0.set(shifts);
        Ok((CpuStorage::F32(out), l2.shape().clone()))
    }

    fn bwd(
        &self,
        logits: &Tensor,
        targets: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let g = grad.contiguous()?;
        let dx = logits.contiguous()?.apply_op2_no_bwd(
            &targets.contiguous()?,
            &TokenLogprobBwd {
                inv_temp: self.inv_temp,
                g,
                shifts: self.shifts.clone(),
            },
        )?;
        Ok((Some(dx), None))
    }
}

/// `(logits, targets) -> dlogits` of [`token_logprob`] for output gradient `g`.
struct TokenLogprobBwd {
    inv_temp: f32,
    g: Tensor,
    shifts: RowShifts,
}

// Not an `F32Op2` either: u32 targets, as in the forward.
impl CustomOp2 for TokenLogprobBwd {
    fn name(&self) -> &'static str {
        "rlprof-token-logprob-bwd"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let tg = u32_values(s2, l2, "token_logprob backward")?;
        let (x, v) = logits_rows(s1, l1, tg, "token_logprob backward")?;
        let g = self.g.flatten_all()?.to_vec1::<f32>()?;
        if g.len() != tg.len() {
            candle_core::bail!(
                "token_logprob backward: {} grads, {} rows",
                g.len(),
                tg.len()
            )
        }
        let mut out = vec![0f32; x.len()];
        let known = self.shifts.get(tg.len());
        for (i, (((row, dr), &t), &gv)) in x
            .chunks_exact(v)
            .zip(out.chunks_exact_mut(v))
            .zip(tg)
            .zip(&g)
            .enumerate()
        {
            let shift = match known {
                Some(s) => s[i],
                None => {
                    let (m, lse) = lse_parts(row, self.inv_temp);
                    m + lse
                }
            };
            let c = gv * self.inv_temp;
            scaled_exp_into(row, self.inv_temp, shift, -c, dr);
            dr[t as usize] += c;
        }
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }
}

/// Entropy of `softmax(logits * inv_temp)` over the last dimension, `[..]`, one pass,
/// differentiable: with `z = logits * inv_temp`, `dz_i = -g * p_i * (log p_i + H)`.
pub fn entropy(logits: &Tensor, inv_temp: f32) -> Result<Tensor> {
    logits.contiguous()?.apply_op1(tagged(Entropy { inv_temp }))
}

/// [`entropy`] without a backward (a metric): no autograd node, no sequence number.
pub fn entropy_no_grad(logits: &Tensor, inv_temp: f32) -> Result<Tensor> {
    logits
        .detach()
        .contiguous()?
        .apply_op1_no_bwd(&Entropy { inv_temp })
}

/// [`entropy_no_grad`] of the logits whose row log-sum-exps [`token_logprob_shifts`] left in
/// `shifts` (recomputed when it has not run on as many rows).
pub fn entropy_no_grad_shifted(
    logits: &Tensor,
    inv_temp: f32,
    shifts: &RowShifts,
) -> Result<Tensor> {
    logits
        .detach()
        .contiguous()?
        .apply_op1_no_bwd(&EntropyShifted {
            inv_temp,
            shifts: shifts.clone(),
        })
}

struct EntropyShifted {
    inv_temp: f32,
    shifts: RowShifts,
}

impl F32Op1 for EntropyShifted {
    fn op(&self) -> &'static str {
        "entropy"
    }

    fn f(&self, rows: Rows<'_>) -> Result<Vec<f32>> {
        let (x, v) = (rows.data, rows.d);
        let Some(shifts) = self.shifts.get(x.len() / v.max(1)) else {
            let plain = Entropy {
                inv_temp: self.inv_temp,
            };
            return plain.f(rows);
        };
        Ok(x.chunks_exact(v)
            .zip(shifts)
            .map(|(row, &s)| s - sum_exp_weighted(row, self.inv_temp, s))
            .collect())
    }

    fn shape(&self, l: &Layout) -> Shape {
        let dims = l.dims();
        Shape::from(&dims[..dims.len() - 1])
    }
}

impl CustomOp1 for EntropyShifted {
    fn name(&self) -> &'static str {
        "rlprof-entropy"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        self.map(s, l)
    }
}

struct Entropy {
    inv_temp: f32,
}

/// `(H, log-sum-exp parts)` of one row.
#[inline(always)]
fn row_entropy(row: &[f32], inv_temp: f32) -> (f32, f32, f32) {
    let (m, lse) = lse_parts(row, inv_temp);
    // sum p log p = sum p z - (m + lse), p = exp(z - m - lse), z = row * inv_temp.
    let h = (m + lse) - sum_exp_weighted(row, inv_temp, m + lse);
    (h, m, lse)
}

impl F32Op1 for Entropy {
    fn op(&self) -> &'static str {
        "entropy"
    }

    fn f(&self, x: Rows<'_>) -> Result<Vec<f32>> {
        let (x, v) = (x.data, x.d);
        let out = x
            .chunks_exact(v)
            .map(|row| row_entropy(row, self.inv_temp).0)
            .collect();
        Ok(out)
    }

    /// The logits' shape less the vocabulary dimension.
    fn shape(&self, l: &Layout) -> Shape {
        let dims = l.dims();
        Shape::from(&dims[..dims.len() - 1])
    }
}

impl CustomOp1 for Entropy {
    fn name(&self) -> &'static str {
        "rlprof-entropy"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        self.map(s, l)
    }

    fn bwd(&self, arg: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        let g = grad.contiguous()?.unsqueeze(candle_core::D::Minus1)?;
        Ok(Some(arg.contiguous()?.apply_op2_no_bwd(
            &g,
            &EntropyBwd {
                inv_temp: self.inv_temp,
            },
        )?))
    }
}

/// `(logits, g [.., 1]) -> dlogits` of [`entropy`].
struct EntropyBwd {
    inv_temp: f32,
}

impl F32Op2 for EntropyBwd {
    fn op(&self) -> &'static str {
        "entropy backward"
    }

    fn f(&self, x: Rows<'_>, g: Rows<'_>) -> Result<Vec<f32>> {
        let (l1, x, v, g) = (x.layout, x.data, x.d, g.data);
        if g.len() * v != x.len() {
            candle_core::bail!("entropy backward: {} grads for {:?}", g.len(), l1.dims())
        }
        let mut out = vec![0f32; x.len()];
        for ((row, dr), &gv) in x.chunks_exact(v).zip(out.chunks_exact_mut(v)).zip(g) {
            let (h, m, lse) = row_entropy(row, self.inv_temp);
            let c = -gv * self.inv_temp;
            for (d, &xv) in dr.iter_mut().zip(row) {
                let lp = xv * self.inv_temp - m - lse;
                *d = c * lp.exp() * (lp + h);
            }
        }
        Ok(out)
    }
}

impl CustomOp2 for EntropyBwd {
    fn name(&self) -> &'static str {
        "rlprof-entropy-bwd"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        self.map(s1, l1, s2, l2)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{check, diff, var};
    use super::*;
    use candle_core::{D, Device};

    #[test]
    fn token_logprob_and_entropy_match_log_softmax_gather() {
        let (b, r, v) = (3, 4, 7);
        let x = var(&[b, r, v], 2.0);
        let tg: Vec<u32> = (0..(b * r) as u32)
            .map(|i| (i * 5 + 1) % v as u32)
            .collect();
        let targets = Tensor::from_vec(tg, (b, r), &Device::Cpu).unwrap();
        for temp in [1.0f32, 0.7] {
            let composed_lsm = |x: &Tensor| {
                let z = x.affine(1.0 / temp as f64, 0.0).unwrap();
                candle_nn::ops::log_softmax(&z, D::Minus1).unwrap()
            };
            check(
                &[&x],
                |ts| token_logprob(ts[0], &targets, 1.0 / temp).unwrap(),
                |ts| {
                    composed_lsm(ts[0])
                        .gather(&targets.unsqueeze(D::Minus1).unwrap(), D::Minus1)
                        .unwrap()
                        .squeeze(D::Minus1)
                        .unwrap()
                },
                1e-5,
            );
            check(
                &[&x],
                |ts| entropy(ts[0], 1.0 / temp).unwrap(),
                |ts| {
                    let lsm = composed_lsm(ts[0]);
                    lsm.exp()
                        .unwrap()
                        .mul(&lsm)
                        .unwrap()
                        .sum(D::Minus1)
                        .unwrap()
                        .neg()
                        .unwrap()
                },
                1e-5,
            );
        }
    }

    #[test]
    fn reused_row_shifts_give_the_same_values_and_gradients() {
        let (b, r, v) = (2, 5, 300);
        let x = var(&[b, r, v], 3.0);
        let tg: Vec<u32> = (0..(b * r) as u32)
            .map(|i| (i * 37 + 3) % v as u32)
            .collect();
        let targets = Tensor::from_vec(tg, (b, r), &Device::Cpu).unwrap();
        let xt = x.as_tensor();
        for inv_temp in [1.0f32, 1.0 / 0.7] {
            let shifts = RowShifts::default();
            // before the forward: the entropy recomputes the shifts
            let e0 = entropy_no_grad_shifted(xt, inv_temp, &shifts).unwrap();
            let lp = token_logprob_shifts(xt, &targets, inv_temp, shifts.clone()).unwrap();
            assert!(shifts.get(b * r).is_some(), "the forward fills the shifts");
            let e1 = entropy_no_grad_shifted(xt, inv_temp, &shifts).unwrap();
            let plain_lp = token_logprob(xt, &targets, inv_temp).unwrap();
            let plain_e = entropy_no_grad(xt, inv_temp).unwrap();
            assert!(diff(&lp, &plain_lp) < 1e-6);
            assert!(diff(&e0, &plain_e) < 1e-6 && diff(&e1, &plain_e) < 1e-6);
            let w = Tensor::randn(0f32, 1.0, (b, r), &Device::Cpu).unwrap();
            let grad = |y: &Tensor| {
                let g = y.mul(&w).unwrap().sum_all().unwrap().backward().unwrap();
                g.get(xt).unwrap().clone()
            };
            assert!(diff(&grad(&lp), &grad(&plain_lp)) < 1e-6);
        }
    }
}
