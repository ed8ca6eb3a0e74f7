//! The two layouts of the `npu` tool side by side, for BENCHMARKS.md.
//!
//! - `ascend_layouts make DIR EVENTS`: a synthetic one-rank collection of about `EVENTS` events
//!   in `DIR` (ops each with one kernel, as in the `parse_throughput` bench, plus one collective
//!   every 1000 ops), written with the profiler's `RawWriter`;
//! - `ascend_layouts export DIR db|text`: exports it in that layout (the whole pass: decode,
//!   attribution, output) and prints the events and the output's bytes.
//!
//! Timed from outside with `scripts/paired_time.sh` (one layout against the other, paired runs).

use rlprof_export::ascend_db_writer::Layout;
use rlprof_export::decode::Index;
use rlprof_profiler::clock::Calibration;
use rlprof_profiler::raw::RawWriter;
use rlprof_profiler::record::{Kind, RangeCat, Record};
use std::path::{Path, PathBuf};

const COLLECTION: &str = "host_1_20250101000000000_ascend_pt";

fn make(dir: &Path, events: u64) {
    let raw_dir = dir.join(COLLECTION).join("rlprof_raw");
    std::fs::create_dir_all(&raw_dir).unwrap();
    let mut w = RawWriter::create(&raw_dir.join("rank_0.rlraw")).unwrap();
    w.write_meta(&serde_json::json!({"tool": "npu", "level": "level1",
        "contents": ["npu", "cpu"], "rank": 0, "world_size": 1, "host": "host", "pid": 1,
        "steps": [1], "start_wall_ns": 1_700_000_000_000_000_000u64,
        "start_mono_ns": 1_000_000_000u64}))
        .unwrap();
    w.write_strings([
        (1, "ProfilerStep#1"),
        (2, "matmul"),
        (3, "gemm_f32"),
        (4, "model.layers.0"),
        (5, "4,8;8,16"),
        (6, "all_reduce"),
        (7, "dp"),
    ])
    .unwrap();
    let cal = |t: u64| Calibration {
        ticks: t,
        mono_ns: 1_000_000_000 + t,
        wall_ns: 1_700_000_000_000_000_000 + t,
    };
    w.write_calibration(cal(0)).unwrap();
    let ops = events / 2;
    let mut buf = Vec::with_capacity(1 << 16);
    let mut t = 1000u64;
    for i in 0..ops {
        buf.push(Record::new(t + 10, t + 60, 3, Kind::Kernel, 1, 0));
        buf.push(Record::new(1000, 4096, 0, Kind::Ext, 0, 0));
        buf.push(Record::new(
            t,
            t + 80,
            2,
            Kind::Range,
            RangeCat::Op as u8,
            1,
        ));
        buf.push(Record::new(4 | 5 << 32, 0, 0, Kind::Ext, 0, 0));
        t += 100;
        if i % 1000 == 999 {
            buf.push(Record::new(t, t + 50, 6, Kind::Comm, 0, 1));
            buf.push(Record::new(1 << 20, 10, 7, Kind::Ext, 0, 0));
            t += 60;
        }
        if buf.len() >= 1 << 16 || i + 1 == ops {
            w.write_records(0, &buf).unwrap();
            buf.clear();
        }
    }
    let step = Record::new(0, t + 10, 1, Kind::Range, RangeCat::Step as u8, 0);
    w.write_records(0, &[step]).unwrap();
    w.write_calibration(cal(t + 20)).unwrap();
    w.write_end(ops * 2 + ops / 1000 + 1, 0).unwrap();
}

fn bytes_below(p: &Path) -> u64 {
    std::fs::read_dir(p)
        .map(|rd| {
            rd.flatten()
                .map(|e| {
                    let p = e.path();
                    if p.is_dir() {
                        bytes_below(&p)
                    } else {
                        e.metadata().map_or(0, |m| m.len())
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

fn export(dir: &Path, layout: Layout) {
    let col: PathBuf = dir.join(COLLECTION);
    let idx = Index::build(&col.join("rlprof_raw/rank_0.rlraw")).unwrap();
    rlprof_export::ascend_writer::export_as(&col, &idx, layout).unwrap();
    let c = idx.counts;
    let events = c.ranges + c.kernels + c.comms + c.memory;
    let bytes = bytes_below(&col.join(rlprof_export::npu::OUTPUT_DIR));
    println!(
        "{}: {events} events, {bytes} bytes, {:.1} bytes/event",
        layout.as_str(),
        bytes as f64 / events as f64
    );
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    match (a.get(1).map(String::as_str), a.get(2), a.get(3)) {
        (Some("make"), Some(dir), Some(n)) => make(Path::new(dir), n.parse().unwrap()),
        (Some("export"), Some(dir), Some(l)) => export(
            Path::new(dir),
            if l == "db" { Layout::Db } else { Layout::Text },
        ),
        _ => eprintln!("usage: ascend_layouts make DIR EVENTS | export DIR db|text"),
    }
}
