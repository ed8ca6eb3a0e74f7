//! Fused kernels with a backward pass, which candle lacks: its fused softmax, RMSNorm and RoPE
//! have none, and the composed forms cost one full pass over the activations per primitive, forward
//! and backward (RMSNorm alone is five ops forward and about a dozen in its backward graph). Each
//! kernel here is one pass forward and one or two backward, written by hand because no crate
//! offers differentiable fused CPU kernels for candle. CPU and f32 only ([`supported`]); other
//! devices use candle's composed ops. Every kernel is tested against the composed form, values and
//! gradients.

use super::autograd::tagged;
use candle_core::{
    CpuStorage, CustomOp1, CustomOp2, CustomOp3, D, Layout, Result, Shape, Storage, Tensor,
};
use std::sync::Arc;

/// Whether the fused kernels run on tensors like `x` (CPU, f32).
pub fn supported(x: &Tensor) -> bool {
    x.device().is_cpu() && x.dtype() == candle_core::DType::F32
}

/// Softmax over the last dimension: `y = exp(x - max) / sum`, backward `dx = y * (g - sum(g*y))`.
pub fn softmax_last_dim(x: &Tensor) -> Result<Tensor> {
    if supported(x) {
        x.contiguous()?.apply_op1(tagged(SoftmaxLastDim))
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
        x.contiguous()?
            .apply_op2(&w.contiguous()?, tagged(RmsNorm { eps }))
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
        g.contiguous()?.apply_op2(&u.contiguous()?, tagged(SiluMul))
    } else {
        candle_nn::ops::silu(g)?.mul(u)
    }
}

struct SiluMul;

#[inline(always)]
fn sigmoid(v: f32) -> f32 {
    1.0 / (1.0 + exp_poly(-v))
}

