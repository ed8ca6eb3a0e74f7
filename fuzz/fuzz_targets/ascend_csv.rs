//! `rlprof report`'s reader of torch_npu's text layout: the input, split at NUL bytes, is
//! written as the CSV files of an `ASCEND_PROFILER_OUTPUT` directory (in the order of `FILES`;
//! missing parts leave their file out) and loaded the way `rlprof report` loads one.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rlprof_report::Limits;
use std::path::PathBuf;
use std::sync::OnceLock;

/// The files the parts of the input become, in order.
const FILES: [&str; 5] = [
    "kernel_details.csv",
    "memory_record.csv",
    "operator_memory.csv",
    "op_statistic.csv",
    "step_trace_time.csv",
];

fn scratch() -> &'static (tempfile::TempDir, PathBuf) {
    static DIR: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = dir
            .path()
            .join("host_1_20250101000000000_ascend_pt/ASCEND_PROFILER_OUTPUT");
        std::fs::create_dir_all(&out).expect("output dir");
        (dir, out)
    })
}

fuzz_target!(|data: &[u8]| {
    let (_dir, out) = scratch();
    let mut parts = data.split(|&b| b == 0);
    for name in FILES {
        let f = out.join(name);
        match parts.next() {
            Some(bytes) => {
                if std::fs::write(&f, bytes).is_err() {
                    return;
                }
            }
            None => {
                let _ = std::fs::remove_file(&f);
            }
        }
    }
    let _ = rlprof_report::ascend_text_reader::load_ascend(out, "fuzz", &Limits::default());
});
