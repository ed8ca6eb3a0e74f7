//! Timestamps for the hot path.
//!
//! Records carry raw TSC-class ticks (`quanta`'s raw counter: `rdtsc` where the TSC is invariant,
//! the monotonic clock otherwise). Raw files also carry [`Calibration`] points that pair a tick
//! value with `CLOCK_MONOTONIC` and wall-clock nanoseconds; the parser maps ticks to nanoseconds
//! by a linear fit between two points, so conversion never happens on the hot path. Monotonic
//! nanoseconds share one base across all processes of a host, which makes ranks comparable.

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

static CLOCK: OnceLock<quanta::Clock> = OnceLock::new();

fn clock() -> &'static quanta::Clock {
    CLOCK.get_or_init(quanta::Clock::new)
}

/// Current raw tick count (a few nanoseconds to read; not yet converted to time).
#[inline(always)]
pub fn now() -> u64 {
    clock().raw()
}

/// A pairing of raw ticks with monotonic and wall-clock nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Calibration {
    /// Raw ticks.
    pub ticks: u64,
    /// `CLOCK_MONOTONIC` in nanoseconds at the same instant.
    pub mono_ns: u64,
    /// Unix wall-clock time in nanoseconds at the same instant.
    pub wall_ns: u64,
}

/// `CLOCK_MONOTONIC` in nanoseconds.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Unix wall-clock time in nanoseconds.
pub fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Takes a calibration point (ticks read on both sides of the clock reads, averaged).
pub fn calibrate() -> Calibration {
    let t0 = now();
    let mono_ns = monotonic_ns();
    let wall_ns = wall_ns();
    let t1 = now();
    Calibration {
        ticks: t0 + (t1.saturating_sub(t0)) / 2,
        mono_ns,
        wall_ns,
    }
}

/// Maps raw ticks to monotonic nanoseconds from two calibration points.
#[derive(Debug, Clone, Copy)]
pub struct TickMapper {
    base_ticks: u64,
    base_ns: u64,
    ns_per_tick: f64,
}

impl TickMapper {
    /// Builds a mapper from the first and last calibration points of a file. With a single
    /// point (or points too close together) the rate is taken from this process's clock.
    pub fn new(first: Calibration, last: Calibration) -> TickMapper {
        let dt = last.ticks.saturating_sub(first.ticks);
        let dn = last.mono_ns.saturating_sub(first.mono_ns);
        let ns_per_tick = if dt > 1_000_000 && dn > 0 {
            dn as f64 / dt as f64
        } else {
            local_ns_per_tick()
        };
        TickMapper {
            base_ticks: first.ticks,
            base_ns: first.mono_ns,
            ns_per_tick,
        }
    }

    /// Monotonic nanoseconds of a tick value.
    ///
    /// The result is that of exact `i128` arithmetic; the common case (tick differences and
    /// products inside `i64`) avoids the slow software `i128 <-> f64` conversions.
    #[inline]
    pub fn to_ns(&self, ticks: u64) -> u64 {
        const HALF: u64 = 1 << 62;
        if ticks >= HALF || self.base_ticks >= HALF {
            return self.wide_ns(ticks);
        }
        let x = (ticks as i64 - self.base_ticks as i64) as f64 * self.ns_per_tick;
        // |x| < 2^62: converting through i64 truncates exactly like the i128 path.
        if x.is_nan() || x.abs() >= HALF as f64 {
            return self.wide_ns(ticks);
        }
        (self.base_ns as i128 + x as i64 as i128).max(0) as u64
    }

    #[cold]
    #[inline(never)]
    fn wide_ns(&self, ticks: u64) -> u64 {
        let d = ticks as i128 - self.base_ticks as i128;
        (self.base_ns as i128 + (d as f64 * self.ns_per_tick) as i128).max(0) as u64
    }

    /// Nanoseconds in a tick interval.
    pub fn span_ns(&self, start: u64, end: u64) -> u64 {
        (end.saturating_sub(start) as f64 * self.ns_per_tick) as u64
    }
}

/// Nanoseconds per raw tick of this process's clock: the scale quanta calibrated when the clock
/// was created (1.0 on its monotonic fallback, whose raw value is nanoseconds). Read from a long
/// span so that the fixed-point scale keeps its precision; no sleep, no new measurement.
pub fn local_ns_per_tick() -> f64 {
    const SPAN: u64 = 1 << 40;
    clock().delta_as_nanos(0, SPAN) as f64 / SPAN as f64
}

#[cfg(test)]
mod mapper_tests {
    use super::*;

    #[test]
    fn the_tick_rate_maps_ticks_to_monotonic_time() {
        let (a, b) = (calibrate(), {
            std::thread::sleep(std::time::Duration::from_millis(50));
            calibrate()
        });
        let by_rate = (b.ticks - a.ticks) as f64 * local_ns_per_tick();
        let elapsed = (b.mono_ns - a.mono_ns) as f64;
        assert!(
            (by_rate / elapsed - 1.0).abs() < 0.05,
            "{by_rate} ns by the rate vs {elapsed} ns elapsed"
        );
    }

    #[test]
    fn fast_path_equals_wide_arithmetic() {
        let cal = |ticks, mono_ns| Calibration {
            ticks,
            mono_ns,
            wall_ns: 0,
        };
        let mappers = [
            TickMapper::new(cal(0, 1_000), cal(10_000_000, 5_001_000)),
            TickMapper::new(cal(5_000_000_000, 77), cal(9_000_000_000, 1_333_333_477)),
            TickMapper::new(cal(1 << 62, 0), cal((1 << 62) + 2_000_000, 4_000_000)),
        ];
        let ticks = [
            0,
            1,
            999,
            4_999_999_999,
            5_000_000_000,
            123_456_789_012,
            (1 << 62) - 1,
            1 << 62,
            u64::MAX / 3,
            u64::MAX,
        ];
        for m in mappers {
            for t in ticks {
                assert_eq!(m.to_ns(t), m.wide_ns(t), "ticks {t} mapper {m:?}");
            }
        }
    }
}
