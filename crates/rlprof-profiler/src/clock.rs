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

/// A fitted rate needs the first and last calibration points more than this many ticks apart.
/// Closer points give a poor rate: each point pairs a tick read with a clock read a few tens of nanoseconds
/// apart, so a fit over 1,000 ticks (about 300 ns on a 3 GHz counter) can be off by 10%, while
/// over 1,000,000 ticks the same jitter is below 0.01%.
pub const FIT_MIN_TICKS: u64 = 1_000_000;

/// Maps raw ticks to nanoseconds (monotonic, or wall-clock once [`TickMapper::rebased`]) by a
/// linear fit between two calibration points. The one mapping every reader of raw files uses.
#[derive(Debug, Clone, Copy)]
pub struct TickMapper {
    base_ticks: u64,
    base_ns: u64,
    ns_per_tick: f64,
}

/// Values below this fit the `i64` fast path of [`TickMapper::to_ns`] with room for a sum.
const NARROW: u64 = 1 << 62;

impl TickMapper {
    /// Builds a mapper from the first and last calibration points of a file.
    ///
    /// The rate is, in order: the fit between the two points when they are more than
    /// [`FIT_MIN_TICKS`] apart; else `recorded`, the writer's rate from the Meta chunk (a
    /// collection whose process was killed has a single point, and its ticks were counted by
    /// the writer's clock, not by the reader's); else, for files of older builds that did not
    /// record it, this process's clock rate.
    pub fn new(first: Calibration, last: Calibration, recorded: Option<f64>) -> TickMapper {
        let dt = last.ticks.saturating_sub(first.ticks);
        let dn = last.mono_ns.saturating_sub(first.mono_ns);
        let recorded = recorded.filter(|r| r.is_finite() && *r > 0.0 && *r < 1e6);
        let ns_per_tick = if dt > FIT_MIN_TICKS && dn > 0 {
            dn as f64 / dt as f64
        } else {
            recorded.unwrap_or_else(local_ns_per_tick)
        };
        TickMapper {
            base_ticks: first.ticks,
            base_ns: first.mono_ns,
            ns_per_tick,
        }
    }

    /// The same mapping shifted by `offset_ns` (for instance from monotonic to wall-clock time).
    pub fn rebased(self, offset_ns: i128) -> TickMapper {
        TickMapper {
            base_ns: (self.base_ns as i128 + offset_ns).clamp(0, u64::MAX as i128) as u64,
            ..self
        }
    }

    /// The time of the base calibration point's tick.
    pub fn base_ns(&self) -> u64 {
        self.base_ns
    }

    /// The rate in use.
    pub fn ns_per_tick(&self) -> f64 {
        self.ns_per_tick
    }

    /// Ticks in `ns` nanoseconds (at least 1).
    pub fn ticks_in(&self, ns: u64) -> u64 {
        ((ns as f64 / self.ns_per_tick) as u64).max(1)
    }

    /// Nanoseconds of a tick value: monotonic, or on the base given to [`TickMapper::rebased`].
    ///
    /// The result is that of exact `i128` arithmetic; the common case (tick differences and
    /// products inside `i64`) avoids the slow software `i128 <-> f64` conversions.
    #[inline(always)]
    pub fn to_ns(&self, ticks: u64) -> u64 {
        // Every operand below 2^62 (ticks, both bases, |x|): the difference, the product's
        // truncation and the sum are exact in `i64`, as in `i128`. `abs() < ..` is false for
        // NaN. Per call about half the instructions of the `i128` sum (callgrind, 4 M calls).
        if (ticks | self.base_ticks | self.base_ns) < NARROW {
            let x = (ticks as i64 - self.base_ticks as i64) as f64 * self.ns_per_tick;
            if x.abs() < NARROW as f64 {
                return (self.base_ns as i64 + x as i64).max(0) as u64;
            }
        }
        self.wide_ns(ticks)
    }

    /// Whether every tick in `[lo, hi]` takes the exact `i64` path of [`TickMapper::to_ns`],
    /// so that `ns_within` (crate-internal) gives its result there without its tests: `hi` and
    /// both bases below 2^62, and the scaled difference below 2^62 at both ends (it is monotone
    /// in the tick between them: the subtraction is exact, and the conversion to `f64` and the
    /// product are monotone; a NaN or infinite rate fails).
    pub fn narrow_over(&self, lo: u64, hi: u64) -> bool {
        let x = |t: u64| (t as i64 - self.base_ticks as i64) as f64 * self.ns_per_tick;
        lo <= hi
            && (hi | self.base_ticks | self.base_ns) < NARROW
            && x(lo).abs() < NARROW as f64
            && x(hi).abs() < NARROW as f64
    }

