//! Fused kernels with a backward pass, which candle lacks: its fused softmax, RMSNorm and RoPE
//! have none, and the composed forms cost one full pass over the activations per primitive, forward
//! and backward (RMSNorm alone is five ops forward and about a dozen in its backward graph). Each
//! kernel here is one pass forward and one or two backward, written by hand because no crate
//! offers differentiable fused CPU kernels for candle. CPU and f32 only ([`supported`]); other
//! devices use candle's composed ops. Every kernel is tested against the composed form, values and
//! gradients.

use candle_core::{CpuStorage, CustomOp1, CustomOp2, CustomOp3, Layout, Result, Shape, Tensor, D};

/// Whether the fused kernels run on tensors like `x` (CPU, f32).
pub fn supported(x: &Tensor) -> bool {
    x.device().is_cpu() && x.dtype() == candle_core::DType::F32
}

/// Softmax over the last dimension: `y = exp(x - max) / sum`, backward `dx = y * (g - sum(g*y))`.
pub fn softmax_last_dim(x: &Tensor) -> Result<Tensor> {
    if supported(x) {
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

/// RMSNorm over the last dimension, `y = x / sqrt(mean(x^2) + eps) * w`, differentiable in `x` and
/// `w`. Backward with `n = x * inv`: `dx = inv * (g*w - n * mean(g*w*n))`, `dw = sum_rows(g * n)`.
pub fn rms_norm(x: &Tensor, w: &Tensor, eps: f32) -> Result<Tensor> {
    if supported(x) {
        x.contiguous()?.apply_op2(&w.contiguous()?, RmsNorm { eps })
    } else {
        let inv = x
            .sqr()?
            .mean_keepdim(D::Minus1)?
            .affine(1.0, f64::from(eps))?
            .sqrt()?
            .recip()?;
        x.broadcast_mul(&inv)?.broadcast_mul(w)
    }
}

#[derive(Clone, Copy)]
struct RmsNorm {
    eps: f32,
}

/// `1 / sqrt(mean(row^2) + eps)`.
fn inv_rms(row: &[f32], eps: f32) -> f32 {
    let ms = row.iter().map(|v| v * v).sum::<f32>() / row.len() as f32;
    1.0 / (ms + eps).sqrt()
}

impl CustomOp2 for RmsNorm {
    fn name(&self) -> &'static str {
        "rlprof-rms-norm"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (x, d) = f32_rows(s1, l1, "rms_norm")?;
        let (w, _) = f32_rows(s2, l2, "rms_norm")?;
        if w.len() != d {
            candle_core::bail!("rms_norm: weight has {} elements, rows {d}", w.len())
        }
        let mut out = vec![0f32; x.len()];
        for (xr, yr) in x.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
            let inv = inv_rms(xr, self.eps);
            for ((y, &v), &wv) in yr.iter_mut().zip(xr).zip(w) {
                *y = v * inv * wv;
            }
        }
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let (g, x, w) = (grad.contiguous()?, x.contiguous()?, w.contiguous()?);
        let dx = g.apply_op3_no_bwd(&x, &w, &RmsNormBwdX(*self))?;
        let dw = g.apply_op2_no_bwd(&x, &RmsNormBwdW(*self))?;
        Ok((Some(dx), Some(dw)))
    }
}

/// `(g, x, w) -> dx` of [`rms_norm`].
struct RmsNormBwdX(RmsNorm);

impl CustomOp3 for RmsNormBwdX {
    fn name(&self) -> &'static str {
        "rlprof-rms-norm-bwd-x"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (g, d) = f32_rows(s1, l1, "rms_norm backward")?;
        let (x, _) = f32_rows(s2, l2, "rms_norm backward")?;
        let (w, _) = f32_rows(s3, l3, "rms_norm backward")?;
        let mut out = vec![0f32; g.len()];
        for ((gr, xr), dr) in g
            .chunks_exact(d)
            .zip(x.chunks_exact(d))
            .zip(out.chunks_exact_mut(d))
        {
            let inv = inv_rms(xr, self.0.eps);
            // mean(g * w * n) with n = x * inv
            let dot = gr
                .iter()
                .zip(xr)
                .zip(w)
                .map(|((gv, xv), wv)| gv * wv * xv)
                .sum::<f32>()
                * inv
                / d as f32;
            for (((o, &gv), &xv), &wv) in dr.iter_mut().zip(gr).zip(xr).zip(w) {
                *o = inv * (gv * wv - xv * inv * dot);
            }
        }
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }
}

/// `(g, x) -> dw` of [`rms_norm`]: the column sums of `g * n`.
struct RmsNormBwdW(RmsNorm);

impl CustomOp2 for RmsNormBwdW {
    fn name(&self) -> &'static str {
        "rlprof-rms-norm-bwd-w"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (g, d) = f32_rows(s1, l1, "rms_norm backward")?;
        let (x, _) = f32_rows(s2, l2, "rms_norm backward")?;
        let mut dw = vec![0f32; d];
        for (gr, xr) in g.chunks_exact(d).zip(x.chunks_exact(d)) {
            let inv = inv_rms(xr, self.0.eps);
            for ((o, &gv), &xv) in dw.iter_mut().zip(gr).zip(xr) {
                *o += gv * xv * inv;
            }
        }
        Ok((CpuStorage::F32(dw), Shape::from(d)))
    }
}

