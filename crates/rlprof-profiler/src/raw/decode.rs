//! The one decoder of raw files: every reader (`rlprof analyse`, `rlprof report`) goes through
//! [`RawIndex`], so a raw file has one meaning.
//!
//! Two passes over the file's bytes (memory-mapped or read by the caller), one chunk at a time:
//! 1. [`RawIndex::scan`] reads the metadata ([`CollectionMeta`]), strings, thread names,
//!    calibration points and the truncation/end markers, hands each Records chunk to the caller
//!    (for its own aggregates). Its verdict is the readability
//!    verdict of a file: it fails only when nothing is recoverable (a bad header, no readable
//!    Meta chunk).
//! 2. [`RawIndex::replay`] reads the records again, pairs each with the Ext record after it on
//!    its thread, and hands out typed [`Event`]s in wall-clock nanoseconds.
//!
//! **Clock.** Ticks map to time through one [`TickMapper`]: a fit between the first and last
//! calibration points when they are more than [`crate::clock::FIT_MIN_TICKS`] apart, else the
//! rate the writer recorded in the Meta chunk (`ns_per_tick`), else this process's rate. The
//! two readers this replaced disagreed: the exporter needed 1,000,000 ticks between the points
//! and fell back to the *reading* machine's rate, the report needed 1,000 and used the recorded
//! rate. The 1,000,000 threshold is kept (a fit over 1,000 ticks is at the mercy of the clock
//! reads' jitter, see `FIT_MIN_TICKS`; no collection that stopped cleanly is that short), and the
//! recorded rate is kept (a killed collection's ticks were counted by the writer's clock; the
//! reader's rate is only right when both run on the same kind of machine).
//!
//! **Validation.** Records whose checksums are right can still be impossible. Each case below
//! gives one [`RawWarning`] naming the file and the byte offset of the first offending record or
//! chunk, and the data are dropped or clamped, never shown as absurd figures:
//! - an interval (range, kernel, collective) that ends before it starts: the end is clamped to
//!   the start;
//! - a timestamp (a start, or an interval's end) outside the collection's [`ClockWindow`]: the
//!   record (and its Ext) is dropped;
//! - a record of unknown kind: dropped (with its Ext);
//! - a second Meta chunk: ignored, the first is kept;
//! - a Meta rank that disagrees with the file name (`rank_0.rlraw` saying rank 7): the file
//!   name's rank is used (names are unique within a collection, so outputs cannot collide);
//! - data after the End chunk: ignored.
//!
//! Chunk findings are made by pass 1 ([`RawIndex::warnings`]); record findings by pass 2, where
//! each record is looked at anyway ([`RawIndex::record_warnings`]). The test of a good record is
//! made inside the decoder's one match on the kind (an unknown kind is that match's default
//! arm): one subtraction and comparison per timestamp and one comparison for an interval's
//! order; a record that fails it is sorted out, warned about and dropped or clamped out of line.
//! Where the window lies inside the tick conversion's exact `i64` range (checked once per
//! replay), the times of the records that passed are converted without that range's own tests
//! ([`TickMapper::narrow_over`]), which more than pays for the test (docs/benchmarks/history.md).

use super::event::{Event, TimeCheck};
use super::meta::CollectionMeta;
use super::names::Names;
use super::reader::{Chunk, ChunkRef, Corruption, SliceReader};
use super::writer::Truncation;
use crate::ProfilerError;
use crate::clock::{Calibration, TickMapper};
use crate::collection::names::{RankFile, rank_file};
use crate::record::{Kind, RECORD_SIZE, RangeCat, Record};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Slack around the calibration points that records may lie outside of (clock reads of one
/// process race a little with the calibration).
const WINDOW_SLACK_NS: u64 = 1_000_000_000;
/// How far after its only calibration point a collection that never stopped may reach.
const OPEN_WINDOW_NS: u64 = 7 * 24 * 3600 * 1_000_000_000;

/// The ticks a collection's records may carry: from a little before its first calibration
/// point to a little after its last (or, with a single point, up to seven days after it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockWindow {
    /// First valid tick.
    pub lo: u64,
    /// Last valid tick.
    pub hi: u64,
}

impl ClockWindow {
    /// Whether `ticks` lies in the window.
    #[inline(always)]
    pub fn contains(&self, ticks: u64) -> bool {
        ticks.wrapping_sub(self.lo) <= self.hi.wrapping_sub(self.lo)
    }
}

