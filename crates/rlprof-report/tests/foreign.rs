//! Foreign inputs: PyTorch Chrome traces (plain and gzip) and an Ascend output directory load,
//! and the report's numbers equal an independent computation over the trace's events.
//!
//! The PyTorch traces in tests/data/torch were written by hand in the exact shape PyTorch's
//! profiler (kineto) writes, with memory and NCCL events; tests/data/torch_real holds two real
//! traces written by PyTorch 2.15.0's profiler on the reference workload.

use rlprof_report::{Limits, load, summarise};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

fn data(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(p)
}

/// Per cpu_op name: (count, total ns, self ns) — self = dur minus directly nested cpu_ops of
/// the same (pid, tid), computed by brute force.
fn independent_ops(v: &serde_json::Value) -> BTreeMap<String, (u64, i64, i64)> {
    let evs: Vec<(String, String, i64, i64)> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "cpu_op")
        .map(|e| {
            let ts = (e["ts"].as_f64().unwrap() * 1000.0).round() as i64;
            let dur = (e["dur"].as_f64().unwrap() * 1000.0).round() as i64;
            let thread = format!("{}/{}", e["pid"], e["tid"]);
            (
                e["name"].as_str().unwrap().to_string(),
                thread,
                ts,
                ts + dur,
            )
        })
        .collect();
    let inside = |c: &(String, String, i64, i64), p: &(String, String, i64, i64)| {
        c.1 == p.1 && c.2 >= p.2 && c.3 <= p.3 && (c.2, -c.3) != (p.2, -p.3)
    };
    let mut out: BTreeMap<String, (u64, i64, i64)> = BTreeMap::new();
    for p in &evs {
        let direct: i64 = evs
            .iter()
            .filter(|c| inside(c, p) && !evs.iter().any(|m| inside(c, m) && inside(m, p)))
            .map(|c| c.3 - c.2)
            .sum();
        let e = out.entry(p.0.clone()).or_default();
        e.0 += 1;
        e.1 += p.3 - p.2;
        e.2 += p.3 - p.2 - direct;
    }
    out
}

/// Loads a directory of two ranks' traces (nothing skipped) and summarises it.
fn two_rank_report(dir: &Path) -> rlprof_report::Report {
    let loaded = load(dir, &Limits::default()).unwrap();
    assert!(loaded.skipped.is_empty(), "{:?}", loaded.skipped);
    assert_eq!(loaded.profiles.len(), 2);
    summarise(&loaded)
}

/// Adds one trace's independent per-op figures into `want`.
fn add_ops(want: &mut BTreeMap<String, (u64, i64, i64)>, v: &serde_json::Value) {
    for (k, (c, t, s)) in independent_ops(v) {
        let e = want.entry(k).or_default();
        e.0 += c;
        e.1 += t;
        e.2 += s;
    }
}

fn json_of(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn torch_traces_load_and_numbers_equal_an_independent_computation() {
    let dir = data("torch");
    let report = two_rank_report(&dir);
    let mut want: BTreeMap<String, (u64, i64, i64)> = BTreeMap::new();
    let mut peak_per_rank = BTreeMap::new();
    for f in std::fs::read_dir(&dir).unwrap() {
        let v = json_of(&f.unwrap().path());
        add_ops(&mut want, &v);
        let peak = v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["name"] == "[memory]")
            .map(|e| e["args"]["Total Allocated"].as_i64().unwrap())
            .max()
            .unwrap();
        peak_per_rank.insert(v["distributedInfo"]["rank"].as_u64().unwrap() as u32, peak);
    }
    assert!(want.len() >= 3);
    for (name, (count, total, selft)) in &want {
        let row = report
            .top
            .iter()
            .find(|r| r.kind.as_str() == "op" && &r.name == name)
            .unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!(
            (row.count, row.total_ns as i64, row.self_ns as i64),
            (*count, *total, *selft),
            "{name}"
        );
    }
    let linear = &want["aten::linear"];
    assert!(
        linear.2 < linear.1,
        "nested addmm is excluded from linear's self time"
    );
    for m in &report.memory {
        assert_eq!(m.baseline, "producer_total");
        assert_eq!(m.peak_bytes, peak_per_rank[&m.rank]);
        assert_eq!(
            m.at_peak[0].op, "aten::addmm",
            "the innermost op open at the allocation"
        );
    }
    let nccl: Vec<_> = report.comm.iter().collect();
    assert_eq!(nccl.len(), 2);
    for c in nccl {
        assert_eq!(c.count, 2);
        assert_eq!(
            c.bytes,
            Some(2 * 262_144 * 4),
            "In msg nelems x sizeof(Float)"
        );
        assert_eq!(
            c.wait_ns, None,
            "no wait time in a kernel trace: left empty"
        );
        // Without a wait time the bandwidth counts it: bytes over the collectives' duration.
        assert!(c.bandwidth_includes_wait);
        let want = 2.0 * 262_144.0 * 4.0 / c.total_ns as f64;
        assert!((c.bandwidth_gbps.unwrap() - want).abs() < 1e-9 * want);
    }
    let slow: Vec<_> = report.breakdown.iter().filter(|r| r.slowest).collect();
    assert_eq!(slow.len(), 2, "one slowest rank per step");
    assert!(slow.iter().all(|r| r.rank == 1));
    let r0 = report
        .breakdown
        .iter()
        .find(|r| r.rank == 0 && r.step == "1")
        .unwrap();
    assert_eq!(r0.rollout_ns, 400_000);
    assert_eq!(r0.update_ns, 150_000);
}

