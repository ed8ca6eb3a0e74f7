//! Streaming decode of a raw file into typed events.
//!
//! Two passes over the file, each one chunk at a time (memory bounded by the interned strings,
//! the step and collective intervals, and one chunk); the file's bytes come from
//! [`crate::source::RawBytes`] (memory-mapped, decoded in place, no copy per pass):
//! 1. [`Index::build`] reads metadata, strings, thread names, calibration points, step ranges,
//!    collective intervals, the truncation/end markers and where valid data ends.
//! 2. [`Index::replay`] reads the records again, pairs each record with its `Ext` record, maps
//!    ticks to wall-clock nanoseconds and hands [`Event`]s to a callback.

use crate::dense::DenseMap;
use crate::meta::Meta;
use crate::source::RawBytes;
use crate::ExportError;
use rlprof_profiler::clock::{Calibration, TickMapper};
use rlprof_profiler::raw::{Chunk, ChunkRef, Corruption, SliceReader, Truncation};
use rlprof_profiler::record::{Kind, RangeCat, Record, RECORD_SIZE};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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

/// What pass 1 learned about a raw file.
#[derive(Debug)]
pub struct Index {
    /// The raw file.
    pub path: PathBuf,
    /// Its metadata.
    pub meta: Meta,
    names: Vec<Box<str>>,
    /// Thread index -> name.
    pub threads: BTreeMap<u32, String>,
    mapper: TickMapper,
    /// Step ranges, sorted by start.
    pub steps: Vec<StepSpan>,
    /// Collective intervals `(start, end)` in wall ns, sorted by start.
    pub comm_spans: Vec<(u64, u64)>,
    /// Record counts.
    pub counts: Counts,
    /// Truncation marker.
    pub truncated: Option<Truncation>,
    /// Clean-end marker `(events, dropped)`.
    pub end: Option<(u64, u64)>,
    /// Where valid data ended early.
    pub corruption: Option<Corruption>,
    /// Bytes of valid data (header + complete chunks).
    pub valid_bytes: u64,
    offset: i128,
}

/// A host range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RangeEv {
    /// Thread index.
    pub thread: u32,
    /// [`RangeCat`] byte.
    pub cat: u8,
    /// Name id.
    pub name: u32,
    /// Start, wall ns.
    pub start: u64,
    /// End, wall ns.
    pub end: u64,
    /// Nesting depth on its thread.
    pub depth: u16,
    /// Module id (ops).
    pub module: u32,
    /// Shapes id (ops).
    pub shapes: u32,
    /// Dtypes id (ops).
    pub dtypes: u32,
    /// Call-stack id (ops).
    pub stack: u32,
    /// Iteration id (scheduled iterations).
    pub iter_id: Option<u64>,
}

/// A device kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelEv {
    /// Thread index that recorded it.
    pub thread: u32,
    /// Name id.
    pub name: u32,
    /// Start, wall ns.
    pub start: u64,
    /// End, wall ns.
    pub end: u64,
    /// Stream.
    pub stream: u16,
    /// Ran on the host CPU engine.
    pub on_host: bool,
    /// FLOPs (0 = unknown).
    pub flops: u64,
    /// Bytes moved (0 = unknown).
    pub bytes: u64,
}

/// An allocation or free.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemEv {
    /// Thread index.
    pub thread: u32,
    /// Time, wall ns.
    pub ts: u64,
    /// Name id of the op that caused it (0 = none).
    pub op: u32,
    /// Device index.
    pub device: u16,
    /// A free (else an allocation).
    pub free: bool,
    /// Address.
    pub addr: u64,
    /// Bytes.
    pub bytes: u64,
}

/// A collective or point-to-point communication op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommEv {
    /// Thread index.
    pub thread: u32,
    /// Name id (`all_reduce`, ...).
    pub name: u32,
    /// Start, wall ns.
    pub start: u64,
    /// End, wall ns.
    pub end: u64,
    /// Bytes.
    pub bytes: u64,
    /// Time spent waiting for peers, ns.
    pub wait_ns: u64,
    /// Group name id.
    pub group: u32,
    /// Peer rank of a point-to-point op.
    pub peer: Option<u16>,
}

/// One decoded event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Host range.
    Range(RangeEv),
    /// Device kernel.
    Kernel(KernelEv),
    /// Memory event.
    Memory(MemEv),
    /// Communication op.
    Comm(CommEv),
    /// Instant `(thread, ts, name, value)`.
    Instant(u32, u64, u32, u64),
    /// Counter sample `(thread, ts, name, value)`.
    Counter(u32, u64, u32, u64),
}