/// What was wrong in a raw file whose chunks were all readable.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum WarningKind {
    /// Intervals ending before they start (clamped).
    EndBeforeStart,
    /// Records with timestamps outside the clock window (dropped).
    OutsideClockWindow,
    /// Records of an unknown kind (dropped); the first one's kind byte.
    UnknownKind(u8),
    /// A second Meta chunk (ignored).
    DuplicateMeta,
    /// The Meta chunk's rank differs from the file name's (the file name's is used).
    RankMismatch {
        /// Rank in the Meta chunk.
        meta: u32,
        /// Rank in the file name.
        file: u32,
    },
    /// Bytes after the End chunk (ignored).
    DataAfterEnd,
    /// String ids defined more than once (the first definition is kept); the first such id.
    DuplicateString {
        /// The id defined again.
        id: u32,
    },
    /// Records naming a string id the file does not define; the first such id. The profiler
    /// writes every id before the records that use it, so the file was damaged or crafted.
    UnknownString {
        /// The undefined id.
        id: u32,
    },
    /// Ranges of a category the format does not define (kept as user ranges); the first one's
    /// category byte.
    UnknownRangeCategory(u8),
}

/// One validation finding: where, what and how often.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RawWarning {
    /// The raw file.
    pub path: PathBuf,
    /// Byte offset of the first offending record or chunk.
    pub offset: u64,
    /// What was wrong.
    pub kind: WarningKind,
    /// How many records (or bytes, for [`WarningKind::DataAfterEnd`]) it concerns.
    pub count: u64,
}

impl std::fmt::Display for RawWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: byte {}: ", self.path.display(), self.offset)?;
        let n = self.count;
        match &self.kind {
            WarningKind::EndBeforeStart => write!(
                f,
                "{n} record(s) end before they start (the first here); their ends were clamped to their starts"
            ),
            WarningKind::OutsideClockWindow => write!(
                f,
                "{n} record(s) have timestamps outside the collection's clock window (the first here); they were dropped"
            ),
            WarningKind::UnknownKind(k) => write!(
                f,
                "{n} record(s) of unknown kind (the first here, kind {k}); they were dropped"
            ),
            WarningKind::DuplicateMeta => {
                write!(
                    f,
                    "a second Meta chunk; it was ignored and the first one kept"
                )
            }
            WarningKind::RankMismatch { meta, file } => write!(
                f,
                "the Meta chunk says rank {meta} but the file name says rank {file}; rank {file} is used"
            ),
            WarningKind::DataAfterEnd => {
                write!(f, "{n} byte(s) after the End chunk; they were ignored")
            }
            WarningKind::DuplicateString { id } => write!(
                f,
                "{n} string id(s) defined again (the first here, id {id}); the first definition of each was kept"
            ),
            WarningKind::UnknownString { id } => write!(
                f,
                "{n} record(s) name string ids the file does not define (the first here, id {id}); their names are unknown"
            ),
            WarningKind::UnknownRangeCategory(c) => write!(
                f,
                "{n} range(s) of unknown category (the first here, category {c}); they were kept as user ranges, \
                 so steps, phases or role calls among them are not counted as such"
            ),
        }
    }
}

/// Whether pass 2 validates records: always, except in a benchmark-only build with
/// `RUSTFLAGS="--cfg rlprof_bench_no_validation"`, which measures what the validation costs
/// (docs/benchmarks/history.md, "Validation on vs off, same code"). It reads impossible records as they are, so it is never a build that reads
/// real data (the validation tests fail under it, as they should). A `--cfg` flag rather than a
/// feature: a feature would be unified across the workspace, so any crate that enabled it would
/// turn validation off for every other crate in the same build.
const VALIDATE: bool = !cfg!(rlprof_bench_no_validation);

/// Bad records met by one replay: `(first offset, count)` per case, and the first unknown kind.
#[derive(Debug, Default, Clone, Copy)]
struct Findings {
    inverted: (u64, u64),
    outside: (u64, u64),
    unknown: (u64, u64),
    unknown_kind: u8,
    unnamed: (u64, u64),
    unnamed_id: u32,
    odd_cat: (u64, u64),
    odd_cat_byte: u8,
}

