//! The model's building blocks: the linear layer (fused bias/residual on the CPU), RMSNorm, the
//! SwiGLU MLP and the value (score) head.

use super::kernels;
use super::precision::{self, Hint};
use crate::traced_op;
use candle_core::{D, Result, Tensor};
use rlprof_profiler::NameId;

/// A linear layer `y = x W^T + b` with its module path.
pub(super) struct Linear {
    pub(super) w: Tensor,
    pub(super) b: Option<Tensor>,
    pub(super) module: NameId,
}

impl Linear {
    pub(super) fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.forward_add(x, None)
    }

    /// `x W^T + b [+ residual]`: on the CPU one fused op (the residual and bias are the gemm's
    /// initial destination), elsewhere matmul and adds.
    pub(super) fn forward_add(
        &self,
        x: &Tensor,
        residual: Option<(&Tensor, NameId)>,
    ) -> Result<Tensor> {
        let (out_f, in_f) = self.w.dims2()?;
        let dims = x.dims().to_vec();
        let rows: usize = dims[..dims.len() - 1].iter().product();
        let flops = 2 * (rows * in_f * out_f) as u64;
        if kernels::supported(x) {
            let addend = match (&self.b, residual) {
                (Some(b), None) => Some(b),
                (None, Some((r, _))) => Some(r),
                _ => None,
            };
            if let Some(a) = addend {
                precision::hint(|| match residual {
                    Some(_) => Hint::Residual(a.clone()),
                    None => Hint::Bias(a.clone()),
                });
            }
            let mut y = traced_op!(
                "linear",
                self.module,
                [x, &self.w],
                flops,
                kernels::linear(x, &self.w, addend)
            )?;
            if let (Some(b), Some((r, m))) = (&self.b, residual) {
                y = traced_op!("add", self.module, [&y, b], 0, y.broadcast_add(b))?;
                y = traced_op!("add", m, [r, &y], 0, r.add(&y))?;
            }
            return Ok(y);
        }
        let x2 = x.reshape((rows, in_f))?;
        let wt = self.w.t()?;
        let mut y = traced_op!("matmul", self.module, [&x2, &self.w], flops, x2.matmul(&wt))?;
        if let Some(b) = &self.b {
            y = traced_op!("add", self.module, [&y, b], 0, y.broadcast_add(b))?;
        }
        let mut out_dims = dims;
        *out_dims.last_mut().expect("rank >= 1") = out_f;
        let y = y.reshape(out_dims)?;
        match residual {
            Some((r, m)) => traced_op!("add", m, [r, &y], 0, r.add(&y)),
            None => Ok(y),
        }
    }
}

/// RMSNorm from primitives (differentiable).
pub(super) struct RmsNorm {
    pub(super) w: Tensor,
    pub(super) eps: f64,
    pub(super) module: NameId,
    /// No-grad model: off the CPU f32 kernel, candle's fused one (it has no backward pass). On
    /// the CPU our kernel serves both models: candle's splits the rows over rayon's global pool,
    /// which the rank threads of one process share (one thread each: they queue behind each
    /// other), where ours runs on the calling thread.
    pub(super) fused: bool,
}

impl RmsNorm {
    pub(super) fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let m = self.module;
        let eps = self.eps as f32;
        precision::hint(|| Hint::Eps(self.eps));
        if self.fused && !kernels::supported(x) {
            return traced_op!(
                "rms_norm",
                m,
                [x, &self.w],
                0,
                candle_nn::ops::rms_norm(x, &self.w, eps)
            );
        }
        if kernels::supported(x) {
            return traced_op!(
                "rms_norm",
                m,
                [x, &self.w],
                0,
                kernels::rms_norm(x, &self.w, eps)
            );
        }
        let sq = traced_op!("pow", m, [x], 0, x.sqr())?;
        let ms = traced_op!("mean", m, [&sq], 0, sq.mean_keepdim(D::Minus1))?;
        let inv = traced_op!(
            "rsqrt",
            m,
            [&ms],
            0,
            ms.affine(1.0, self.eps)?.sqrt()?.recip()
        )?;
        let xn = traced_op!("mul", m, [x, &inv], 0, x.broadcast_mul(&inv))?;
        traced_op!("mul", m, [&xn, &self.w], 0, xn.broadcast_mul(&self.w))
    }
}

pub(super) struct Mlp {
    pub(super) gate: Linear,
    pub(super) up: Linear,
    pub(super) down: Linear,
    pub(super) module: NameId,
}

impl Mlp {
    /// `residual + down(silu(gate(x)) * up(x))`.
    pub(super) fn forward(&self, x: &Tensor, residual: &Tensor) -> Result<Tensor> {
        let m = self.module;
        let g = self.gate.forward(x)?;
        let u = self.up.forward(x)?;
        let gu = traced_op!("silu_mul", m, [&g, &u], 0, kernels::silu_mul(&g, &u))?;
        self.down.forward_add(&gu, Some((residual, m)))
    }
}

/// A value (score) head: `x` `[B, T, H]` -> `[B, T]` through `w` `[1, H]` and bias `b` `[1]`
/// (ops under module `score`, verl's critic head).
pub fn score_head(x: &Tensor, w: &Tensor, b: &Tensor) -> Result<Tensor> {
    let head = Linear {
        w: w.clone(),
        b: Some(b.clone()),
        module: rlprof_profiler::name!("score"),
    };
    head.forward(x)?.squeeze(D::Minus1)
}
