//! The model's op layer: every tensor op the model runs goes through [`traced`], the single
//! instrumentation point (candle has no per-op hook). It opens a profiler op range (name, module
//! path; input shapes and dtypes only when the `shapes` content is collected), times the candle CPU
//! kernel as a device kernel record (`npu` content; on CUDA, a pair of CUDA events around the op,
//! see `crate::cuda`), and — through the process's tracking
//! allocator — attributes the tensor memory allocated inside to the op. When nothing collects, a
//! call costs the relaxed atomic loads of the profiler API and two thread-local swaps. A
//! differentiable op created inside (in grad mode) gives the op an autograd sequence number that
//! its backward op carries too ([`super::autograd`]).

use super::{autograd, precision};
use candle_core::{DType, Result, Tensor};
use rlprof_profiler::{Content, NameId, intern, intern_shapes, kernel, now, op, wants};

/// Runs `f` (one tensor op on `inputs`) as op `name` of `module`, recording it when collecting.
/// `flops` is the op's floating-point work (0 when not worth counting).
#[inline]
pub fn traced(
    name: NameId,
    kernel_name: NameId,
    module: NameId,
    inputs: &[&Tensor],
    flops: u64,
    f: impl FnOnce() -> Result<Tensor>,
) -> Result<Tensor> {
    let mut guard = op(name, module);
    if guard.is_recording() && wants(Content::Shapes) {
        guard.shapes(shapes_of(inputs));
        guard.dtypes(dtypes_of(inputs));
    }
    let prev = autograd::enter_forward(name, module);
    let pd = if precision::on() {
        precision::enter(name)
    } else {
        0
    };
    let out = if !wants(Content::Npu) {
        f()
    } else {
        timed_kernel(name, kernel_name, flops, f)
    };
    if pd != 0 {
        precision::forward(pd, module, inputs, out.as_ref().ok());
    }
    let seq = autograd::exit_forward(prev);
    if seq != 0 {
        guard.seq(seq, false);
    }
    out
}

/// The device kernel record of one tensor op: a pair of CUDA events around it on a CUDA device,
/// else the host clock around the candle CPU kernel.
#[inline]
fn timed_kernel(
    name: NameId,
    kernel_name: NameId,
    flops: u64,
    f: impl FnOnce() -> Result<Tensor>,
) -> Result<Tensor> {
    #[cfg(feature = "cuda")]
    if let Some(timeline) = crate::cuda::current() {
        return timeline.time_op(name, flops, f);
    }
    #[cfg(not(feature = "cuda"))]
    let _ = name;
    let start = now();
    let out = f()?;
    let bytes = out.elem_count() * out.dtype().size_in_bytes();
    kernel(kernel_name, start, now(), flops, bytes as u64);
    Ok(out)
}

/// Runs host work `f` (optimizer arithmetic, gradient copies, sampling) as op `name` of `module`
/// with a kernel record `kernel_name` of `bytes` processed, like [`traced`] does for tensor ops.
pub fn host_op<R>(
    name: NameId,
    kernel_name: NameId,
    module: NameId,
    bytes: u64,
    f: impl FnOnce() -> R,
) -> R {
    let _guard = op(name, module);
    if !wants(Content::Npu) {
        return f();
    }
    // On a CUDA device this work is queued as kernels of its own op ranges' tensor ops (timed by
    // CUDA events in `traced`); a host-clock record here would show queueing time as device time.
    #[cfg(feature = "cuda")]
    if crate::cuda::current().is_some() {
        return f();
    }
    let start = now();
    let out = f();
    kernel(kernel_name, start, now(), 0, bytes);
    out
}

/// [`host_op()`] with names: `host_op!(name, module, bytes, expr)` (kernel `cpu_<name>_f32`).
#[macro_export]
macro_rules! host_op {
    ($name:literal, $module:expr, $bytes:expr, $body:expr) => {
        $crate::model::ops::host_op(
            rlprof_profiler::name!($name),
            rlprof_profiler::name!(concat!("cpu_", $name, "_f32")),
            $module,
            $bytes as u64,
            || $body,
        )
    };
}

fn shapes_of(inputs: &[&Tensor]) -> NameId {
    let dims: Vec<&[usize]> = inputs.iter().map(|t| t.dims()).collect();
    intern_shapes(&dims)
}

fn dtypes_of(inputs: &[&Tensor]) -> NameId {
    let names: Vec<&str> = inputs.iter().map(|t| dtype_name(t.dtype())).collect();
    intern(&names.join(";"))
}

/// PyTorch's spelling of a dtype (what trace readers expect in `Input type`).
pub fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "float",
        DType::F16 => "c10::Half",
        DType::BF16 => "c10::BFloat16",
        DType::F64 => "double",
        DType::U32 => "unsigned int",
        DType::I64 => "long int",
        DType::U8 => "unsigned char",
        _ => "unknown",
    }
}

/// Declares a traced op: `traced_op!(name, module, [inputs], flops, expr)`.
#[macro_export]
macro_rules! traced_op {
    ($name:literal, $module:expr, [$($inp:expr),*], $flops:expr, $body:expr) => {
        $crate::model::ops::traced(
            rlprof_profiler::name!($name),
            rlprof_profiler::name!(concat!("cpu_", $name, "_f32")),
            $module,
            &[$($inp),*],
            $flops,
            || $body,
        )
    };
}