impl Findings {
    #[cold]
    #[inline(never)]
    fn note(case: &mut (u64, u64), offset: u64) {
        if case.1 == 0 {
            case.0 = offset;
        }
        case.1 += 1;
    }

    #[cold]
    #[inline(never)]
    fn unknown_kind(&mut self, kind: u8, offset: u64) {
        if self.unknown.1 == 0 {
            self.unknown_kind = kind;
        }
        Findings::note(&mut self.unknown, offset);
    }

    #[cold]
    #[inline(never)]
    fn unknown_string(&mut self, id: u32, offset: u64) {
        if self.unnamed.1 == 0 {
            self.unnamed_id = id;
        }
        Findings::note(&mut self.unnamed, offset);
    }

    #[cold]
    #[inline(never)]
    fn unknown_category(&mut self, cat: u8, offset: u64) {
        if self.odd_cat.1 == 0 {
            self.odd_cat_byte = cat;
        }
        Findings::note(&mut self.odd_cat, offset);
    }

    fn warnings(&self, path: &Path) -> Vec<RawWarning> {
        [
            (WarningKind::EndBeforeStart, self.inverted),
            (WarningKind::OutsideClockWindow, self.outside),
            (WarningKind::UnknownKind(self.unknown_kind), self.unknown),
            (
                WarningKind::UnknownRangeCategory(self.odd_cat_byte),
                self.odd_cat,
            ),
            (
                WarningKind::UnknownString {
                    id: self.unnamed_id,
                },
                self.unnamed,
            ),
        ]
        .into_iter()
        .filter(|(_, (_, n))| *n > 0)
        .map(|(kind, (offset, count))| RawWarning {
            path: path.to_path_buf(),
            offset,
            kind,
            count,
        })
        .collect()
    }
}

/// What pass 1 learned about a raw file; replays its events.
#[derive(Debug)]
pub struct RawIndex {
    /// The raw file.
    pub path: PathBuf,
    /// Its metadata. `rank` is the file name's rank where the name has one (see
    /// [`WarningKind::RankMismatch`]).
    pub meta: CollectionMeta,
    names: Names,
    /// Thread index -> name.
    pub threads: BTreeMap<u32, String>,
    /// The first calibration point, if any.
    pub first_calibration: Option<Calibration>,
    /// Number of calibration points (2 when the collection stopped cleanly).
    pub calibration_points: usize,
    mapper: TickMapper,
    /// Ticks the records may carry.
    pub window: ClockWindow,
    /// Truncation marker.
    pub truncated: Option<Truncation>,
    /// Clean-end marker `(events, dropped)`.
    pub end: Option<(u64, u64)>,
    /// Where valid data ended early.
    pub corruption: Option<Corruption>,
    /// Bytes of valid data (header + complete chunks, up to the End chunk).
    pub valid_bytes: u64,
    /// Findings about chunks (duplicate Meta, rank mismatch, data after End); those about
    /// records are [`RawIndex::record_warnings`].
    pub warnings: Vec<RawWarning>,
    records_checked: OnceLock<Vec<RawWarning>>,
}

/// Pass-1 state before the metadata is known to be there.
#[derive(Default)]
struct Scan {
    meta: Option<(u64, CollectionMeta)>,
    meta_error: Option<String>,
    names: Names,
    /// Strings defined again: `(first offset, count)` and the first such id.
    dup_strings: (u64, u64, u32),
    threads: BTreeMap<u32, String>,
    cals: Vec<Calibration>,
    truncated: Option<Truncation>,
    end: Option<(u64, u64)>,
    warnings: Vec<RawWarning>,
}