/// `exp(x)` by range reduction and a degree-5 polynomial (Cephes `expf`, about 1 ulp on the
/// normal range; clamped to `[-87.3, 88.7]`). Plain arithmetic, so that the element-wise maps
/// vectorise (the libm call does not).
#[inline(always)]
fn exp_poly(x: f32) -> f32 {
    let x = x.clamp(-87.3, 88.7);
    let fx = (x * std::f32::consts::LOG2_E + 0.5).floor();
    let r = x - fx * 0.693_359_4 + fx * 2.121_944_4e-4;
    let z = r * r;
    let y = (((((1.987_569_2e-4 * r + 1.398_2e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
        + 1.666_666_5e-1)
        * r
        + 0.5)
        * z
        + r
        + 1.0;
    y * f32::from_bits(((fx as i32 + 127) as u32) << 23)
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

/// Plain indexed loops (not `collect`, whose `from_iter` is a separate function compiled without
/// the caller's target features, so it would not vectorise inside the AVX2 wrappers).
#[inline(always)]
#[allow(clippy::needless_range_loop)]
fn map2<F: Fn(f32, f32) -> f32>(a: &[f32], b: &[f32], f: &F) -> Vec<f32> {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut out = vec![0f32; n];
    for i in 0..n {
        out[i] = f(a[i], b[i]);
    }
    out
}

/// Whether this CPU runs the `avx2,fma` paths (std caches the detection).
#[cfg(target_arch = "x86_64")]
#[inline]
fn avx2_fma() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn map2_avx2<F: Fn(f32, f32) -> f32>(a: &[f32], b: &[f32], f: &F) -> Vec<f32> {
    map2(a, b, f)
}

#[inline(always)]
#[allow(clippy::needless_range_loop)]
fn map3<F: Fn(f32, f32, f32) -> f32>(a: &[f32], b: &[f32], c: &[f32], f: &F) -> Vec<f32> {
    let n = a.len().min(b.len()).min(c.len());
    let (a, b, c) = (&a[..n], &b[..n], &c[..n]);
    let mut out = vec![0f32; n];
    for i in 0..n {
        out[i] = f(a[i], b[i], c[i]);
    }
    out
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn map3_avx2<F: Fn(f32, f32, f32) -> f32>(a: &[f32], b: &[f32], c: &[f32], f: &F) -> Vec<f32> {
    map3(a, b, c, f)
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
        if a.len() != b.len() {
            candle_core::bail!("{}: {} vs {} elements", self.0, a.len(), b.len())
        }
        #[cfg(target_arch = "x86_64")]
        if avx2_fma() {
            // SAFETY: the CPU supports AVX2 and FMA (checked above).
            let out = unsafe { map2_avx2(a, b, &self.1) };
            return Ok((CpuStorage::F32(out), l1.shape().clone()));
        }
        Ok((CpuStorage::F32(map2(a, b, &self.1)), l1.shape().clone()))
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
        if a.len() != b.len() || a.len() != c.len() {
            candle_core::bail!("{}: operands differ in length", self.0)
        }
        #[cfg(target_arch = "x86_64")]
        if avx2_fma() {
            // SAFETY: the CPU supports AVX2 and FMA (checked above).
            let out = unsafe { map3_avx2(a, b, c, &self.1) };
            return Ok((CpuStorage::F32(out), l1.shape().clone()));
        }
        Ok((CpuStorage::F32(map3(a, b, c, &self.1)), l1.shape().clone()))
    }
}

/// Rotate-half RoPE of `x` `[B, T, H, D]` (the projections' natural layout, no transpose
/// needed) with tables `cos`, `sin` `[B, T, D/2]` (the first half of the duplicated rows),
/// differentiable in `x`: `y1 = x1*c - x2*s`, `y2 = x2*c + x1*s`. The rotation is orthogonal, so
/// its backward is the same kernel with `-sin`.
pub fn rope_bthd(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    x.contiguous()?.apply_op3(
        &cos.contiguous()?,
        &sin.contiguous()?,
        tagged(Rope { sign: 1.0 }),
    )
}

struct Rope {
    /// +1 forward, -1 for the transposed rotation (backward).
    sign: f32,
}

impl CustomOp3 for Rope {
    fn name(&self) -> &'static str {
        "rlprof-rope-bthd"
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
        let (b, t, h) = match *l1.dims() {
            [b, t, h, _] => (b, t, h),
            _ => candle_core::bail!("rope: x must be [B, T, H, D], got {:?}", l1.dims()),
        };
        if half * 2 != d || c.len() != b * t * half || s.len() != c.len() {
            candle_core::bail!("rope: tables {:?} do not fit x {:?}", l2.dims(), l1.dims())
        }
        let mut out = vec![0f32; x.len()];
        for (i, (xr, yr)) in x.chunks_exact(d).zip(out.chunks_exact_mut(d)).enumerate() {
            // row i is (bi, ti, hi) of x; its table row is (bi, ti) = i / h
            let off = (i / h) * half;
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

/// `dst (m x n) = [dst +] lhs (m x k) * rhs (k x n)` with explicit element strides (row, column)
/// of each operand: candle's CPU matmul kernel (gemm), single-threaded unless candle's thread
/// count says otherwise.
#[allow(clippy::too_many_arguments)]
fn gemm_f32(
    m: usize,
    n: usize,
    k: usize,
    dst: &mut [f32],
    accumulate: bool,
    lhs: &[f32],
    lhs_s: (usize, usize),
    rhs: &[f32],
    rhs_s: (usize, usize),
) {
    assert!(dst.len() >= m * n, "gemm: dst too short");
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            dst[..m * n].iter_mut().for_each(|d| *d = 0.0);
        }
        return;
    }
    // SAFETY: dst holds m * n elements (checked above) and is a distinct &mut.
    unsafe {
        gemm_raw(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            accumulate,
            lhs,
            lhs_s,
            rhs,
            rhs_s,
        )
    }
}

/// [`gemm_f32`] into a new `m x n` buffer. (Skipping the zero fill behind an uninitialised
/// buffer measured 0.98x whole-run CPU, inside the noise; not worth an `unsafe` that depends on
/// gemm never reading its destination.)
#[allow(clippy::too_many_arguments)]
fn gemm_new(
    m: usize,
    n: usize,
    k: usize,
    lhs: &[f32],
    lhs_s: (usize, usize),
    rhs: &[f32],
    rhs_s: (usize, usize),
) -> Vec<f32> {
    let mut dst = vec![0f32; m * n];
    gemm_f32(m, n, k, &mut dst, false, lhs, lhs_s, rhs, rhs_s);
    dst
}

/// The gemm call of [`gemm_f32`]; `m, n, k > 0`.
///
/// # Safety
/// `dst` must be valid for writes of `m * n` f32s (and reads when `accumulate`) and must not
/// alias `lhs` or `rhs`.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_raw(
    m: usize,
    n: usize,
    k: usize,
    dst: *mut f32,
    accumulate: bool,
    lhs: &[f32],
    (lhs_rs, lhs_cs): (usize, usize),
    rhs: &[f32],
    (rhs_rs, rhs_cs): (usize, usize),
) {
    let last = |rs: usize, cs: usize, r: usize, c: usize| (r - 1) * rs + (c - 1) * cs;
    assert!(
        lhs.len() > last(lhs_rs, lhs_cs, m, k) && rhs.len() > last(rhs_rs, rhs_cs, k, n),
        "gemm: operand too short"
    );
    let threads = candle_core::utils::get_num_threads();
    let par = if threads > 1 {
        gemm::Parallelism::Rayon(threads)
    } else {
        gemm::Parallelism::None
    };
    // SAFETY: every operand index gemm touches is inside the slices (checked above: the last
    // element of each operand is in bounds and strides are non-negative); `dst` is valid for
    // the m x n row-major destination and does not alias the inputs (the caller's contract).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst,
            1,
            n as isize,
            accumulate,
            lhs.as_ptr(),
            lhs_cs as isize,
            lhs_rs as isize,
            rhs.as_ptr(),
            rhs_cs as isize,
            rhs_rs as isize,
            1.0,
            1.0,
            false,
            false,
            false,
            par,
        )
    }
}

/// A fused linear layer `y = x W^T [+ add]`, `x` `[.., in]`, `W` `[out, in]`, `add` either a
/// bias `[out]` or a residual of the output's shape: one gemm with the addend as its initial
/// destination. Backward: `dx = g W`, `dW = g^T x` (two gemms on the stored layouts, no
/// transposed copies), `dbias = column sums of g`, `dresidual = g`.
pub fn linear(x: &Tensor, w: &Tensor, add: Option<&Tensor>) -> Result<Tensor> {
    let (x, w) = (x.contiguous()?, w.contiguous()?);
    match add {
        Some(a) => x.apply_op3(&w, &a.contiguous()?, tagged(Linear)),
        None => x.apply_op2(&w, tagged(Linear)),
    }
}

struct Linear;

/// `(rows, in, out)` of a linear layer, checked.
fn linear_dims(x: &Layout, w: &Layout) -> Result<(usize, usize, usize)> {
    let (out_f, in_f) = match *w.dims() {
        [o, i] => (o, i),
        _ => candle_core::bail!("linear: weight must be 2-D, got {:?}", w.dims()),
    };
    let xd = x.dims();
    if xd.last() != Some(&in_f) {
        candle_core::bail!("linear: input {xd:?} does not fit weight {:?}", w.dims())
    }
    Ok((x.shape().elem_count() / in_f.max(1), in_f, out_f))
}

fn linear_shape(x: &Layout, out_f: usize) -> Shape {
    let mut d = x.dims().to_vec();
    *d.last_mut().expect("rank >= 1") = out_f;
    Shape::from(d)
}

fn linear_fwd(
    s1: &CpuStorage,
    l1: &Layout,
    s2: &CpuStorage,
    l2: &Layout,
    add: Option<(&CpuStorage, &Layout)>,
) -> Result<(CpuStorage, Shape)> {
    let (x, _) = f32_rows(s1, l1, "linear")?;
    let (w, _) = f32_rows(s2, l2, "linear")?;
    let (rows, in_f, out_f) = linear_dims(l1, l2)?;
    let mut dst = match add {
        None => {
            let y = gemm_new(rows, out_f, in_f, x, (in_f, 1), w, (1, in_f));
            return Ok((CpuStorage::F32(y), linear_shape(l1, out_f)));
        }
        Some((s3, l3)) => {
            let (a, _) = f32_rows(s3, l3, "linear")?;
            if a.len() == out_f {
                let mut d = Vec::with_capacity(rows * out_f);
                for _ in 0..rows {
                    d.extend_from_slice(a);
                }
                d
            } else if a.len() == rows * out_f {
                a.to_vec()
            } else {
                candle_core::bail!(
                    "linear: addend {:?} fits neither bias nor output",
                    l3.dims()
                )
            }
        }
    };
    gemm_f32(
        rows,
        out_f,
        in_f,
        &mut dst,
        true,
        x,
        (in_f, 1),
        w,
        (1, in_f),
    );
    Ok((CpuStorage::F32(dst), linear_shape(l1, out_f)))
}

/// `(dx, dW)` of a linear layer, reading the operands in place.
fn linear_bwd(x: &Tensor, w: &Tensor, g: &Tensor) -> Result<(Tensor, Tensor)> {
    let (out_f, in_f) = w.dims2()?;
    let rows = x.elem_count() / in_f.max(1);
    let (x, w, g) = (x.contiguous()?, w.contiguous()?, g.contiguous()?);
    let (dx, dw);
    {
        let (gs, gl) = g.storage_and_layout();
        let (xs, xl) = x.storage_and_layout();
        let (ws, wl) = w.storage_and_layout();
        let (gv, _) = f32_rows(cpu_of(&gs, "grad")?, gl, "linear backward")?;
        let (xv, _) = f32_rows(cpu_of(&xs, "x")?, xl, "linear backward")?;
        let (wv, _) = f32_rows(cpu_of(&ws, "w")?, wl, "linear backward")?;
        if gv.len() != rows * out_f || xv.len() != rows * in_f || wv.len() != out_f * in_f {
            candle_core::bail!(
                "linear backward: grad {:?}, x {:?}, w {:?}",
                gl.dims(),
                xl.dims(),
                wl.dims()
            )
        }
        dx = gemm_new(rows, in_f, out_f, gv, (out_f, 1), wv, (in_f, 1));
        dw = gemm_new(out_f, in_f, rows, gv, (1, out_f), xv, (in_f, 1));
    }
    Ok((
        Tensor::from_vec(dx, x.shape(), x.device())?,
        Tensor::from_vec(dw, w.shape(), w.device())?,
    ))
}

impl CustomOp2 for Linear {
    fn name(&self) -> &'static str {
        "rlprof-linear"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        linear_fwd(s1, l1, s2, l2, None)
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let (dx, dw) = linear_bwd(x, w, grad)?;
        Ok((Some(dx), Some(dw)))
    }
}

