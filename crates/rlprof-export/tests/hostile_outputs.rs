//! What `analyse` writes stays in its place and tells the truth (issue 28): a planted link never
//! makes it create a file elsewhere, and a snapshot that failed to write is never replaced by an
//! empty one under the final name.

mod support;

use rlprof_export::analyse_collection;
use rlprof_profiler::collection::lock::COLLECTION_LOCK;
use rlprof_profiler::collection::marker::MARKER;
use rlprof_profiler::plan::{Content, Level, Tool};
use std::process::Command;
use support::*;

#[test]
fn a_planted_lock_link_creates_nothing_outside_the_tree() {
    let tmp = tempfile::tempdir().unwrap();
    let save = tmp.path().join("save");
    let mut s = Script::npu(Level::Level0, &[Content::Cpu]);
    s.world = 1;
    s.steps = vec![1];
    let done = collect(&save, &s);
    let dir = &done[0].dir;
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let target = elsewhere.join("X");
    let lock = dir.join(COLLECTION_LOCK);
    let _ = std::fs::remove_file(&lock);
    std::os::unix::fs::symlink(&target, &lock).unwrap();
    let r = analyse_collection(dir);
    assert!(!target.exists(), "analyse created {}", target.display());
    assert!(r.is_err(), "a link in place of the lock is refused");
    assert!(
        std::fs::symlink_metadata(&lock)
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

/// The child half of the next test: analyses `dir` with a file size limit (`RLIMIT_FSIZE`, as
/// a full disk: writes past it fail with EFBIG) and exits 0 on success, 3 on an error.
const CHILD_ENV: &str = "RLPROF_TEST_FSIZE_CHILD_DIR";
const FSIZE: u64 = 1024;

#[test]
fn a_snapshot_that_failed_to_write_is_not_replaced_by_an_empty_one() {
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        // SAFETY: setrlimit / signal on this child process only, before any file is written.
        unsafe {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let lim = libc::rlimit {
                rlim_cur: FSIZE,
                rlim_max: FSIZE,
            };
            assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &lim), 0);
        }
        let code = match analyse_collection(std::path::Path::new(&dir)) {
            Ok(_) => 0,
            Err(e) => {
                eprintln!("analyse failed as expected: {e}");
                3
            }
        };
        std::process::exit(code);
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut s = Script::npu(Level::Level0, &[Content::Memory, Content::Cpu]);
    s.tool = Tool::TorchMemory;
    s.world = 1;
    s.steps = vec![1];
    s.ops = 60;
    let done = collect(tmp.path(), &s);
    let dir = &done[0].dir;
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "a_snapshot_that_failed_to_write_is_not_replaced_by_an_empty_one",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    // verl's layout: the window's one snapshot, beside the collection.
    let snap =
        dir.parent()
            .unwrap()
            .join(rlprof_profiler::collection::names::memory_snapshot_name(
                0,
                std::process::id(),
            ));
    assert!(
        !snap.exists(),
        "{} left under its final name ({} B)",
        snap.display(),
        std::fs::metadata(&snap).map(|m| m.len()).unwrap_or(0)
    );
    assert!(
        !dir.join(MARKER).exists(),
        "no parsed marker on a failed export"
    );
    // With room again, `analyse` writes the real snapshot.
    let r = analyse_collection(dir).unwrap();
    assert_eq!(r.ranks[0].outputs, vec![snap.clone()]);
    assert!(std::fs::metadata(&snap).unwrap().len() > FSIZE);
}
