//! Parser throughput on a large synthetic collection: decode + aggregate (pass 1 + pass 2 with
//! kernel attribution) and full npu / torch exports, with peak RSS.
//!
//! `cargo bench -p rlprof-export --bench parse_throughput` (BENCH_EVENTS overrides 10 000 000,
//! BENCH_ROUNDS the 5 rounds; medians are reported).

use rlprof_export::attrib::Attributor;
use rlprof_export::decode::Index;
use rlprof_profiler::clock::Calibration;
use rlprof_profiler::raw::RawWriter;
use rlprof_profiler::record::{Kind, RangeCat, Record};
use std::path::Path;
use std::time::Instant;

/// Writes a collection of about `events` events: per step, ops each with one kernel (op + ext +
/// kernel + ext = 4 records, 2 events), inside a step range.
fn synth(dir: &Path, events: u64) -> std::path::PathBuf {
    let raw_dir = dir.join("host_1_20250101000000000_ascend_pt/rlprof_raw");
    std::fs::create_dir_all(&raw_dir).unwrap();
    let path = raw_dir.join("rank_0.rlraw");
    let mut w = RawWriter::create(&path).unwrap();
    w.write_meta(
        &serde_json::json!({"tool": "npu", "level": "level1", "contents": ["npu", "cpu"],
        "rank": 0, "world_size": 1, "host": "host", "pid": 1, "steps": [1],
        "start_wall_ns": 1_700_000_000_000_000_000u64, "start_mono_ns": 1_000_000_000u64}),
    )
    .unwrap();
    w.write_strings([
        (1, "ProfilerStep#1"),
        (2, "matmul"),
        (3, "gemm_f32"),
        (4, "model.layers.0"),
        (5, "4,8;8,16"),
    ])
    .unwrap();
    w.write_calibration(Calibration {
        ticks: 0,
        mono_ns: 1_000_000_000,
        wall_ns: 1_700_000_000_000_000_000,
    })
    .unwrap();
    let ops = events / 2;
    let mut buf = Vec::with_capacity(4 * 16384);
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
        if buf.len() >= 4 * 16384 || i + 1 == ops {
            w.write_records(0, &buf).unwrap();
            buf.clear();
        }
    }
    w.write_records(
        0,
        &[Record::new(
            0,
            t + 10,
            1,
            Kind::Range,
            RangeCat::Step as u8,
            0,
        )],
    )
    .unwrap();
    w.write_calibration(Calibration {
        ticks: t + 20,
        mono_ns: 1_000_000_000 + t + 20,
        wall_ns: 1_700_000_000_000_000_000 + t + 20,
    })
    .unwrap();
    w.write_end(ops * 2 + 1, 0).unwrap();
    path
}

fn peak_rss_mib() -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// CPU seconds (user + system) this process has used, from `/proc/self/stat` (10 ms ticks):
/// on a shared machine CPU time is steadier than wall time.
fn cpu_s() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = s.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let t = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (t(11) + t(12)) / 100.0
}

/// Wall and CPU seconds of `f`.
fn timed<T>(f: impl FnOnce() -> T) -> (T, f64, f64) {
    let (w, c) = (Instant::now(), cpu_s());
    let v = f();
    (v, w.elapsed().as_secs_f64(), cpu_s() - c)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Decode + aggregate: both passes, kernel attribution, per-name kernel totals.
fn decode_aggregate(path: &Path) -> (Index, u64) {
    let idx = Index::build(path).unwrap();
    let mut attr = Attributor::default();
    let mut kernel_ns = 0u64;
    let mut n = 0u64;
    idx.replay(|e| {
        n += 1;
        attr.push(e, &mut |o| {
            if let rlprof_export::attrib::Out::Kernel(k, _) = o {
                kernel_ns += k.end - k.start;
            }
        })
    })
    .unwrap();
    assert!(kernel_ns > 0);
    (idx, n)
}

/// Bytes of every file below `dir`, by file name.
fn file_sizes(dir: &Path) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| {
            let len = e.metadata().unwrap().len();
            (e.file_name().to_string_lossy().into_owned(), len)
        })
        .collect();
    v.sort();
    v
}

fn main() {
    let events: u64 = std::env::var("BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000);
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let tmp = std::env::temp_dir().join(format!("rlprof-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let path = synth(&tmp, events);
    let raw_mb = std::fs::metadata(&path).unwrap().len() as f64 / 1e6;
    let rss0 = peak_rss_mib();
    let coll = path.parent().unwrap().parent().unwrap().to_path_buf();
    let stages = [
        "decode + aggregate",
        "full npu export",
        "torch export (gzip)",
    ];
    let mut wall: [Vec<f64>; 3] = Default::default();
    let mut cpu: [Vec<f64>; 3] = Default::default();
    let decode_only = std::env::var_os("BENCH_DECODE_ONLY").is_some();
    let mut n = 0;
    let mut gz = 0;
    for round in 0..rounds {
        let ((idx, got), w, c) = timed(|| decode_aggregate(&path));
        n = got;
        wall[0].push(w);
        cpu[0].push(c);
        if !decode_only {
            let (_, w, c) = timed(|| rlprof_export::ascend_writer::export(&coll, &idx).unwrap());
            wall[1].push(w);
            cpu[1].push(c);
            let (files, w, c) = timed(|| rlprof_export::torch::export(&coll, &idx).unwrap());
            wall[2].push(w);
            cpu[2].push(c);
            gz = std::fs::metadata(&files[0]).unwrap().len();
        }
        let line: Vec<String> = (0..3)
            .filter(|&i| !wall[i].is_empty())
            .map(|i| {
                format!(
                    "{} {:.3} s ({:.2} s CPU)",
                    stages[i], wall[i][round], cpu[i][round]
                )
            })
            .collect();
        println!("round {round}: {}", line.join(", "));
    }
    let ev = n as f64;
    println!("events: {n} ({raw_mb:.1} MB raw); medians of {rounds} rounds");
    for i in 0..3 {
        if wall[i].is_empty() {
            continue;
        }
        let (w, c) = (median(&mut wall[i]), median(&mut cpu[i]));
        println!(
            "{}: {w:.3} s wall, {c:.2} s CPU; {:.2} M events/s wall, {:.2} M events/CPU-s; {:.0} MB/s raw",
            stages[i],
            ev / w / 1e6,
            ev / c.max(0.01) / 1e6,
            raw_mb / w
        );
    }
    if decode_only {
        // The raw data alone is ~48 bytes per event (on tmpfs: memory) and goes too.
        let _ = std::fs::remove_dir_all(&tmp);
        return;
    }
    let sizes = file_sizes(&coll.join("ASCEND_PROFILER_OUTPUT"));
    let out_bytes: u64 = sizes.iter().map(|s| s.1).sum();
    println!(
        "npu output: {:.0} MB written ({:.1} B/event)",
        out_bytes as f64 / 1e6,
        out_bytes as f64 / ev
    );
    for (name, len) in sizes.iter().filter(|s| s.1 > 0) {
        println!(
            "  {name}: {:.1} MB, {:.1} B/event",
            *len as f64 / 1e6,
            *len as f64 / ev
        );
    }
    println!(
        "torch output: {:.0} MB gz ({:.1} B/event)",
        gz as f64 / 1e6,
        gz as f64 / ev
    );
    println!(
        "peak RSS: {:.0} MiB (before parsing: {rss0:.0} MiB)",
        peak_rss_mib()
    );
    if std::env::var_os("BENCH_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&tmp);
    } else {
        println!("kept {}", tmp.display());
    }
}
