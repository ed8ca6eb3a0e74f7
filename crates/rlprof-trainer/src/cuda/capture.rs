//! `cudaProfilerStart/Stop`: the capture ranges `nsys profile --capture-range=cudaProfilerApi`
//! records. From the CUDA runtime that candle's kernels already link (`libcudart`); they act on
//! the current device's primary context, the one candle uses.

use std::ffi::c_int;

#[link(name = "cudart")]
unsafe extern "C" {
    fn cudaProfilerStart() -> c_int;
    fn cudaProfilerStop() -> c_int;
}

/// Opens a capture range (logs and goes on when the runtime refuses).
pub fn start() {
    // SAFETY: no arguments; the runtime initialises itself on first use.
    let rc = unsafe { cudaProfilerStart() };
    if rc != 0 {
        tracing::warn!(
            "cudaProfilerStart failed (cudaError {rc}); nsys will capture nothing for this range"
        );
    }
}

/// Closes the capture range.
pub fn stop() {
    // SAFETY: as for `start`.
    let rc = unsafe { cudaProfilerStop() };
    if rc != 0 {
        tracing::warn!("cudaProfilerStop failed (cudaError {rc})");
    }
}