fn reader<'a>(raw: &'a RawBytes, path: &Path) -> Result<SliceReader<'a>, ExportError> {
    SliceReader::new(raw.bytes(), path).map_err(|e| match e {
        rlprof_profiler::ProfilerError::Io { path, source } => ExportError::Io { path, source },
        other => ExportError::Unrecoverable {
            path: path.to_path_buf(),
            reason: other.to_string(),
        },
    })
}

impl Index {
    /// Pass 1 over `path`. Fails only when nothing is recoverable: an unreadable header or no
    /// Meta chunk.
    pub fn build(path: &Path) -> Result<Index, ExportError> {
        let raw = RawBytes::open(path)?;
        let mut reader = reader(&raw, path)?;
        let mut meta = None;
        let mut names: Vec<Box<str>> = Vec::new();
        let mut threads = BTreeMap::new();
        let mut cals: Vec<Calibration> = Vec::new();
        let mut counts = Counts::default();
        let mut truncated = None;
        let mut end = None;
        let mut steps_raw = Vec::new();
        let mut comms_raw = Vec::new();
        while let Some(chunk) = reader.next_ref() {
            raw.release_before(reader.offset());
            let chunk = match chunk {
                ChunkRef::Records { body, .. } => {
                    count(body, &mut counts, &mut steps_raw, &mut comms_raw);
                    continue;
                }
                ChunkRef::Other(c) => c,
            };
            match chunk {
                Chunk::Meta(m) => meta = Some(Meta::from_json(&m)),
                Chunk::Strings(v) => {
                    for (id, s) in v {
                        let i = id as usize;
                        if i >= names.len() {
                            names.resize(i + 1, Box::from(""));
                        }
                        names[i] = s.into_boxed_str();
                    }
                }
                Chunk::Records { records, .. } => {
                    // Not produced by `SliceReader` (records come borrowed); counted the same way.
                    let mut body = Vec::with_capacity(records.len() * RECORD_SIZE);
                    records.iter().for_each(|r| r.to_bytes(&mut body));
                    count(&body, &mut counts, &mut steps_raw, &mut comms_raw);
                }
                Chunk::Calibration(c) => cals.push(c),
                Chunk::Thread { thread, name } => {
                    threads.insert(thread, name);
                }
                Chunk::Truncated(t) => truncated = Some(t),
                Chunk::End { events, dropped } => end = Some((events, dropped)),
            }
        }
        let corruption = reader.corruption().cloned();
        let valid_bytes = reader.offset();
        let Some(meta) = meta else {
            return Err(ExportError::Unrecoverable {
                path: path.to_path_buf(),
                reason: match &corruption {
                    Some(c) => format!("no metadata chunk before byte {}: {}", c.offset, c.reason),
                    None => "no metadata chunk".into(),
                },
            });
        };
        let first = cals.first().copied().unwrap_or(Calibration {
            ticks: 0,
            mono_ns: meta.start_mono_ns,
            wall_ns: meta.start_wall_ns,
        });
        let mapper = TickMapper::new(first, cals.last().copied().unwrap_or(first));
        let mut idx = Index {
            path: path.to_path_buf(),
            offset: meta.wall_offset(),
            meta,
            names,
            threads,
            mapper,
            steps: Vec::new(),
            comm_spans: Vec::new(),
            counts,
            truncated,
            end,
            corruption,
            valid_bytes,
        };
        idx.steps = steps_raw
            .iter()
            .map(|&(name, s, e)| StepSpan {
                step: step_number(idx.name(name)),
                start: idx.wall(s),
                end: idx.wall(e),
            })
            .collect();
        idx.steps.sort_by_key(|s| s.start);
        idx.comm_spans = comms_raw
            .iter()
            .map(|&(s, e)| (idx.wall(s), idx.wall(e)))
            .collect();
        idx.comm_spans.sort_unstable();
        Ok(idx)
    }

    /// The string of a name id (empty when unknown or 0).
    #[inline]
    pub fn name(&self, id: u32) -> &str {
        self.names.get(id as usize).map(|s| &**s).unwrap_or("")
    }

    /// Wall-clock ns of a tick value.
    #[inline]
    pub fn wall(&self, ticks: u64) -> u64 {
        (self.mapper.to_ns(ticks) as i128 + self.offset).max(0) as u64
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
        let raw = RawBytes::open(&self.path)?;
        let mut reader = reader(&raw, &self.path)?.verified_prefix(self.valid_bytes);
        let mut pending: DenseMap<Record> = DenseMap::default();
        while let Some(chunk) = reader.next_ref() {
            raw.release_before(reader.offset());
            let ChunkRef::Records { thread, body } = chunk else {
                continue;
            };
            let prev = pending.take(thread);
            if let Some(p) = self.replay_chunk(thread, prev, body, &mut f) {
                pending.insert(thread, p);
            }
        }
        for (thread, p) in pending.drain() {
            f(&self.event(thread, &p, None));
        }
        Ok(())
    }