impl CustomOp3 for Linear {
    fn name(&self) -> &'static str {
        "rlprof-linear-add"
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
        linear_fwd(s1, l1, s2, l2, Some((s3, l3)))
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        add: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let (dx, dw) = linear_bwd(x, w, grad)?;
        let da = if add.rank() == 1 {
            // a bias: its gradient sums the output gradient over the rows
            grad.reshape(((), add.elem_count()))?.sum(0)?
        } else {
            grad.clone()
        };
        Ok((Some(dx), Some(dw), Some(da)))
    }
}

/// Log-probabilities of `targets` (u32 `[..]`) under `softmax(logits * inv_temp)` over the
/// last dimension of `logits` `[.., V]`: one pass (log-softmax and gather fused), differentiable
/// in `logits`: `dlogits = g * inv_temp * (onehot(target) - p)`.
pub fn token_logprob(logits: &Tensor, targets: &Tensor, inv_temp: f32) -> Result<Tensor> {
    let targets = targets.to_dtype(candle_core::DType::U32)?.contiguous()?;
    logits
        .contiguous()?
        .apply_op2(&targets, tagged(TokenLogprob { inv_temp }))
}

struct TokenLogprob {
    inv_temp: f32,
}

/// Max and log-sum-exp shift of `row * inv_temp`: returns `(max, ln(sum(exp(z - max))))`.
#[inline(always)]
fn lse_parts(row: &[f32], inv_temp: f32) -> (f32, f32) {
    let m = row
        .iter()
        .fold(f32::NEG_INFINITY, |a, &v| a.max(v * inv_temp));
    let sum: f32 = row.iter().map(|&v| (v * inv_temp - m).exp()).sum();
    (m, sum.ln())
}

