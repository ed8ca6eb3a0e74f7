//! Grouped-query self-attention of one layer: the q/k/v/o projections, RoPE (fused kernels or
//! composed ops), the KV-cache append, and fused CPU or dense attention.

use super::ModelConfig;
use super::cache::LayerCache;
use super::kernels;
use super::layers::Linear;
use super::precision::{self, Hint};
use crate::traced_op;
use candle_core::{D, Device, Result, Tensor};
use rlprof_profiler::NameId;

pub(super) struct Attention {
    pub(super) q: Linear,
    pub(super) k: Linear,
    pub(super) v: Linear,
    pub(super) o: Linear,
    pub(super) heads: usize,
    pub(super) kv_heads: usize,
    pub(super) head_dim: usize,
    pub(super) module: NameId,
    /// No-grad model: fused RoPE and softmax kernels.
    pub(super) fused: bool,
}

impl Attention {
    pub(super) fn forward(
        &self,
        x: &Tensor,
        rope: &Rope,
        mask: &AttnMask,
        cache: Option<&mut Option<LayerCache>>,
        capacity: usize,
        residual: &Tensor,
    ) -> Result<Tensor> {
        let (b, t, _) = x.dims3()?;
        let (h, kvh, hd) = (self.heads, self.kv_heads, self.head_dim);
        let m = self.module;
        // `[B, T, heads, hd]`: the projections' own layout, no transpose.
        let q = self.q.forward(x)?.reshape((b, t, h, hd))?;
        let k = self.k.forward(x)?.reshape((b, t, kvh, hd))?;
        let v = self.v.forward(x)?.reshape((b, t, kvh, hd))?;
        let rot = |x: &Tensor| {
            let (c, s) = (&rope.cos, &rope.sin);
            if !rope.half {
                return apply_rope(x, c, s, m);
            }
            precision::hint(|| Hint::Sin(s.clone()));
            if kernels::supported(x) {
                traced_op!("rope", m, [x, c], 0, kernels::rope_bthd(x, c, s))
            } else {
                traced_op!(
                    "rope",
                    m,
                    [x, c],
                    0,
                    candle_nn::rotary_emb::rope_thd(x, c, s)
                )
            }
        };
        let (q, k) = (rot(&q)?, rot(&k)?);
        let (k, v) = match cache {
            Some(slot) => LayerCache::append(slot, &k, &v, capacity, self.fused, m)?,
            None => (k, v),
        };
        let tk = k.dim(1)?;
        let flops = 4 * (b * h * t * tk * hd) as u64;
        let scale = 1.0 / (hd as f64).sqrt();
        let out = match mask {
            AttnMask::Host(hm, mask) => {
                precision::hint(|| Hint::Mask((*mask).clone()));
                traced_op!(
                    "attention",
                    m,
                    [&q, &k, &v],
                    flops,
                    kernels::attention(&q, &k, &v, hm, scale as f32)
                )?
            }
            AttnMask::Dense(mask) => {
                let bhtd = |x: &Tensor| x.transpose(1, 2)?.contiguous();
                let (q, k, v) = (bhtd(&q)?, bhtd(&k)?, bhtd(&v)?);
                let (k, v) = (repeat_kv(&k, h / kvh)?, repeat_kv(&v, h / kvh)?);
                let kt = k.transpose(2, 3)?.contiguous()?;
                let scores = traced_op!("matmul", m, [&q, &kt], flops / 2, q.matmul(&kt))?;
                let scores = traced_op!("mul", m, [&scores], 0, scores.affine(scale, 0.0))?;
                let scores = traced_op!("add", m, [&scores, mask], 0, scores.add(mask))?;
                let probs = traced_op!(
                    "softmax",
                    m,
                    [&scores],
                    0,
                    kernels::softmax_last_dim(&scores)
                )?;
                let out = traced_op!("matmul", m, [&probs, &v], flops / 2, probs.matmul(&v))?;
                out.transpose(1, 2)?.contiguous()?
            }
        };
        self.o
            .forward_add(&out.reshape((b, t, h * hd))?, Some((residual, m)))
    }
}

fn repeat_kv(x: &Tensor, n: usize) -> Result<Tensor> {
    if n == 1 {
        return Ok(x.clone());
    }
    let (b, kvh, t, hd) = x.dims4()?;
    x.unsqueeze(2)?
        .expand((b, kvh, n, t, hd))?
        .contiguous()?
        .reshape((b, kvh * n, t, hd))
}

pub(super) fn rope_tables(config: &ModelConfig, device: &Device) -> Result<(Tensor, Tensor)> {
    let hd = config.head_dim();
    let half = hd / 2;
    let max = config.max_position_embeddings.min(1 << 16);
    let mut cos = Vec::with_capacity(max * hd);
    let mut sin = Vec::with_capacity(max * hd);
    // Both halves of a row hold the same frequencies (rotate-half layout).
    for p in 0..max {
        for _half in 0..2 {
            for i in 0..half {
                let freq = 1.0 / config.rope_theta.powf(2.0 * i as f64 / hd as f64);
                let a = p as f64 * freq;
                cos.push(a.cos() as f32);
                sin.push(a.sin() as f32);
            }
        }
    }
    Ok((
        Tensor::from_vec(cos, (max, hd), device)?,
        Tensor::from_vec(sin, (max, hd), device)?,
    ))
}

/// RoPE tables at the call's positions: `[B, T, D/2]` for the fused kernels (`half`), else
/// `[B, T, 1, D]` for the composed form.
pub(super) struct Rope {
    pub(super) cos: Tensor,
    pub(super) sin: Tensor,
    pub(super) half: bool,
}

/// The attention mask of one forward call: on the host for the fused CPU kernel (with the
/// `[B, 1, T, Tk]` tensor a precision dump writes as the kernel's mask argument), else expanded
/// to `[B, H, T, Tk]`.
pub(super) enum AttnMask<'a> {
    Host(&'a kernels::HostMask, &'a Tensor),
    Dense(Tensor),
}

/// `x * cos + rotate_half(x) * sin` from primitive ops; x `[B, T, H, D]`, cos, sin `[B, T, 1, D]`.
fn apply_rope(x: &Tensor, cos: &Tensor, sin: &Tensor, module: NameId) -> Result<Tensor> {
    let d = x.dim(D::Minus1)?;
    let (cos, sin) = (
        cos.broadcast_as(x.shape())?.contiguous()?,
        sin.broadcast_as(x.shape())?.contiguous()?,
    );
    let x1 = x.narrow(D::Minus1, 0, d / 2)?;
    let x2 = x.narrow(D::Minus1, d / 2, d / 2)?;
    let rot = traced_op!(
        "cat",
        module,
        [&x2, &x1],
        0,
        Tensor::cat(&[&x2.neg()?, &x1], D::Minus1)
    )?;
    let a = traced_op!("mul", module, [x, &cos], 0, x.mul(&cos))?;
    let b = traced_op!("mul", module, [&rot, &sin], 0, rot.mul(&sin))?;
    traced_op!("add", module, [&a, &b], 0, a.add(&b))
}
