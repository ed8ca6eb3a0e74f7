//! Position ids and the additive attention mask of one forward call, built from per-token
//! validity (full pass, a pass after cached positions, one decode step).

use super::kernels;
use candle_core::{Device, Result, Tensor};

/// Position ids and the additive attention mask of one forward call.
pub struct Attn {
    /// `[B, T]` u32 positions of the new tokens.
    pub positions: Tensor,
    /// `[B, 1, T, T_keys]` additive mask (0 or -1e9).
    pub mask: Tensor,
    /// The same mask on the host, `[B, T, T_keys]`, for the fused CPU attention.
    pub(super) host_mask: kernels::HostMask,
}

/// Mask value of a masked key (finite so fully-masked pad rows stay NaN-free).
const MASKED: f32 = -1e9;

impl Attn {
    /// For a full pass over `[B, L]` tokens with validity `valid` (row-major, 1 = real token).
    pub fn full(valid: &[Vec<bool>], device: &Device) -> Result<Attn> {
        Attn::rows(valid, 0, device)
    }

    /// Query positions `start..L` of the full pass over `valid` (keys: every position `0..L`),
    /// for a pass whose first `start` positions are already in a KV cache.
    pub fn rows(valid: &[Vec<bool>], start: usize, device: &Device) -> Result<Attn> {
        let b = valid.len();
        let l = valid.first().map_or(0, |r| r.len());
        let t = l.saturating_sub(start);
        let mut pos = Vec::with_capacity(b * t);
        let mut mask = vec![MASKED; b * t * l];
        for (bi, row) in valid.iter().enumerate() {
            let mut p = 0u32;
            for (i, &vi) in row.iter().enumerate() {
                if i >= start {
                    pos.push(if vi { p } else { 0 });
                    let r = (bi * t + i - start) * l;
                    for (j, &vj) in row.iter().enumerate().take(i + 1) {
                        if vj || j == i {
                            mask[r + j] = 0.0;
                        }
                    }
                }
                if vi {
                    p += 1;
                }
            }
        }
        Ok(Attn {
            positions: Tensor::from_vec(pos, (b, t), device)?,
            mask: Tensor::from_slice(&mask, (b, 1, t, l), device)?,
            host_mask: kernels::HostMask::new(mask, b, t, l)?,
        })
    }

    /// For one decode step: new token at `positions[b]`, keys valid per `valid[b]` (cached + new).
    pub fn decode(positions: &[u32], valid: &[Vec<bool>], device: &Device) -> Result<Attn> {
        let b = valid.len();
        let tk = valid.first().map_or(0, |r| r.len());
        let mask: Vec<f32> = valid
            .iter()
            .flat_map(|r| r.iter().map(|&v| if v { 0.0 } else { MASKED }))
            .collect();
        Ok(Attn {
            positions: Tensor::from_vec(positions.to_vec(), (b, 1), device)?,
            mask: Tensor::from_slice(&mask, (b, 1, 1, tk), device)?,
            host_mask: kernels::HostMask::new(mask, b, 1, tk)?,
        })
    }
}
