//! Real profiles written by other tools: each test checks the JSON contract of `report --format
//! json` against an independent computation over the file's events, done here with serde_json
//! (`support::contract`). Synthetic inputs of the same layouts are in `layouts.rs`.
//!
//! The real profiles are third-party files kept outside the repository (`$RLPROF_FIXTURES`,
//! by default `../shared/fixtures` beside the checkout; see PROVENANCE.md there), so the tests
//! that read them are `#[ignore = "needs ../shared/fixtures"]` and CI runs them by name
//! (`.ci/parts/05-fixtures.sh`). A fresh clone's `cargo test` runs `layouts.rs` only.

mod support;

use rlprof_report::{Limits, load, summarise};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use support::contract::*;

/// A real profile under `$RLPROF_FIXTURES/real` (default: `../shared/fixtures` beside the
/// checkout). Panics when the fixtures are absent: only ignored tests call it.
fn real(p: &str) -> PathBuf {
    let root = std::env::var_os("RLPROF_FIXTURES").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures"),
        PathBuf::from,
    );
    let path = root.join("real").join(p);
    assert!(
        path.exists(),
        "{} is missing: set RLPROF_FIXTURES to the fixtures directory",
        path.display()
    );
    path
}

/// The trace as a `Value`, with every `"ts"` and `"dur"` number kept as its text (a string),
/// so that [`ns`] reads it exactly: serde_json's `Value` holds numbers as f64, which rounds
/// epoch-based microseconds by up to 128 ns.
fn read_json(path: &Path) -> Value {
    let bytes = std::fs::read(path).unwrap();
    let text = if path.extension().is_some_and(|e| e == "gz") {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut flate2::read::MultiGzDecoder::new(&bytes[..]), &mut s)
            .unwrap();
        s
    } else {
        String::from_utf8(bytes).unwrap()
    };
    serde_json::from_str(&quote_times(&text)).unwrap()
}

/// `"ts": 123.456` -> `"ts": "123.456"` (and `"dur"`), written independently of the crate.
fn quote_times(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    let mut last = 0;
    let mut i = 0;
    while i < b.len() {
        let key = [&b"\"ts\""[..], &b"\"dur\""[..]]
            .into_iter()
            .find(|k| b[i..].starts_with(k));
        let Some(key) = key else {
            i += 1;
            continue;
        };
        let mut j = i + key.len();
        while j < b.len() && b[j].is_ascii_whitespace() {
            j += 1;
        }
        if j < b.len() && b[j] == b':' {
            j += 1;
            while j < b.len() && b[j].is_ascii_whitespace() {
                j += 1;
            }
            let start = j;
            while j < b.len() && (b[j].is_ascii_digit() || b"-+.eE".contains(&b[j])) {
                j += 1;
            }
            if j > start {
                out.push_str(&text[last..start]);
                out.push('"');
                out.push_str(&text[start..j]);
                out.push('"');
                last = j;
            }
        }
        i = j.max(i + 1);
    }
    out.push_str(&text[last..]);
    out
}

