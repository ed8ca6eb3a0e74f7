//! Property tests (proptest, stable Rust) over the raw reader, bounded so that they add little
//! to the test time: a valid raw file with bytes flipped, cut or appended, and arbitrary bytes
//! behind a valid header, never panic the chunk reader, the decoder (both passes) or the
//! analysis; whatever they accept stays within the file.

mod support;

use proptest::prelude::*;
use rlprof_export::decode::Index;
use rlprof_profiler::plan::{Content, Level};
use rlprof_profiler::raw::SliceReader;
use std::path::Path;
use std::sync::OnceLock;
use support::*;

/// One valid raw file of a small collection (made once).
fn valid_raw() -> &'static [u8] {
    static RAW: OnceLock<Vec<u8>> = OnceLock::new();
    RAW.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let mut s = Script::npu(
            Level::Level1,
            &[Content::Npu, Content::Cpu, Content::Memory],
        );
        s.world = 1;
        s.steps = vec![1];
        s.ops = 3;
        let done = collect(tmp.path(), &s);
        std::fs::read(&done[0].raw_file).unwrap()
    })
}

/// Reads `bytes` through every raw entry point; panics are the failures looked for.
fn read_all_ways(bytes: &[u8]) -> Result<(), TestCaseError> {
    if let Ok(mut r) = SliceReader::new(bytes, Path::new("fuzz.rlraw")) {
        let mut n = 0u64;
        while r.next_ref().is_some() {
            n += 1;
        }
        prop_assert!(r.offset() <= bytes.len() as u64, "{n} chunks");
    }
    let dir = tempfile::tempdir().unwrap();
    let coll = dir.path().join("h_1_20260101000000000_ascend_pt");
    std::fs::create_dir_all(coll.join("rlprof_raw")).unwrap();
    let path = coll.join("rlprof_raw/rank_0.rlraw");
    std::fs::write(&path, bytes).unwrap();
    if let Ok(idx) = Index::build(&path) {
        prop_assert!(idx.valid_bytes <= bytes.len() as u64);
        let mut events = 0u64;
        idx.replay(|_| events += 1).ok();
        prop_assert!(events <= idx.counts.records);
    }
    // The whole analysis: outputs or a clean error, never a panic or a write elsewhere.
    let _ = rlprof_export::analyse_collection(&coll);
    let outside: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    prop_assert!(outside.len() <= 2, "{outside:?}");
    Ok(())
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config(48))]

    #[test]
    fn mutated_raw_files_never_panic(
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
        cut in prop::option::of(any::<prop::sample::Index>()),
        tail in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut bytes = valid_raw().to_vec();
        for (at, b) in flips {
            let i = at.index(bytes.len());
            bytes[i] = b;
        }
        if let Some(c) = cut {
            bytes.truncate(c.index(bytes.len() + 1));
        }
        bytes.extend_from_slice(&tail);
        read_all_ways(&bytes)?;
    }

    #[test]
    fn arbitrary_chunks_behind_a_valid_header_never_panic(
        body in prop::collection::vec(any::<u8>(), 0..512),
    ) {
        let mut bytes = valid_raw()[..16].to_vec();
        bytes.extend_from_slice(&body);
        read_all_ways(&bytes)?;
    }
}
