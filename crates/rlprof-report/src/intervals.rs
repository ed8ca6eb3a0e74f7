//! Event runs as interval streams for the interval arithmetic of
//! [`rlprof_profiler::metrics::intervals`] (re-exported here), which is written once for the
//! report, `analyse --cluster`, the Python API and the Ascend writer.
//!
//! The device figures and the op coverage work on [`Run`]s, views of one track's events (which
//! a sorted [`Profile`] holds as one slice, in start order), and merge them as they stream: no
//! union is materialised, so summarising a collection of 10 M events holds the events and
//! nothing of their size beside them (the unions of its kernels, built as vectors, were 53 MB
//! each, and their copies for the busy time, the gaps and the coverage as much again).

use crate::model::{Event, Profile, Track};
use either::Either;
use std::borrow::Cow;

pub use rlprof_profiler::metrics::intervals::*;

/// Events per entry of a [`Run`]'s index.
const BLOCK: usize = 1024;
/// A run of at most this many events keeps its union's segments (16 MB at most): every query
/// of the union reads them, where a large run streams its union from the events again each
/// time (the merges cost a 160 k-event trace's summary a third more time when streamed).
const KEEP_UNION: usize = 1 << 20;

/// One track's events sorted by start, with a sparse index of their running maximum end, so
/// that the intervals reaching into a window are found without a pass from the start.
#[derive(Debug, Clone)]
pub struct Run<'a> {
    ev: Cow<'a, [Event]>,
    /// `reach[j]`: the latest end among `ev[..j * BLOCK]` (`i64::MIN` for none).
    reach: Vec<i64>,
    /// The union's segments, for a run of at most [`KEEP_UNION`] events.
    kept: Option<Vec<(i64, i64)>>,
}

impl<'a> Run<'a> {
    /// The events of `track` in `p`: a slice of `p.events`, which every loader leaves sorted
    /// by (track, start) ([`Profile::sort`]). Where the slice found is not that track's events
    /// in start order (a profile built by hand and not sorted), a sorted copy of them.
    pub fn of(p: &'a Profile, track: Track) -> Run<'a> {
        Run::keeping(p, track, KEEP_UNION)
    }

    /// [`Run::of`], keeping the union's segments when the run has at most `keep` events.
    fn keeping(p: &'a Profile, track: Track, keep: usize) -> Run<'a> {
        let ev = &p.events;
        debug_assert!(
            ev.is_sorted_by_key(|e| (e.track, e.start)),
            "a profile's events are sorted before they are summarised"
        );
        // Checking the whole profile's order for each run cost a pass over every event per
        // run (5 runs per profile: 5% of summarising a 160 k-event trace); the run's own
        // slice is checked instead.
        let from = ev.partition_point(|e| e.track < track);
        let to = from + ev[from..].partition_point(|e| e.track <= track);
        let slice = &ev[from..to];
        let ev: Cow<'a, [Event]> =
            if slice.iter().all(|e| e.track == track) && slice.is_sorted_by_key(|e| e.start) {
                Cow::Borrowed(slice)
            } else {
                let mut v: Vec<Event> = ev.iter().filter(|e| e.track == track).copied().collect();
                v.sort_by_key(|e| e.start);
                Cow::Owned(v)
            };
        let mut reach = Vec::with_capacity(ev.len() / BLOCK + 1);
        let mut latest = i64::MIN;
        for (i, e) in ev.iter().enumerate() {
            if i % BLOCK == 0 {
                reach.push(latest);
            }
            latest = latest.max(e.end());
        }
        reach.push(latest);
        let mut run = Run {
            ev,
            reach,
            kept: None,
        };
        if run.ev.len() <= keep {
            run.kept = Some(Union::new(run.intervals(i64::MIN, None)).collect());
        }
        run
    }

    /// Whether the run keeps its union's segments (a run of at most [`KEEP_UNION`] events).
    pub fn keeps_union(&self) -> bool {
        self.kept.is_some()
    }

    /// The events.
    pub fn events(&self) -> &[Event] {
        &self.ev
    }

    /// An index at or before the first event that ends after `t` (events before it all end
    /// at or before `t`).
    fn reaching_index(&self, t: i64) -> usize {
        // `reach` never decreases: the first block whose prefix ends after `t` is found by
        // bisection, and the event sought is in the block before.
        let j = self.reach.partition_point(|&r| r <= t);
        // (Past every end, the index is the end of the run.)
        (j.saturating_sub(1) * BLOCK).min(self.ev.len())
    }

    /// The run's intervals from the first that may reach past `from`, in start order, those
    /// of `thread` only when given.
    fn intervals(&self, from: i64, thread: Option<u32>) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.ev[self.reaching_index(from)..]
            .iter()
            .filter(move |e| thread.is_none_or(|t| e.thread == t))
            .map(|e| (e.start, e.end()))
    }

    /// The union of the run's intervals, in start order.
    pub fn union(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        match &self.kept {
            Some(k) => Either::Left(k.iter().copied()),
            None => Either::Right(Union::new(self.intervals(i64::MIN, None))),
        }
    }

    /// Time in `[s, e)` covered by the run's intervals (of `thread` only, when given).
    pub fn covered(&self, s: i64, e: i64, thread: Option<u32>) -> u64 {
        match (&self.kept, thread) {
            (Some(k), None) => covered(k[k.partition_point(|x| x.1 <= s)..].iter().copied(), s, e),
            _ => covered(Union::new(self.reaching(s, e, thread)), s, e),
        }
    }

    /// The run's intervals that may reach into `[s, e)` (of `thread` only, when given), in
    /// start order: every one that does, and a few before that end at or before `s`.
    pub fn reaching(
        &self,
        s: i64,
        e: i64,
        thread: Option<u32>,
    ) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.intervals(s, thread).take_while(move |iv| iv.0 < e)
    }