/// SwiGLU's gate, `silu(g) * u`, differentiable in both. With `s = sigmoid(g)`:
/// `dg = grad * u * s * (1 + g * (1 - s))`, `du = grad * g * s`.
pub fn silu_mul(g: &Tensor, u: &Tensor) -> Result<Tensor> {
    if supported(g) && g.dims() == u.dims() {
        g.contiguous()?.apply_op2(&u.contiguous()?, SiluMul)
    } else {
        candle_nn::ops::silu(g)?.mul(u)
    }
}

struct SiluMul;

#[inline(always)]
fn sigmoid(v: f32) -> f32 {
    1.0 / (1.0 + (-v).exp())
}

#[inline(always)]
fn silu_mul_fwd(g: f32, u: f32) -> f32 {
    g * sigmoid(g) * u
}

#[inline(always)]
fn silu_mul_bwd_gate(d: f32, g: f32, u: f32) -> f32 {
    let s = sigmoid(g);
    d * u * s * (1.0 + g * (1.0 - s))
}

#[inline(always)]
fn silu_mul_bwd_up(d: f32, g: f32) -> f32 {
    d * g * sigmoid(g)
}

impl CustomOp2 for SiluMul {
    fn name(&self) -> &'static str {
        "rlprof-silu-mul"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        Map2("rlprof-silu-mul", silu_mul_fwd).cpu_fwd(s1, l1, s2, l2)
    }

    fn bwd(
        &self,
        g: &Tensor,
        u: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let (grad, g, u) = (grad.contiguous()?, g.contiguous()?, u.contiguous()?);
        let dg =
            grad.apply_op3_no_bwd(&g, &u, &Map3("rlprof-silu-mul-bwd-gate", silu_mul_bwd_gate))?;
        let du = grad.apply_op2_no_bwd(&g, &Map2("rlprof-silu-mul-bwd-up", silu_mul_bwd_up))?;
        Ok((Some(dg), Some(du)))
    }
}

/// An element-wise map of two contiguous same-shape f32 tensors (no backward). Generic over the
/// function so that it inlines into the loop (a `fn` pointer costs an indirect call per element).
struct Map2<F>(&'static str, F);

impl<F: Fn(f32, f32) -> f32 + Send + Sync> CustomOp2 for Map2<F> {
    fn name(&self) -> &'static str {
        self.0
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (a, _) = f32_rows(s1, l1, self.0)?;
        let (b, _) = f32_rows(s2, l2, self.0)?;
        let out = a.iter().zip(b).map(|(&x, &y)| (self.1)(x, y)).collect();
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }
}

/// An element-wise map of three contiguous same-shape f32 tensors (no backward), generic like
/// [`Map2`].
struct Map3<F>(&'static str, F);

impl<F: Fn(f32, f32, f32) -> f32 + Send + Sync> CustomOp3 for Map3<F> {
    fn name(&self) -> &'static str {
        self.0
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (a, _) = f32_rows(s1, l1, self.0)?;
        let (b, _) = f32_rows(s2, l2, self.0)?;
        let (c, _) = f32_rows(s3, l3, self.0)?;
        let out = a
            .iter()
            .zip(b)
            .zip(c)
            .map(|((&x, &y), &z)| (self.1)(x, y, z))
            .collect();
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }
}

/// Rotate-half RoPE of `x` `[B, H, T, D]` with tables `cos`, `sin` `[B, T, D/2]` (the first half
/// of the duplicated rows), differentiable in `x`: `y1 = x1*c - x2*s`, `y2 = x2*c + x1*s`. The
/// rotation is orthogonal, so its backward is the same kernel with `-sin`.
pub fn rope(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    x.contiguous()?
        .apply_op3(&cos.contiguous()?, &sin.contiguous()?, Rope { sign: 1.0 })
}

struct Rope {
    /// +1 forward, -1 for the transposed rotation (backward).
    sign: f32,
}