impl RawIndex {
    /// Pass 1 over `data`, the bytes of the raw file `path`. `each` gets every record (24
    /// bytes, as in the file, Ext records included); `advanced` the offset reached after each
    /// chunk (to release memory behind the reader). Fails only when nothing is recoverable.
    pub fn scan(
        data: &[u8],
        path: &Path,
        mut each: impl FnMut(&[u8; RECORD_SIZE]),
        mut advanced: impl FnMut(u64),
    ) -> Result<RawIndex, ProfilerError> {
        let mut reader = SliceReader::new(data, path)?;
        let mut s = Scan::default();
        loop {
            let at = reader.offset();
            let Some(chunk) = reader.next_ref() else {
                break;
            };
            advanced(reader.offset());
            match chunk {
                ChunkRef::Records { body, .. } => body.as_chunks().0.iter().for_each(&mut each),
                ChunkRef::Other(Chunk::Records { .. }) => {}
                ChunkRef::Other(Chunk::Strings(v)) => {
                    // The payload follows the 16-byte chunk header.
                    let payload = data.get(at as usize + 16..).unwrap_or_default();
                    s.strings(v, payload, at + 16);
                }
                ChunkRef::Other(c) => {
                    if s.other_chunk(c, at, path) {
                        break;
                    }
                }
            }
        }
        if s.dup_strings.1 > 0 {
            let (offset, count, id) = s.dup_strings;
            s.warnings.push(RawWarning {
                path: path.to_path_buf(),
                offset,
                kind: WarningKind::DuplicateString { id },
                count,
            });
        }
        let valid_bytes = reader.offset();
        if s.end.is_some() && (valid_bytes as usize) < data.len() {
            s.warnings.push(RawWarning {
                path: path.to_path_buf(),
                offset: valid_bytes,
                kind: WarningKind::DataAfterEnd,
                count: data.len() as u64 - valid_bytes,
            });
        }
        let corruption = reader.corruption().cloned();
        let Some((meta_at, mut meta)) = s.meta.take() else {
            return Err(ProfilerError::Unrecoverable {
                path: path.to_path_buf(),
                reason: no_meta_reason(s.meta_error.as_deref(), corruption.as_ref()),
            });
        };
        match rank_file(path) {
            RankFile::Rank(file) if file != meta.rank => {
                s.warnings.push(RawWarning {
                    path: path.to_path_buf(),
                    offset: meta_at,
                    kind: WarningKind::RankMismatch {
                        meta: meta.rank,
                        file,
                    },
                    count: 1,
                });
                meta.rank = file;
            }
            RankFile::Invalid(why) => {
                return Err(ProfilerError::Unrecoverable {
                    path: path.to_path_buf(),
                    reason: format!(
                        "{why}; its Meta chunk (byte {meta_at}) says rank {}: the file is refused \
                         rather than read as a rank it may not be",
                        meta.rank
                    ),
                });
            }
            RankFile::Rank(_) | RankFile::Other => {}
        }
        let first = s.cals.first().copied().unwrap_or(Calibration {
            ticks: 0,
            mono_ns: meta.start_mono_ns,
            wall_ns: meta.start_wall_ns,
        });
        let last = s.cals.last().copied().unwrap_or(first);
        let mono = TickMapper::new(first, last, meta.ns_per_tick);
        let slack = mono.ticks_in(WINDOW_SLACK_NS);
        let window = ClockWindow {
            lo: first.ticks.saturating_sub(slack),
            hi: if s.cals.len() >= 2 {
                last.ticks.max(first.ticks).saturating_add(slack)
            } else {
                first.ticks.saturating_add(mono.ticks_in(OPEN_WINDOW_NS))
            },
        };
        Ok(RawIndex {
            path: path.to_path_buf(),
            mapper: mono.rebased(meta.wall_offset()),
            meta,
            names: s.names,
            threads: s.threads,
            first_calibration: s.cals.first().copied(),
            calibration_points: s.cals.len(),
            window,
            truncated: s.truncated,
            end: s.end,
            corruption,
            valid_bytes,
            warnings: s.warnings,
            records_checked: OnceLock::new(),
        })
    }

    /// The string of a name id (empty when unknown).
    #[inline]
    pub fn name(&self, id: u32) -> &str {
        self.string(id).unwrap_or("")
    }

    /// The string of a name id, if the file defines it.
    #[inline]
    pub fn string(&self, id: u32) -> Option<&str> {
        self.names.get(id)
    }

    /// Wall-clock ns of a tick value.
    #[inline]
    pub fn wall(&self, ticks: u64) -> u64 {
        self.mapper.to_ns(ticks)
    }

    /// Whether pass 2 keeps an interval `[start, end)` (ticks): both inside the clock window,
    /// or an end before the start, which is clamped to it.
    #[inline]
    pub fn keeps_interval(&self, start: u64, end: u64) -> bool {
        self.window.contains(start) && end <= self.window.hi
    }

    /// Wall-clock ns of the first calibration point's tick: the origin of relative times.
    pub fn origin_wall(&self) -> u64 {
        self.mapper.base_ns()
    }

