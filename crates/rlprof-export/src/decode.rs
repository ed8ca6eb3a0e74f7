//! The exporters' view of a raw file: the one decoder, [`rlprof_profiler::raw::RawIndex`]
//! (metadata, strings, clock mapping, Ext pairing, validation), plus the aggregates the
//! exporters take from its first pass (step ranges, collective intervals, counts by kind).
//!
//! Two passes over the file, each one chunk at a time (memory bounded by the interned strings,
//! the step and collective intervals, and one chunk); the file's bytes come from
//! `RawBytes` (`rlprof_profiler::collection::mmap`: memory-mapped, decoded in place, no copy per pass):
//! 1. [`Index::build`] runs the decoder's scan and counts the records as they pass.
//! 2. [`Index::replay`] hands the decoder's paired, validated [`Event`]s (wall-clock ns) to a
//!    callback.

use crate::ExportError;
use rlprof_profiler::ProfilerError;
use rlprof_profiler::collection::mmap::RawBytes;
use rlprof_profiler::raw::{RawIndex, WarningKind};
use rlprof_profiler::record::{Kind, RECORD_SIZE, RangeCat, Record};
use std::path::Path;

pub use rlprof_profiler::raw::{CommEv, Event, KernelEv, MemEv, RangeEv};

/// A step range (`ProfilerStep#N`) in wall-clock ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepSpan {
    /// Step number.
    pub step: u64,
    /// Start, wall ns.
    pub start: u64,
    /// End, wall ns.
    pub end: u64,
}

/// Record counts by kind, as read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    /// All records including Ext.
    pub records: u64,
    /// Host ranges.
    pub ranges: u64,
    /// Op ranges (subset of `ranges`).
    pub ops: u64,
    /// Kernels.
    pub kernels: u64,
    /// Memory events.
    pub memory: u64,
    /// Collectives.
    pub comms: u64,
    /// Instants.
    pub instants: u64,
    /// Counter samples.
    pub counters: u64,
}

/// A decoded raw file: the decoder's [`RawIndex`] (reached through `Deref`: `idx.meta`,
/// `idx.name(id)`, `idx.wall(ticks)`, ...) and what the exporters aggregate from pass 1.
#[derive(Debug)]
pub struct Index {
    raw: RawIndex,
    /// Step ranges, sorted by start.
    pub steps: Vec<StepSpan>,
    /// Record counts, as read (before validation drops any).
    pub counts: Counts,
}

impl std::ops::Deref for Index {
    type Target = RawIndex;
    fn deref(&self) -> &RawIndex {
        &self.raw
    }
}

impl std::ops::DerefMut for Index {
    fn deref_mut(&mut self) -> &mut RawIndex {
        &mut self.raw
    }
}

/// The decoder's error as the exporter's.
fn export_error(e: ProfilerError, path: &Path) -> ExportError {
    match e {
        ProfilerError::Io { path, source } => ExportError::Io { path, source },
        ProfilerError::Unrecoverable { path, reason } => {
            ExportError::Unrecoverable { path, reason }
        }
        other => ExportError::Unrecoverable {
            path: path.to_path_buf(),
            reason: other.to_string(),
        },
    }
}

impl Index {
    /// Pass 1 over `path`. Fails only when nothing is recoverable: an unreadable header or no
    /// Meta chunk (the decoder's verdict, which `rlprof report` shares).
    pub fn build(path: &Path) -> Result<Index, ExportError> {
        let bytes = RawBytes::open(path).map_err(|e| export_error(e, path))?;
        let mut c = Counter {
            by_kind: [0; 256],
            ops: 0,
            steps: Vec::new(),
        };
        let raw = RawIndex::scan(
            bytes.bytes(),
            path,
            |b| c.add(b),
            |offset| bytes.release_before(offset),
        )
        .map_err(|e| export_error(e, path))?;
        let counts = c.counts();
        let mut steps: Vec<StepSpan> = c
            .steps
            .iter()
            .filter(|&&(_, s, e)| raw.keeps_interval(s, e))
            .map(|&(name, s, e)| StepSpan {
                step: step_number(raw.name(name)),
                start: raw.wall(s),
                end: raw.wall(e.max(s)),
            })
            .collect();
        steps.sort_by_key(|s| s.start);
        Ok(Index { raw, steps, counts })
    }

