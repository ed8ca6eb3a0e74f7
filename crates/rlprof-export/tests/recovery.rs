//! Interrupted collections, concurrent parsers and hostile host names, at the library level:
//! - an unfinished (`*.tmp`) collection nobody writes is finished under its final name (never
//!   over existing data), parsed, and marked partial when its data stops early;
//! - one whose lock is held (a writer in flight) is left alone;
//! - a marker that lists a missing output makes the collection parse again;
//! - parsers racing on one tree end in the state of one clean run;
//! - host names from raw metadata never steer an output outside its place.

mod support;

use rlprof_export::analyse::is_parsed;
use rlprof_export::{Outcome, analyse_collection, analyse_tree};
use rlprof_profiler::collection::marker::{MARKER, WARNINGS};
use rlprof_profiler::plan::{Content, Level};
use std::path::{Path, PathBuf};
use support::*;

fn one_collection() -> (tempfile::TempDir, rlprof_profiler::CompletedCollection) {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = Script::npu(Level::Level1, &[Content::Npu, Content::Cpu]);
    s.world = 1;
    s.steps = vec![1];
    let mut done = collect(tmp.path(), &s);
    (tmp, done.remove(0))
}

/// Turns a finished collection back into what a killed process leaves: the `.tmp` name and a
/// raw file cut `cut` bytes before its end (0: only the rename is missing).
fn unfinish(c: &rlprof_profiler::CompletedCollection, cut: u64) -> PathBuf {
    let mut name = c.dir.file_name().unwrap().to_os_string();
    name.push(".tmp");
    let tmp = c.dir.with_file_name(name);
    std::fs::rename(&c.dir, &tmp).unwrap();
    let raw = tmp.join("rlprof_raw").join(c.raw_file.file_name().unwrap());
    let len = std::fs::metadata(&raw).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&raw).unwrap();
    f.set_len(len - cut).unwrap();
    tmp
}

fn marker(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join(MARKER)).unwrap()).unwrap()
}

#[test]
fn killed_collection_is_recovered_parsed_and_marked_partial() {
    let (tmp, c) = one_collection();
    let unfinished = unfinish(&c, 30);
    let r = analyse_tree(tmp.path(), 1, &|_| {}).unwrap();
    assert_eq!((r.found, r.parsed(), r.failed()), (1, 1, 0));
    assert!(!unfinished.exists(), "the .tmp directory was finished");
    assert!(
        c.dir.is_dir(),
        "under the name the profiler would have used"
    );
    assert!(is_parsed(&c.dir));
    let m = marker(&c.dir);
    assert_eq!(m["partial"], true, "{m}");
    assert_eq!(
        m["recovered_from"],
        unfinished.file_name().unwrap().to_string_lossy().as_ref()
    );
    let w = std::fs::read_to_string(c.dir.join(WARNINGS)).unwrap();
    assert!(
        w.starts_with("NOTE: partial collection (partial: true)"),
        "{w}"
    );
    assert!(w.contains("byte offset"), "{w}");
    let md: serde_json::Value =
        serde_json::from_slice(&std::fs::read(c.dir.join("profiler_metadata.json")).unwrap())
            .unwrap();
    assert_eq!(md["partial"], true, "{md}");
    assert!(
        c.dir
            .join("ASCEND_PROFILER_OUTPUT/kernel_details.csv")
            .is_file()
    );
    // The report's advice (`rlprof analyse <the .tmp dir>`) keeps working afterwards too.
    let again = analyse_tree(tmp.path(), 1, &|_| {}).unwrap();
    assert_eq!((again.found, again.skipped()), (1, 1));
}

#[test]
fn unfinished_only_by_the_rename_is_recovered_but_complete() {
    let (_tmp, c) = one_collection();
    let unfinished = unfinish(&c, 0);
    let r = analyse_collection(&unfinished).unwrap();
    assert_eq!(r.dir, c.dir);
    assert!(!r.partial, "the end marker is there: nothing was lost");
    assert!(r.recovered_from.is_some());
    assert_eq!(marker(&c.dir)["partial"], false);
}

#[test]
fn recovery_never_renames_over_existing_data() {
    let (tmp, c) = one_collection();
    let unfinished = unfinish(&c, 30);
    // Someone created the final name meanwhile, holding other data.
    std::fs::create_dir_all(c.dir.join("rlprof_raw")).unwrap();
    std::fs::write(c.dir.join("rlprof_raw/rank_0.rlraw"), b"other data").unwrap();
    let r = analyse_collection(&unfinished).unwrap();
    assert_ne!(r.dir, c.dir);
    assert!(r.dir.starts_with(tmp.path()));
    assert_eq!(
        std::fs::read(c.dir.join("rlprof_raw/rank_0.rlraw")).unwrap(),
        b"other data"
    );
    assert!(r.partial);
    assert!(is_parsed(&r.dir));
}

