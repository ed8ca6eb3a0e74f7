//! Crafted raw files through `rlprof report` and `rlprof analyse`: both agree on which files of
//! a collection are rank files, refuse the same ones, and pass the decoder's warnings on.

use rlprof_profiler::record::{Kind, RangeCat, Record};
use rlprof_testkit::{RawFileBuilder, T0, raw_meta};
use std::path::{Path, PathBuf};

/// Writes a clean raw file (rank `rank`, plan steps `[1]`) holding `recs` on thread 0.
fn write(path: &Path, rank: u32, strings: &[(u32, &str)], recs: &[Record]) {
    let mut f = RawFileBuilder::create(path, &raw_meta(rank));
    f.strings(strings);
    f.records(0, recs);
    f.end(recs.len() as u64);
}

fn step(ts: u64, cat: u8) -> Record {
    Record::new(ts, ts + 1000, 1, Kind::Range, cat, 0)
}

fn collection(root: &Path) -> PathBuf {
    let dir = root.join("host_1_2_ascend_pt");
    std::fs::create_dir_all(dir.join("rlprof_raw")).unwrap();
    dir
}

#[test]
fn report_and_analyse_agree_on_rank_files() {
    let root = tempfile::tempdir().unwrap();
    let dir = collection(root.path());
    let good = [(1, "ProfilerStep#1")];
    let recs = [step(T0 + 10, RangeCat::Step as u8)];
    let raw = dir.join("rlprof_raw");
    for name in [
        "rank_0.rlraw",
        "rank_1.rlraw",
        "rank_-1.rlraw",
        "rank_4294967296.rlraw",
        "rank_01.rlraw",
        "notes.rlraw",
    ] {
        write(&raw.join(name), 0, &good, &recs);
    }
    let refused = ["rank_-1.rlraw", "rank_01.rlraw", "rank_4294967296.rlraw"];

    let files = rlprof_export::analyse::raw_files(&dir);
    assert_eq!(
        files,
        vec![raw.join("rank_0.rlraw"), raw.join("rank_1.rlraw")]
    );
    let bad: Vec<PathBuf> = rlprof_export::analyse::refused_raw_files(&dir)
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    assert_eq!(bad, refused.map(|n| raw.join(n)));

    let loaded = rlprof_report::load(root.path(), &rlprof_report::Limits::default()).unwrap();
    let mut ranks: Vec<u32> = loaded.profiles.iter().map(|p| p.rank).collect();
    ranks.sort();
    assert_eq!(ranks, vec![0, 1], "rank_1.rlraw says rank 0: the name wins");
    let mut skipped: Vec<&PathBuf> = loaded.skipped.iter().map(|s| &s.path).collect();
    skipped.sort();
    assert_eq!(skipped, bad.iter().collect::<Vec<_>>());
    for s in &loaded.skipped {
        assert!(s.reason.contains("refused"), "{}", s.reason);
    }

    let rep = rlprof_export::analyse_collection(&dir).unwrap();
    let mut ranks: Vec<u32> = rep.ranks.iter().map(|r| r.rank).collect();
    ranks.sort();
    assert_eq!(ranks, vec![0, 1]);
    for name in refused {
        let w = rep
            .warnings
            .iter()
            .find(|w| w.contains(name))
            .unwrap_or_else(|| panic!("{name} not in {:?}", rep.warnings));
        assert!(w.contains("skipped") && w.contains("refused"), "{w}");
    }
    assert!(!rep.warnings.iter().any(|w| w.contains("notes.rlraw")));
}

#[test]
fn a_step_of_unknown_category_is_named_instead_of_a_stopped_run() {
    let root = tempfile::tempdir().unwrap();
    let dir = collection(root.path());
    let path = dir.join("rlprof_raw/rank_0.rlraw");
    // The step range's category byte is 200, and a range names string id 2^31 - 16.
    write(
        &path,
        0,
        &[(1, "ProfilerStep#1"), (2, "generate_sequences")],
        &[
            step(T0 + 10, 200),
            Record::new(T0 + 20, T0 + 30, 2_147_483_632, Kind::Range, 8, 0),
        ],
    );
    // Header 16, then Meta, Calibration and Strings chunks: the records follow their chunk's
    // header and `thread, reserved`.
    let data = std::fs::read(&path).unwrap();
    let first = data.len() as u64 - 2 * 24 - (16 + 24) - (16 + 16);

    let p = rlprof_report::raw_input::load_raw(&path, "g").unwrap();
    let notes = p.notes.join("\n");
    assert!(
        notes.contains(&format!("byte {first}: 1 range(s) of unknown category")),
        "{notes}"
    );
    assert!(
        notes.contains(&format!("byte {}: 1 record(s) name string ids", first + 24)),
        "{notes}"
    );

    let rep = rlprof_export::analyse_collection(&dir).unwrap();
    let all = rep.warnings.join("\n");
    assert!(all.contains("category 200"), "{all}");
    assert!(all.contains("id 2147483632"), "{all}");
    assert!(
        all.contains(&format!(
            "planned step(s) [1] not found: 1 range(s) of unknown category, the first at byte {first}"
        )),
        "{all}"
    );
    assert!(!all.contains("never finished"), "{all}");
}