fn u32_values<'a>(s: &'a CpuStorage, l: &Layout, op: &str) -> Result<&'a [u32]> {
    let CpuStorage::U32(data) = s else {
        candle_core::bail!("{op}: targets must be u32")
    };
    let Some((a, b)) = l.contiguous_offsets() else {
        candle_core::bail!("{op}: contiguous targets required")
    };
    Ok(&data[a..b])
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
        let out = x
            .chunks_exact(v)
            .zip(tg)
            .map(|(row, &t)| {
                let (m, lse) = lse_parts(row, self.inv_temp);
                row[t as usize] * self.inv_temp - m - lse
            })
            .collect();
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
            },
        )?;
        Ok((Some(dx), None))
    }
}

/// `(logits, targets) -> dlogits` of [`token_logprob`] for output gradient `g`.
struct TokenLogprobBwd {
    inv_temp: f32,
    g: Tensor,
}

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
        for (((row, dr), &t), &gv) in x
            .chunks_exact(v)
            .zip(out.chunks_exact_mut(v))
            .zip(tg)
            .zip(&g)
        {
            let (m, lse) = lse_parts(row, self.inv_temp);
            let c = gv * self.inv_temp;
            for (d, &xv) in dr.iter_mut().zip(row) {
                *d = -c * (xv * self.inv_temp - m - lse).exp();
            }
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

struct Entropy {
    inv_temp: f32,
}

/// `(H, log-sum-exp parts)` of one row.
#[inline(always)]
fn row_entropy(row: &[f32], inv_temp: f32) -> (f32, f32, f32) {
    let (m, lse) = lse_parts(row, inv_temp);
    let h = -row
        .iter()
        .map(|&v| {
            let lp = v * inv_temp - m - lse;
            lp.exp() * lp
        })
        .sum::<f32>();
    (h, m, lse)
}

impl CustomOp1 for Entropy {
    fn name(&self) -> &'static str {
        "rlprof-entropy"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let (x, v) = f32_rows(s, l, "entropy")?;
        let out = x
            .chunks_exact(v)
            .map(|row| row_entropy(row, self.inv_temp).0)
            .collect();
        let dims = l.dims();
        Ok((CpuStorage::F32(out), Shape::from(&dims[..dims.len() - 1])))
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
        let (x, v) = f32_rows(s1, l1, "entropy backward")?;
        let (g, _) = f32_rows(s2, l2, "entropy backward")?;
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
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }
}

/// Mask values at or below this are treated as masked keys (skipped: their softmax weight
/// underflows to exactly 0 anyway).
const MASK_SKIP: f32 = -1e8;

/// An additive attention mask on the host, `[B, T, Tk]` (0 or a large negative value), shared
/// by every layer of one forward call.
#[derive(Clone)]
pub struct HostMask {
    data: Arc<Vec<f32>>,
    b: usize,
    t: usize,
    tk: usize,
}

impl HostMask {
    /// A mask over `data` `[b, t, tk]` (row-major).
    pub fn new(data: Vec<f32>, b: usize, t: usize, tk: usize) -> Result<HostMask> {
        if data.len() != b * t * tk {
            candle_core::bail!("mask has {} values, not {b} x {t} x {tk}", data.len())
        }
        Ok(HostMask {
            data: Arc::new(data),
            b,
            t,
            tk,
        })
    }

    /// `[B, T, Tk]`.
    pub fn dims(&self) -> (usize, usize, usize) {
        (self.b, self.t, self.tk)
    }

    fn row(&self, b: usize, i: usize) -> &[f32] {
        let o = (b * self.t + i) * self.tk;
        &self.data[o..o + self.tk]
    }
}

/// Fused scaled-dot-product attention, `softmax(q k^T * scale + mask) v`, differentiable in `q`,
/// `k` and `v`: `q` `[B, T, H, D]`, `k`, `v` `[B, Tk, KVH, D]` (grouped-query heads: query head
/// `h` reads key/value head `h / (H / KVH)`), any strides with a unit last one (a KV-cache
/// prefix view works as is), mask `[B, T, Tk]`; output `[B, T, H, D]`. One pass per query row,
/// keys the mask removes are skipped. Backward recomputes the probabilities row by row.
pub fn attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: &HostMask,
    scale: f32,
) -> Result<Tensor> {
    let unit = |x: &Tensor| -> Result<Tensor> {
        if x.stride().last() == Some(&1) {
            Ok(x.clone())
        } else {
            x.contiguous()
        }
    };
    let (q, k, v) = (unit(q)?, unit(k)?, unit(v)?);
    q.apply_op3(
        &k,
        &v,
        tagged(FusedAttention {
            mask: mask.clone(),
            scale,
        }),
    )
}

struct FusedAttention {
    mask: HostMask,
    scale: f32,
}

#[derive(Clone, Copy)]
struct AttnDims {
    b: usize,
    t: usize,
    tk: usize,
    h: usize,
    kvh: usize,
    d: usize,
}

/// A strided `[B, T, H, D]` f32 view with unit last stride.
#[derive(Clone, Copy)]
struct View<'a> {
    data: &'a [f32],
    s: [usize; 3],
}

impl<'a> View<'a> {
    #[inline(always)]
    fn row(&self, b: usize, t: usize, h: usize, d: usize) -> &'a [f32] {
        let o = b * self.s[0] + t * self.s[1] + h * self.s[2];
        let data: &'a [f32] = self.data;
        &data[o..o + d]
    }
}

