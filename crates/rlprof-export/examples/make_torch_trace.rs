//! Writes a synthetic collection and exports it with the `torch` exporter, to get a
//! PyTorch-format Chrome trace of a chosen size for the foreign-trace benchmark
//! (BENCHMARKS.md; docs/benchmarks/history.md, "Loading a foreign Chrome trace").
//!
//! `cargo run --release -p rlprof-export --example make_torch_trace -- OUT_DIR [OPS]`: OPS ops
//! (default 80 000, about 80 MB) over 10 `ProfilerStep#N` ranges, each op with module, shapes and dtypes,
//! one kernel and one allocation freed at its end. Writes `OUT_DIR/trace/<name>.pt.trace.json`
//! (uncompressed, what `json.load` and HolisticTraceAnalysis read) and prints its size.

use rlprof_profiler::clock::Calibration;
use rlprof_profiler::raw::RawWriter;
use rlprof_profiler::record::{Kind, RangeCat, Record};
use std::io::Read;
use std::path::Path;

const STEPS: u64 = 10;
const T0: u64 = 1_700_000_000_000_000_000;

fn write_raw(path: &Path, ops: u64) {
    let mut w = RawWriter::create(path).unwrap();
    w.write_meta(&serde_json::json!({"tool": "torch", "level": "level1",
        "contents": ["cuda", "cpu", "memory", "shapes", "module"],
        "rank": 0, "world_size": 1, "host": "host", "pid": 7, "steps": (1..=STEPS).collect::<Vec<_>>(),
        "start_wall_ns": T0, "start_mono_ns": 1_000_000_000u64}))
    .unwrap();
    let mut strings: Vec<(u32, String)> = (1..=STEPS)
        .map(|s| (s as u32, format!("ProfilerStep#{s}")))
        .collect();
    let ops_names = ["aten::mm", "aten::add", "aten::softmax", "aten::layer_norm"];
    let kernels = ["gemm_f32", "add_f32", "softmax_f32", "layer_norm_f32"];
    for (i, (o, k)) in ops_names.iter().zip(kernels).enumerate() {
        strings.push((100 + i as u32, o.to_string()));
        strings.push((200 + i as u32, k.to_string()));
    }
    strings.push((300, "model.layers.0.mlp".into()));
    strings.push((301, "4,8;8,16".into()));
    strings.push((302, "float32;float32".into()));
    w.write_strings(strings.iter().map(|(i, s)| (*i, s.as_str())))
        .unwrap();
    w.write_thread(0, "MainThread").unwrap();
    w.write_calibration(Calibration {
        ticks: 0,
        mono_ns: 1_000_000_000,
        wall_ns: T0,
    })
    .unwrap();
    let per_step = ops / STEPS;
    let mut t = 1000u64;
    let mut buf = Vec::new();
    for step in 1..=STEPS {
        let start = t;
        for i in 0..per_step {
            let v = (i % 4) as u32;
            let addr = 0x10_0000 + (i % 64) * 0x1000;
            buf.push(Record::new(t + 2, 0, 100 + v, Kind::Memory, 0, 0));
            buf.push(Record::new(addr, 4096, 0, Kind::Ext, 0, 0));
            buf.push(Record::new(t + 10, t + 60, 200 + v, Kind::Kernel, 1, 0));
            buf.push(Record::new(1000, 4096, 0, Kind::Ext, 0, 0));
            buf.push(Record::new(t + 70, 0, 100 + v, Kind::Memory, 1, 0));
            buf.push(Record::new(addr, 4096, 0, Kind::Ext, 0, 0));
            buf.push(Record::new(
                t,
                t + 80,
                100 + v,
                Kind::Range,
                RangeCat::Op as u8,
                1,
            ));
            buf.push(Record::new(300 | 301 << 32, 302, 0, Kind::Ext, 0, 0));
            t += 100;
            if buf.len() >= 60_000 {
                w.write_records(0, &buf).unwrap();
                buf.clear();
            }
        }
        buf.push(Record::new(
            start,
            t,
            step as u32,
            Kind::Range,
            RangeCat::Step as u8,
            0,
        ));
        t += 50;
    }
    w.write_records(0, &buf).unwrap();
    w.write_calibration(Calibration {
        ticks: t + 20,
        mono_ns: 1_000_000_000 + t + 20,
        wall_ns: T0 + t + 20,
    })
    .unwrap();
    w.write_end(ops * 4 + STEPS, 0).unwrap();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let out = Path::new(args.get(1).expect("usage: make_torch_trace OUT_DIR [OPS]"));
    let ops: u64 = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(80_000);
    let coll = out.join("coll/host_7_20231114221320000_ascend_pt");
    let raw = coll.join("rlprof_raw");
    let _ = std::fs::remove_dir_all(out);
    std::fs::create_dir_all(&raw).unwrap();
    write_raw(&raw.join("rank_0.rlraw"), ops);
    let idx = rlprof_export::decode::Index::build(&raw.join("rank_0.rlraw")).unwrap();
    let files = rlprof_export::torch::export(&coll, &idx).unwrap();
    let mut text = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&files[0]).unwrap())
        .read_to_end(&mut text)
        .unwrap();
    let name = files[0].file_name().unwrap().to_string_lossy();
    let dir = out.join("trace");
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join(name.trim_end_matches(".gz"));
    std::fs::write(&json, &text).unwrap();
    println!(
        "{}: {:.1} MB, {} events",
        json.display(),
        text.len() as f64 / 1e6,
        idx.counts.ranges + idx.counts.kernels + idx.counts.memory
    );
}
