//! Test data made with the profiler's own API (the scripted run of [`rlprof_testkit::Script`],
//! re-exported here), CSV reading and the consumer venv.
#![allow(dead_code)]

pub(crate) use rlprof_testkit::{Script, collect};
use std::path::Path;

/// Reads a CSV: (header, rows).
pub(crate) fn read_csv(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let mut r = csv::Reader::from_path(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let h = r.headers().unwrap().iter().map(str::to_string).collect();
    let rows = r
        .records()
        .map(|x| x.unwrap().iter().map(str::to_string).collect())
        .collect();
    (h, rows)
}

/// The Python of the consumer venv (`RLPROF_VENV`, default `/opt/rlprof-venv`) that holds
/// msprof-analyze and HolisticTraceAnalysis. Tests calling it are `#[ignore = "needs ..."]` and run
/// by name in CI; run without the venv they fail, naming what is missing.
pub(crate) fn consumer_python() -> std::path::PathBuf {
    let venv = std::env::var("RLPROF_VENV").unwrap_or_else(|_| "/opt/rlprof-venv".into());
    let py = Path::new(&venv).join("bin/python");
    assert!(
        py.is_file(),
        "{} is missing: install msprof-analyze and HolisticTraceAnalysis there (see .ci/run)",
        py.display()
    );
    py
}
