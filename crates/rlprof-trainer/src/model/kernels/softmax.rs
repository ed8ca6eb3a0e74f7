//! The fused softmax over the last dimension ([`softmax_last_dim`]) and its backward.

use super::{F32Op1, F32Op2, Rows, supported};
use crate::model::autograd::tagged;
use candle_core::{CpuStorage, CustomOp1, CustomOp2, D, Layout, Result, Shape, Tensor};

/// Softmax over the last dimension: `y = exp(x - max) / sum`, backward `dx = y * (g - sum(g*y))`.
pub fn softmax_last_dim(x: &Tensor) -> Result<Tensor> {
    if supported(x) {
        x.contiguous()?.apply_op1(tagged(SoftmaxLastDim))
    } else {
        candle_nn::ops::softmax(x, D::Minus1)
    }
}

struct SoftmaxLastDim;

impl F32Op1 for SoftmaxLastDim {
    fn op(&self) -> &'static str {
        "softmax"
    }

    fn f(&self, x: Rows<'_>) -> Result<Vec<f32>> {
        let (x, d) = (x.data, x.d);
        let mut out = vec![0f32; x.len()];
        for (xr, yr) in x.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
            let m = xr.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0.0;
            for (y, &v) in yr.iter_mut().zip(xr) {
                *y = (v - m).exp();
                sum += *y;
            }
            let inv = 1.0 / sum;
            yr.iter_mut().for_each(|y| *y *= inv);
        }
        Ok(out)
    }
}

impl CustomOp1 for SoftmaxLastDim {
    fn name(&self) -> &'static str {
        "rlprof-softmax-last-dim"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        self.map(s, l)
    }

    fn bwd(&self, _arg: &Tensor, res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        let g = grad.contiguous()?;
        Ok(Some(g.apply_op2_no_bwd(&res.contiguous()?, &SoftmaxBwd)?))
    }
}

/// `(g, y) -> y * (g - sum(g * y))` row by row.
struct SoftmaxBwd;

impl F32Op2 for SoftmaxBwd {
    fn op(&self) -> &'static str {
        "softmax backward"
    }

    fn f(&self, g: Rows<'_>, y: Rows<'_>) -> Result<Vec<f32>> {
        let (g, d, y) = (g.data, g.d, y.data);
        let mut out = vec![0f32; g.len()];
        for ((gr, yr), dr) in g
            .chunks_exact(d)
            .zip(y.chunks_exact(d))
            .zip(out.chunks_exact_mut(d))
        {
            let dot: f32 = gr.iter().zip(yr).map(|(a, b)| a * b).sum();
            for ((o, &gv), &yv) in dr.iter_mut().zip(gr).zip(yr) {
                *o = yv * (gv - dot);
            }
        }
        Ok(out)
    }
}

impl CustomOp2 for SoftmaxBwd {
    fn name(&self) -> &'static str {
        "rlprof-softmax-last-dim-bwd"
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
    use super::super::test_util::{check, var};
    use super::*;

    #[test]
    fn softmax_matches_candle_forward_and_backward() {
        let x = var(&[3, 4, 7], 3.0);
        check(
            &[&x],
            |t| softmax_last_dim(t[0]).unwrap(),
            |t| candle_nn::ops::softmax(t[0], D::Minus1).unwrap(),
            1e-5,
        );
    }
}