#[test]
fn collection_in_flight_is_left_alone() {
    let (tmp, c) = one_collection();
    let unfinished = unfinish(&c, 30);
    // A live writer holds the collection's lock.
    let lock = std::fs::File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(unfinished.join(rlprof_profiler::collection::lock::COLLECTION_LOCK))
        .unwrap();
    lock.lock().unwrap();
    let r = analyse_tree(tmp.path(), 1, &|_| {}).unwrap();
    assert_eq!((r.found, r.busy(), r.failed()), (1, 1, 0));
    assert!(matches!(&r.outcomes[0], Outcome::Busy(d) if d == &unfinished));
    assert!(unfinished.is_dir(), "not renamed under its writer");
    assert!(!unfinished.join(MARKER).exists());
    drop(lock);
    let r = analyse_tree(tmp.path(), 1, &|_| {}).unwrap();
    assert_eq!(r.parsed(), 1, "recovered once the writer is gone");
}

#[test]
fn marker_listing_a_missing_output_is_redone() {
    let (_tmp, c) = one_collection();
    analyse_collection(&c.dir).unwrap();
    let files = marker(&c.dir)["files"].as_array().unwrap().clone();
    assert!(
        files
            .iter()
            .any(|f| f == "ASCEND_PROFILER_OUTPUT/kernel_details.csv")
    );
    std::fs::remove_file(c.dir.join("ASCEND_PROFILER_OUTPUT/kernel_details.csv")).unwrap();
    assert!(!is_parsed(&c.dir));
    let r = analyse_collection(&c.dir).unwrap();
    assert!(!r.already_done);
    assert!(
        c.dir
            .join("ASCEND_PROFILER_OUTPUT/kernel_details.csv")
            .is_file()
    );
    assert!(is_parsed(&c.dir));
}

/// Every file below `root` (lock files and staging leftovers included) with its content;
/// the root path inside files is replaced so that two trees compare.
pub fn snapshot(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    let prefix = root.to_string_lossy().into_owned();
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
                continue;
            }
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            let bytes = std::fs::read(&p).unwrap();
            let text = String::from_utf8_lossy(&bytes).replace(&prefix, "ROOT");
            out.push((rel, text.into_bytes()));
        }
    }
    out.sort();
    out
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), &t).unwrap();
        }
    }
}

#[test]
fn racing_parsers_end_like_one_clean_run() {
    let src = tempfile::tempdir().unwrap();
    let mut s = Script::npu(Level::Level1, &[Content::Npu, Content::Cpu]);
    s.steps = vec![1, 2, 3];
    let done = collect(src.path(), &s);
    unfinish(&done[0], 30);
    let clean = tempfile::tempdir().unwrap();
    copy_tree(src.path(), clean.path());
    let r = analyse_tree(clean.path(), 1, &|_| {}).unwrap();
    assert_eq!(r.parsed(), done.len(), "{:#?}\n{done:#?}", r.outcomes);
    let want = snapshot(clean.path());
    for parsers in [2, 4] {
        let raced = tempfile::tempdir().unwrap();
        copy_tree(src.path(), raced.path());
        std::thread::scope(|sc| {
            for _ in 0..parsers {
                sc.spawn(|| {
                    let r = analyse_tree(raced.path(), 2, &|_| {}).unwrap();
                    for o in &r.outcomes {
                        assert!(!matches!(o, Outcome::Failed(..)), "{o:?}");
                    }
                });
            }
        });
        let got = snapshot(raced.path());
        let names = |v: &[(String, Vec<u8>)]| v.iter().map(|f| f.0.clone()).collect::<Vec<_>>();
        assert_eq!(names(&got), names(&want), "{parsers} parsers: same files");
        for ((name, a), (_, b)) in got.iter().zip(&want) {
            assert!(a == b, "{parsers} parsers: {name} differs");
        }
    }
}

/// A raw file whose metadata claims `host`, tool torch.
fn hostile_raw(dir: &Path, host: &str) {
    use rlprof_profiler::raw::RawWriter;
    std::fs::create_dir_all(dir.join("rlprof_raw")).unwrap();
    let mut w = RawWriter::create(&dir.join("rlprof_raw/rank_0.rlraw")).unwrap();
    w.write_meta(&serde_json::json!({
        "tool": "torch", "level": "level0", "rank": 0, "host": host, "pid": 7,
        "steps": [1], "start_wall_ns": 1_000_000_000u64, "start_mono_ns": 0u64,
    }))
    .unwrap();
    w.write_calibration(rlprof_profiler::clock::calibrate())
        .unwrap();
    w.write_end(0, 0).unwrap();
}

