//! Fused kernels with a backward pass, which candle lacks: its fused softmax, RMSNorm and RoPE
//! have none, and the composed forms cost one full pass over the activations per primitive, forward
//! and backward (RMSNorm alone is five ops forward and about a dozen in its backward graph). Each
//! kernel here is one pass forward and one or two backward, written by hand because no crate
//! offers differentiable fused CPU kernels for candle. CPU and f32 only ([`supported`]); other
//! devices use candle's composed ops. Every kernel is tested against the composed form, values and
//! gradients.
//!
//! One kernel family per file: [`softmax`](softmax_last_dim), [`rms_norm`], the element-wise maps
//! ([`silu_mul`]), [`rope_bthd`], [`linear`] (gemm), [`token_logprob`] and [`entropy`], and
//! [`attention`] with its [`HostMask`]; `simd` holds the AVX2+FMA detection and the vectorised
//! helpers they share. This file holds the storage helpers every kernel's CPU entry point uses.

mod attention;
mod elementwise;
mod linear;
mod logprob;
mod rms_norm;
mod rope;
mod simd;
mod softmax;
#[cfg(test)]
mod test_util;

pub use attention::{HostMask, attention};
pub use elementwise::silu_mul;
pub use linear::linear;
pub use logprob::{entropy, token_logprob};
pub use rms_norm::rms_norm;
pub use rope::rope_bthd;
pub use softmax::softmax_last_dim;

use candle_core::{CpuStorage, Layout, Result, Storage, Tensor};

/// Whether the fused kernels run on tensors like `x` (CPU, f32).
pub fn supported(x: &Tensor) -> bool {
    x.device().is_cpu() && x.dtype() == candle_core::DType::F32
}

/// The contiguous f32 elements of `s` under `l` and its row length (last dimension).
fn f32_rows<'a>(s: &'a CpuStorage, l: &Layout, op: &str) -> Result<(&'a [f32], usize)> {
    let CpuStorage::F32(data) = s else {
        candle_core::bail!("{op}: f32 only")
    };
    let Some((a, b)) = l.contiguous_offsets() else {
        candle_core::bail!("{op}: contiguous input required")
    };
    Ok((&data[a..b], *l.dims().last().unwrap_or(&1)))
}

/// The contiguous u32 elements (token ids) of `s` under `l`.
fn u32_values<'a>(s: &'a CpuStorage, l: &Layout, op: &str) -> Result<&'a [u32]> {
    let CpuStorage::U32(data) = s else {
        candle_core::bail!("{op}: targets must be u32")
    };
    let Some((a, b)) = l.contiguous_offsets() else {
        candle_core::bail!("{op}: contiguous targets required")
    };
    Ok(&data[a..b])
}

/// The CPU storage of a tensor's storage `s` (`what` names it in the error).
fn cpu_of<'a>(s: &'a Storage, what: &str) -> Result<&'a CpuStorage> {
    match s {
        Storage::Cpu(c) => Ok(c),
        _ => candle_core::bail!("{what} must be on the CPU"),
    }
}
