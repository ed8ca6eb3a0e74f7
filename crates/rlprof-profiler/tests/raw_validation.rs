//! Raw files with valid checksums but impossible contents: each case gives one warning naming
//! the file and the byte offset, and the decoder drops or clamps the data.

use rlprof_profiler::plan::Tool;
use rlprof_profiler::raw::{CollectionMeta, Event, RawIndex, RawWarning, RawWriter, WarningKind};
use rlprof_profiler::record::{Kind, RangeCat, Record};
use rlprof_testkit::{RawFileBuilder, T0, raw_meta};
use std::path::{Path, PathBuf};

/// A crafted collection's metadata without plan steps.
fn meta(rank: u32) -> CollectionMeta {
    CollectionMeta {
        steps: vec![],
        ..raw_meta(rank)
    }
}

fn range(ts: u64, a: u64) -> Record {
    Record::new(ts, a, 1, Kind::Range, RangeCat::Phase as u8, 0)
}

/// A collection file (rate 1 ns per tick, clock window T0-1s..T0+3s once closed) in a
/// temporary directory, with the strings `phase` and `kernel`.
struct Crafted {
    _dir: tempfile::TempDir,
    f: RawFileBuilder,
}

impl Crafted {
    fn new(name: &str, meta: &CollectionMeta) -> Crafted {
        let dir = tempfile::tempdir().unwrap();
        let mut f = RawFileBuilder::create(&dir.path().join(name), meta);
        f.strings(&[(1, "phase"), (2, "kernel")]);
        Crafted { _dir: dir, f }
    }

    fn w(&mut self) -> &mut RawWriter {
        self.f.writer()
    }

    /// Writes one Records chunk; the byte offsets of its records.
    fn records(&mut self, recs: &[Record]) -> Vec<u64> {
        self.f.records(0, recs)
    }

    /// Closes the collection cleanly (second calibration, End).
    fn close(&mut self) {
        self.f.end(0);
    }

    fn path(&self) -> PathBuf {
        self.f.path().to_path_buf()
    }

    fn decode(&self) -> (RawIndex, Vec<Event>) {
        decode(&self.path())
    }
}

fn decode(path: &Path) -> (RawIndex, Vec<Event>) {
    let data = std::fs::read(path).unwrap();
    let idx = RawIndex::scan(&data, path, |_| {}, |_| {}).unwrap();
    let mut events = Vec::new();
    idx.replay(&data, |_| {}, |e, _| events.push(*e)).unwrap();
    (idx, events)
}

/// The only warning (about chunks or records), checked to name the file and its offset.
fn only_warning(idx: &RawIndex) -> &RawWarning {
    let all: Vec<&RawWarning> = idx.warnings.iter().chain(idx.record_warnings()).collect();
    assert_eq!(all.len(), 1, "{all:?}");
    let w = all[0];
    let text = w.to_string();
    assert!(text.contains(&idx.path.display().to_string()), "{text}");
    assert!(text.contains(&format!("byte {}", w.offset)), "{text}");
    w
}