/// torch_npu's trace_view.json: process names survive `process_labels`, `Ascend Hardware` holds
/// the device tasks, `Overlap Analysis` is not counted, `ProfilerStep#1` (a `cpu_op`) is a step.
#[test]
#[ignore = "needs ../shared/fixtures"]
fn torch_npu_trace_view_reads_as_msprof_analyze_reads_it() {
    let dir = real("ascend_mstt_trace_view");
    let pt = dir.join("host_437675_20240102_ascend_pt");
    let events = read_json(&pt.join("ASCEND_PROFILER_OUTPUT/trace_view.json"));
    let events = events.as_array().unwrap();
    let mut procs: BTreeMap<String, String> = BTreeMap::new();
    for e in events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
    {
        procs.insert(
            e["pid"].to_string(),
            e["args"]["name"].as_str().unwrap().into(),
        );
    }
    let on = |e: &Value, p: &str| procs.get(&e["pid"].to_string()).is_some_and(|n| n == p);
    let (mut kernels, mut comm, mut copies) = (Vec::new(), Vec::new(), Vec::new());
    for e in events
        .iter()
        .filter(|e| e["ph"] == "X" && on(e, "Ascend Hardware"))
    {
        let (s, d) = (ns(&e["ts"]), ns(&e["dur"]));
        let name = e["name"].as_str().unwrap().to_ascii_lowercase();
        if name.starts_with("hcom") || name.starts_with("hccl") {
            comm.push((s, s + d));
        } else if name.starts_with("memcpy") || name.starts_with("memset") {
            // `MEMCPY_ASYNC` tasks; `*_MemSet` kernels (atomic clean) are AI-core kernels.
            copies.push((s, s + d));
        } else {
            kernels.push((s, s + d));
        }
    }
    assert!(kernels.len() > 200, "{} device tasks", kernels.len());
    assert_eq!(copies.len(), 2);
    let report = report_json(&dir);
    let jobs = report["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1);
    let ranks = jobs[0]["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 1);
    assert_eq!(
        ranks[0]["files"][0].as_str().unwrap(),
        pt.join("ASCEND_PROFILER_OUTPUT").to_str().unwrap()
    );
    check_device(&ranks[0], &expected(&kernels, &comm, &copies));
    assert_eq!(steps_in(&ranks[0]), steps_of(events));
    assert_eq!(steps_in(&ranks[0]), vec![(1, 14_091_970)]);
    // The derived lanes and labels are not ops; the CANN layer is the API track.
    let top = report["top"].as_array().unwrap();
    for name in ["Computing", "Free", "Communication(Not Overlapped)"] {
        assert!(
            top.iter().all(|r| r["name"] != name),
            "{name} in the op table"
        );
    }
    let acl = top
        .iter()
        .find(|r| r["name"] == "AscendCL@aclrtSynchronizeStream")
        .unwrap();
    assert_eq!(acl["kind"], "api");
    let kernel_rows: u64 = top
        .iter()
        .filter(|r| r["kind"] == "kernel")
        .map(|r| r["count"].as_u64().unwrap())
        .sum();
    assert_eq!(kernel_rows as usize, kernels.len());
    // Thread names keep the process names (`Python`, `Ascend Hardware`), not `CPU`/`NPU`.
    let loaded = load(&dir, &Limits::default()).unwrap();
    let threads = &loaded.profiles[0].threads;
    assert!(
        threads.iter().any(|t| t == "Ascend Hardware / Stream 3"),
        "{threads:?}"
    );
    assert!(
        threads
            .iter()
            .all(|t| !t.starts_with("CPU") && !t.starts_with("NPU"))
    );
}

/// A real GPU trace named `rank0.json.gz` is found in directory mode; its device figures,
/// steps and rank equal an independent computation; the world size is the declared 16.
#[test]
#[ignore = "needs ../shared/fixtures"]
fn a_gpu_trace_of_any_name_gives_the_contracts_device_figures() {
    let dir = real("hta_negative_queue_16w");
    let v = read_json(&dir.join("rank0.json.gz"));
    let events = v["traceEvents"].as_array().unwrap();
    let (mut kernels, mut comm, mut memcpy) = (Vec::new(), Vec::new(), Vec::new());
    for e in events.iter().filter(|e| e["ph"] == "X") {
        let (s, d) = (ns(&e["ts"]), ns(&e["dur"]));
        let name = e["name"].as_str().unwrap_or("");
        match e["cat"].as_str().unwrap_or("") {
            "kernel" if name.starts_with("nccl") => comm.push((s, s + d)),
            "kernel" => kernels.push((s, s + d)),
            "gpu_memcpy" | "gpu_memset" => memcpy.push((s, s + d)),
            _ => {}
        }
    }
    assert!(!comm.is_empty() && !memcpy.is_empty());
    let report = report_json(&dir);
    let job = &report["jobs"][0];
    assert_eq!(report["jobs"].as_array().unwrap().len(), 1);
    assert_eq!(job["world_size"], 16);
    assert_eq!(job["world_size_declared"], true);
    let rank = &job["ranks"][0];
    assert_eq!(rank["rank"], 0);
    check_device(rank, &expected(&kernels, &comm, &memcpy));
    assert_eq!(steps_in(rank), steps_of(events));
    assert_eq!(steps_in(rank).len(), 5);
    // Kernel breakdown by type: plain sums of durations.
    let sum = |v: &[(i64, i64)]| v.iter().map(|x| x.1 - x.0).sum::<i64>();
    let types: BTreeMap<String, i64> = rank["kernel_types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["kind"].as_str().unwrap().to_string(),
                t["sum_ns"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(types["COMPUTATION"], sum(&kernels));
    assert_eq!(types["COMMUNICATION"], sum(&comm));
    assert_eq!(types["MEMORY"], sum(&memcpy));
    // The profiler's whole-trace span is not an op.
    let top = report["top"].as_array().unwrap();
    assert!(
        top.iter()
            .all(|r| !r["name"].as_str().unwrap().starts_with("PyTorch Profiler"))
    );
    // The step breakdown splits steps by device time (not a solid `other`).
    let row = &report["breakdown"][0];
    let dev = &row["device"];
    let parts: i64 = ["kernel", "comm", "memcpy", "idle"]
        .iter()
        .map(|k| dev[k].as_i64().unwrap())
        .sum();
    assert!(parts >= row["step_ns"].as_i64().unwrap(), "{row}");
}

/// HTA's CPU-only trace: rank 34 from `distributedInfo`, 5 steps, no device time.
#[test]
#[ignore = "needs ../shared/fixtures"]
fn a_cpu_only_trace_has_steps_and_no_device_time() {
    let dir = real("hta_cpu_only");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let v = read_json(&file);
    let report = report_json(&dir);
    let rank = &report["jobs"][0]["ranks"][0];
    assert_eq!(rank["rank"], v["distributedInfo"]["rank"]);
    assert_eq!(
        steps_in(rank),
        steps_of(v["traceEvents"].as_array().unwrap())
    );
    assert_eq!(steps_in(rank).len(), 5);
    assert_eq!(rank["device"]["busy_ns"], 0);
    assert_eq!(rank["device"]["idle_ns"], 0);
}

/// torch's own CPU profile with `profile_memory`: its memory is host memory (`Device Type` 0),
/// reported apart from device memory; the peak time is counted from the profile's start.
#[test]
#[ignore = "needs ../shared/fixtures"]
fn host_memory_is_reported_apart_from_device_memory() {
    let file = real("torch_cpu_withstack/cpu_withstack_rank0.pt.trace.json");
    let v = read_json(&file);
    let mem: Vec<&Value> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "[memory]")
        .collect();
    assert!(!mem.is_empty());
    let host = mem.iter().filter(|e| e["args"]["Device Type"] == 0).count();
    let report = report_json(&file);
    let rows = report["memory"].as_array().unwrap();
    let count = |kind: &str| {
        rows.iter()
            .filter(|m| m["kind"] == kind)
            .map(|m| m["events"].as_u64().unwrap() as usize)
            .sum::<usize>()
    };
    assert_eq!(count("host"), host);
    assert_eq!(count("device"), mem.len() - host);
    for m in rows {
        let since = m["peak_since_start_ns"].as_i64().unwrap();
        assert!((0..3_600_000_000_000).contains(&since), "{m}");
    }
}

/// The same trace as `.json` and `.json.gz`, and as `trace.json`: found whatever the name,
/// counted once, with a note; other JSON is ignored with a note.
#[test]
#[ignore = "needs ../shared/fixtures"]
fn the_same_trace_twice_is_counted_once_and_other_json_is_ignored() {
    let src = real("hta_cpu_only");
    let file = std::fs::read_dir(&src)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let text = serde_json::to_vec(&read_json(&file)).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("trace.json"), &text).unwrap();
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(tmp.path().join("trace.json.gz")).unwrap(),
        Default::default(),
    );
    gz.write_all(&text).unwrap();
    gz.finish().unwrap();
    std::fs::write(tmp.path().join("config.json"), br#"{"lr": 0.1}"#).unwrap();
    let loaded = load(tmp.path(), &Limits::default()).unwrap();
    assert_eq!(loaded.profiles.len(), 1);
    assert!(
        loaded
            .notes
            .iter()
            .any(|n| n.contains("same trace") && n.contains("counted once")),
        "{:?}",
        loaded.notes
    );
    assert!(
        loaded.notes.iter().any(|n| n.contains("config.json")),
        "{:?}",
        loaded.notes
    );
    let report = summarise(&loaded);
    assert_eq!(report.jobs.len(), 1);
    assert_eq!(report.jobs[0].ranks[0].files.len(), 1);
}

/// Two jobs' traces of the same rank (different processes, times and world sizes) are two
/// jobs: their step rows are kept apart and never ranked against each other.
#[test]
#[ignore = "needs ../shared/fixtures"]
fn profiles_of_different_jobs_are_never_summed_or_compared() {
    let src = real("hta_cpu_only");
    let file = std::fs::read_dir(&src)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let a = read_json(&file);
    let mut b = a.clone();
    b["distributedInfo"]["world_size"] = 2.into();
    for e in b["traceEvents"].as_array_mut().unwrap() {
        if e.get("pid").is_some() {
            e["pid"] = 999_999.into();
        }
        if let Some(ts) = e.get("ts").map(ns) {
            let t = ts + 3_600_000_000_000_000;
            e["ts"] = format!("{}.{:03}", t / 1000, t % 1000).into();
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("a.json"), serde_json::to_vec(&a).unwrap()).unwrap();
    std::fs::write(tmp.path().join("b.json"), serde_json::to_vec(&b).unwrap()).unwrap();
    let report = summarise(&load(tmp.path(), &Limits::default()).unwrap());
    assert_eq!(report.jobs.len(), 2);
    let ws: Vec<u32> = report.jobs.iter().map(|j| j.world_size).collect();
    assert!(
        ws.contains(&2)
            && ws.contains(
                &a["distributedInfo"]["world_size"]
                    .as_u64()
                    .unwrap()
                    .try_into()
                    .unwrap()
            )
    );
    let single = summarise(&load(&file, &Limits::default()).unwrap());
    for j in &report.jobs {
        let rows: Vec<_> = report.breakdown.iter().filter(|r| r.job == j.id).collect();
        assert_eq!(rows.len(), single.breakdown.len(), "{}", j.id);
        for (r, s) in rows.iter().zip(&single.breakdown) {
            assert_eq!(r.step_ns, s.step_ns, "not summed across jobs");
            assert!(!r.slowest, "not ranked across jobs");
        }
    }
}

/// CANN's step figures computed by its rules from torch_npu's own timeline agree with what
/// torch_npu wrote in `step_trace_time.csv` beside it (which the report shows as written), and the cluster view gives the report's
/// per-rank figures, on every real profile.
#[test]
#[ignore = "needs ../shared/fixtures"]
fn cann_rules_reproduce_step_trace_time_and_cluster_equals_report() {
    for level in ["level0", "level1", "level2"] {
        let dir = real(&format!("msinsight_pytorch/text/{level}"));
        let loaded = rlprof_report::load(&dir, &Default::default()).unwrap();
        let report = rlprof_report::summarise(&loaded);
        for (i, p) in loaded.profiles.iter().enumerate() {
            let table: Vec<_> = report
                .cann_steps
                .iter()
                .filter(|c| c.profile == i)
                .collect();
            assert!(!table.is_empty(), "{level}: no CANN rows");
            assert!(table.iter().all(|c| c.source == "step_trace_time.csv"));
            let ours = rlprof_report::summary::cann::computed(p, "job", i);
            for t in &table {
                let o = ours.iter().find(|o| o.step == t.step).unwrap_or_else(|| {
                    panic!("{level} rank {}: no step {}: {ours:?}", p.rank, t.step)
                });
                let pairs = [
                    ("Computing", o.computing_ns, t.computing_ns),
                    ("Communication", o.communication_ns, t.communication_ns),
                    (
                        "Communication(Not Overlapped)",
                        o.communication_not_overlapped_ns,
                        t.communication_not_overlapped_ns,
                    ),
                    ("Free", o.free_ns, t.free_ns),
                    ("Stage", o.stage_ns, t.stage_ns),
                ];
                // CANN sums its overlap-analysis events, each written in microseconds with
                // three decimals, and writes the sums as floats: within 200 ns of ours (the
                // largest difference measured on these six ranks: 125 ns, on Stage).
                for (name, a, b) in pairs {
                    assert!(
                        a.abs_diff(b) <= 200,
                        "{level} rank {} step {}: {name} ours {a} ns, CANN {b} ns",
                        p.rank,
                        t.step
                    );
                }
            }
        }
        let cluster = rlprof_report::cluster::from_report(&report);
        assert_eq!(cluster.steps.len(), report.cann_steps.len());
        for s in &cluster.steps {
            let c = report
                .cann_steps
                .iter()
                .find(|c| c.rank == s.rank && c.step == s.step)
                .unwrap();
            assert_eq!(s.step_ms, c.stage_ns as f64 / 1e6);
            assert_eq!(s.free_ms, c.free_ns as f64 / 1e6);
            assert_eq!(s.computing_ms, c.computing_ns as f64 / 1e6);
        }
    }
}