fn view<'a>(s: &'a CpuStorage, l: &Layout, what: &str) -> Result<(View<'a>, [usize; 4])> {
    let CpuStorage::F32(data) = s else {
        candle_core::bail!("attention: {what} must be f32")
    };
    let (dims, st) = (l.dims(), l.stride());
    if dims.len() != 4 || (st[3] != 1 && dims[3] > 1) {
        candle_core::bail!("attention: {what} must be 4-D with a unit last stride, got {l:?}")
    }
    Ok((
        View {
            data: &data[l.start_offset()..],
            s: [st[0], st[1], st[2]],
        },
        [dims[0], dims[1], dims[2], dims[3]],
    ))
}

fn attn_dims(q: [usize; 4], k: [usize; 4], v: [usize; 4], mask: &HostMask) -> Result<AttnDims> {
    let [b, t, h, d] = q;
    let [_, tk, kvh, _] = k;
    if k != v || k[0] != b || k[3] != d || kvh == 0 || h % kvh != 0 || mask.dims() != (b, t, tk) {
        candle_core::bail!(
            "attention: q {q:?}, k {k:?}, v {v:?} and mask {:?} do not fit",
            mask.dims()
        )
    }
    Ok(AttnDims {
        b,
        t,
        tk,
        h,
        kvh,
        d,
    })
}

/// Dot product; with `AVX` (only inside the AVX2+FMA wrappers) by 8-wide fused multiply-adds.
#[inline(always)]
fn dot<const AVX: bool>(a: &[f32], b: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if AVX {
        // SAFETY: AVX is only true in functions called after the CPU was checked for AVX2+FMA.
        return unsafe { dot_avx2(a, b) };
    }
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    let mut s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let n = a.len().min(b.len());
    let mut acc = _mm256_setzero_ps();
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: i + 8 <= n, inside both slices.
        let (x, y) = unsafe {
            (
                _mm256_loadu_ps(a.as_ptr().add(i)),
                _mm256_loadu_ps(b.as_ptr().add(i)),
            )
        };
        acc = _mm256_fmadd_ps(x, y, acc);
        i += 8;
    }
    let s4 = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    let s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    let mut s = _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
    while i < n {
        s += a[i] * b[i];
        i += 1;
    }
    s
}

/// `out[n] = a . row(idx[n])` for every `n`; with `AVX`, eight rows at a time (eight dot
/// products share one horizontal reduction).
#[inline(always)]
fn dots<'a, const AVX: bool>(
    a: &[f32],
    idx: &[usize],
    row: impl Fn(usize) -> &'a [f32],
    out: &mut [f32],
) {
    let mut n = 0;
    #[cfg(target_arch = "x86_64")]
    if AVX {
        while n + 8 <= idx.len().min(out.len()) {
            let rows: [&[f32]; 8] = std::array::from_fn(|l| row(idx[n + l]));
            // SAFETY: AVX is only true in functions called after the CPU was checked for
            // AVX2+FMA.
            let s = unsafe { dot8_avx2(a, &rows) };
            out[n..n + 8].copy_from_slice(&s);
            n += 8;
        }
    }
    for (o, &j) in out[n..].iter_mut().zip(&idx[n..]) {
        *o = dot::<AVX>(a, row(j));
    }
}

/// Eight dot products `a . b[l]` by 8-wide fused multiply-adds, reduced together (two rounds
/// of horizontal adds and one cross-lane add for all eight).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
fn dot8_avx2(a: &[f32], b: &[&[f32]; 8]) -> [f32; 8] {
    use std::arch::x86_64::*;
    let n = b.iter().fold(a.len(), |m, r| m.min(r.len()));
    let mut acc = [_mm256_setzero_ps(); 8];
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: i + 8 <= n, inside `a` and every `b[l]` (n is the shortest length).
        let x = unsafe { _mm256_loadu_ps(a.as_ptr().add(i)) };
        for (acc, r) in acc.iter_mut().zip(b) {
            // SAFETY: as above.
            let y = unsafe { _mm256_loadu_ps(r.as_ptr().add(i)) };
            *acc = _mm256_fmadd_ps(x, y, *acc);
        }
        i += 8;
    }
    // hadd(x, y) = [x0+x1, x2+x3, y0+y1, y2+y3 | x4+x5, x6+x7, y4+y5, y6+y7]: after two rounds
    // lane l of the low (high) half holds accumulator l's (l + 4's) sum of lanes 0..4 in the
    // first vector's low half and of lanes 4..8 in its high half.
    let h01 = _mm256_hadd_ps(acc[0], acc[1]);
    let h23 = _mm256_hadd_ps(acc[2], acc[3]);
    let h45 = _mm256_hadd_ps(acc[4], acc[5]);
    let h67 = _mm256_hadd_ps(acc[6], acc[7]);
    let h0123 = _mm256_hadd_ps(h01, h23);
    let h4567 = _mm256_hadd_ps(h45, h67);
    let lo = _mm256_permute2f128_ps(h0123, h4567, 0x20);
    let hi = _mm256_permute2f128_ps(h0123, h4567, 0x31);
    let mut out = [0f32; 8];
    // SAFETY: `out` holds eight f32s.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), _mm256_add_ps(lo, hi)) };
    for (o, r) in out.iter_mut().zip(b) {
        for j in i..n {
            *o += a[j] * r[j];
        }
    }
    out
}

/// `y += a * x`.
#[inline(always)]
fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
    for (yv, &xv) in y.iter_mut().zip(x) {
        *yv += a * xv;
    }
}