fn ranges(events: &[Event]) -> Vec<(u64, u64)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Range(r) => Some((r.start, r.end)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_clean_collection_has_no_warning() {
    let mut c = Crafted::new("rank_0.rlraw", &meta(0));
    c.records(&[range(T0 + 10, T0 + 20)]);
    c.close();
    let (idx, events) = c.decode();
    assert!(idx.warnings.is_empty(), "{:?}", idx.warnings);
    assert!(idx.record_warnings().is_empty());
    assert_eq!(events.len(), 1);
}

#[test]
fn a_range_ending_before_it_starts_is_clamped_to_zero_length() {
    let mut c = Crafted::new("rank_0.rlraw", &meta(0));
    let at = c.records(&[
        range(T0 + 10, T0 + 20),
        range(T0 + 500, T0 + 100),
        range(T0 + 600, 0),
    ]);
    c.close();
    let (idx, events) = c.decode();
    let w = only_warning(&idx);
    assert_eq!(
        (&w.kind, w.offset, w.count),
        (&WarningKind::EndBeforeStart, at[1], 2)
    );
    let r = ranges(&events);
    assert_eq!(r.len(), 3);
    assert_eq!(r[0].1 - r[0].0, 10);
    assert_eq!(r[1].0, r[1].1, "clamped, not 1.8e16 us");
    assert_eq!(r[2].0, r[2].1);
}

#[test]
fn timestamps_outside_the_clock_window_are_dropped_with_their_ext() {
    let mut c = Crafted::new("rank_0.rlraw", &meta(0));
    let at = c.records(&[
        range(T0 + 10, T0 + 20),
        range(u64::MAX - 10, u64::MAX),
        Record::new(T0 + 30, u64::MAX, 2, Kind::Kernel, 0, 0),
        Record::new(7, 9, 0, Kind::Ext, 0, 0),
        Record::new(u64::MAX, 0, 0, Kind::Memory, 0, 0),
        Record::new(0xdead, 4096, 0, Kind::Ext, 0, 0),
        range(T0 + 40, T0 + 50),
    ]);
    c.close();
    let (idx, events) = c.decode();
    let w = only_warning(&idx);
    assert_eq!(
        (&w.kind, w.offset, w.count),
        (&WarningKind::OutsideClockWindow, at[1], 3)
    );
    assert_eq!(events.len(), 2, "{events:?}");
    let r = ranges(&events);
    assert_eq!((r[0].1 - r[0].0, r[1].1 - r[1].0), (10, 10));
}

#[test]
fn a_killed_collection_keeps_a_window_from_its_only_calibration() {
    let mut c = Crafted::new("rank_0.rlraw", &meta(0));
    let at = c.records(&[range(T0 + 10, T0 + 20), range(T0 - 2_000_000_000, T0)]);
    // No second calibration, no End: the process died.
    let (idx, events) = c.decode();
    assert!(idx.end.is_none());
    let w = only_warning(&idx);
    assert_eq!(
        (&w.kind, w.offset),
        (&WarningKind::OutsideClockWindow, at[1])
    );
    assert_eq!(ranges(&events).len(), 1);
}

#[test]
fn records_of_unknown_kind_are_dropped_with_their_ext() {
    let mut c = Crafted::new("rank_0.rlraw", &meta(0));
    let mut odd = range(T0 + 10, T0 + 20);
    odd.kind = 42;
    let at = c.records(&[
        odd,
        Record::new(5, 6, 0, Kind::Ext, 0, 0),
        range(T0 + 30, T0 + 35),
        odd,
    ]);
    c.close();
    let (idx, events) = c.decode();
    let w = only_warning(&idx);
    assert_eq!(
        (&w.kind, w.offset, w.count),
        (&WarningKind::UnknownKind(42), at[0], 2)
    );
    assert_eq!(
        ranges(&events),
        vec![(idx.wall(T0 + 30), idx.wall(T0 + 35))]
    );
}

#[test]
fn a_second_meta_chunk_is_ignored() {
    let mut c = Crafted::new("rank_0.rlraw", &meta(0));
    let at = c.w().bytes_written();
    let other = CollectionMeta {
        tool: Tool::Torch,
        rank: 5,
        ..meta(5)
    };
    c.w().write_meta(&other).unwrap();
    c.records(&[range(T0 + 10, T0 + 20)]);
    c.close();
    let (idx, events) = c.decode();
    let w = only_warning(&idx);
    assert_eq!((&w.kind, w.offset), (&WarningKind::DuplicateMeta, at));
    assert_eq!((idx.meta.tool, idx.meta.rank), (Tool::Npu, 0));
    assert_eq!(events.len(), 1);
}

#[test]
fn the_file_name_rank_wins_over_a_disagreeing_meta() {
    let mut c = Crafted::new("rank_0.rlraw", &meta(7));
    c.records(&[range(T0 + 10, T0 + 20)]);
    c.close();
    let (idx, _) = c.decode();
    let w = only_warning(&idx);
    // The Meta chunk follows the 16-byte header.
    assert_eq!(
        (&w.kind, w.offset),
        (&WarningKind::RankMismatch { meta: 7, file: 0 }, 16)
    );
    assert_eq!(idx.meta.rank, 0);
}

#[test]
fn data_after_the_end_chunk_is_ignored() {
    let mut c = Crafted::new("rank_0.rlraw", &meta(0));
    c.records(&[range(T0 + 10, T0 + 20)]);
    c.close();
    let end = c.w().bytes_written();
    c.records(&[range(T0 + 30, T0 + 40)]);
    c.w().write_end(5, 0).unwrap();
    let total = c.w().bytes_written();
    let (idx, events) = c.decode();
    let w = only_warning(&idx);
    assert_eq!(
        (&w.kind, w.offset, w.count),
        (&WarningKind::DataAfterEnd, end, total - end)
    );
    assert_eq!(idx.valid_bytes, end);
    assert_eq!(idx.end, Some((0, 0)));
    assert_eq!(events.len(), 1);
}

#[test]
fn a_file_without_readable_meta_is_unrecoverable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rank_0.rlraw");
    let mut w = RawWriter::create(&path).unwrap();
    w.write_meta(&serde_json::json!({"tool": "perf"})).unwrap();
    w.write_records(0, &[range(T0, T0 + 1)]).unwrap();
    drop(w);
    let data = std::fs::read(&path).unwrap();
    let err = RawIndex::scan(&data, &path, |_| {}, |_| {}).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("nothing recoverable") && text.contains("byte 16"),
        "{text}"
    );
}
