//! Element-wise kernels: SwiGLU's gate [`silu_mul`] and the generic two- and three-operand maps
//! ([`Map2`], [`Map3`]) its forward and backward run on.

#[cfg(target_arch = "x86_64")]
use super::simd::{avx2_fma, avx512, map2_avx2, map2_avx512, map3_avx2, map3_avx512};
use super::simd::{exp_poly, map2, map3};
use super::{Body, F32Op2, F32Op3, Rows, cpu_of, f32_rows, supported, widest};
use crate::model::autograd::tagged;
use candle_core::{CpuStorage, CustomOp2, CustomOp3, Layout, Result, Shape, Tensor};

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
        Map2("rlprof-silu-mul", silu_mul_fwd).map(s1, l1, s2, l2)
    }

    fn bwd(
        &self,
        g: &Tensor,
        u: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let (grad, g, u) = (grad.contiguous()?, g.contiguous()?, u.contiguous()?);
        if !supported(&grad) || grad.dims() != g.dims() || g.dims() != u.dims() {
            let dg = grad.apply_op3_no_bwd(
                &g,
                &u,
                &Map3("rlprof-silu-mul-bwd-gate", silu_mul_bwd_gate),
            )?;
            let du = grad.apply_op2_no_bwd(&g, &Map2("rlprof-silu-mul-bwd-up", silu_mul_bwd_up))?;
            return Ok((Some(dg), Some(du)));
        }
        // Both gradients from one pass (one sigmoid per element, where two maps computed it
        // twice and read `grad` and `g` twice).
        let (dg, du) = {
            let (gs, gl) = grad.storage_and_layout();
            let (xs, xl) = g.storage_and_layout();
            let (us, ul) = u.storage_and_layout();
            let op = "silu_mul backward";
            let (d, _) = f32_rows(cpu_of(&gs, "grad")?, gl, op)?;
            let (gv, _) = f32_rows(cpu_of(&xs, "gate")?, xl, op)?;
            let (uv, _) = f32_rows(cpu_of(&us, "up")?, ul, op)?;
            let n = d.len();
            if gv.len() != n || uv.len() != n {
                candle_core::bail!("{op}: operands differ in length")
            }
            let (mut dg, mut du) = (Vec::with_capacity(n), Vec::with_capacity(n));
            widest(SiluMulBwd {
                d,
                g: gv,
                u: uv,
                dg: &mut dg.spare_capacity_mut()[..n],
                du: &mut du.spare_capacity_mut()[..n],
            });
            // SAFETY: `SiluMulBwd` wrote all n elements of both (every operand holds n).
            unsafe {
                dg.set_len(n);
                du.set_len(n);
            }
            (dg, du)
        };
        let dev = grad.device();
        Ok((
            Some(Tensor::from_vec(dg, g.shape(), dev)?),
            Some(Tensor::from_vec(du, u.shape(), dev)?),
        ))
    }
}

/// Both input gradients of [`silu_mul`] in one pass.
struct SiluMulBwd<'a> {
    d: &'a [f32],
    g: &'a [f32],
    u: &'a [f32],
    dg: &'a mut [std::mem::MaybeUninit<f32>],
    du: &'a mut [std::mem::MaybeUninit<f32>],
}

impl Body for SiluMulBwd<'_> {
    #[inline(always)]
    #[allow(clippy::needless_range_loop)]
    fn run(self) {
        let n = self.d.len();
        let (d, g, u) = (&self.d[..n], &self.g[..n], &self.u[..n]);
        let (dg, du) = (&mut self.dg[..n], &mut self.du[..n]);
        for i in 0..n {
            let s = sigmoid(g[i]);
            // the expressions of `silu_mul_bwd_gate` and `silu_mul_bwd_up`, bit for bit
            dg[i].write(d[i] * u[i] * s * (1.0 + g[i] * (1.0 - s)));
            du[i].write(d[i] * g[i] * s);
        }
    }
}

/// An element-wise map of two contiguous same-shape f32 tensors (no backward). Generic over the
/// function so that it inlines into the loop (a `fn` pointer costs an indirect call per element).
struct Map2<F>(&'static str, F);

impl<F: Fn(f32, f32) -> f32> F32Op2 for Map2<F> {
    fn op(&self) -> &'static str {
        self.0
    }

    fn f(&self, a: Rows<'_>, b: Rows<'_>) -> Result<Vec<f32>> {
        let (a, b) = (a.data, b.data);
        if a.len() != b.len() {
            candle_core::bail!("{}: {} vs {} elements", self.0, a.len(), b.len())
        }
        #[cfg(target_arch = "x86_64")]
        if avx512() {
            // SAFETY: the CPU supports AVX-512F, AVX2 and FMA (checked above).
            return Ok(unsafe { map2_avx512(a, b, &self.1) });
        }
        #[cfg(target_arch = "x86_64")]
        if avx2_fma() {
            // SAFETY: the CPU supports AVX2 and FMA (checked above).
            return Ok(unsafe { map2_avx2(a, b, &self.1) });
        }
        Ok(map2(a, b, &self.1))
    }
}

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
        self.map(s1, l1, s2, l2)
    }
}

/// An element-wise map of three contiguous same-shape f32 tensors (no backward), generic like
/// [`Map2`].
struct Map3<F>(&'static str, F);

impl<F: Fn(f32, f32, f32) -> f32> F32Op3 for Map3<F> {
    fn op(&self) -> &'static str {
        self.0
    }

    fn f(&self, a: Rows<'_>, b: Rows<'_>, c: Rows<'_>) -> Result<Vec<f32>> {
        let (a, b, c) = (a.data, b.data, c.data);
        if a.len() != b.len() || a.len() != c.len() {
            candle_core::bail!("{}: operands differ in length", self.0)
        }
        #[cfg(target_arch = "x86_64")]
        if avx512() {
            // SAFETY: the CPU supports AVX-512F, AVX2 and FMA (checked above).
            return Ok(unsafe { map3_avx512(a, b, c, &self.1) });
        }
        #[cfg(target_arch = "x86_64")]
        if avx2_fma() {
            // SAFETY: the CPU supports AVX2 and FMA (checked above).
            return Ok(unsafe { map3_avx2(a, b, c, &self.1) });
        }
        Ok(map3(a, b, c, &self.1))
    }
}

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
        self.map(s1, l1, s2, l2, s3, l3)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{check, var};
    use super::*;

    #[test]
    fn silu_mul_matches_the_composed_form() {
        // 185 elements: vector blocks and a scalar remainder in the fused backward
        let (g, u) = (var(&[5, 37], 3.0), var(&[5, 37], 1.0));
        check(
            &[&g, &u],
            |t| silu_mul(t[0], t[1]).unwrap(),
            |t| candle_nn::ops::silu(t[0]).unwrap().mul(t[1]).unwrap(),
            1e-5,
        );
    }
}
