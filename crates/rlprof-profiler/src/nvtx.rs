//! NVTX ranges for the `nsys` tool (cargo feature `nvtx`, the `nvtx` crate: header-only NVTX, so
//! it builds without CUDA): steps (`step N`), role calls (`generate_sequences`, ...) and phases
//! (`gen`, ...) appear as nested named ranges on each thread in Nsight Systems' timeline. On only
//! when the plan's tool is `nsys`; otherwise, and without the feature, a range costs one relaxed
//! load. The crate's safe API has no colour attribute, so ranges use Nsight's default colours.

use std::sync::atomic::{AtomicBool, Ordering};

static ON: AtomicBool = AtomicBool::new(false);

/// Turns NVTX ranges on or off for this process (no effect without the `nvtx` feature).
pub fn set_enabled(on: bool) {
    ON.store(on && cfg!(feature = "nvtx"), Ordering::Relaxed);
}

/// Whether NVTX ranges are being emitted.
pub fn enabled() -> bool {
    ON.load(Ordering::Relaxed)
}

/// A pushed NVTX range, popped on drop (same thread).
#[must_use = "the NVTX range ends when the guard is dropped"]
pub struct NvtxRange {
    #[cfg_attr(not(feature = "nvtx"), allow(dead_code))]
    pushed: bool,
}

impl NvtxRange {
    /// Pushes a range named `name` when NVTX is on.
    #[inline]
    pub fn push(name: impl std::fmt::Display) -> NvtxRange {
        if !ON.load(Ordering::Relaxed) {
            return NvtxRange { pushed: false };
        }
        #[cfg(feature = "nvtx")]
        {
            nvtx::range_push!("{}", name);
            NvtxRange { pushed: true }
        }
        #[cfg(not(feature = "nvtx"))]
        {
            let _ = name;
            NvtxRange { pushed: false }
        }
    }
}

impl Drop for NvtxRange {
    #[inline]
    fn drop(&mut self) {
        #[cfg(feature = "nvtx")]
        if self.pushed {
            nvtx::range_pop!();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_follow_the_nsys_tool_and_the_feature() {
        set_enabled(true);
        assert_eq!(enabled(), cfg!(feature = "nvtx"));
        {
            let r = NvtxRange::push("step 1");
            assert_eq!(r.pushed, cfg!(feature = "nvtx"));
        }
        set_enabled(false);
        assert!(!enabled());
        assert!(!NvtxRange::push("gen").pushed);
    }
}