    /// The union of the run's intervals that reach into `[s, e)` (segments may start before
    /// `s` or end after `e`: clip them, or measure with [`covered`]).
    pub fn union_from(&self, s: i64, e: i64) -> impl Iterator<Item = (i64, i64)> + '_ {
        match &self.kept {
            Some(k) => Either::Left(
                k[k.partition_point(|x| x.1 <= s)..]
                    .iter()
                    .copied()
                    .take_while(move |x| x.0 < e),
            ),
            None => Either::Right(Union::new(self.reaching(s, e, None))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{NONE, SourceFormat};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// A run's windowed queries agree with the union of every interval, clipped, however
        /// far back the interval reaching into the window starts (the index skips whole
        /// blocks of events: thousands of short intervals and a few long ones).
        #[test]
        fn a_run_covers_a_window_as_the_whole_union_does(
            short in prop::collection::vec((0i64..10, 0i64..15, 0u32..2), 2500..4000),
            long in prop::collection::vec((0usize..4000, 0i64..40_000), 0..6),
            windows in prop::collection::vec((-1000i64..45_000, 0i64..5000), 20),
        ) {
            let mut p = Profile::new("x".into(), SourceFormat::RlprofRaw, 0, "g".into());
            for (i, &(jitter, dur, thread)) in short.iter().enumerate() {
                let dur = long.iter().find(|l| l.0 == i).map_or(dur, |l| l.1);
                p.events.push(Event {
                    start: i as i64 * 10 + jitter,
                    dur,
                    name: NONE,
                    detail: NONE,
                    thread,
                    depth: 0,
                    track: Track::Kernel,
                });
            }
            p.sort();
            let whole = union(p.events.iter().map(|e| (e.start, e.end())).collect());
            let one = union(
                p.events
                    .iter()
                    .filter(|ev| ev.thread == 1)
                    .map(|ev| (ev.start, ev.end()))
                    .collect(),
            );
            // The union kept and the union streamed from the events.
            for run in [Run::keeping(&p, Track::Kernel, usize::MAX), Run::keeping(&p, Track::Kernel, 0)] {
                let all: Vec<(i64, i64)> = run.union().collect();
                prop_assert_eq!(&all, &whole);
                for &(s, len) in &windows {
                    let e = s + len;
                    let want = covered(whole.iter().copied(), s, e);
                    prop_assert_eq!(run.covered(s, e, None), want, "[{}, {})", s, e);
                    prop_assert_eq!(covered(run.union_from(s, e), s, e), want);
                    prop_assert_eq!(run.covered(s, e, Some(1)), covered(one.iter().copied(), s, e));
                }
            }
        }
    }
}