    /// The clock mapping in use.
    pub fn mapper(&self) -> &TickMapper {
        &self.mapper
    }

    /// Findings about records (ends before starts, timestamps outside the clock window,
    /// unknown kinds), known once a [`RawIndex::replay`] has run to the end (every replay finds
    /// the same); empty before.
    pub fn record_warnings(&self) -> &[RawWarning] {
        self.records_checked.get().map_or(&[], |v| v.as_slice())
    }

    /// Pass 2 over the same `data`: every event in file order (per thread in completion order),
    /// each paired with its Ext record; `f` also learns whether the record had an Ext. Records
    /// the validation drops are skipped, interval ends clamped, and what was wrong is kept for
    /// [`RawIndex::record_warnings`].
    pub fn replay(
        &self,
        data: &[u8],
        advanced: impl FnMut(u64),
        f: impl FnMut(&Event, bool),
    ) -> Result<(), ProfilerError> {
        let (lo, hi) = (self.window.lo, self.window.hi);
        if !VALIDATE {
            self.replay_with(data, advanced, f, Unchecked)
        } else if self.mapper.narrow_over(lo, hi) {
            self.replay_with(data, advanced, f, Check::<true>::new(self.window))
        } else {
            self.replay_with(data, advanced, f, Check::<false>::new(self.window))
        }
    }

    /// [`RawIndex::replay`] with `check` deciding which records are kept as they are.
    fn replay_with(
        &self,
        data: &[u8],
        mut advanced: impl FnMut(u64),
        mut f: impl FnMut(&Event, bool),
        check: impl TimeCheck,
    ) -> Result<(), ProfilerError> {
        let mut reader = SliceReader::new(data, &self.path)?.verified_prefix(self.valid_bytes);
        let mut pending: BTreeMap<u32, ([u8; RECORD_SIZE], u64)> = BTreeMap::new();
        let mut found = Findings::default();
        loop {
            let at = reader.offset();
            let Some(chunk) = reader.next_ref() else {
                break;
            };
            advanced(reader.offset());
            let ChunkRef::Records { thread, body } = chunk else {
                continue;
            };
            let prev = pending.remove(&thread);
            // Records start after the chunk header and the `thread, reserved` words.
            let first = at + 16 + 8;
            if let Some(p) = self.pair_chunk(thread, prev, body, first, check, &mut found, &mut f) {
                pending.insert(thread, p);
            }
        }
        for (thread, (p, off)) in pending {
            self.emit(thread, &p, off, None, check, &mut found, &mut f);
        }
        let _ = self.records_checked.set(found.warnings(&self.path));
        Ok(())
    }

