//! Rotate-half RoPE on `[B, T, H, D]` activations ([`rope_bthd`]), its own transpose as backward.

use super::{F32Op3, Rows, whole_rows};
use crate::model::autograd::tagged;
use candle_core::{CpuStorage, CustomOp3, Layout, Result, Shape, Tensor};

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

impl F32Op3 for Rope {
    fn op(&self) -> &'static str {
        "rope"
    }

    fn f(&self, x: Rows<'_>, c: Rows<'_>, s: Rows<'_>) -> Result<Vec<f32>> {
        let (l1, l2) = (x.layout, c.layout);
        let (x, d, c, half, s) = (x.data, x.d, c.data, c.d, s.data);
        let (b, t, h) = match *l1.dims() {
            [b, t, h, _] => (b, t, h),
            _ => candle_core::bail!("rope: x must be [B, T, H, D], got {:?}", l1.dims()),
        };
        if half * 2 != d || c.len() != b * t * half || s.len() != c.len() {
            candle_core::bail!("rope: tables {:?} do not fit x {:?}", l2.dims(), l1.dims())
        }
        let n = whole_rows(x.len(), d, "rope")?;
        let mut out = Vec::with_capacity(n);
        // written through the spare capacity, without a zero fill first
        let rows = out.spare_capacity_mut()[..n].chunks_exact_mut(d);
        for (i, (xr, yr)) in x.chunks_exact(d).zip(rows).enumerate() {
            // row i is (bi, ti, hi) of x; its table row is (bi, ti) = i / h
            let off = (i / h) * half;
            let (cr, sr) = (&c[off..off + half], &s[off..off + half]);
            let (x1, x2) = xr.split_at(half);
            let (y1, y2) = yr.split_at_mut(half);
            for j in 0..half {
                let sj = self.sign * sr[j];
                y1[j].write(x1[j] * cr[j] - x2[j] * sj);
                y2[j].write(x2[j] * cr[j] + x1[j] * sj);
            }
        }
        // SAFETY: the n / d rows above each wrote their two halves of d / 2 elements (d is
        // even, checked above): all n elements.
        unsafe { out.set_len(n) };
        Ok(out)
    }
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
        self.map(s1, l1, s2, l2, s3, l3)
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
    use super::super::test_util::{check, diff, var};
    use super::*;
    use candle_core::{D, Device};

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
}
