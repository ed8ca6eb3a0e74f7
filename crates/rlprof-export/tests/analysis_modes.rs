//! The analysis driver: tree discovery, idempotency, resumption, damaged raw data, empty
//! collections, no collections, read-only output.

mod support;

use rlprof_export::analyse::is_parsed;
use rlprof_export::{ExportError, Outcome, analyse_collection, analyse_tree};
use rlprof_profiler::collection::marker::{MARKER, WARNINGS};
use rlprof_profiler::plan::{Content, Level};
use std::sync::atomic::{AtomicUsize, Ordering};
use support::*;

fn two_rank_tree() -> (tempfile::TempDir, Vec<rlprof_profiler::CompletedCollection>) {
    let tmp = tempfile::tempdir().unwrap();
    let s = Script::npu(Level::Level1, &[Content::Npu, Content::Cpu]);
    let done = collect(tmp.path(), &s);
    assert_eq!(done.len(), 4, "2 steps x 2 ranks");
    (tmp, done)
}

#[test]
fn tree_parses_everything_in_parallel_then_does_nothing() {
    let (tmp, done) = two_rank_tree();
    let finished = AtomicUsize::new(0);
    let progress = |e: rlprof_export::TreeEvent| {
        if let rlprof_export::TreeEvent::Finished(_) = e {
            finished.fetch_add(1, Ordering::Relaxed);
        }
    };
    let r = analyse_tree(tmp.path(), 2, &progress).unwrap();
    assert_eq!((r.found, r.parsed(), r.skipped(), r.failed()), (4, 4, 0, 0));
    assert_eq!(finished.load(Ordering::Relaxed), 4);
    for c in &done {
        assert!(is_parsed(&c.dir));
    }
    let marker = std::fs::metadata(done[0].dir.join(MARKER))
        .unwrap()
        .modified()
        .unwrap();
    let again = analyse_tree(tmp.path(), 2, &|_| {}).unwrap();
    assert_eq!((again.found, again.parsed(), again.skipped()), (4, 0, 4));
    let marker2 = std::fs::metadata(done[0].dir.join(MARKER))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(marker, marker2, "a second run rewrites nothing");
    // A single collection directory as PATH works too.
    let one = analyse_tree(&done[0].dir, 1, &|_| {}).unwrap();
    assert_eq!((one.found, one.skipped()), (1, 1));
}

#[test]
fn interrupted_run_is_redone() {
    let (tmp, done) = two_rank_tree();
    let c = &done[0].dir;
    analyse_collection(c).unwrap();
    // Simulate an interruption: marker missing, a half-written temporary output left behind.
    std::fs::remove_file(c.join(MARKER)).unwrap();
    std::fs::create_dir(c.join("ASCEND_PROFILER_OUTPUT.tmp")).unwrap();
    std::fs::write(
        c.join("ASCEND_PROFILER_OUTPUT.tmp/kernel_details.csv"),
        "garbage",
    )
    .unwrap();
    let r = analyse_tree(tmp.path(), 2, &|_| {}).unwrap();
    assert_eq!(r.parsed(), 4);
    assert!(!c.join("ASCEND_PROFILER_OUTPUT.tmp").exists());
    let (h, rows) = read_csv(&c.join("ASCEND_PROFILER_OUTPUT/kernel_details.csv"));
    assert_eq!(h[0], "Step Id");
    assert_eq!(rows.len(), 10);
}

#[test]
fn truncated_raw_parses_the_valid_part_and_warns_with_offset() {
    let (_tmp, done) = two_rank_tree();
    let c = &done[0];
    let len = std::fs::metadata(&c.raw_file).unwrap().len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&c.raw_file)
        .unwrap();
    f.set_len(len - 40).unwrap(); // cuts into the last chunk(s)
    drop(f);
    let r = analyse_collection(&c.dir).unwrap();
    let w = std::fs::read_to_string(c.dir.join(WARNINGS)).unwrap();
    assert!(w.contains(&c.raw_file.display().to_string()), "{w}");
    assert!(w.contains("byte offset"), "{w}");
    assert!(!r.warnings.is_empty());
    assert!(
        c.dir
            .join("ASCEND_PROFILER_OUTPUT/kernel_details.csv")
            .is_file()
    );
}

