//! Figures that more than one consumer shows, defined once: `rlprof analyse --cluster`
//! (`rlprof-export`'s `cluster`) and `rlprof report` (`rlprof-report`'s `summary`) both call
//! these, so the two can never name a different slowest rank for the same numbers, nor compute a
//! bandwidth two ways. They live beside the raw decoder because it is the one crate both readers
//! depend on.

/// Achieved bandwidth in GB/s (bytes per nanosecond) of `bytes` moved in `busy_ns`, the
/// collective's time without its wait for peers. `None` when there was no busy time.
///
/// ```
/// use rlprof_profiler::metrics::bandwidth_gbps;
/// assert_eq!(bandwidth_gbps(2_000_000_000, 1_000_000_000), Some(2.0));
/// assert_eq!(bandwidth_gbps(1, 0), None);
/// ```
pub fn bandwidth_gbps(bytes: u64, busy_ns: u64) -> Option<f64> {
    (busy_ns > 0).then(|| bytes as f64 / busy_ns as f64)
}

/// The slowest of several ranks' figures (time, busy time): the highest value, the lowest rank
/// on a tie. `None` with fewer than two ranks (nothing to compare).
///
/// ```
/// use rlprof_profiler::metrics::slowest;
/// assert_eq!(slowest([(0, 5.0), (1, 7.0), (2, 7.0)]), Some((1, 7.0)));
/// assert_eq!(slowest([(3, 1.0)]), None);
/// ```
pub fn slowest(figures: impl IntoIterator<Item = (u32, f64)>) -> Option<(u32, f64)> {
    let mut n = 0usize;
    let mut best: Option<(u32, f64)> = None;
    for (rank, v) in figures {
        n += 1;
        best = match best {
            Some((r, b)) if b > v || (b == v && r <= rank) => Some((r, b)),
            _ => Some((rank, v)),
        };
    }
    best.filter(|_| n > 1)
}