#[test]
fn a_gzipped_trace_gives_the_same_numbers_as_the_plain_one() {
    let src = data("torch/host_1001.1700000000000000000.pt.trace.json");
    let tmp = tempfile::tempdir().unwrap();
    let gz = tmp
        .path()
        .join("host_1001.1700000000000000000.pt.trace.json.gz");
    let mut enc =
        flate2::write::GzEncoder::new(std::fs::File::create(&gz).unwrap(), Default::default());
    enc.write_all(&std::fs::read(&src).unwrap()).unwrap();
    enc.finish().unwrap();
    let a = summarise(&load(&src, &Limits::default()).unwrap());
    let b = summarise(&load(&gz, &Limits::default()).unwrap());
    assert_eq!(a.top, b.top);
    assert_eq!(a.breakdown.len(), b.breakdown.len());
    assert_eq!(b.inputs[0].rank, 1);
}

#[test]
fn an_ascend_output_directory_loads_with_its_tables() {
    let loaded = load(&data("ascend"), &Limits::default()).unwrap();
    assert_eq!(loaded.profiles.len(), 1);
    let p = &loaded.profiles[0];
    assert_eq!(p.rank, 3, "rank from profiler_info_3.json");
    let report = summarise(&loaded);
    let mm = report.top.iter().find(|r| r.name == "MatMulV2").unwrap();
    assert_eq!(mm.kind.as_str(), "kernel");
    assert_eq!((mm.count, mm.total_ns), (4, 100_000));
    assert!(
        report.top.iter().all(|r| r.name != "Computing"),
        "Overlap Analysis is derived data, not events"
    );
    assert_eq!(report.comm.len(), 1);
    assert_eq!(report.comm[0].name, "hcom_allReduce__123_0_1");
    let titles: Vec<_> = report.inputs[0]
        .tables
        .iter()
        .map(|t| t.title.as_str())
        .collect();
    assert_eq!(titles, ["step_trace_time.csv", "op_statistic.csv"]);
    assert_eq!(
        report.inputs[0].tables[0].rows[0][2], "100.000",
        "trailing tab stripped"
    );
}

#[test]
fn without_trace_view_the_kernels_come_from_kernel_details() {
    let tmp = tempfile::tempdir().unwrap();
    let pt = tmp.path().join("h_1_20250101000000000_ascend_pt");
    let out = pt.join("ASCEND_PROFILER_OUTPUT");
    std::fs::create_dir_all(&out).unwrap();
    let src = data("ascend/host_2000_20250101000000000_ascend_pt/ASCEND_PROFILER_OUTPUT");
    std::fs::copy(
        src.join("kernel_details.csv"),
        out.join("kernel_details.csv"),
    )
    .unwrap();
    let report = summarise(&load(tmp.path(), &Limits::default()).unwrap());
    let mm = report.top.iter().find(|r| r.name == "MatMulV2").unwrap();
    assert_eq!((mm.count, mm.total_ns), (4, 100_000));
}