impl CustomOp3 for Rope {
    fn name(&self) -> &'static str {
        "rlprof-rope"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (x, d) = f32_rows(s1, l1, "rope")?;
        let (c, half) = f32_rows(s2, l2, "rope")?;
        let (s, _) = f32_rows(s3, l3, "rope")?;
        let (b, h, t) = match *l1.dims() {
            [b, h, t, _] => (b, h, t),
            _ => candle_core::bail!("rope: x must be [B, H, T, D], got {:?}", l1.dims()),
        };
        if half * 2 != d || c.len() != b * t * half || s.len() != c.len() {
            candle_core::bail!("rope: tables {:?} do not fit x {:?}", l2.dims(), l1.dims())
        }
        let mut out = vec![0f32; x.len()];
        for (i, (xr, yr)) in x.chunks_exact(d).zip(out.chunks_exact_mut(d)).enumerate() {
            // row i is (bi, hi, ti) of x; its table row is (bi, ti)
            let (bi, ti) = (i / (h * t), i % t);
            let off = (bi * t + ti) * half;
            let (cr, sr) = (&c[off..off + half], &s[off..off + half]);
            let (x1, x2) = xr.split_at(half);
            let (y1, y2) = yr.split_at_mut(half);
            for j in 0..half {
                let sj = self.sign * sr[j];
                y1[j] = x1[j] * cr[j] - x2[j] * sj;
                y2[j] = x2[j] * cr[j] + x1[j] * sj;
            }
        }
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }

    fn bwd(
        &self,
        _x: &Tensor,
        cos: &Tensor,
        sin: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let transposed = Rope { sign: -self.sign };
        let dx = grad.contiguous()?.apply_op3_no_bwd(cos, sin, &transposed)?;
        Ok((Some(dx), None, None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    fn diff(a: &Tensor, b: &Tensor) -> f32 {
        a.sub(b)
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap()
    }

    fn var(shape: &[usize], std: f64) -> Var {
        let t = Tensor::randn(0f32, std as f32, shape, &Device::Cpu).unwrap();
        Var::from_tensor(&t).unwrap()
    }

    /// Runs `fused` and `composed` on the same inputs, then backpropagates a random projection of
    /// each output: values and every input's gradient must agree.
    fn check(
        inputs: &[&Var],
        fused: impl Fn(&[&Tensor]) -> Tensor,
        composed: impl Fn(&[&Tensor]) -> Tensor,
        tol: f32,
    ) {
        let ts: Vec<&Tensor> = inputs.iter().map(|v| v.as_tensor()).collect();
        let (ours, theirs) = (fused(&ts), composed(&ts));
        assert_eq!(ours.dims(), theirs.dims());
        assert!(
            diff(&ours, &theirs) < tol,
            "values differ by {}",
            diff(&ours, &theirs)
        );
        let w = Tensor::randn(0f32, 1.0, ours.dims(), &Device::Cpu).unwrap();
        let grads = |y: &Tensor| y.mul(&w).unwrap().sum_all().unwrap().backward().unwrap();
        let (g1, g2) = (grads(&ours), grads(&theirs));
        for (i, t) in ts.iter().enumerate() {
            let (a, b) = (g1.get(t).unwrap(), g2.get(t).unwrap());
            assert!(
                diff(a, b) < tol,
                "gradient of input {i} differs by {}",
                diff(a, b)
            );
        }
    }

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

    #[test]
    fn rms_norm_matches_the_composed_form() {
        let (x, w) = (var(&[2, 5, 16], 2.0), var(&[16], 1.0));
        let composed = |t: &[&Tensor]| {
            let inv = t[0]
                .sqr()
                .unwrap()
                .mean_keepdim(D::Minus1)
                .unwrap()
                .affine(1.0, 1e-6)
                .unwrap()
                .sqrt()
                .unwrap()
                .recip()
                .unwrap();
            t[0].broadcast_mul(&inv)
                .unwrap()
                .broadcast_mul(t[1])
                .unwrap()
        };
        check(
            &[&x, &w],
            |t| rms_norm(t[0], t[1], 1e-6).unwrap(),
            composed,
            1e-4,
        );
    }

    #[test]
    fn silu_mul_matches_the_composed_form() {
        let (g, u) = (var(&[6, 24], 3.0), var(&[6, 24], 1.0));
        check(
            &[&g, &u],
            |t| silu_mul(t[0], t[1]).unwrap(),
            |t| candle_nn::ops::silu(t[0]).unwrap().mul(t[1]).unwrap(),
            1e-5,
        );
    }

    #[test]
    fn rope_matches_the_composed_rotate_half_form() {
        let (b, h, t, d) = (2, 3, 5, 8);
        let x = var(&[b, h, t, d], 1.0);
        let angles = Tensor::randn(0f32, 2.0, (b, t, d / 2), &Device::Cpu).unwrap();
        let (c, s) = (angles.cos().unwrap(), angles.sin().unwrap());
        let full = |half: &Tensor| {
            Tensor::cat(&[half, half], D::Minus1)
                .unwrap()
                .unsqueeze(1)
                .unwrap()
                .broadcast_as((b, h, t, d))
                .unwrap()
                .contiguous()
                .unwrap()
        };
        let (cf, sf) = (full(&c), full(&s));
        let composed = |ts: &[&Tensor]| {
            let x = ts[0];
            let x1 = x.narrow(D::Minus1, 0, d / 2).unwrap();
            let x2 = x.narrow(D::Minus1, d / 2, d / 2).unwrap();
            let rot = Tensor::cat(&[&x2.neg().unwrap(), &x1], D::Minus1).unwrap();
            x.mul(&cf).unwrap().add(&rot.mul(&sf).unwrap()).unwrap()
        };
        check(&[&x], |ts| rope(ts[0], &c, &s).unwrap(), composed, 1e-5);
        // and candle's fused (forward-only) kernel agrees on values
        let theirs = candle_nn::rotary_emb::rope(x.as_tensor(), &c, &s).unwrap();
        assert!(diff(&rope(x.as_tensor(), &c, &s).unwrap(), &theirs) < 1e-5);
    }
}
