//! Raw files large enough to be memory-mapped (>= 1 MiB): decoding them gives the same counts
//! and events as the profiler's streaming reader, and a damaged tail is reported at the byte
//! offset where valid data ends.

use rlprof_export::decode::{Event, Index};
use rlprof_profiler::clock::Calibration;
use rlprof_profiler::raw::{RawSummary, RawWriter};
use rlprof_profiler::record::{Kind, RangeCat, Record};
use std::io::Write;

/// `ops` ops with one kernel each on two threads, in a step; returns the file's path.
fn write(dir: &std::path::Path, ops: u64) -> std::path::PathBuf {
    let path = dir.join("rank_0.rlraw");
    let mut w = RawWriter::create(&path).unwrap();
    w.write_meta(
        &serde_json::json!({"tool": "npu", "level": "level1", "contents": ["npu", "cpu"],
        "rank": 0, "world_size": 1, "host": "h", "pid": 1, "steps": [1],
        "start_wall_ns": 1_000_000_000_000u64, "start_mono_ns": 1_000u64}),
    )
    .unwrap();
    w.write_strings([(1, "ProfilerStep#1"), (2, "op"), (3, "kern")])
        .unwrap();
    let cal = |t| Calibration {
        ticks: t,
        mono_ns: 1_000 + t,
        wall_ns: 1_000_000_000_000 + t,
    };
    w.write_calibration(cal(0)).unwrap();
    let mut t = 100;
    for chunk in 0..ops / 1000 {
        let mut buf = Vec::new();
        for _ in 0..1000 {
            buf.push(Record::new(t + 1, t + 5, 3, Kind::Kernel, 0, 0));
            buf.push(Record::new(7, 8, 0, Kind::Ext, 0, 0));
            buf.push(Record::new(t, t + 9, 2, Kind::Range, RangeCat::Op as u8, 0));
            t += 10;
        }
        w.write_records((chunk % 2) as u32, &buf).unwrap();
    }
    w.write_records(
        0,
        &[Record::new(0, t, 1, Kind::Range, RangeCat::Step as u8, 0)],
    )
    .unwrap();
    w.write_calibration(cal(t + 2_000_000)).unwrap();
    path
}

#[test]
fn a_mapped_file_decodes_like_the_stream_reader_and_reports_a_damaged_tail() {
    let dir = tempfile::tempdir().unwrap();
    // Over 32 MiB, so the pages behind the reader are released on the way.
    let ops = 500_000;
    let path = write(dir.path(), ops);
    let good_len = std::fs::metadata(&path).unwrap().len();
    assert!(good_len > 33 << 20, "large enough to be mapped: {good_len}");
    // A torn last chunk: a valid header announcing more payload than the file holds.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(b"CHNK\x03\x00\x00\x00\x00\x10\x00\x00\x00\x00\x00\x00partial")
        .unwrap();
    drop(f);

    let idx = Index::build(&path).unwrap();
    let stream = RawSummary::read(&path, false).unwrap();
    assert_eq!(idx.counts.records, stream.records);
    assert_eq!(idx.counts.kernels, ops);
    assert_eq!(idx.counts.ops, ops);
    let c = idx.corruption.as_ref().expect("damaged tail reported");
    assert_eq!(c.offset, good_len);
    assert_eq!(Some(c), stream.corruption.as_ref());
    assert_eq!(idx.valid_bytes, good_len);

    let (mut kernels, mut ranges, mut flops) = (0, 0, 0);
    idx.replay(|e| match e {
        Event::Kernel(k) => {
            kernels += 1;
            flops += k.flops;
            assert!(k.end > k.start);
        }
        Event::Range(_) => ranges += 1,
        _ => {}
    })
    .unwrap();
    assert_eq!(kernels, ops);
    assert_eq!(flops, 7 * ops, "every kernel paired with its Ext");
    assert_eq!(ranges, ops + 1);
}