/// The keys row `mrow` keeps (all of them when it keeps none, as the dense softmax would).
#[inline(always)]
fn kept_keys(mrow: &[f32], idx: &mut Vec<usize>) {
    idx.clear();
    idx.extend((0..mrow.len()).filter(|&j| mrow[j] > MASK_SKIP));
    if idx.is_empty() {
        idx.extend(0..mrow.len());
    }
}

/// Normalised probabilities `p[n]` of query row `qr` over keys `idx` (head `kh` of batch `bi`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn attn_probs<const AVX: bool>(
    qr: &[f32],
    k: View,
    bi: usize,
    kh: usize,
    d: usize,
    idx: &[usize],
    mrow: &[f32],
    scale: f32,
    p: &mut [f32],
) {
    dots::<AVX>(qr, idx, |j| k.row(bi, j, kh, d), p);
    let mut m = f32::NEG_INFINITY;
    for (pn, &j) in p.iter_mut().zip(idx) {
        let s = *pn * scale + mrow[j];
        *pn = s;
        m = m.max(s);
    }
    p.iter_mut().for_each(|pn| *pn = exp_poly(*pn - m));
    let sum: f32 = p.iter().sum();
    let inv = 1.0 / sum;
    p.iter_mut().for_each(|pn| *pn *= inv);
}

#[inline(always)]
fn attn_fwd_impl<const AVX: bool>(
    q: View,
    k: View,
    v: View,
    mask: &HostMask,
    a: AttnDims,
    scale: f32,
) -> Vec<f32> {
    let AttnDims {
        b,
        t,
        tk,
        h,
        kvh,
        d,
    } = a;
    let group = h / kvh;
    let mut out = vec![0f32; b * t * h * d];
    let mut idx = Vec::with_capacity(tk);
    let mut p = vec![0f32; tk];
    for bi in 0..b {
        for i in 0..t {
            let mrow = mask.row(bi, i);
            kept_keys(mrow, &mut idx);
            let p = &mut p[..idx.len()];
            for hi in 0..h {
                let kh = hi / group;
                attn_probs::<AVX>(q.row(bi, i, hi, d), k, bi, kh, d, &idx, mrow, scale, p);
                let o = ((bi * t + i) * h + hi) * d;
                let orow = &mut out[o..o + d];
                for (&pn, &j) in p.iter().zip(idx.iter()) {
                    axpy(pn, v.row(bi, j, kh, d), orow);
                }
            }
        }
    }
    out
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn attn_fwd_avx2(q: View, k: View, v: View, mask: &HostMask, a: AttnDims, scale: f32) -> Vec<f32> {
    attn_fwd_impl::<true>(q, k, v, mask, a, scale)
}

fn attn_fwd(q: View, k: View, v: View, mask: &HostMask, a: AttnDims, scale: f32) -> Vec<f32> {
    #[cfg(target_arch = "x86_64")]
    if avx2_fma() {
        // SAFETY: the CPU supports AVX2 and FMA (checked above).
        return unsafe { attn_fwd_avx2(q, k, v, mask, a, scale) };
    }
    attn_fwd_impl::<false>(q, k, v, mask, a, scale)
}

/// `(dq, dk, dv)` of [`attention`] for output gradient `g` (contiguous `[B, T, H, D]`).
type AttnGrads = (Vec<f32>, Vec<f32>, Vec<f32>);

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn attn_bwd_impl<const AVX: bool>(
    q: View,
    k: View,
    v: View,
    g: View,
    mask: &HostMask,
    a: AttnDims,
    scale: f32,
) -> AttnGrads {
    let AttnDims {
        b,
        t,
        tk,
        h,
        kvh,
        d,
    } = a;
    let group = h / kvh;
    let mut dq = vec![0f32; b * t * h * d];
    let mut dk = vec![0f32; b * tk * kvh * d];
    let mut dv = vec![0f32; b * tk * kvh * d];
    let mut idx = Vec::with_capacity(tk);
    let (mut p, mut dp) = (vec![0f32; tk], vec![0f32; tk]);
    for bi in 0..b {
        for i in 0..t {
            let mrow = mask.row(bi, i);
            kept_keys(mrow, &mut idx);
            let n = idx.len();
            let (p, dp) = (&mut p[..n], &mut dp[..n]);
            for hi in 0..h {
                let kh = hi / group;
                let qr = q.row(bi, i, hi, d);
                attn_probs::<AVX>(qr, k, bi, kh, d, &idx, mrow, scale, p);
                let gr = g.row(bi, i, hi, d);
                dots::<AVX>(gr, &idx, |j| v.row(bi, j, kh, d), dp);
                let mut dsum = 0.0;
                for (&dpn, &pn) in dp.iter().zip(p.iter()) {
                    dsum += pn * dpn;
                }
                let qo = ((bi * t + i) * h + hi) * d;
                for ((&dpn, &pn), &j) in dp.iter().zip(p.iter()).zip(idx.iter()) {
                    let ds = pn * (dpn - dsum) * scale;
                    let ko = ((bi * tk + j) * kvh + kh) * d;
                    axpy(ds, k.row(bi, j, kh, d), &mut dq[qo..qo + d]);
                    axpy(ds, qr, &mut dk[ko..ko + d]);
                    axpy(pn, gr, &mut dv[ko..ko + d]);
                }
            }
        }
    }
    (dq, dk, dv)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn attn_bwd_avx2(
    q: View,
    k: View,
    v: View,
    g: View,
    mask: &HostMask,
    a: AttnDims,
    scale: f32,
) -> AttnGrads {
    attn_bwd_impl::<true>(q, k, v, g, mask, a, scale)
}

fn attn_bwd(
    q: View,
    k: View,
    v: View,
    g: View,
    mask: &HostMask,
    a: AttnDims,
    scale: f32,
) -> AttnGrads {
    #[cfg(target_arch = "x86_64")]
    if avx2_fma() {
        // SAFETY: the CPU supports AVX2 and FMA (checked above).
        return unsafe { attn_bwd_avx2(q, k, v, g, mask, a, scale) };
    }
    attn_bwd_impl::<false>(q, k, v, g, mask, a, scale)
}

fn cpu_of<'a>(s: &'a Storage, what: &str) -> Result<&'a CpuStorage> {
    match s {
        Storage::Cpu(c) => Ok(c),
        _ => candle_core::bail!("{what} must be on the CPU"),
    }
}

