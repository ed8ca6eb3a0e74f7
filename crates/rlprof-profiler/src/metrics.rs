//! Figure rules that more than one crate needs, defined once: `rlprof-report` (the one
//! analysis layer, behind `report`, `analyse --cluster` and the Python API) and `rlprof-export`
//! (whose Ascend writer fills CANN's tables) both call these, so no two places can name a
//! different slowest rank for the same numbers, nor compute a bandwidth two ways. They live
//! beside the raw decoder because it is the one crate both depend on.

pub mod cann;
pub mod intervals;

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

/// Ascend stream synchronisation and bookkeeping tasks (`EVENT_WAIT`, `EVENT_RECORD`,
/// `NOTIFY_WAIT`, `PROFILING_ENABLE`, ...): a stream waiting or signalling, not device work. A
/// compute stream's `EVENT_WAIT` can last as long as the collective it waits for, so counting
/// it as a kernel would make the device look busy while it idles; msprof's own overlap
/// analysis (`StepTraceTime.computing`) leaves them out too.
///
/// ```
/// use rlprof_profiler::metrics::is_sync_task;
/// assert!(is_sync_task("EVENT_WAIT"));
/// assert!(!is_sync_task("AI_CORE"));
/// ```
pub fn is_sync_task(task_type: &str) -> bool {
    const SYNC: [&str; 12] = [
        "EVENT_WAIT",
        "EVENT_RECORD",
        "EVENT_RESET",
        "NOTIFY_WAIT",
        "NOTIFY_RECORD",
        "NOTIFY WAIT",
        "NOTIFY RECORD",
        "CAPTURE_WAIT",
        "CAPTURE_RECORD",
        "PROFILING_ENABLE",
        "PROFILING_DISABLE",
        "WRITE VALUE",
    ];
    let t = task_type.trim();
    SYNC.iter().any(|s| t.eq_ignore_ascii_case(s))
}

/// A collective's `Notify_Wait` time per plane, and its waiting time: the least over the
/// planes. A collective runs its tasks on several planes at once, each waiting on its own peer,
/// so their sum counts one wait several times (and can exceed the op's duration); the least is
/// what the whole op certainly spent waiting. It is the plane msprof-analyze's comparison takes
/// (the one with the longest transit), and on real torch_npu DBs it matches CANN's
/// `CommAnalyzerTime.wait_time` to within 1 us for most ops. Both readers of the Ascend DB
/// (`rlprof report`'s and `analyse --cluster`'s) fill one per collective.
///
/// ```
/// use rlprof_profiler::metrics::PlaneWaits;
/// let mut w = PlaneWaits::default();
/// assert_eq!(w.wait(), 0);
/// w.add(1, 1_500);
/// w.add(2, 5_000);
/// w.add(1, 500);
/// assert_eq!(w.wait(), 2_000);
/// ```
#[derive(Debug, Default, Clone)]
pub struct PlaneWaits(Vec<(i64, u64)>);

impl PlaneWaits {
    /// Adds a `Notify_Wait` task of `ns` on `plane`.
    pub fn add(&mut self, plane: i64, ns: u64) {
        match self.0.iter_mut().find(|w| w.0 == plane) {
            Some(w) => w.1 += ns,
            None => self.0.push((plane, ns)),
        }
    }

    /// The collective's waiting time: the least of its planes' (0 without any wait task).
    pub fn wait(&self) -> u64 {
        self.0.iter().map(|w| w.1).min().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_synchronisation_is_not_device_work() {
        for t in [
            "EVENT_WAIT",
            "event_record",
            "Notify Wait",
            " PROFILING_ENABLE ",
        ] {
            assert!(is_sync_task(t), "{t}");
        }
        for t in [
            "AI_CORE",
            "KERNEL_AIVEC",
            "MEMCPY_ASYNC",
            "EVENT_WAITER",
            "",
        ] {
            assert!(!is_sync_task(t), "{t}");
        }
    }
}

/// A collective's kind, by its name, for nccl-tests' bandwidth conventions
/// ([`algorithm_bytes`], [`bus_factor`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CollectiveKind {
    /// `all_reduce`, `allreduce`, `ncclAllReduce`, `hcom_allReduce_`...
    AllReduce,
    /// `all_gather`, `_allgather_base`, `all_gather_into_tensor`, `hcom_allGather_`...
    AllGather,
    /// `reduce_scatter`, `_reduce_scatter_base`, `hcom_reduceScatter_`...
    ReduceScatter,
    /// `all_to_all`, `alltoall(v)`.
    AllToAll,
    /// `broadcast`.
    Broadcast,
    /// `reduce` (to one root).
    Reduce,
    /// `send`, `recv`, `batch_isend_irecv`: one peer.
    PointToPoint,
    /// Anything else (barriers, ...).
    Other,
}

