//! Real profiles written by other tools, and synthetic inputs of the same layouts: each test
//! checks the JSON contract of `report --format json` against an independent computation over
//! the file's events, done here with serde_json.
//!
//! The real profiles are third-party files kept outside the repository (`$RLPROF_FIXTURES`,
//! by default `../shared/fixtures` beside the checkout; see PROVENANCE.md there), so the tests
//! that read them are `#[ignore = "needs ../shared/fixtures"]` and CI runs them by name
//! (`.ci/parts/05-fixtures.sh`). A fresh clone's `cargo test` runs the synthetic ones.

use rlprof_report::{Limits, load, render_json, summarise};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

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

/// `report --format json` of a path, parsed.
fn report_json(path: &Path) -> Value {
    let loaded = load(path, &Limits::default()).unwrap();
    serde_json::from_str(&render_json(&summarise(&loaded)).unwrap()).unwrap()
}

/// The kind (`op`, `api`, `kernel`, ...) of the top-table row named `name`.
fn top_kind(report: &Value, name: &str) -> Option<String> {
    report["top"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .map(|r| r["kind"].as_str().unwrap().to_string())
}

/// Microseconds to nanoseconds: a decimal text exactly (in i128, half away from zero past the
/// third decimal), anything else through f64.
fn ns(v: &Value) -> i64 {
    let text = match v {
        Value::String(s) => s.trim().to_string(),
        v => return (v.as_f64().unwrap() * 1000.0).round() as i64,
    };
    if text.contains(['e', 'E']) {
        return (text.parse::<f64>().unwrap() * 1000.0).round() as i64;
    }
    let (neg, body) = text
        .strip_prefix('-')
        .map_or((false, text.as_str()), |b| (true, b));
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    let mut digits: Vec<u8> = frac.bytes().collect();
    digits.resize(digits.len().max(4), b'0');
    let whole: i128 = if int.is_empty() {
        0
    } else {
        int.parse().unwrap()
    };
    let milli: i128 = std::str::from_utf8(&digits[..3]).unwrap().parse().unwrap();
    let round = i128::from(digits[3] >= b'5');
    let v = whole * 1000 + milli + round;
    (if neg { -v } else { v }) as i64
}

/// Total length of the union of intervals (sort and sweep, written independently of the crate).
fn union_len(mut v: Vec<(i64, i64)>) -> i64 {
    v.sort();
    let (mut total, mut cur): (i64, Option<(i64, i64)>) = (0, None);
    for (s, e) in v {
        cur = match cur {
            Some((cs, ce)) if s <= ce => Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                Some((s, e))
            }
            None => Some((s, e)),
        };
    }
    total + cur.map_or(0, |(s, e)| e - s)
}

/// Time covered by both interval sets.
fn overlap_len(a: &[(i64, i64)], b: &[(i64, i64)]) -> i64 {
    // |A ∩ B| = |A| + |B| − |A ∪ B| for unions of intervals.
    let both: Vec<_> = a.iter().chain(b).copied().collect();
    union_len(a.to_vec()) + union_len(b.to_vec()) - union_len(both)
}

/// The expected device figures: (kernel, comm, memcpy, busy, idle, overlapped).
struct Expected {
    kernel: i64,
    comm: i64,
    memcpy: i64,
    busy: i64,
    idle: i64,
    overlapped: i64,
}

fn expected(kernels: &[(i64, i64)], comm: &[(i64, i64)], memcpy: &[(i64, i64)]) -> Expected {
    let all: Vec<_> = kernels.iter().chain(comm).chain(memcpy).copied().collect();
    let span =
        all.iter().map(|x| x.1).max().unwrap_or(0) - all.iter().map(|x| x.0).min().unwrap_or(0);
    let busy = union_len(all.clone());
    Expected {
        kernel: union_len(kernels.to_vec()),
        comm: union_len(comm.to_vec()),
        memcpy: union_len(memcpy.to_vec()),
        busy,
        idle: span - busy,
        overlapped: overlap_len(kernels, comm),
    }
}