    /// The events of one Records chunk body of `thread`; `prev` is the thread's record left
    /// unpaired at the end of its previous chunk (its Ext may open this chunk). Returns the
    /// record left unpaired at the end of this one.
    ///
    /// A record is paired with the record right after it when that is an Ext, looking ahead in
    /// the borrowed bytes instead of carrying an `Option<Record>` through every step; an Ext
    /// with no record before it is skipped. Same events, same order as pairing one at a time.
    #[inline]
    fn replay_chunk(
        &self,
        thread: u32,
        prev: Option<Record>,
        body: &[u8],
        f: &mut impl FnMut(&Event),
    ) -> Option<Record> {
        const EXT: u8 = Kind::Ext as u8;
        let (recs, _) = body.as_chunks::<RECORD_SIZE>();
        let mut i = 0;
        if let Some(p) = prev {
            let Some(first) = recs.first() else {
                return Some(p);
            };
            let r = Record::from_bytes(first);
            if r.kind == EXT {
                f(&self.event(thread, &p, Some(&r)));
                i = 1;
            } else {
                f(&self.event(thread, &p, None));
            }
        }
        while let Some(b) = recs.get(i) {
            let r = Record::from_bytes(b);
            if r.kind == EXT {
                i += 1;
                continue;
            }
            let Some(nb) = recs.get(i + 1) else {
                return Some(r);
            };
            let x = Record::from_bytes(nb);
            if x.kind == EXT {
                f(&self.event(thread, &r, Some(&x)));
                i += 2;
            } else {
                f(&self.event(thread, &r, None));
                i += 1;
            }
        }
        None
    }

    #[inline(always)]
    fn event(&self, thread: u32, r: &Record, ext: Option<&Record>) -> Event {
        let e = ext.copied().unwrap_or_default();
        match Kind::from_u8(r.kind) {
            Some(Kind::Kernel) => Event::Kernel(KernelEv {
                thread,
                name: r.name,
                start: self.wall(r.ts),
                end: self.wall(r.a.max(r.ts)),
                stream: r.aux,
                on_host: r.cat == 1,
                flops: e.ts,
                bytes: e.a,
            }),
            Some(Kind::Memory) => Event::Memory(MemEv {
                thread,
                ts: self.wall(r.ts),
                op: r.name,
                device: r.aux,
                free: r.cat == 1,
                addr: e.ts,
                bytes: e.a,
            }),
            Some(Kind::Comm) => Event::Comm(CommEv {
                thread,
                name: r.name,
                start: self.wall(r.ts),
                end: self.wall(r.a.max(r.ts)),
                bytes: e.ts,
                wait_ns: self.mapper.span_ns(0, e.a),
                group: e.name,
                peer: (e.aux > 0).then(|| e.aux - 1),
            }),
            Some(Kind::Instant) => Event::Instant(thread, self.wall(r.ts), r.name, r.a),
            Some(Kind::Counter) => Event::Counter(thread, self.wall(r.ts), r.name, r.a),
            _ => {
                let is_op = r.cat == RangeCat::Op as u8;
                let is_iter = r.cat == RangeCat::Iteration as u8;
                Event::Range(RangeEv {
                    thread,
                    cat: r.cat,
                    name: r.name,
                    start: self.wall(r.ts),
                    end: self.wall(r.a.max(r.ts)),
                    depth: r.aux,
                    module: if is_op { e.ts as u32 } else { 0 },
                    shapes: if is_op { (e.ts >> 32) as u32 } else { 0 },
                    dtypes: if is_op { e.a as u32 } else { 0 },
                    stack: if is_op { (e.a >> 32) as u32 } else { 0 },
                    iter_id: (is_iter && ext.is_some()).then_some(e.ts),
                })
            }
        }
    }
}