/// The kind of a collective from its name (case and `_` ignored).
///
/// ```
/// use rlprof_profiler::metrics::{CollectiveKind, collective_kind};
/// assert_eq!(collective_kind("nccl:_all_gather_base"), CollectiveKind::AllGather);
/// assert_eq!(collective_kind("hcom_allReduce__123_1"), CollectiveKind::AllReduce);
/// assert_eq!(collective_kind("c10d::reduce_scatter_"), CollectiveKind::ReduceScatter);
/// assert_eq!(collective_kind("nccl:recv"), CollectiveKind::PointToPoint);
/// ```
pub fn collective_kind(name: &str) -> CollectiveKind {
    let n: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    let has = |p: &str| n.contains(p);
    if has("allreduce") {
        CollectiveKind::AllReduce
    } else if has("allgather") {
        CollectiveKind::AllGather
    } else if has("reducescatter") {
        CollectiveKind::ReduceScatter
    } else if has("alltoall") {
        CollectiveKind::AllToAll
    } else if has("broadcast") {
        CollectiveKind::Broadcast
    } else if has("send") || has("recv") || has("receive") {
        CollectiveKind::PointToPoint
    } else if has("reduce") {
        CollectiveKind::Reduce
    } else {
        CollectiveKind::Other
    }
}

/// nccl-tests' message size `S` of one call (`doc/PERFORMANCE.md`): the gathered output for an
/// all-gather (its input times the group size when only the input is known), the input for
/// every other collective. `None` when it cannot be known.
///
/// ```
/// use rlprof_profiler::metrics::{CollectiveKind, algorithm_bytes};
/// // 8 ranks gather 50,272 bytes each: S is the 402,176-byte output.
/// assert_eq!(algorithm_bytes(CollectiveKind::AllGather, Some(50_272), None, Some(8)), Some(402_176));
/// assert_eq!(algorithm_bytes(CollectiveKind::AllGather, Some(50_272), Some(402_176), None), Some(402_176));
/// assert_eq!(algorithm_bytes(CollectiveKind::AllGather, Some(50_272), None, None), None);
/// assert_eq!(algorithm_bytes(CollectiveKind::AllReduce, Some(4096), Some(4096), None), Some(4096));
/// ```
pub fn algorithm_bytes(
    kind: CollectiveKind,
    in_bytes: Option<u64>,
    out_bytes: Option<u64>,
    group_size: Option<u32>,
) -> Option<u64> {
    match kind {
        CollectiveKind::AllGather => out_bytes.or_else(|| {
            in_bytes
                .zip(group_size)
                .and_then(|(b, n)| b.checked_mul(u64::from(n)))
        }),
        _ => in_bytes,
    }
}

/// nccl-tests' bus-bandwidth factor for `n` ranks: `2(n-1)/n` for an all-reduce, `(n-1)/n` for
/// an all-gather, a reduce-scatter and an all-to-all, 1 for a broadcast, a reduce and a
/// point-to-point transfer. `None` for other ops, or when the group size is unknown and the
/// factor depends on it.
///
/// ```
/// use rlprof_profiler::metrics::{CollectiveKind, bus_factor};
/// assert_eq!(bus_factor(CollectiveKind::AllReduce, Some(8)), Some(1.75));
/// assert_eq!(bus_factor(CollectiveKind::AllGather, Some(4)), Some(0.75));
/// assert_eq!(bus_factor(CollectiveKind::Broadcast, None), Some(1.0));
/// assert_eq!(bus_factor(CollectiveKind::AllReduce, None), None);
/// ```
pub fn bus_factor(kind: CollectiveKind, n: Option<u32>) -> Option<f64> {
    let frac = |n: u32| (n > 0).then(|| f64::from(n - 1) / f64::from(n));
    match kind {
        CollectiveKind::AllReduce => n.and_then(frac).map(|f| 2.0 * f),
        CollectiveKind::AllGather | CollectiveKind::ReduceScatter | CollectiveKind::AllToAll => {
            n.and_then(frac)
        }
        CollectiveKind::Broadcast | CollectiveKind::Reduce | CollectiveKind::PointToPoint => {
            Some(1.0)
        }
        CollectiveKind::Other => None,
    }
}
