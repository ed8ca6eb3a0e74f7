//! `rlprof report`'s Chrome JSON trace reader (PyTorch / torch_npu `trace_view.json`) over
//! arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rlprof_report::Limits;
use rlprof_report::model::{Profile, SourceFormat};
use std::path::{Path, PathBuf};

fuzz_target!(|data: &[u8]| {
    let path = Path::new("trace.pt.trace.json");
    let mut p = Profile::new(
        PathBuf::from(path),
        SourceFormat::TorchTrace,
        0,
        "fuzz".into(),
    );
    let _ = rlprof_report::chrome_reader::read_stream(data, path, &mut p, &Limits::default());
});
