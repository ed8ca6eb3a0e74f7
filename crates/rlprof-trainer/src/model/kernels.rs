//! Fused kernels with a backward pass, which candle lacks (its fused softmax has none, and the
//! composed form costs one broadcast op per step forward and backward). CPU only; other devices
//! use candle's composed ops.

use candle_core::{CpuStorage, CustomOp1, CustomOp2, Layout, Result, Shape, Tensor, D};

/// Softmax over the last dimension: `y = exp(x - max) / sum`, backward `dx = y * (g - sum(g*y))`.
pub fn softmax_last_dim(x: &Tensor) -> Result<Tensor> {
    if x.device().is_cpu() && x.dtype() == candle_core::DType::F32 {
        x.contiguous()?.apply_op1(SoftmaxLastDim)
    } else {
        candle_nn::ops::softmax(x, D::Minus1)
    }
}

struct SoftmaxLastDim;

fn f32_rows<'a>(s: &'a CpuStorage, l: &Layout, op: &str) -> Result<(&'a [f32], usize)> {
    let CpuStorage::F32(data) = s else {
        candle_core::bail!("{op}: f32 only")
    };
    let Some((a, b)) = l.contiguous_offsets() else {
        candle_core::bail!("{op}: contiguous input required")
    };
    Ok((&data[a..b], *l.dims().last().unwrap_or(&1)))
}

impl CustomOp1 for SoftmaxLastDim {
    fn name(&self) -> &'static str {
        "rlprof-softmax-last-dim"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let (x, d) = f32_rows(s, l, "softmax")?;
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
        Ok((CpuStorage::F32(out), l.shape().clone()))
    }

    fn bwd(&self, _arg: &Tensor, res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        let g = grad.contiguous()?;
        Ok(Some(g.apply_op2_no_bwd(&res.contiguous()?, &SoftmaxBwd)?))
    }
}

/// `(g, y) -> y * (g - sum(g * y))` row by row.
struct SoftmaxBwd;

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
        let (g, d) = f32_rows(s1, l1, "softmax backward")?;
        let (y, _) = f32_rows(s2, l2, "softmax backward")?;
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
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    #[test]
    fn softmax_matches_candle_forward_and_backward() {
        let d = Device::Cpu;
        let x = Var::from_tensor(&Tensor::randn(0f32, 3.0, (3, 4, 7), &d).unwrap()).unwrap();
        let w = Tensor::randn(0f32, 1.0, (3, 4, 7), &d).unwrap();
        let ours = softmax_last_dim(x.as_tensor()).unwrap();
        let theirs = candle_nn::ops::softmax(x.as_tensor(), D::Minus1).unwrap();
        let diff = |a: &Tensor, b: &Tensor| {
            a.sub(b)
                .unwrap()
                .abs()
                .unwrap()
                .max_all()
                .unwrap()
                .to_scalar::<f32>()
                .unwrap()
        };
        assert!(diff(&ours, &theirs) < 1e-6);
        let g1 = ours.mul(&w).unwrap().sum_all().unwrap().backward().unwrap();
        let g2 = theirs
            .mul(&w)
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
        let (a, b) = (
            g1.get(x.as_tensor()).unwrap(),
            g2.get(x.as_tensor()).unwrap(),
        );
        assert!(diff(a, b) < 1e-5, "gradients differ by {}", diff(a, b));
    }
}
