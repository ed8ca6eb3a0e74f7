//! Crafted raw contents (valid checksums, contents the profiler never writes): unknown range
//! categories, string ids the file does not define or defines twice, huge string ids, and file
//! names whose rank is not a rank. Each is warned about with the file and the byte offset, or
//! refused with an error naming the file.

use rlprof_profiler::collection::names::{RankFile, rank_file};
use rlprof_profiler::raw::{CollectionMeta, Event, RawIndex, RawWarning, RawWriter, WarningKind};
use rlprof_profiler::record::{Kind, RangeCat, Record};
use rlprof_testkit::{RawFileBuilder, T0, raw_meta};
use std::path::{Path, PathBuf};

fn range(ts: u64, name: u32, cat: u8) -> Record {
    Record::new(ts, ts + 100, name, Kind::Range, cat, 0)
}

/// A raw file `name` in a temporary directory, written by `body` between the Meta chunk (and
/// the first calibration) and the end (second calibration, End).
struct File {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl File {
    fn new(name: &str, meta: &CollectionMeta, body: impl FnOnce(&mut RawWriter)) -> File {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        let mut f = RawFileBuilder::create(&path, meta);
        body(f.writer());
        f.end(0);
        File { _dir: dir, path }
    }
}

/// Offset of the first record of the Records chunk the writer writes next.
fn next_records(w: &RawWriter) -> u64 {
    w.bytes_written() + 16 + 8
}

fn decode(path: &Path) -> Result<(RawIndex, Vec<Event>), String> {
    let data = std::fs::read(path).unwrap();
    let idx = RawIndex::scan(&data, path, |_| {}, |_| {}).map_err(|e| e.to_string())?;
    let mut events = Vec::new();
    idx.replay(&data, |_| {}, |e, _| events.push(*e)).unwrap();
    Ok((idx, events))
}

/// Every warning (chunks, then records), each checked to name the file and its byte offset.
fn warnings(idx: &RawIndex) -> Vec<&RawWarning> {
    let all: Vec<&RawWarning> = idx.warnings.iter().chain(idx.record_warnings()).collect();
    for w in &all {
        let text = w.to_string();
        assert!(text.contains(&idx.path.display().to_string()), "{text}");
        assert!(text.contains(&format!("byte {}:", w.offset)), "{text}");
    }
    all
}

#[test]
fn a_range_of_unknown_category_is_warned_about_and_kept_as_a_user_range() {
    let mut at = 0;
    let f = File::new("rank_0.rlraw", &raw_meta(0), |w| {
        w.write_strings([(1, "ProfilerStep#1"), (2, "generate_sequences")])
            .unwrap();
        at = next_records(w);
        w.write_records(
            0,
            &[
                range(T0 + 10, 1, 200),
                range(T0 + 20, 2, 200),
                range(T0 + 30, 2, RangeCat::RoleCall as u8),
            ],
        )
        .unwrap();
    });
    let (idx, events) = decode(&f.path).unwrap();
    let ws = warnings(&idx);
    assert_eq!(ws.len(), 1, "{ws:?}");
    assert_eq!(
        (&ws[0].kind, ws[0].offset, ws[0].count),
        (&WarningKind::UnknownRangeCategory(200), at, 2)
    );
    assert!(
        ws[0].to_string().contains("category 200"),
        "{}",
        ws[0].to_string()
    );
    let cats: Vec<u8> = events
        .iter()
        .filter_map(|e| match e {
            Event::Range(r) => Some(r.cat),
            _ => None,
        })
        .collect();
    assert_eq!(cats, vec![200, 200, RangeCat::RoleCall as u8]);
}

#[test]
fn string_ids_missing_from_the_strings_table_are_warned_about() {
    let mut at = 0;
    let f = File::new("rank_0.rlraw", &raw_meta(0), |w| {
        w.write_strings([(1, "ProfilerStep#1"), (2, "aten::mm")])
            .unwrap();
        at = next_records(w);
        w.write_records(
            0,
            &[
                range(T0 + 10, 1, RangeCat::Step as u8),
                // The profiler's interner never reaches this id.
                range(T0 + 20, 2_147_483_632, RangeCat::User as u8),
                // An op whose Ext names module id 77, which is not defined either.
                range(T0 + 30, 2, RangeCat::Op as u8),
                Record::new(77, 0, 0, Kind::Ext, 0, 0),
                // Id 0 is the empty string: always known.
                Record::new(T0 + 40, T0 + 41, 0, Kind::Kernel, 0, 0),
            ],
        )
        .unwrap();
    });
    let (idx, events) = decode(&f.path).unwrap();
    let ws = warnings(&idx);
    assert_eq!(ws.len(), 1, "{ws:?}");
    assert_eq!(
        (&ws[0].kind, ws[0].offset, ws[0].count),
        (
            &WarningKind::UnknownString { id: 2_147_483_632 },
            at + 24,
            2
        )
    );
    assert_eq!(events.len(), 4, "kept, with unknown names: {events:?}");
    assert_eq!(idx.string(2_147_483_632), None);
}

#[test]
fn a_string_id_defined_twice_keeps_its_first_string_and_is_warned_about() {
    let mut at = 0;
    let f = File::new("rank_0.rlraw", &raw_meta(0), |w| {
        w.write_strings([(1, "first"), (2, "two")]).unwrap();
        // The second chunk's second entry redefines id 1: it starts after the chunk header and
        // the first entry (id, length, 3 bytes).
        at = w.bytes_written() + 16 + 8 + 3;
        w.write_strings([(3, "new"), (1, "second"), (2, "again")])
            .unwrap();
        w.write_records(0, &[range(T0 + 10, 1, RangeCat::User as u8)])
            .unwrap();
    });
    let (idx, _) = decode(&f.path).unwrap();
    let ws = warnings(&idx);
    assert_eq!(ws.len(), 1, "{ws:?}");
    assert_eq!(
        (&ws[0].kind, ws[0].offset, ws[0].count),
        (&WarningKind::DuplicateString { id: 1 }, at, 2)
    );
    assert_eq!(
        (idx.string(1), idx.string(2), idx.string(3)),
        (Some("first"), Some("two"), Some("new"))
    );
}

#[test]
fn huge_string_ids_are_read_without_a_huge_table() {
    let f = File::new("rank_0.rlraw", &raw_meta(0), |w| {
        w.write_strings([(0xffff_fff0, "far"), (u32::MAX, "last")])
            .unwrap();
        w.write_records(0, &[range(T0 + 10, u32::MAX, RangeCat::User as u8)])
            .unwrap();
    });
    let (idx, events) = decode(&f.path).unwrap();
    assert!(warnings(&idx).is_empty());
    assert_eq!(idx.string(0xffff_fff0), Some("far"));
    assert_eq!(idx.name(u32::MAX), "last");
    assert_eq!(events.len(), 1);
}

#[test]
fn file_name_ranks_that_are_not_ranks_are_refused() {
    for (name, why) in [
        ("rank_4294967296.rlraw", "out of range"),
        ("rank_18446744073709551616.rlraw", "out of range"),
        ("rank_-1.rlraw", "negative"),
        ("rank_x.rlraw", "not a number"),
        ("rank_01.rlraw", "leading zeros"),
    ] {
        let f = File::new(name, &raw_meta(0), |w| {
            w.write_strings([(1, "r")]).unwrap();
            w.write_records(0, &[range(T0 + 10, 1, RangeCat::User as u8)])
                .unwrap();
        });
        assert!(matches!(rank_file(&f.path), RankFile::Invalid(_)), "{name}");
        let err = decode(&f.path).unwrap_err();
        assert!(err.contains(&f.path.display().to_string()), "{err}");
        assert!(err.contains(why), "{name}: {err}");
        assert!(err.contains("Meta chunk (byte 16) says rank 0"), "{err}");
        assert!(err.contains("refused"), "{err}");
    }
}

#[test]
fn the_largest_rank_and_names_that_are_not_rank_files_are_read() {
    let f = File::new("rank_4294967295.rlraw", &raw_meta(u32::MAX), |_| {});
    let (idx, _) = decode(&f.path).unwrap();
    assert_eq!(idx.meta.rank, u32::MAX);
    assert!(warnings(&idx).is_empty());
    // A file given by another name (`rlprof report some.rlraw`) keeps its Meta rank.
    let f = File::new("copy.rlraw", &raw_meta(9), |_| {});
    let (idx, _) = decode(&f.path).unwrap();
    assert_eq!(idx.meta.rank, 9);
}
