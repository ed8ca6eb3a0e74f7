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
//! [`attention`] with its [`HostMask`]; `simd` holds the AVX2+FMA and AVX-512 detection and the
//! vectorised helpers they share. This file holds the storage helpers every kernel's CPU entry
//! point uses.

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
pub use logprob::{
    RowShifts, entropy, entropy_no_grad, entropy_no_grad_shifted, softmax_weights, token_logprob,
    token_logprob_shifts,
};
pub use rms_norm::rms_norm;
pub use rope::rope_bthd;
pub use softmax::softmax_last_dim;

use candle_core::{CpuStorage, Layout, Result, Shape, Storage, Tensor};

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

/// One contiguous f32 operand of an [`F32Op1`]/[`F32Op2`]/[`F32Op3`] kernel.
#[derive(Clone, Copy)]
struct Rows<'a> {
    /// The elements, row-major.
    data: &'a [f32],
    /// The row length (the last dimension; 1 for a scalar).
    d: usize,
    /// The layout `data` was taken from (dims for checks and error messages).
    layout: &'a Layout,
}

impl<'a> Rows<'a> {
    /// The operand `s` under `l`: f32 and contiguous, else an error naming `op`.
    fn of(s: &'a CpuStorage, l: &'a Layout, op: &str) -> Result<Self> {
        let (data, d) = f32_rows(s, l, op)?;
        Ok(Rows { data, d, layout: l })
    }
}

// The `F32Op*` traits factor the CPU entry point that most kernels repeat, in the pattern of
// candle's `Map1`/`Map2` (candle-core `cpu_backend/utils.rs`): the kernel implements `f` on typed
// f32 rows, and the provided `map` takes the operands out of their `CpuStorage` (erroring on
// another dtype or a non-contiguous layout), runs `f` and wraps the result with its shape. A
// kernel's `CustomOpN::cpu_fwd` is then `self.map(..)`. (Rust's orphan rule forbids a blanket
// `impl<T: F32Op2> CustomOp2 for T`, so each op still spells out its `cpu_fwd`.)
//
// Not every kernel fits, and those keep their own entry points: the token log-prob kernels take
// u32 targets as second operand ([`u32_values`]); attention reads strided views in place rather
// than contiguous rows; linear computes its output shape from checked dims in one body shared by
// its `CustomOp2` and `CustomOp3` forms; and the linear and attention backward passes read
// tensors' storages, not a custom op's.

/// A kernel over one contiguous f32 operand (see the comment above).
trait F32Op1 {
    /// The kernel's name in error messages.
    fn op(&self) -> &'static str;

    /// The output's elements for operand `x`.
    fn f(&self, x: Rows<'_>) -> Result<Vec<f32>>;

    /// The output's shape: the operand's unless overridden.
    fn shape(&self, l: &Layout) -> Shape {
        l.shape().clone()
    }

    /// `CustomOp1::cpu_fwd`: the f32 operand out of `s`, [`f`](Self::f), the result's storage.
    fn map(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let out = self.f(Rows::of(s, l, self.op())?)?;
        Ok((CpuStorage::F32(out), self.shape(l)))
    }
}

/// A kernel over two contiguous f32 operands (see the comment above [`F32Op1`]).
trait F32Op2 {
    /// The kernel's name in error messages.
    fn op(&self) -> &'static str;

    /// The output's elements for operands `a`, `b`.
    fn f(&self, a: Rows<'_>, b: Rows<'_>) -> Result<Vec<f32>>;

    /// The output's shape: the first operand's unless overridden.
    fn shape(&self, l1: &Layout, _l2: &Layout) -> Shape {
        l1.shape().clone()
    }

    /// `CustomOp2::cpu_fwd`: the f32 operands out of `s1`, `s2`, [`f`](Self::f), the result's
    /// storage.
    fn map(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (a, b) = (Rows::of(s1, l1, self.op())?, Rows::of(s2, l2, self.op())?);
        let out = self.f(a, b)?;
        Ok((CpuStorage::F32(out), self.shape(l1, l2)))
    }
}

/// A kernel over three contiguous f32 operands (see the comment above [`F32Op1`]); its output
/// has the first operand's shape.
trait F32Op3 {
    /// The kernel's name in error messages.
    fn op(&self) -> &'static str;

    /// The output's elements for operands `a`, `b`, `c`.
    fn f(&self, a: Rows<'_>, b: Rows<'_>, c: Rows<'_>) -> Result<Vec<f32>>;

    /// `CustomOp3::cpu_fwd`: the f32 operands out of `s1`, `s2`, `s3`, [`f`](Self::f), the
    /// result's storage.
    fn map(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let op = self.op();
        let (a, b, c) = (
            Rows::of(s1, l1, op)?,
            Rows::of(s2, l2, op)?,
            Rows::of(s3, l3, op)?,
        );
        let out = self.f(a, b, c)?;
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }
}

/// A kernel body, run by [`widest`].
pub(super) trait Body {
    /// The work; `#[inline(always)]` in every impl, so that it is compiled into `widest`'s
    /// wrappers with their target features (a closure is not inlined there: measured, it stayed
    /// a call to scalar code).
    fn run(self);
}

/// Runs `body` compiled for the widest vector unit this CPU has (AVX-512, else AVX2 + FMA).
#[inline(always)]
pub(super) fn widest(body: impl Body) {
    #[cfg(target_arch = "x86_64")]
    {
        use simd::{avx2_fma, avx512};
        #[target_feature(enable = "avx512f,avx2,fma")]
        fn avx512_call(body: impl Body) {
            body.run()
        }
        #[target_feature(enable = "avx2,fma")]
        fn avx2_call(body: impl Body) {
            body.run()
        }
        if avx512() {
            // SAFETY: the CPU supports AVX-512F, AVX2 and FMA (checked above).
            return unsafe { avx512_call(body) };
        }
        if avx2_fma() {
            // SAFETY: the CPU supports AVX2 and FMA (checked above).
            return unsafe { avx2_call(body) };
        }
    }
    body.run()
}

/// `len` when it is a whole number of rows of `d` (`d > 0`), else an error naming `op`: the
/// element count a kernel that writes its output row by row (into spare capacity, without a
/// zero fill) has then written in full.
fn whole_rows(len: usize, d: usize, op: &str) -> Result<usize> {
    if d == 0 || !len.is_multiple_of(d) {
        candle_core::bail!("{op}: {len} elements are not rows of {d}")
    }
    Ok(len)
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