/// Counts the records of a Records chunk body by kind, straight from the kind/category bytes
/// (branch-free except for the rare step ranges and collectives, whose intervals are kept).
fn count(
    body: &[u8],
    c: &mut Counts,
    steps: &mut Vec<(u32, u64, u64)>,
    comms: &mut Vec<(u64, u64)>,
) {
    let (recs, _) = body.as_chunks::<RECORD_SIZE>();
    c.records += recs.len() as u64;
    // Kind and category bytes of each record as one u16 (kind in the low byte); the rare
    // step ranges and collectives are handled in a branch, everything else only counted.
    let step = u16::from_le_bytes([Kind::Range as u8, RangeCat::Step as u8]);
    let mut by_kind = [0u32; 256];
    let mut ops = 0u64;
    for b in recs {
        let kc = u16::from_le_bytes([b[20], b[21]]);
        by_kind[(kc & 0xff) as usize] += 1;
        ops += (kc == u16::from_le_bytes([Kind::Range as u8, RangeCat::Op as u8])) as u64;
        if kc == step || (kc & 0xff) == Kind::Comm as u16 {
            let r = Record::from_bytes(b);
            if kc == step {
                steps.push((r.name, r.ts, r.a));
            } else {
                comms.push((r.ts, r.a));
            }
        }
    }
    let n = |k: Kind| by_kind[k as usize] as u64;
    c.ranges += n(Kind::Range);
    c.ops += ops;
    c.kernels += n(Kind::Kernel);
    c.memory += n(Kind::Memory);
    c.comms += n(Kind::Comm);
    c.instants += n(Kind::Instant);
    c.counters += n(Kind::Counter);
}

/// `ProfilerStep#12` -> 12 (0 when the name has no number).
pub fn step_number(name: &str) -> u64 {
    name.rsplit('#')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
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

    /// The pairing rule, one record at a time (the reference for the look-ahead loop).
    fn reference(idx: &Index, chunks: &[(u32, Vec<Record>)]) -> Vec<Event> {
        let mut out = Vec::new();
        let mut pending: BTreeMap<u32, Record> = BTreeMap::new();
        for (thread, recs) in chunks {
            let mut prev = pending.remove(thread);
            for r in recs {
                if r.kind == Kind::Ext as u8 {
                    if let Some(p) = prev.take() {
                        out.push(idx.event(*thread, &p, Some(r)));
                    }
                } else if let Some(p) = prev.replace(*r) {
                    out.push(idx.event(*thread, &p, None));
                }
            }
            if let Some(p) = prev {
                pending.insert(*thread, p);
            }
        }
        for (thread, p) in pending {
            out.push(idx.event(thread, &p, None));
        }
        out
    }

    #[test]
    fn lookahead_pairing_matches_one_at_a_time_across_chunks() {
        use Kind::*;
        let op = RangeCat::Op as u8;
        let step = RangeCat::Step as u8;
        // Ext records split from their record by a chunk boundary (also with another thread's
        // chunk in between), orphan and doubled Ext records, empty chunks, records without an
        // Ext, and a record left pending at the very end.
        let chunks: Vec<(u32, Vec<Record>)> = vec![
            (0, vec![rec(1, Ext, 0, 0), rec(2, Kernel, 0, 1)]),
            (0, vec![rec(3, Ext, 0, 0), rec(4, Range, op, 2)]),
            (1, vec![rec(5, Memory, 0, 0)]),
            (0, vec![]),
            (
                1,
                vec![rec(6, Ext, 0, 0), rec(7, Ext, 0, 0), rec(8, Comm, 0, 3)],
            ),
            (
                0,
                vec![
                    rec(9, Ext, 0, 0),
                    rec(10, Range, step, 4),
                    rec(11, Instant, 0, 0),
                ],
            ),
            (
                0,
                vec![
                    rec(12, Counter, 0, 0),
                    rec(13, Range, op, 2),
                    rec(14, Ext, 0, 0),
                ],
            ),
            (1, vec![rec(15, Ext, 0, 0), rec(16, Kernel, 1, 1)]),
            (2, vec![rec(17, Range, op, 2)]),
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
        let mut got = Vec::new();
        idx.replay(|e| got.push(*e)).unwrap();
        let want = reference(&idx, &chunks);
        assert_eq!(got, want);
        assert_eq!(got.len(), 10);

        // Counts by kind, from the kind bytes.
        let all: Vec<&Record> = chunks.iter().flat_map(|c| &c.1).collect();
        let n = |k: Kind| all.iter().filter(|r| r.kind == k as u8).count() as u64;
        let c = idx.counts;
        assert_eq!(c.records, all.len() as u64);
        assert_eq!(
            (c.ranges, c.ops, c.kernels, c.memory, c.comms, c.instants, c.counters),
            (
                n(Range),
                3,
                n(Kernel),
                n(Memory),
                n(Comm),
                n(Instant),
                n(Counter)
            )
        );
        assert_eq!(idx.steps.len(), 1);
        assert_eq!(idx.steps[0].step, 3);
        assert_eq!(idx.comm_spans.len(), 1);
    }
}