impl CustomOp3 for FusedAttention {
    fn name(&self) -> &'static str {
        "rlprof-attention"
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
        let (q, qd) = view(s1, l1, "q")?;
        let (k, kd) = view(s2, l2, "k")?;
        let (v, vd) = view(s3, l3, "v")?;
        let a = attn_dims(qd, kd, vd, &self.mask)?;
        let out = attn_fwd(q, k, v, &self.mask, a, self.scale);
        Ok((CpuStorage::F32(out), Shape::from(qd.to_vec())))
    }

    fn bwd(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let grad = grad.contiguous()?;
        let (dq, dk, dv) = {
            let (qs, ql) = q.storage_and_layout();
            let (ks, kl) = k.storage_and_layout();
            let (vs, vl) = v.storage_and_layout();
            let (gs, gl) = grad.storage_and_layout();
            let (qv, qd) = view(cpu_of(&qs, "q")?, ql, "q")?;
            let (kv, kd) = view(cpu_of(&ks, "k")?, kl, "k")?;
            let (vv, vd) = view(cpu_of(&vs, "v")?, vl, "v")?;
            let (gv, gd) = view(cpu_of(&gs, "grad")?, gl, "grad")?;
            let a = attn_dims(qd, kd, vd, &self.mask)?;
            if gd != qd {
                candle_core::bail!("attention backward: grad {gd:?} vs q {qd:?}")
            }
            attn_bwd(qv, kv, vv, gv, &self.mask, a, self.scale)
        };
        let dev = q.device();
        Ok((
            Some(Tensor::from_vec(dq, q.shape(), dev)?),
            Some(Tensor::from_vec(dk, k.shape(), dev)?),
            Some(Tensor::from_vec(dv, v.shape(), dev)?),
        ))
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
    fn rope_bthd_matches_the_composed_rotate_half_form() {
        let (b, h, t, d) = (2, 3, 5, 8);
        let x = var(&[b, t, h, d], 1.0);
        let angles = Tensor::randn(0f32, 2.0, (b, t, d / 2), &Device::Cpu).unwrap();
        let (c, s) = (angles.cos().unwrap(), angles.sin().unwrap());
        let full = |half: &Tensor| {
            Tensor::cat(&[half, half], D::Minus1)
                .unwrap()
                .unsqueeze(2)
                .unwrap()
                .broadcast_as((b, t, h, d))
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
        check(
            &[&x],
            |ts| rope_bthd(ts[0], &c, &s).unwrap(),
            composed,
            1e-5,
        );
        // and candle's fused (forward-only, [B, H, T, D]) kernel agrees on values
        let bhtd = x.as_tensor().transpose(1, 2).unwrap().contiguous().unwrap();
        let theirs = candle_nn::rotary_emb::rope(&bhtd, &c, &s)
            .unwrap()
            .transpose(1, 2)
            .unwrap();
        assert!(diff(&rope_bthd(x.as_tensor(), &c, &s).unwrap(), &theirs) < 1e-5);
    }

    /// Causal mask over left-padded rows (`pad[b]` leading pad keys), as the model builds it.
    fn causal_mask(b: usize, t: usize, pad: &[usize]) -> Vec<f32> {
        let mut m = vec![-1e9f32; b * t * t];
        for bi in 0..b {
            for i in 0..t {
                for j in 0..=i {
                    if j >= pad[bi] || j == i {
                        m[(bi * t + i) * t + j] = 0.0;
                    }
                }
            }
        }
        m
    }

    /// Dense attention from candle ops on `[B, T, H, D]` inputs (grouped heads repeated).
    fn composed_attention(q: &Tensor, k: &Tensor, v: &Tensor, mask: &[f32], scale: f64) -> Tensor {
        let (b, t, h, d) = q.dims4().unwrap();
        let (_, tk, kvh, _) = k.dims4().unwrap();
        let rep = |x: &Tensor| {
            x.transpose(1, 2)
                .unwrap()
                .unsqueeze(2)
                .unwrap()
                .expand((b, kvh, h / kvh, tk, d))
                .unwrap()
                .contiguous()
                .unwrap()
                .reshape((b, h, tk, d))
                .unwrap()
        };
        let qt = q.transpose(1, 2).unwrap().contiguous().unwrap();
        let (kt, vt) = (rep(k), rep(v));
        let m = Tensor::from_slice(mask, (b, 1, t, tk), &Device::Cpu)
            .unwrap()
            .broadcast_as((b, h, t, tk))
            .unwrap()
            .contiguous()
            .unwrap();
        let s = qt
            .matmul(&kt.transpose(2, 3).unwrap().contiguous().unwrap())
            .unwrap()
            .affine(scale, 0.0)
            .unwrap()
            .add(&m)
            .unwrap();
        let p = candle_nn::ops::softmax(&s, D::Minus1).unwrap();
        p.matmul(&vt)
            .unwrap()
            .transpose(1, 2)
            .unwrap()
            .contiguous()
            .unwrap()
    }

    #[test]
    fn attention_matches_the_composed_form_with_padding_and_grouped_heads() {
        // 19 positions: rows with 8 or more kept keys take the eight-at-a-time dot products.
        for (h, kvh, t) in [(4, 4, 6), (4, 2, 6), (4, 2, 19)] {
            let (b, d) = (3, 8);
            let (q, k, v) = (
                var(&[b, t, h, d], 1.0),
                var(&[b, t, kvh, d], 1.0),
                var(&[b, t, kvh, d], 1.0),
            );
            let mask = causal_mask(b, t, &[0, 2, 5]);
            let hm = HostMask::new(mask.clone(), b, t, t).unwrap();
            let scale = 1.0 / (d as f64).sqrt();
            check(
                &[&q, &k, &v],
                |ts| attention(ts[0], ts[1], ts[2], &hm, scale as f32).unwrap(),
                |ts| composed_attention(ts[0], ts[1], ts[2], &mask, scale),
                1e-5,
            );
        }
    }

    #[test]
    fn attention_reads_a_strided_cache_prefix() {
        let (b, h, d, cap, tk) = (2, 2, 4, 9, 5);
        let q = Tensor::randn(0f32, 1.0, (b, 1, h, d), &Device::Cpu).unwrap();
        let kc = Tensor::randn(0f32, 1.0, (b, cap, h, d), &Device::Cpu).unwrap();
        let vc = Tensor::randn(0f32, 1.0, (b, cap, h, d), &Device::Cpu).unwrap();
        let (k, v) = (kc.narrow(1, 0, tk).unwrap(), vc.narrow(1, 0, tk).unwrap());
        let mask: Vec<f32> = (0..b * tk)
            .map(|i| if i == 1 { -1e9 } else { 0.0 })
            .collect();
        let hm = HostMask::new(mask.clone(), b, 1, tk).unwrap();
        let ours = attention(&q, &k, &v, &hm, 0.5).unwrap();
        let theirs = composed_attention(
            &q,
            &k.contiguous().unwrap(),
            &v.contiguous().unwrap(),
            &mask,
            0.5,
        );
        assert!(diff(&ours, &theirs) < 1e-5, "{}", diff(&ours, &theirs));
    }

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
    fn linear_matches_matmul_with_bias_and_residual() {
        let (x, w) = (var(&[2, 5, 6], 1.0), var(&[4, 6], 1.0));
        let (b, r) = (var(&[4], 1.0), var(&[2, 5, 4], 1.0));
        let mm = |x: &Tensor, w: &Tensor| {
            x.reshape((10, 6))
                .unwrap()
                .matmul(&w.t().unwrap())
                .unwrap()
                .reshape((2, 5, 4))
                .unwrap()
        };
        check(
            &[&x, &w],
            |t| linear(t[0], t[1], None).unwrap(),
            |t| mm(t[0], t[1]),
            1e-5,
        );
        check(
            &[&x, &w, &b],
            |t| linear(t[0], t[1], Some(t[2])).unwrap(),
            |t| mm(t[0], t[1]).broadcast_add(t[2]).unwrap(),
            1e-5,
        );
        check(
            &[&x, &w, &r],
            |t| linear(t[0], t[1], Some(t[2])).unwrap(),
            |t| mm(t[0], t[1]).add(t[2]).unwrap(),
            1e-5,
        );
    }

    #[test]
    fn polynomial_exp_is_within_a_few_ulp() {
        for i in -8000..=8000 {
            let x = i as f32 * 0.01;
            let (ours, libm) = (exp_poly(x), x.exp());
            assert!(
                ((ours - libm) / libm).abs() < 5e-7,
                "exp({x}): {ours} vs {libm}"
            );
        }
    }

    #[test]
    fn avx2_dot_matches_the_portable_dot() {
        #[cfg(target_arch = "x86_64")]
        if avx2_fma() {
            for n in [0, 3, 8, 32, 37] {
                let a: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
                let b: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
                let (x, y) = (dot::<false>(&a, &b), dot::<true>(&a, &b));
                assert!((x - y).abs() < 1e-5, "n {n}: {x} vs {y}");
            }
            // Eight at a time: row lengths with and without a tail, 0..=20 rows (tails of the
            // row count too), rows picked out of order.
            for d in [3, 8, 32, 37] {
                let a: Vec<f32> = (0..d).map(|i| (i as f32 * 0.37).sin()).collect();
                let rows: Vec<Vec<f32>> = (0..24)
                    .map(|r| (0..d).map(|i| ((r * d + i) as f32 * 0.13).cos()).collect())
                    .collect();
                for n in 0..=20 {
                    let idx: Vec<usize> = (0..n).map(|i| (i * 7 + 3) % 24).collect();
                    let mut out = vec![f32::NAN; n];
                    dots::<true>(&a, &idx, |j| &rows[j], &mut out);
                    for (o, &j) in out.iter().zip(&idx) {
                        let want = dot::<false>(&a, &rows[j]);
                        assert!((o - want).abs() < 1e-5, "d {d} n {n}: {o} vs {want}");
                    }
                }
            }
        }
    }
}