fn check_device(rank: &Value, want: &Expected) {
    let d = &rank["device"];
    for (k, v) in [
        ("kernel_ns", want.kernel),
        ("comm_ns", want.comm),
        ("memcpy_ns", want.memcpy),
        ("busy_ns", want.busy),
        ("idle_ns", want.idle),
    ] {
        assert_eq!(d[k].as_i64(), Some(v), "{k}: {d}");
    }
    assert_eq!(
        rank["overlap"]["overlapped_ns"].as_i64(),
        Some(want.overlapped)
    );
    let t = &rank["temporal"];
    assert_eq!(t["compute_ns"].as_i64(), Some(want.kernel));
    assert_eq!(t["non_compute_ns"].as_i64(), Some(want.busy - want.kernel));
    assert_eq!(t["idle_ns"].as_i64(), Some(want.idle));
}

/// Steps of the trace's `ProfilerStep#N` events: (N, dur ns), sorted.
fn steps_of(events: &[Value]) -> Vec<(u64, i64)> {
    let mut v: Vec<(u64, i64)> = events
        .iter()
        .filter(|e| e["ph"] == "X")
        .filter_map(|e| {
            let n = e["name"]
                .as_str()?
                .strip_prefix("ProfilerStep#")?
                .parse()
                .ok()?;
            let cat = e["cat"].as_str().unwrap_or("");
            (cat != "gpu_user_annotation").then(|| (n, ns(&e["dur"])))
        })
        .collect();
    v.sort();
    v
}

fn steps_in(rank: &Value) -> Vec<(u64, i64)> {
    rank["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["step"].as_u64().unwrap(), s["dur_ns"].as_i64().unwrap()))
        .collect()
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

/// 2021-era kineto categories (`Operator`, `Kernel`, `Runtime`, `Memcpy`, as in kineto's
/// tb_plugin samples) are read like today's.
#[test]
fn kineto_2021_categories_are_read_case_insensitively() {
    let trace = r#"{"schemaVersion": 1, "traceEvents": [
      {"ph": "X", "cat": "Operator", "name": "ProfilerStep#5", "pid": 1, "tid": 1, "ts": 100, "dur": 100},
      {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 110, "dur": 20},
      {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 115, "dur": 5},
      {"ph": "X", "cat": "Kernel", "name": "volta_sgemm", "pid": 0, "tid": 7, "ts": 130, "dur": 30},
      {"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7, "ts": 170, "dur": 10},
      {"ph": "X", "cat": "Kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float", "pid": 0, "tid": 8, "ts": 150, "dur": 20}
    ]}"#;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("worker0.pt.trace.json"), trace).unwrap();
    let report = report_json(tmp.path());
    let rank = &report["jobs"][0]["ranks"][0];
    assert_eq!(steps_in(rank), vec![(5, 100_000)]);
    let want = expected(
        &[(130_000, 160_000)],
        &[(150_000, 170_000)],
        &[(170_000, 180_000)],
    );
    check_device(rank, &want);
    let kind = |n: &str| top_kind(&report, n);
    assert_eq!(kind("aten::mm").as_deref(), Some("op"));
    assert_eq!(kind("cudaLaunchKernel").as_deref(), Some("api"));
    assert_eq!(kind("volta_sgemm").as_deref(), Some("kernel"));
}

/// Other accelerators' kineto categories: MTIA's device events (`mtia_ccp_events`) are
/// kernels, `*_runtime` / `*_driver` host calls (`mtia_runtime`, `xpu_runtime`,
/// `privateuse1_driver`) are API calls.
#[test]
fn other_accelerators_categories_give_kernels_and_api_calls() {
    let trace = r#"{"schemaVersion": 1, "traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 100, "dur": 100},
      {"ph": "X", "cat": "mtia_runtime", "name": "mtiaLaunch", "pid": 1, "tid": 1, "ts": 105, "dur": 4},
      {"ph": "X", "cat": "xpu_runtime", "name": "urEnqueueKernelLaunch", "pid": 1, "tid": 1, "ts": 110, "dur": 3},
      {"ph": "X", "cat": "privateuse1_driver", "name": "devLaunch", "pid": 1, "tid": 1, "ts": 114, "dur": 2},
      {"ph": "X", "cat": "mtia_ccp_events", "name": "fused_gemm", "pid": 0, "tid": 7, "ts": 120, "dur": 40},
      {"ph": "X", "cat": "mtia_ccp_events", "name": "fused_add", "pid": 0, "tid": 7, "ts": 165, "dur": 20}
    ]}"#;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("rank-0.json"), trace).unwrap();
    let report = report_json(tmp.path());
    let rank = &report["jobs"][0]["ranks"][0];
    assert_eq!(steps_in(rank), vec![(2, 100_000)]);
    check_device(
        rank,
        &expected(&[(120_000, 160_000), (165_000, 185_000)], &[], &[]),
    );
    let kind = |n: &str| top_kind(&report, n);
    assert_eq!(kind("fused_gemm").as_deref(), Some("kernel"));
    for api in ["mtiaLaunch", "urEnqueueKernelLaunch", "devLaunch"] {
        assert_eq!(kind(api).as_deref(), Some("api"), "{api}");
    }
}

