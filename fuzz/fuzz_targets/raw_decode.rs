//! The raw decoder over arbitrary bytes: pass 1 (`RawIndex::scan`), pass 2 (`replay`, every
//! event's names looked up), the streaming chunk reader, and `rlprof report`'s loader of a raw
//! file (the same bytes written as `rlprof_raw/rank_0.rlraw`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use rlprof_profiler::raw::{Event, RawIndex, RawReader};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn scratch() -> &'static (tempfile::TempDir, PathBuf) {
    static DIR: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let raw = dir.path().join("rlprof_raw");
        std::fs::create_dir_all(&raw).expect("rlprof_raw");
        let file = raw.join("rank_0.rlraw");
        (dir, file)
    })
}

fuzz_target!(|data: &[u8]| {
    let path = Path::new("rlprof_raw/rank_0.rlraw");
    if let Ok(idx) = RawIndex::scan(data, path, |_| {}, |_| {}) {
        let mut names = 0usize;
        let _ = idx.replay(
            data,
            |_| {},
            |e, _| {
                let id = match *e {
                    Event::Range(r) => r.name,
                    Event::Kernel(k) => k.name,
                    Event::Comm(c) => c.group,
                    Event::Memory(m) => m.op,
                    Event::Instant(_, _, n, _) | Event::Counter(_, _, n, _) => n,
                };
                names += idx.name(id).len();
            },
        );
        for w in idx.warnings.iter().chain(idx.record_warnings()) {
            let _ = w.to_string();
        }
        let _ = (idx.origin_wall(), names);
    }
    if let Ok(mut r) = RawReader::new(data, path) {
        while r.next_ref().is_some() {}
    }
    let (_dir, file) = scratch();
    if std::fs::write(file, data).is_ok() {
        let _ = rlprof_report::raw_input::load_raw(file, "fuzz");
    }
});