/// Real traces: PyTorch 2.15.0's own profiler (`torch.profiler`, CPU activity, one active step)
/// around the PyTorch reference GRPO step of BENCHMARKS.md (2 gloo ranks, one profiled step
/// each), gzipped.
#[test]
fn real_pytorch_traces_load_with_ranks_steps_and_exact_op_times() {
    let dir = data("torch_real");
    let report = two_rank_report(&dir);
    let mut want: BTreeMap<String, (u64, i64, i64)> = BTreeMap::new();
    let mut ranks = Vec::new();
    for f in std::fs::read_dir(&dir).unwrap() {
        let gz = std::fs::File::open(f.unwrap().path()).unwrap();
        let v: serde_json::Value =
            serde_json::from_reader(flate2::read::GzDecoder::new(gz)).unwrap();
        ranks.push(v["distributedInfo"]["rank"].as_u64().unwrap());
        add_ops(&mut want, &v);
    }
    ranks.sort();
    assert_eq!(ranks, vec![0, 1]);
    assert!(want.contains_key("aten::linear") && want.contains_key("aten::mm"));
    let mut checked = 0;
    for (name, (count, total, selft)) in &want {
        let row = report
            .top
            .iter()
            .find(|r| r.kind.as_str() == "op" && &r.name == name)
            .unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!(row.count, *count, "{name}");
        // Microsecond timestamps with 3 decimals: allow 1 ns of rounding per event.
        assert!(
            (row.total_ns as i64 - total).abs() <= *count as i64,
            "{name}"
        );
        assert!(
            (row.self_ns as i64 - selft).abs() <= 2 * *count as i64,
            "{name}"
        );
        checked += 1;
    }
    assert!(checked > 20, "{checked} op names checked");
    let steps: Vec<_> = report
        .breakdown
        .iter()
        .map(|r| (r.rank, r.step.clone()))
        .collect();
    assert_eq!(steps.len(), 2, "one profiled step per rank: {steps:?}");
}

/// A trace over the memory-mapping threshold (1 MiB) and its gzip: both give the numbers the
/// in-memory reader gives for the same text.
#[test]
fn a_mapped_large_trace_and_its_gzip_load_like_the_in_memory_text() {
    let mut evs = vec![
        r#"{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":1000000}"#
            .to_string(),
    ];
    for i in 0..20_000u64 {
        evs.push(format!(
            r#"{{"ph":"X","cat":"cpu_op","name":"aten::op{}","pid":1,"tid":1,"ts":{}.5,"dur":40,"args":{{"Input Dims":[[{i},8]],"External id":{i}}}}}"#,
            i % 7,
            i * 50
        ));
        evs.push(format!(
            r#"{{"ph":"i","name":"[memory]","pid":1,"tid":1,"ts":{}.75,"args":{{"Bytes":{},"Addr":{},"Total Allocated":{}}}}}"#,
            i * 50,
            if i % 2 == 0 { 512 } else { -512 },
            i / 2,
            (i % 2 + 1) * 512 % 1024
        ));
    }
    let text = format!("{{\"traceEvents\":[\n{}\n]}}", evs.join(",\n"));
    assert!(text.len() > 2 << 20);
    let tmp = tempfile::tempdir().unwrap();
    let plain = tmp.path().join("big.pt.trace.json");
    std::fs::write(&plain, &text).unwrap();
    let gz = tmp.path().join("big_gz.pt.trace.json.gz");
    let mut enc =
        flate2::write::GzEncoder::new(std::fs::File::create(&gz).unwrap(), Default::default());
    enc.write_all(text.as_bytes()).unwrap();
    enc.finish().unwrap();

    let mut p = rlprof_report::model::Profile::new(
        plain.clone(),
        rlprof_report::model::SourceFormat::TorchTrace,
        0,
        "g".into(),
    );
    rlprof_report::chrome_reader::read_stream(text.as_bytes(), &plain, &mut p, &Limits::default())
        .unwrap();
    let want = summarise(&rlprof_report::model::Loaded {
        profiles: vec![p],
        ..Default::default()
    });
    for f in [&plain, &gz] {
        let got = summarise(&load(f, &Limits::default()).unwrap());
        assert_eq!(got.top, want.top, "{}", f.display());
        assert_eq!(got.memory, want.memory, "{}", f.display());
        assert_eq!(got.inputs[0].events, 20_001);
        assert_eq!(got.inputs[0].memory_events, 20_000);
    }
    let op0 = want.top.iter().find(|r| r.name == "aten::op0").unwrap();
    assert_eq!(op0.count, 20_000u64.div_ceil(7));
}
