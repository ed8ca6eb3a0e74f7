//! NVTX ranges for the `nsys` tool (cargo feature `nvtx`, NVIDIA's `nvtx` crate: header-only
//! NVTX, so it builds without CUDA): steps (`step N`), role calls (verl's stage labels
//! `actor_update`, `actor_compute_log_prob`, ...), phases (`gen`, ...) and verl's `train_batch`
//! appear as nested named ranges on each thread in Nsight Systems' timeline. On only when the
//! plan's tool is `nsys`; otherwise, and without the feature, a range costs one relaxed load.
//!
//! Colours are verl 0.9.1's: `verl/workers/engine_workers.py` annotates `train_batch` and
//! `actor_update` `red`, `actor_compute_log_prob` `blue` and `ref_compute_log_prob` `olive`, which
//! Python's `nvtx` resolves as the CSS colour names ([`colour`]); other ranges carry no colour
//! attribute (Nsight's default), as verl's uncoloured ranges do.

use std::sync::atomic::{AtomicBool, Ordering};

static ON: AtomicBool = AtomicBool::new(false);

/// CSS `red`.
const RED: u32 = 0xFF_00_00;
/// CSS `blue`.
const BLUE: u32 = 0x00_00_FF;
/// CSS `olive`.
const OLIVE: u32 = 0x80_80_00;

/// The RGB colour verl gives the range named `name` (verl 0.9.1's `@DistProfiler.annotate(color=...)`
/// in `engine_workers.py`), or `None` where verl gives none.
pub fn colour(name: &str) -> Option<u32> {
    match name {
        "actor_update" | "train_batch" => Some(RED),
        "actor_compute_log_prob" => Some(BLUE),
        "ref_compute_log_prob" => Some(OLIVE),
        _ => None,
    }
}

/// Turns NVTX ranges on or off for this process (no effect without the `nvtx` feature).
pub fn set_enabled(on: bool) {
    ON.store(on && cfg!(feature = "nvtx"), Ordering::Relaxed);
}

/// Whether NVTX ranges are being emitted.
pub fn enabled() -> bool {
    ON.load(Ordering::Relaxed)
}

/// The event attributes of a range: its name and, where verl gives one, its colour.
#[cfg(feature = "nvtx")]
fn attributes(name: &str) -> nvtx::EventAttributes {
    let b = nvtx::EventAttributes::builder().message(nvtx::Str::from_str_lossy(name));
    match colour(name) {
        Some(rgb) => b.color(rgb).build(),
        None => b.build(),
    }
}

/// A pushed NVTX range, popped on drop (same thread).
#[must_use = "the NVTX range ends when the guard is dropped"]
pub struct NvtxRange {
    #[cfg(feature = "nvtx")]
    range: Option<nvtx::LocalRange>,
}

impl NvtxRange {
    const NONE: NvtxRange = NvtxRange {
        #[cfg(feature = "nvtx")]
        range: None,
    };

    /// Pushes a range named `name` when NVTX is on.
    #[inline]
    pub fn push(name: impl std::fmt::Display) -> NvtxRange {
        if !ON.load(Ordering::Relaxed) {
            return NvtxRange::NONE;
        }
        #[cfg(feature = "nvtx")]
        {
            NvtxRange {
                range: Some(nvtx::LocalRange::new(attributes(&name.to_string()))),
            }
        }
        #[cfg(not(feature = "nvtx"))]
        {
            let _ = name;
            NvtxRange::NONE
        }
    }

    /// Whether a range was pushed.
    pub fn is_pushed(&self) -> bool {
        #[cfg(feature = "nvtx")]
        {
            self.range.is_some()
        }
        #[cfg(not(feature = "nvtx"))]
        {
            false
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
            assert_eq!(r.is_pushed(), cfg!(feature = "nvtx"));
        }
        set_enabled(false);
        assert!(!enabled());
        assert!(!NvtxRange::push("gen").is_pushed());
    }

    /// verl 0.9.1, `engine_workers.py`: `train_batch` and `actor_update` `color="red"`,
    /// `actor_compute_log_prob` `"blue"`, `ref_compute_log_prob` `"olive"` (CSS names).
    #[test]
    fn stage_ranges_carry_verls_colours() {
        assert_eq!(colour("actor_update"), Some(0xFF0000));
        assert_eq!(colour("train_batch"), Some(0xFF0000));
        assert_eq!(colour("actor_compute_log_prob"), Some(0x0000FF));
        assert_eq!(colour("ref_compute_log_prob"), Some(0x808000));
        assert_eq!(colour("rollout_generate"), None);
        assert_eq!(colour("mini_batch0"), None);
    }

    /// The attributes handed to `nvtxRangePushEx`: the name, and verl's colour as opaque ARGB.
    #[cfg(feature = "nvtx")]
    #[test]
    fn pushed_attributes_hold_the_name_and_colour() {
        let a = attributes("ref_compute_log_prob").encode();
        assert_eq!(a.color, 0xFF80_8000);
        assert_eq!(a.colorType, nvtx::sys::ColorType::NVTX_COLOR_ARGB as i32);
        let plain = attributes("step 1").encode();
        assert_eq!(plain.color, 0);
        assert_eq!(
            plain.colorType,
            nvtx::sys::ColorType::NVTX_COLOR_UNKNOWN as i32
        );
    }
}