#[test]
fn hostile_host_names_stay_beside_the_collection() {
    let long = "h".repeat(10 * 1024);
    let hosts = [
        "../../escaped",
        "/tmp/absolute-escape",
        "nul\0byte/..",
        long.as_str(),
        "..",
        "",
    ];
    for host in hosts {
        let root = tempfile::tempdir().unwrap();
        let role = root.path().join("save/step1/e2e");
        let coll = role.join("h_7_20260101000000000_torch_pt");
        hostile_raw(&coll, host);
        let r = analyse_collection(&coll).unwrap();
        let outs = &r.ranks[0].outputs;
        assert_eq!(outs.len(), 1);
        let out = &outs[0];
        assert_eq!(out.parent().unwrap(), role, "{host:?}: {out:?}");
        let name = out.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)),
            "{name}"
        );
        assert!(!name.starts_with('.'), "{name}");
        assert!(name.len() < 200, "{} bytes", name.len());
        assert!(out.is_file());
        // Nothing else appeared anywhere: the role directory holds the trace and the collection.
        let mut entries: Vec<String> = std::fs::read_dir(&role)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        entries.sort();
        assert_eq!(entries.len(), 2, "{entries:?}");
        assert!(!root.path().join("escaped").exists());
    }
    assert!(!Path::new("/tmp/absolute-escape_7_rank0.1000000000.pt.trace.json.gz").exists());
}

/// A raw file's recorded export name is untrusted: a path or a dot name is refused and the
/// trace keeps the export's own name, beside the collection.
#[test]
fn hostile_export_names_stay_beside_the_collection() {
    use rlprof_profiler::raw::RawWriter;
    for name in [
        "../../escaped.json.gz",
        "/tmp/abs-escape.json.gz",
        "..",
        ".hidden.json.gz",
        "x/y.pickle",
    ] {
        let root = tempfile::tempdir().unwrap();
        let save = root.path().join("save");
        let coll = save.join("a_train_step1_rank0-of-1_pid7_20260101000000000_torch_pt");
        std::fs::create_dir_all(coll.join("rlprof_raw")).unwrap();
        let mut w = RawWriter::create(&coll.join("rlprof_raw/rank_0.rlraw")).unwrap();
        w.write_meta(&serde_json::json!({
            "tool": "torch", "level": "level0", "rank": 0, "host": "h", "pid": 7,
            "steps": [1], "start_wall_ns": 1_000_000_000u64, "start_mono_ns": 0u64,
            "layout": "verl", "export_name": name,
        }))
        .unwrap();
        w.write_calibration(rlprof_profiler::clock::calibrate())
            .unwrap();
        w.write_end(0, 0).unwrap();
        let r = analyse_collection(&coll).unwrap();
        let out = &r.ranks[0].outputs[0];
        assert_eq!(out.parent().unwrap(), save, "{name:?}: {out:?}");
        assert_eq!(
            out.file_name().unwrap().to_string_lossy(),
            "h_7_rank0.1000000000.pt.trace.json.gz",
            "{name:?}"
        );
        assert!(!root.path().join("escaped.json.gz").exists());
    }
    assert!(!Path::new("/tmp/abs-escape.json.gz").exists());
}

/// A recorded export name that passes the check names the trace, beside the collection.
#[test]
fn verl_export_name_names_the_trace() {
    use rlprof_profiler::raw::RawWriter;
    let root = tempfile::tempdir().unwrap();
    let coll = root
        .path()
        .join("a_train_step1_rank0-of-1_pid7_20260101000000000_torch_pt");
    std::fs::create_dir_all(coll.join("rlprof_raw")).unwrap();
    let mut w = RawWriter::create(&coll.join("rlprof_raw/rank_0.rlraw")).unwrap();
    w.write_meta(&serde_json::json!({
        "tool": "torch", "level": "level0", "rank": 0, "host": "h", "pid": 7,
        "steps": [1], "start_wall_ns": 1_000_000_000u64, "start_mono_ns": 0u64,
        "layout": "verl", "export_name": "a_train_step1_rank0-of-1_pid7_20260101000000000.json.gz",
    }))
    .unwrap();
    w.write_calibration(rlprof_profiler::clock::calibrate())
        .unwrap();
    w.write_end(0, 0).unwrap();
    let r = analyse_collection(&coll).unwrap();
    assert_eq!(
        r.ranks[0].outputs,
        vec![
            root.path()
                .join("a_train_step1_rank0-of-1_pid7_20260101000000000.json.gz")
        ]
    );
}