    /// The step whose range contains `ts` (wall ns), if any.
    pub fn step_at(&self, ts: u64) -> Option<u64> {
        let i = self.steps.partition_point(|s| s.start <= ts);
        let s = self.steps.get(i.checked_sub(1)?)?;
        (ts < s.end).then_some(s.step)
    }

    /// Start of the collection in wall ns (first calibration).
    pub fn start_wall(&self) -> u64 {
        self.meta.start_wall_ns
    }

    /// Pass 2: every event in file order (per thread in completion order), each paired with
    /// its Ext record and in wall-clock ns.
    pub fn replay(&self, mut f: impl FnMut(&Event)) -> Result<(), ExportError> {
        let bytes = RawBytes::open(&self.path).map_err(|e| export_error(e, &self.path))?;
        self.raw
            .replay(bytes.bytes(), |o| bytes.release_before(o), |e, _| f(e))
            .map_err(|e| export_error(e, &self.path))
    }
}

/// Counts records by kind from their kind/category bytes (branch-free except for the rare step
/// ranges, whose intervals are kept), one record at a time inside the decoder's pass-1 loop.
struct Counter {
    by_kind: [u64; 256],
    ops: u64,
    steps: Vec<(u32, u64, u64)>,
}

impl Counter {
    #[inline(always)]
    fn add(&mut self, b: &[u8; RECORD_SIZE]) {
        const STEP: u16 = u16::from_le_bytes([Kind::Range as u8, RangeCat::Step as u8]);
        const OP: u16 = u16::from_le_bytes([Kind::Range as u8, RangeCat::Op as u8]);
        // Kind and category bytes as one u16 (kind in the low byte).
        let kc = u16::from_le_bytes([b[20], b[21]]);
        self.by_kind[(kc & 0xff) as usize] += 1;
        self.ops += (kc == OP) as u64;
        if kc == STEP {
            let r = Record::from_bytes(b);
            self.steps.push((r.name, r.ts, r.a));
        }
    }

    fn counts(&self) -> Counts {
        let n = |k: Kind| self.by_kind[k as usize];
        Counts {
            records: self.by_kind.iter().sum(),
            ranges: n(Kind::Range),
            ops: self.ops,
            kernels: n(Kind::Kernel),
            memory: n(Kind::Memory),
            comms: n(Kind::Comm),
            instants: n(Kind::Instant),
            counters: n(Kind::Counter),
        }
    }
}

