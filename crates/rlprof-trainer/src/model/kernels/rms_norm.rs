//! The fused RMSNorm ([`rms_norm`]) and its two backward kernels (input and weight gradients).

use super::{Body, F32Op2, F32Op3, Rows, supported, whole_rows, widest};
use crate::model::autograd::tagged;
use candle_core::{CpuStorage, CustomOp2, CustomOp3, D, Layout, Result, Shape, Tensor};

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

/// Lanes of the row sums below: 16 independent accumulators (one AVX-512 vector, two AVX2
/// ones), so that a row's sum is not one chain of dependent adds. The sequential `f32` sum of a
/// 128-wide row cost a 4-cycle add latency per element, and made RMSNorm one of the slowest
/// ops of the tiny bench size (issue 29).
const LANES: usize = 16;

/// The lanes' total, as a balanced tree.
#[inline(always)]
fn lane_total(acc: [f32; LANES]) -> f32 {
    let mut a = acc;
    let mut w = LANES / 2;
    while w > 0 {
        for l in 0..w {
            a[l] += a[l + w];
        }
        w /= 2;
    }
    a[0]
}

/// `sum_i a[i] * a[i]`, `LANES` sums at a time (over chunks, not indices: the indexed form
/// kept its bounds checks and stayed scalar).
#[inline(always)]
fn lane_sum_sq(a: &[f32]) -> f32 {
    let mut acc = [0f32; LANES];
    let ca = a.chunks_exact(LANES);
    let ra = ca.remainder();
    for x in ca {
        for l in 0..LANES {
            acc[l] += x[l] * x[l];
        }
    }
    ra.iter().fold(lane_total(acc), |s, x| s + x * x)
}

/// `sum_i a[i] * b[i] * c[i]`, `LANES` sums at a time.
#[inline(always)]
fn lane_dot3(a: &[f32], b: &[f32], c: &[f32]) -> f32 {
    let n = a.len().min(b.len()).min(c.len());
    let (ca, cb, cc) = (
        a[..n].chunks_exact(LANES),
        b[..n].chunks_exact(LANES),
        c[..n].chunks_exact(LANES),
    );
    let rest = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .zip(cc.remainder());
    let mut acc = [0f32; LANES];
    for ((x, y), z) in ca.zip(cb).zip(cc) {
        for l in 0..LANES {
            acc[l] += x[l] * y[l] * z[l];
        }
    }
    rest.fold(lane_total(acc), |s, ((x, y), z)| s + x * y * z)
}

/// `1 / sqrt(mean(row^2) + eps)`.
#[inline(always)]
fn inv_rms(row: &[f32], eps: f32) -> f32 {
    let ms = lane_sum_sq(row) / row.len() as f32;
    1.0 / (ms + eps).sqrt()
}

/// The forward rows: `y = x * inv_rms(x) * w`, `d` wide.
struct Fwd<'a> {
    x: &'a [f32],
    w: &'a [f32],
    d: usize,
    eps: f32,
    y: &'a mut [std::mem::MaybeUninit<f32>],
}

impl Body for Fwd<'_> {
    #[inline(always)]
    fn run(self) {
        let Fwd { x, w, d, eps, y } = self;
        for (xr, yr) in x.chunks_exact(d).zip(y.chunks_exact_mut(d)) {
            let inv = inv_rms(xr, eps);
            for ((y, &v), &wv) in yr.iter_mut().zip(xr).zip(w) {
                y.write(v * inv * wv);
            }
        }
    }
}

/// The input gradient rows: `dx = inv * (g*w - n * mean(g*w*n))`, `n = x * inv`.
struct BwdX<'a> {
    g: &'a [f32],
    x: &'a [f32],
    w: &'a [f32],
    d: usize,
    eps: f32,
    dx: &'a mut [std::mem::MaybeUninit<f32>],
}

impl Body for BwdX<'_> {
    #[inline(always)]
    fn run(self) {
        let BwdX {
            g,
            x,
            w,
            d,
            eps,
            dx,
        } = self;
        for ((gr, xr), dr) in g
            .chunks_exact(d)
            .zip(x.chunks_exact(d))
            .zip(dx.chunks_exact_mut(d))
        {
            let inv = inv_rms(xr, eps);
            let dot = lane_dot3(gr, w, xr) * inv / d as f32;
            for (((o, &gv), &xv), &wv) in dr.iter_mut().zip(gr).zip(xr).zip(w) {
                o.write(inv * (gv * wv - xv * inv * dot));
            }
        }
    }
}