    /// [`TickMapper::to_ns`] of a tick inside a range [`TickMapper::narrow_over`] accepted
    /// (the decoder's clock window, whose test each record passes first): the same arithmetic
    /// without the tests that choose it. Outside such a range the result is meaningless.
    #[inline(always)]
    pub(crate) fn ns_within(&self, ticks: u64) -> u64 {
        let x = (ticks as i64 - self.base_ticks as i64) as f64 * self.ns_per_tick;
        (self.base_ns as i64).wrapping_add(x as i64).max(0) as u64
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
            TickMapper::new(cal(0, 1_000), cal(10_000_000, 5_001_000), None),
            TickMapper::new(
                cal(5_000_000_000, 77),
                cal(9_000_000_000, 1_333_333_477),
                None,
            ),
            TickMapper::new(cal(1 << 62, 0), cal((1 << 62) + 2_000_000, 4_000_000), None),
            // Wall-clock bases: today's, just under and over 2^62, and near u64::MAX.
            TickMapper::new(cal(0, 1_000), cal(10_000_000, 5_001_000), None)
                .rebased(1_764_000_000_000_000_000),
            TickMapper::new(cal(7, 0), cal(3_000_007, 1_000_000), None).rebased((1 << 62) - 5),
            TickMapper::new(cal(7, 0), cal(3_000_007, 1_000_000), None).rebased(1 << 62),
            TickMapper::new(cal(7, 0), cal(3_000_007, 9_000_000), None)
                .rebased(u64::MAX as i128 - 10),
            TickMapper::new(cal(7, 0), cal(3_000_007, 9_000_000), None).rebased(-1_000_000),
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
            // Every window the fast path is proven over (ends included) gives the same result
            // without its tests.
            for lo in ticks {
                for hi in ticks {
                    if m.narrow_over(lo, hi) {
                        for t in ticks.into_iter().filter(|t| (lo..=hi).contains(t)) {
                            assert_eq!(m.ns_within(t), m.wide_ns(t), "ticks {t} mapper {m:?}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_window_is_narrow_only_when_its_ends_and_bases_are() {
        let cal = |ticks, mono_ns| Calibration {
            ticks,
            mono_ns,
            wall_ns: 0,
        };
        let m = TickMapper::new(cal(0, 1_000), cal(10_000_000, 5_001_000), None)
            .rebased(1_764_000_000_000_000_000);
        assert!(m.narrow_over(0, 1 << 40));
        assert!(!m.narrow_over(1 << 40, 0), "an empty window");
        assert!(!m.narrow_over(0, 1 << 62));
        assert!(!m.narrow_over(0, u64::MAX));
        let high_base =
            TickMapper::new(cal(7, 0), cal(3_000_007, 1_000_000), None).rebased(1 << 62);
        assert!(!high_base.narrow_over(0, 1 << 20));
        // Ticks below 2^62 whose scaled difference is not (a rate of 4 ns per tick).
        let fast = TickMapper::new(cal(0, 0), cal(10_000_000, 40_000_000), None);
        assert!(fast.narrow_over(0, 1 << 59));
        assert!(!fast.narrow_over(0, (1 << 61) - 1));
    }

    #[test]
    fn one_point_uses_the_recorded_rate_and_close_points_do_not_fit() {
        let cal = |ticks, mono_ns| Calibration {
            ticks,
            mono_ns,
            wall_ns: 0,
        };
        let one = TickMapper::new(cal(100, 5_000), cal(100, 5_000), Some(2.5));
        assert_eq!(one.to_ns(1_100), 7_500);
        let close = TickMapper::new(cal(0, 0), cal(FIT_MIN_TICKS, 1), Some(3.0));
        assert_eq!(close.ns_per_tick(), 3.0);
        let fitted = TickMapper::new(cal(0, 0), cal(2 * FIT_MIN_TICKS, FIT_MIN_TICKS), Some(3.0));
        assert_eq!(fitted.ns_per_tick(), 0.5);
        for bad in [f64::NAN, -1.0, 0.0, f64::INFINITY] {
            let m = TickMapper::new(cal(0, 0), cal(0, 0), Some(bad));
            assert_eq!(m.ns_per_tick(), local_ns_per_tick());
        }
        assert_eq!(one.rebased(1_000).to_ns(1_100), 8_500);
    }
}