    /// Pairs the records of one Records chunk body of `thread` with their Ext records and
    /// emits them; `prev` is the thread's record (and its offset) left unpaired at the end of
    /// its previous chunk (its Ext may open this chunk). Returns the record left unpaired at
    /// the end of this one. `first` is the file offset of the body's first record.
    ///
    /// A record is paired with the record right after it when that is an Ext, looking ahead in
    /// the borrowed bytes; an Ext with no record before it is skipped.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn pair_chunk(
        &self,
        thread: u32,
        prev: Option<([u8; RECORD_SIZE], u64)>,
        body: &[u8],
        first: u64,
        check: impl TimeCheck,
        found: &mut Findings,
        f: &mut impl FnMut(&Event, bool),
    ) -> Option<([u8; RECORD_SIZE], u64)> {
        const EXT: u8 = Kind::Ext as u8;
        // The kind byte of a record.
        const KIND: usize = 20;
        let (recs, _) = body.as_chunks::<RECORD_SIZE>();
        let at = |i: usize| first + (i * RECORD_SIZE) as u64;
        let mut i = 0;
        if let Some((p, off)) = prev {
            let Some(b) = recs.first() else {
                return Some((p, off));
            };
            if b[KIND] == EXT {
                self.emit(thread, &p, off, Some(b), check, found, f);
                i = 1;
            } else {
                self.emit(thread, &p, off, None, check, found, f);
            }
        }
        while let Some(b) = recs.get(i) {
            if b[KIND] == EXT {
                i += 1;
                continue;
            }
            let Some(nb) = recs.get(i + 1) else {
                return Some((*b, at(i)));
            };
            if nb[KIND] == EXT {
                self.emit(thread, b, at(i), Some(nb), check, found, f);
                i += 2;
            } else {
                self.emit(thread, b, at(i), None, check, found, f);
                i += 1;
            }
        }
        None
    }

    /// Validates one paired record (at file offset `off`) and hands its event to `f`: the
    /// common case, a good record, is decided by `check` inside the decoder's match on the kind;
    /// any other goes to [`RawIndex::rejected`], out of line.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn emit(
        &self,
        thread: u32,
        b: &[u8; RECORD_SIZE],
        off: u64,
        xb: Option<&[u8; RECORD_SIZE]>,
        check: impl TimeCheck,
        found: &mut Findings,
        f: &mut impl FnMut(&Event, bool),
    ) {
        let r = Record::from_bytes(b);
        let ext = xb.map(|x| Record::from_bytes(x));
        match Event::decode_checked(thread, &r, ext.as_ref(), &self.mapper, check) {
            Some(e) => {
                if VALIDATE {
                    self.check_names(&e, off, found);
                }
                f(&e, xb.is_some())
            }
            // The record's bytes, not the record: they are in memory already.
            None if VALIDATE => self.rejected(thread, b, off, xb, found, f),
            None => {}
        }
    }

    /// A record [`Check`] did not pass (or an Ext with no record before it, which is skipped):
    /// notes what is wrong at `off` and drops it, or, for an interval ending before it starts
    /// (and otherwise in the window), clamps its end to its start and hands it to `f`.
    #[cold]
    #[inline(never)]
    fn rejected(
        &self,
        thread: u32,
        b: &[u8; RECORD_SIZE],
        off: u64,
        xb: Option<&[u8; RECORD_SIZE]>,
        found: &mut Findings,
        f: &mut impl FnMut(&Event, bool),
    ) {
        let r = Record::from_bytes(b);
        let ext = xb.map(|x| Record::from_bytes(x));
        let interval = match Kind::from_u8(r.kind) {
            None => return found.unknown_kind(r.kind, off),
            Some(Kind::Ext) => return,
            Some(k) => matches!(k, Kind::Range | Kind::Kernel | Kind::Comm),
        };
        if !self.window.contains(r.ts) || (interval && r.a > self.window.hi) {
            return Findings::note(&mut found.outside, off);
        }
        if interval && r.a < r.ts {
            Findings::note(&mut found.inverted, off);
            let clamped = Record { a: r.ts, ..r };
            let ext = ext.as_ref();
            if let Some(e) = Event::decode_checked(thread, &clamped, ext, &self.mapper, Unchecked) {
                self.check_names(&e, off, found);
                f(&e, ext.is_some());
            }
        }
    }

    /// Notes, for the event of the record at `off`, a name id the file does not define and a
    /// range category the format does not define (both kept: the name shows as unknown, the
    /// range as a user range).
    #[inline(always)]
    fn check_names(&self, e: &Event, off: u64, found: &mut Findings) {
        // Every string id of the event (0, "none", where it has fewer).
        let ids: [u32; 5] = match *e {
            Event::Range(r) => {
                if RangeCat::from_u8(r.cat).is_none() {
                    found.unknown_category(r.cat, off);
                }
                // Module, shapes, dtypes and stack are 0 unless the range is an op.
                [r.name, r.module, r.shapes, r.dtypes, r.stack]
            }
            Event::Kernel(k) => [k.name, 0, 0, 0, 0],
            Event::Comm(c) => [c.name, c.group, 0, 0, 0],
            Event::Memory(m) => [m.op, 0, 0, 0, 0],
            Event::Instant(_, _, name, _) | Event::Counter(_, _, name, _) => [name, 0, 0, 0, 0],
        };
        if let Some(&id) = ids.iter().find(|&&id| !self.names.known(id)) {
            found.unknown_string(id, off);
        }
    }
}

/// The test of pass 2's validation on the common case, a good record: its timestamps inside
/// the clock window `[lo, lo + span]`, an interval's end not before its start. One subtraction
/// and comparison per timestamp, one more comparison for an interval's order; what fails goes
/// to [`RawIndex::rejected`], which says why.
///
/// `WITHIN`: the window lies where [`TickMapper::to_ns`] takes its exact `i64` path
/// ([`TickMapper::narrow_over`], true of every collection on today's clocks), so
/// that the times of the records this check keeps are converted without that path's own tests.
#[derive(Debug, Clone, Copy)]
struct Check<const WITHIN: bool> {
    lo: u64,
    span: u64,
}