/// The weight gradient: `dw += g * n` over the rows.
struct BwdW<'a> {
    g: &'a [f32],
    x: &'a [f32],
    d: usize,
    eps: f32,
    dw: &'a mut [f32],
}

impl Body for BwdW<'_> {
    #[inline(always)]
    fn run(self) {
        let BwdW { g, x, d, eps, dw } = self;
        for (gr, xr) in g.chunks_exact(d).zip(x.chunks_exact(d)) {
            let inv = inv_rms(xr, eps);
            for ((o, &gv), &xv) in dw.iter_mut().zip(gr).zip(xr) {
                *o += gv * xv * inv;
            }
        }
    }
}

impl F32Op2 for RmsNorm {
    fn op(&self) -> &'static str {
        "rms_norm"
    }

    fn f(&self, x: Rows<'_>, w: Rows<'_>) -> Result<Vec<f32>> {
        let (x, d, w) = (x.data, x.d, w.data);
        if w.len() != d {
            candle_core::bail!("rms_norm: weight has {} elements, rows {d}", w.len())
        }
        let n = whole_rows(x.len(), d, "rms_norm")?;
        let mut out = Vec::with_capacity(n);
        // written through the spare capacity, without a zero fill first
        widest(Fwd {
            x,
            w,
            d,
            eps: self.eps,
            y: &mut out.spare_capacity_mut()[..n],
        });
        // SAFETY: the n / d rows of d elements above wrote all n elements (`whole_rows`; `w`
        // has d elements, checked above).
        unsafe { out.set_len(n) };
        Ok(out)
    }
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
        self.map(s1, l1, s2, l2)
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

impl F32Op3 for RmsNormBwdX {
    fn op(&self) -> &'static str {
        "rms_norm backward"
    }

    fn f(&self, g: Rows<'_>, x: Rows<'_>, w: Rows<'_>) -> Result<Vec<f32>> {
        let (g, d, x, w) = (g.data, g.d, x.data, w.data);
        let n = whole_rows(g.len(), d, "rms_norm backward")?;
        if x.len() != n || w.len() != d {
            candle_core::bail!("rms_norm backward: operands do not fit the gradient")
        }
        let mut out = Vec::with_capacity(n);
        widest(BwdX {
            g,
            x,
            w,
            d,
            eps: self.0.eps,
            dx: &mut out.spare_capacity_mut()[..n],
        });
        // SAFETY: the n / d rows of d elements above wrote all n elements (`whole_rows`; `x`
        // has n and `w` d elements, checked above).
        unsafe { out.set_len(n) };
        Ok(out)
    }
}

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
        self.map(s1, l1, s2, l2, s3, l3)
    }
}

/// `(g, x) -> dw` of [`rms_norm`]: the column sums of `g * n`.
struct RmsNormBwdW(RmsNorm);

impl F32Op2 for RmsNormBwdW {
    fn op(&self) -> &'static str {
        "rms_norm backward"
    }

    fn f(&self, g: Rows<'_>, x: Rows<'_>) -> Result<Vec<f32>> {
        let (g, d, x) = (g.data, g.d, x.data);
        let mut dw = vec![0f32; d];
        widest(BwdW {
            g,
            x,
            d,
            eps: self.0.eps,
            dw: &mut dw,
        });
        Ok(dw)
    }

    /// `[D]`, the weight's shape.
    fn shape(&self, l1: &Layout, _l2: &Layout) -> Shape {
        Shape::from(*l1.dims().last().unwrap_or(&1))
    }
}

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
        self.map(s1, l1, s2, l2)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{check, var};
    use super::*;

    #[test]
    fn rms_norm_matches_the_composed_form() {
        // d = 16: whole lanes only; d = 37: two lane blocks and a remainder of 5
        for d in [16, 37] {
            rms_norm_matches_the_composed_form_at(d);
        }
    }

    fn rms_norm_matches_the_composed_form_at(d: usize) {
        let (x, w) = (var(&[2, 5, d], 2.0), var(&[d], 1.0));
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
}