/// `ProfilerStep#12` -> 12 (0 when the name has no number).
pub fn step_number(name: &str) -> u64 {
    name.rsplit('#')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Why a raw file's data is incomplete (`None`: it holds the whole collection): damaged or
/// cut off, no end marker (the process stopped while collecting), or, end-to-end, a planned
/// step that never finished (the run was stopped and its collections closed early). Call it
/// after a replay, which finds the ranges of unknown category that a missing step may be.
pub fn incomplete(idx: &Index) -> Option<String> {
    if let Some(c) = &idx.corruption {
        return Some(format!(
            "data stops at byte offset {} ({})",
            c.offset, c.reason
        ));
    }
    if idx.end.is_none() {
        return Some(format!(
            "no end marker: data stops at byte offset {} (the process stopped while collecting)",
            idx.valid_bytes
        ));
    }
    if idx.truncated.is_some() {
        return None;
    }
    // Without a cap, dropped events are lost ones (a failed or panicking write while
    // collecting): the data are not all there.
    if let Some((_, dropped)) = idx.end
        && dropped > 0
    {
        return Some(format!(
            "{dropped} event(s) were lost while collecting (a write failed or panicked)"
        ));
    }
    if idx.meta.discrete {
        return None;
    }
    let missing: Vec<u64> = idx
        .meta
        .steps
        .iter()
        .copied()
        .filter(|s| !idx.steps.iter().any(|sp| sp.step == *s))
        .collect();
    if missing.is_empty() {
        return None;
    }
    // Step ranges whose category byte was damaged are not counted as steps: say so rather than
    // blame the run (known once a replay has run).
    let odd = idx
        .record_warnings()
        .iter()
        .find(|w| matches!(w.kind, WarningKind::UnknownRangeCategory(_)));
    Some(match odd {
        Some(w) => format!(
            "planned step(s) {missing:?} not found: {} range(s) of unknown category, the first at \
             byte {}, may be them (the file is damaged or crafted)",
            w.count, w.offset
        ),
        None => format!("planned step(s) {missing:?} never finished (the run was stopped early)"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlprof_profiler::raw::RawWriter;

    fn rec(ts: u64, kind: Kind, cat: u8, name: u32) -> Record {
        Record {
            ts,
            a: ts + 5,
            name,
            kind: kind as u8,
            cat,
            aux: 0,
        }
    }

    #[test]
    fn counts_steps_and_collectives_from_pass_one() {
        use Kind::*;
        let op = RangeCat::Op as u8;
        let step = RangeCat::Step as u8;
        let chunks: Vec<(u32, Vec<Record>)> = vec![
            (0, vec![rec(1, Ext, 0, 0), rec(2, Kernel, 0, 1)]),
            (0, vec![rec(3, Ext, 0, 0), rec(4, Range, op, 2)]),
            (1, vec![rec(5, Memory, 0, 0), rec(6, Ext, 0, 0)]),
            (1, vec![rec(8, Comm, 0, 3), rec(9, Ext, 0, 0)]),
            (0, vec![rec(10, Range, step, 4), rec(11, Instant, 0, 0)]),
            (0, vec![rec(12, Counter, 0, 0), rec(13, Range, op, 2)]),
        ];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rank_0.rlraw");
        let mut w = RawWriter::create(&path).unwrap();
        w.write_meta(&serde_json::json!({"tool": "npu", "level": "level1", "rank": 0}))
            .unwrap();
        w.write_strings([
            (1, "k"),
            (2, "op"),
            (3, "all_reduce"),
            (4, "ProfilerStep#3"),
        ])
        .unwrap();
        for (t, recs) in &chunks {
            w.write_records(*t, recs).unwrap();
        }
        drop(w);
        let idx = Index::build(&path).unwrap();
        let all: Vec<&Record> = chunks.iter().flat_map(|c| &c.1).collect();
        let n = |k: Kind| all.iter().filter(|r| r.kind == k as u8).count() as u64;
        let c = idx.counts;
        assert_eq!(c.records, all.len() as u64);
        assert_eq!(
            (
                c.ranges, c.ops, c.kernels, c.memory, c.comms, c.instants, c.counters
            ),
            (
                n(Range),
                2,
                n(Kernel),
                n(Memory),
                n(Comm),
                n(Instant),
                n(Counter)
            )
        );
        assert_eq!(idx.steps.len(), 1);
        assert_eq!(idx.steps[0].step, 3);
        let mut events = 0;
        idx.replay(|_| events += 1).unwrap();
        assert_eq!(events, 8);
    }

    /// Events lost while collecting (the end marker's `dropped` with no cap reached) make the
    /// collection partial, with the count; a clean end with none lost does not.
    #[test]
    fn lost_events_make_the_collection_partial_with_the_count() {
        let dir = tempfile::tempdir().unwrap();
        for (dropped, want) in [(0u64, None), (2048, Some("2048 event(s) were lost"))] {
            let path = dir.path().join(format!("rank_{dropped}.rlraw"));
            let _ = std::fs::remove_file(&path);
            let mut w = RawWriter::create(&path).unwrap();
            w.write_meta(
                &serde_json::json!({"tool": "npu", "level": "level1", "rank": 0, "discrete": true}),
            )
            .unwrap();
            w.write_records(0, &[rec(1, Kind::Kernel, 0, 0)]).unwrap();
            w.write_end(1, dropped).unwrap();
            drop(w);
            let idx = Index::build(&path).unwrap();
            let got = incomplete(&idx);
            match want {
                None => assert_eq!(got, None),
                Some(w) => assert!(got.as_deref().is_some_and(|g| g.contains(w)), "{got:?}"),
            }
        }
    }
}