#[test]
fn corrupted_chunk_in_the_middle_keeps_what_precedes_it() {
    let (_tmp, done) = two_rank_tree();
    let c = &done[1];
    let mut bytes = std::fs::read(&c.raw_file).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&c.raw_file, &bytes).unwrap();
    let r = analyse_collection(&c.dir).unwrap();
    let offset = r.ranks[0].valid_bytes;
    assert!(offset < bytes.len() as u64);
    let w = std::fs::read_to_string(c.dir.join(WARNINGS)).unwrap();
    assert!(w.contains(&format!("byte offset {offset}")), "{w}");
}

#[test]
fn nothing_recoverable_is_an_error_and_not_marked() {
    let (_tmp, done) = two_rank_tree();
    let c = &done[0];
    std::fs::write(&c.raw_file, b"not a raw file at all").unwrap();
    let e = analyse_collection(&c.dir).unwrap_err();
    assert!(matches!(e, ExportError::Unrecoverable { .. }), "{e}");
    assert!(e.to_string().contains(&c.raw_file.display().to_string()));
    assert!(!is_parsed(&c.dir));
}

#[test]
fn empty_collection_gives_header_only_outputs() {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = Script::npu(Level::Level0, &[Content::Npu, Content::Cpu]);
    s.world = 1;
    s.steps = vec![1];
    s.ops = 0;
    s.comms = 0;
    let done = collect(tmp.path(), &s);
    analyse_collection(&done[0].dir).unwrap();
    let (h, rows) = read_csv(
        &done[0]
            .dir
            .join("ASCEND_PROFILER_OUTPUT/kernel_details.csv"),
    );
    assert_eq!(h[0], "Step Id");
    assert!(rows.is_empty());
    let (_, steps) = read_csv(
        &done[0]
            .dir
            .join("ASCEND_PROFILER_OUTPUT/step_trace_time.csv"),
    );
    assert_eq!(steps.len(), 1, "the step itself was recorded");
    assert_eq!(steps[0][2], "0.000", "no kernel: zero computing");
    assert_eq!(
        steps[0][10], "",
        "no kernel: preparing time has no honest value"
    );
}

#[test]
fn no_collections_and_missing_path() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("a/b")).unwrap();
    let r = analyse_tree(tmp.path(), 1, &|_| {}).unwrap();
    assert_eq!(r.found, 0);
    let e = analyse_tree(&tmp.path().join("nope"), 1, &|_| {}).unwrap_err();
    assert!(matches!(e, ExportError::Missing(_)));
    let e = analyse_collection(&tmp.path().join("a")).unwrap_err();
    assert!(matches!(e, ExportError::NotACollection(_)));
}

#[test]
fn read_only_output_directory_fails_cleanly() {
    use std::os::unix::fs::PermissionsExt;
    let (_tmp, done) = two_rank_tree();
    let c = &done[0].dir;
    std::fs::set_permissions(c, std::fs::Permissions::from_mode(0o555)).unwrap();
    let probe = c.join("probe");
    if std::fs::write(&probe, b"x").is_ok() {
        let _ = std::fs::remove_file(&probe);
        std::fs::set_permissions(c, std::fs::Permissions::from_mode(0o755)).unwrap();
        // Root ignores permissions: make the first output unwritable another way (a
        // directory holds its name, so the rename into place fails), the same error path.
        eprintln!("running as root: simulating an unwritable output instead of chmod");
        // The collection's rank (done[0] is whichever rank finished first).
        let raw = rlprof_export::analyse::raw_files(c);
        let name = raw[0].file_name().unwrap().to_string_lossy().into_owned();
        let rank = name.trim_start_matches("rank_").trim_end_matches(".rlraw");
        std::fs::create_dir_all(c.join(format!("profiler_info_{rank}.json/x"))).unwrap();
    }
    let r = analyse_tree(c, 1, &|_| {}).unwrap();
    assert_eq!(r.failed(), 1);
    let Outcome::Failed(d, e) = &r.outcomes[0] else {
        panic!()
    };
    assert_eq!(d, c);
    assert!(matches!(e, ExportError::Io { .. }), "{e}");
    std::fs::set_permissions(c, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert!(!is_parsed(c));
}