/// What the HCCL stream of a newer torch_npu `trace_view.json` holds on `Ascend Hardware`
/// (MindStudio Insight's test data, `test/data/pytorch/text/level*`): the collective's transfer
/// tasks (`SDMA`) are parts of the collective (not kernels, not collectives of their own);
/// `Notify Wait`, `Write Value` and a compute stream's `EVENT_WAIT` are synchronisation, not
/// device work. With them, the report's kernel and
/// communication time equal CANN's `step_trace_time.csv` on those six real ranks to within
/// 0.5 us; here, against the events the test wrote.
#[test]
fn hccl_stream_tasks_and_stream_waits_are_not_kernels() {
    let trace = r#"[
      {"ph": "M", "name": "process_name", "pid": 10, "args": {"name": "Ascend Hardware"}},
      {"ph": "M", "name": "process_labels", "pid": 10, "args": {"labels": "NPU"}},
      {"ph": "M", "name": "thread_name", "pid": 10, "tid": 2, "args": {"name": "Stream 2"}},
      {"ph": "M", "name": "thread_name", "pid": 10, "tid": 4, "args": {"name": "Stream 4"}},
      {"ph": "M", "name": "process_name", "pid": 11, "args": {"name": "HCCL"}},
      {"ph": "M", "name": "thread_name", "pid": 11, "tid": 1, "args": {"name": "Communication"}},
      {"ph": "M", "name": "process_name", "pid": 12, "args": {"name": "Python"}},
      {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#7", "pid": 12, "tid": 1, "ts": "100.000", "dur": 200},
      {"ph": "X", "cat": "enqueue", "name": "Enqueue@MatMul", "pid": 12, "tid": 1, "ts": "105.000", "dur": 2},
      {"ph": "X", "name": "aclnnMm_MatMulCommon_MatMulV2", "pid": 10, "tid": 2, "ts": "110.000", "dur": 20, "args": {"Task Type": "AI_CORE"}},
      {"ph": "X", "name": "EVENT_WAIT", "pid": 10, "tid": 2, "ts": "131.000", "dur": 60, "args": {"Task Type": "EVENT_WAIT_SQE"}},
      {"ph": "X", "name": "hcom_allReduce__586_0_1", "pid": 11, "tid": 1, "ts": "140.000", "dur": 50},
      {"ph": "X", "name": "Notify Wait", "pid": 10, "tid": 4, "ts": "140.000", "dur": 30, "args": {"Task Type": "Notify Wait"}},
      {"ph": "X", "name": "SDMA", "pid": 10, "tid": 4, "ts": "170.000", "dur": 15, "args": {"Task Type": "SDMA"}},
      {"ph": "X", "name": "Write Value", "pid": 10, "tid": 4, "ts": "185.000", "dur": 1, "args": {"Task Type": "Write Value"}},
      {"ph": "X", "name": "SDMA", "pid": 10, "tid": 4, "ts": "186.000", "dur": 4, "args": {"Task Type": "SDMA"}}
    ]"#;
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp
        .path()
        .join("host_1_20250101000000000_ascend_pt/ASCEND_PROFILER_OUTPUT");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("trace_view.json"), trace).unwrap();
    let report = report_json(tmp.path());
    let rank = &report["jobs"][0]["ranks"][0];
    assert_eq!(steps_in(rank), vec![(7, 200_000)]);
    check_device(
        rank,
        &expected(&[(110_000, 130_000)], &[(140_000, 190_000)], &[]),
    );
    // The transfers are parts of the collective, not collectives of their own.
    let comm: Vec<&str> = report["comm"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(comm, ["hcom_allReduce__586_0_1"]);
    // torch_npu's task queue is the runtime layer, as its DB's `queue` API type is read.
    assert_eq!(
        top_kind(&report, "Enqueue@MatMul").as_deref(),
        Some("runtime")
    );
}

