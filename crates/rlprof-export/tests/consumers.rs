//! Consumer tests: the real tools read our outputs. `#[ignore = "needs ..."]`: CI installs
//! msprof-analyze and HolisticTraceAnalysis into RLPROF_VENV (default /opt/rlprof-venv) and runs
//! them by name with `-- --ignored`.

mod support;

use rlprof_export::analyse_tree;
use rlprof_profiler::plan::{Content, Level, Tool};
use std::path::Path;
use std::process::Command;
use support::*;

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("spawn");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

#[test]
#[ignore = "needs msprof-analyze in RLPROF_VENV (/opt/rlprof-venv)"]
fn msprof_analyze_cluster_reads_two_rank_npu_collection() {
    let py = consumer_python();
    let tmp = tempfile::tempdir().unwrap();
    let mut s = Script::npu(Level::Level1, &[Content::Npu, Content::Cpu]);
    s.steps = vec![1];
    collect(tmp.path(), &s);
    let r = analyse_tree(tmp.path(), 2, &|_| {}).unwrap();
    assert_eq!(r.parsed(), 2);
    // verl's layout: end-to-end npu collections go to {save_path}/train/.
    let step_dir = tmp.path().join("train");
    let exe = py.parent().unwrap().join("msprof-analyze");
    let out_dir = tmp.path().join("cluster_out");
    let log = run(Command::new(exe)
        .args(["cluster", "-d"])
        .arg(&step_dir)
        .arg("-o")
        .arg(&out_dir));
    let csv_path = find(&out_dir, "cluster_step_trace_time.csv").unwrap_or_else(|| {
        panic!(
            "no cluster_step_trace_time.csv under {}:\n{log}",
            out_dir.display()
        )
    });
    let (h, rows) = read_csv(&csv_path);
    let col = |name: &str| {
        h.iter()
            .position(|c| c == name)
            .unwrap_or_else(|| panic!("{name} in {h:?}"))
    };
    let (ty, idx, comp) = (col("Type"), col("Index"), col("Computing"));
    let mut ranks: Vec<String> = rows
        .iter()
        .filter(|r| r[ty] == "rank")
        .map(|r| {
            let v: f64 = r[comp].parse().unwrap();
            assert!(v > 0.0, "rank {} has zero computing time: {r:?}", r[idx]);
            r[idx].clone()
        })
        .collect();
    ranks.sort();
    assert_eq!(ranks, ["0", "1"], "{rows:?}");
    assert!(
        find(&out_dir, "cluster_communication.json").is_some(),
        "{log}"
    );
}

#[test]
#[ignore = "needs HolisticTraceAnalysis in RLPROF_VENV (/opt/rlprof-venv)"]
fn holistic_trace_analysis_reads_two_rank_torch_collection() {
    let py = consumer_python();
    let tmp = tempfile::tempdir().unwrap();
    let mut s = Script::npu(
        Level::Level0,
        &[
            Content::Cuda,
            Content::Cpu,
            Content::Memory,
            Content::Shapes,
        ],
    );
    s.tool = Tool::Torch;
    s.steps = vec![2];
    collect(tmp.path(), &s);
    assert_eq!(analyse_tree(tmp.path(), 2, &|_| {}).unwrap().parsed(), 2);
    // verl's layout: torch traces are flat in save_path, named by build_trace_basename.
    let dir = tmp.path().to_path_buf();
    let script = r#"
import sys, json, glob, gzip
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir=sys.argv[1])
ranks = sorted(int(r) for r in a.t.get_ranks())
iters = sorted(int(i) for i in a.t.get_iterations(0))
tb = a.get_temporal_breakdown(visualize=False)
ours = {}
for f in glob.glob(sys.argv[1] + "/*.json.gz"):
    t = json.load(gzip.open(f))
    ours[t["distributedInfo"]["rank"]] = sum(e["dur"] for e in t["traceEvents"] if e.get("cat") == "kernel")
print(json.dumps({"ranks": ranks, "iters": iters,
  "hta_compute_us": {int(r): float(c) for r, c in zip(tb["rank"], tb["compute_time(us)"])},
  "our_kernel_us": ours}))
"#;
    let out = run(Command::new(&py).arg("-c").arg(script).arg(&dir));
    let line = out
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("{out}"));
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(v["ranks"], serde_json::json!([0, 1]), "{out}");
    // verl's torch steps: `ProfilerStep#0` over the step (this script runs no update
    // mini-batch), then the one `stop()` opens; HTA counts the complete ones.
    assert_eq!(v["iters"], serde_json::json!([0]), "{out}");
    for rank in ["0", "1"] {
        let hta = v["hta_compute_us"][rank].as_f64().unwrap();
        let ours = v["our_kernel_us"][rank].as_f64().unwrap();
        assert!(ours >= 200.0, "10 kernels of >= 20us each: {ours}");
        // HTA rounds each kernel down to whole microseconds.
        assert!(
            (hta - ours).abs() <= 0.1 * ours,
            "rank {rank}: HTA {hta} vs ours {ours}"
        );
    }
}

fn find(dir: &Path, name: &str) -> Option<std::path::PathBuf> {
    for e in std::fs::read_dir(dir).ok()?.filter_map(|e| e.ok()) {
        let p = e.path();
        if p.file_name().is_some_and(|n| n == name) {
            return Some(p);
        }
        if p.is_dir()
            && let Some(f) = find(&p, name)
        {
            return Some(f);
        }
    }
    None
}