impl<const WITHIN: bool> Check<WITHIN> {
    fn new(w: ClockWindow) -> Check<WITHIN> {
        Check {
            lo: w.lo,
            span: w.hi.wrapping_sub(w.lo),
        }
    }
}

impl<const WITHIN: bool> TimeCheck for Check<WITHIN> {
    #[inline(always)]
    fn interval(self, ts: u64, a: u64) -> bool {
        // Offsets into the window, wrapping below `lo`: `lo <= ts <= a <= hi` exactly when
        // `s <= e <= span` (the window `scan` builds never wraps: `lo <= hi`).
        let s = ts.wrapping_sub(self.lo);
        let e = a.wrapping_sub(self.lo);
        s <= e && e <= self.span
    }

    #[inline(always)]
    fn instant(self, ts: u64) -> bool {
        ts.wrapping_sub(self.lo) <= self.span
    }

    #[inline(always)]
    fn to_ns(self, m: &TickMapper, ticks: u64) -> u64 {
        if WITHIN {
            m.ns_within(ticks)
        } else {
            m.to_ns(ticks)
        }
    }
}

/// Keeps every record as it is: the benchmark-only build's stand-in for [`Check`], and the
/// decoding of a record that [`RawIndex::rejected`] has clamped.
#[derive(Debug, Clone, Copy)]
struct Unchecked;

impl TimeCheck for Unchecked {
    #[inline(always)]
    fn interval(self, _: u64, _: u64) -> bool {
        true
    }
    #[inline(always)]
    fn instant(self, _: u64) -> bool {
        true
    }
}

impl Scan {
    /// Takes a Strings chunk's entries `v`, decoded from `payload` (which starts at file offset
    /// `at`): an id defined again keeps its first string and is noted.
    fn strings(&mut self, v: Vec<(u32, String)>, payload: &[u8], at: u64) {
        for (k, (id, s)) in v.into_iter().enumerate() {
            if !self.names.insert(id, s) {
                if self.dup_strings.1 == 0 {
                    self.dup_strings = (at + entry_offset(payload, k), 0, id);
                }
                self.dup_strings.1 += 1;
            }
        }
    }

    /// Takes a non-record chunk at offset `at`; true when reading must stop (End).
    fn other_chunk(&mut self, c: Chunk, at: u64, path: &Path) -> bool {
        match c {
            Chunk::Meta(_) if self.meta.is_some() => self.warnings.push(RawWarning {
                path: path.to_path_buf(),
                offset: at,
                kind: WarningKind::DuplicateMeta,
                count: 1,
            }),
            Chunk::Meta(v) => match CollectionMeta::from_json(&v) {
                Ok(m) => self.meta = Some((at, m)),
                Err(e) => {
                    self.meta_error
                        .get_or_insert(format!("the Meta chunk at byte {at} does not decode: {e}"));
                }
            },
            // Taken by `Scan::strings`, which needs the payload.
            Chunk::Strings(_) => {}
            Chunk::Calibration(c) => self.cals.push(c),
            Chunk::Thread { thread, name } => {
                self.threads.insert(thread, name);
            }
            Chunk::Truncated(t) => self.truncated = Some(t),
            Chunk::End { events, dropped } => {
                self.end = Some((events, dropped));
                return true;
            }
            Chunk::Records { .. } => {}
        }
        false
    }
}

fn no_meta_reason(meta_error: Option<&str>, corruption: Option<&Corruption>) -> String {
    match (meta_error, corruption) {
        (Some(e), _) => e.to_string(),
        (None, Some(c)) => format!("no metadata chunk before byte {}: {}", c.offset, c.reason),
        (None, None) => "no metadata chunk".into(),
    }
}

/// Offset in a Strings chunk's `payload` of its `k`-th entry (`u32 id, u32 len, bytes`).
#[cold]
fn entry_offset(payload: &[u8], k: usize) -> u64 {
    let mut i = 0usize;
    for _ in 0..k {
        let n = payload
            .get(i + 4..i + 8)
            .map_or(0, |b| u32::from_le_bytes(b.try_into().expect("4")) as usize);
        i = i.saturating_add(8).saturating_add(n);
    }
    i as u64
}

#[cfg(test)]
mod tests;