/// `kernel_details.csv`: HCCL tasks are communication, `Step Id` gives the steps, a lane per
/// stream; `memory_record.csv` gives the device memory curve; `communication.json` a table.
#[test]
fn ascend_csv_outputs_feed_the_same_model() {
    let tmp = tempfile::tempdir().unwrap();
    let pt = tmp.path().join("node_4242_20250101000000000_ascend_pt");
    let out = pt.join("ASCEND_PROFILER_OUTPUT");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(
        pt.join("profiler_info_5.json"),
        r#"{"config": {}, "rank_id": 5}"#,
    )
    .unwrap();
    std::fs::write(
        out.join("kernel_details.csv"),
        "Step Id,Device_id,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),Block Dim\n\
         1,0,MatMulV2,MatMulV2,AI_CORE,1000.000\t,10.000\t,0.000\t,8\n\
         1,0,hcom_allReduce__1_1_1,hcom_allReduce_,HCCL,1005.000\t,20.000\t,0.000\t,0\n\
         2,0,Add,Add,AI_VECTOR_CORE,1030.000\t,5.000\t,0.000\t,4\n",
    )
    .unwrap();
    std::fs::write(
        out.join("memory_record.csv"),
        "Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),Stream Ptr,Device Type\n\
         PTA,1000.0,1.0,2.0,1.0,0,NPU:0\nAPP,1000.0,50.0,60.0,50.0,0,NPU:0\nPTA,1010.0,3.0,4.0,3.0,0,NPU:0\nPTA,1020.0,2.0,4.0,2.0,0,NPU:0\n",
    )
    .unwrap();
    std::fs::write(
        out.join("communication.json"),
        r#"{"step1": {"collective": {"hcom_allReduce__1_1_1@123": {"Communication Time Info": {"Elapse Time(ms)": 0.02, "Wait Time(ms)": 0.005, "Transit Time(ms)": 0.01}, "Communication Bandwidth Info": {"HCCS": {"Transit Size(MB)": 1.0, "Transit Time(ms)": 0.01}}}}}}"#,
    )
    .unwrap();
    // Two ops' allocations on the PTA curve (same time, same total just after), one released
    // before the peak; a third that matches no point of the curve.
    std::fs::write(
        out.join("operator_memory.csv"),
        "Name,Size(KB),Allocation Time(us),Release Time(us),Active Release Time(us),Duration(us),\
         Active Duration(us),Allocation Total Allocated(MB),Allocation Total Reserved(MB),\
         Allocation Total Active(MB),Release Total Allocated(MB),Release Total Reserved(MB),\
         Release Total Active(MB),Stream Ptr,Device Type\n\
         aten::empty,1024.0,1000.000\t,,,,,1.0,2.0,1.0,,,,0,NPU:0\n\
         aten::mm,2048.0,1010.000\t,1020.000\t,,10.0,,3.0,4.0,3.0,2.0,4.0,2.0,0,NPU:0\n\
         aten::add,4.0,1005.000\t,,,,,9.0,9.0,9.0,,,,0,NPU:0\n",
    )
    .unwrap();
    let report = report_json(tmp.path());
    let rank = &report["jobs"][0]["ranks"][0];
    assert_eq!(rank["rank"], 5);
    // profiler_info_5.json is the profile's own metadata, not a stray JSON file.
    assert!(
        report["notes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| !n.as_str().unwrap().contains("profiler_info")),
        "{}",
        report["notes"]
    );
    check_device(
        rank,
        &expected(
            &[(1_000_000, 1_010_000), (1_030_000, 1_035_000)],
            &[(1_005_000, 1_025_000)],
            &[],
        ),
    );
    let steps: Vec<u64> = rank["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, vec![1, 2]);
    assert!(
        rank["steps"][0]["dur_ns"].is_null(),
        "a Step Id has no duration"
    );
    let mem = &report["memory"][0];
    assert_eq!(mem["peak_bytes"], 3 * 1024 * 1024);
    assert_eq!(mem["kind"], "device");
    let live: Vec<(&str, i64)> = mem["at_peak"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["op"].as_str().unwrap(), o["bytes"].as_i64().unwrap()))
        .collect();
    assert_eq!(live, [("aten::mm", 2 << 20), ("aten::empty", 1 << 20)]);
    let comm = report["inputs"][0]["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["title"] == "communication.json")
        .unwrap();
    assert_eq!(comm["rows"][0][2], "hcom_allReduce__1_1_1@123");
    assert_eq!(comm["rows"][0][8], "100.000000");
}
