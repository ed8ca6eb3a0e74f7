//! `rlprof report`'s reader of torch_npu's DB layout over mutated database files: the input is
//! written as `ascend_pytorch_profiler_0.db` and loaded the way `rlprof report` loads one.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rlprof_report::Limits;
use std::path::PathBuf;
use std::sync::OnceLock;

fn scratch() -> &'static (tempfile::TempDir, PathBuf) {
    static DIR: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = dir
            .path()
            .join("host_1_20250101000000000_ascend_pt/ASCEND_PROFILER_OUTPUT");
        std::fs::create_dir_all(&out).expect("output dir");
        let db = out.join("ascend_pytorch_profiler_0.db");
        (dir, db)
    })
}

fuzz_target!(|data: &[u8]| {
    let (_dir, db) = scratch();
    // A journal left by a previous input would be replayed into this one.
    for ext in ["-journal", "-wal", "-shm"] {
        let mut p = db.clone().into_os_string();
        p.push(ext);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
    if std::fs::write(db, data).is_ok() {
        let _ = rlprof_report::ascend_db_reader::load_db(db, "fuzz", &Limits::default());
    }
});
