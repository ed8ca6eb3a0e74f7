//! `rlprof train` as separate processes under `mpirun -np 2` (MPICH's hydra), one rank each.
//!
//! Every test is `#[ignore = "needs ..."]`: it needs MPICH's `mpirun` and a binary built with
//! `--features mpi` (CI: `apt-get install mpich libmpich-dev libclang-dev`, then
//! `cargo test --release -p rlprof-cli --features mpi --test mpi -- --ignored`). Run without the
//! feature, a test fails instead of passing silently. `RLPROF_MPIRUN` names the launcher
//! (default `mpirun`).
//! Each launch gets its own `TMPDIR`: parallel mpiruns collide on their session directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_rlprof");
/// No launch may take longer than this (a hang fails the test instead of blocking CI).
const LAUNCH_LIMIT: Duration = Duration::from_secs(120);

/// Fails the test when the binary cannot launch ranks as processes.
fn require_mpi_build() {
    if !cfg!(feature = "mpi") {
        panic!("the MPI tests need rlprof-cli built with --features mpi");
    }
}

/// A small, fast job: 3 RL steps, step 2 profiled at level1 on every rank.
fn overrides(root: &Path, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = vec![
        format!("global_profiler.save_path={}", root.join("prof").display()),
        "global_profiler.steps=[2]".into(),
        "actor_rollout_ref.actor.profiler.tool_config.npu.level=level1".into(),
        // These tests read the text layout's step_trace_time.csv and communication.json.
        "+actor_rollout_ref.actor.profiler.tool_config.npu.export_type=text".into(),
        "trainer.total_training_steps=3".into(),
        "trainer.sft_warmup_steps=2".into(),
        "trainer.n_gpus_per_node=2".into(),
        format!("trainer.default_local_dir={}", root.join("ckpt").display()),
        "data.train_batch_size=4".into(),
        "actor_rollout_ref.actor.ppo_mini_batch_size=2".into(),
        "actor_rollout_ref.rollout.n=2".into(),
        "actor_rollout_ref.model.hidden_size=32".into(),
        "actor_rollout_ref.model.num_hidden_layers=2".into(),
        "actor_rollout_ref.model.intermediate_size=64".into(),
    ];
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

struct Outcome {
    ok: bool,
    code: Option<i32>,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

impl Outcome {
    fn text(&self) -> String {
        format!(
            "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs `cmd` with a hard time limit (killed and reported as a hang past it).
fn run_limited(mut cmd: Command) -> Outcome {
    let t0 = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let (out_p, err_p) = (dir.path().join("out"), dir.path().join("err"));
    cmd.stdout(Stdio::from(std::fs::File::create(&out_p).unwrap()))
        .stderr(Stdio::from(std::fs::File::create(&err_p).unwrap()));
    let mut child = cmd.spawn().expect("spawn the launcher");
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > LAUNCH_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{cmd:?} hung for more than {LAUNCH_LIMIT:?}\n--- stdout\n{}\n--- stderr\n{}",
                std::fs::read_to_string(&out_p).unwrap_or_default(),
                std::fs::read_to_string(&err_p).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Outcome {
        ok: status.success(),
        code: status.code(),
        stdout: std::fs::read_to_string(&out_p).unwrap(),
        stderr: std::fs::read_to_string(&err_p).unwrap(),
        elapsed: t0.elapsed(),
    }
}

/// `mpirun [launcher args] -np 2 rlprof train --quiet OVERRIDES` with its own TMPDIR.
fn mpirun(root: &Path, launcher_args: &[&str], env: &[(&str, &str)], extra: &[&str]) -> Outcome {
    let launcher = std::env::var("RLPROF_MPIRUN").unwrap_or_else(|_| "mpirun".into());
    let tmp = root.join("mpi-tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut cmd = Command::new(launcher);
    cmd.args(launcher_args)
        .args(["-np", "2", BIN, "train", "--quiet"])
        .args(overrides(root, extra))
        .env("TMPDIR", &tmp)
        .env("RUST_LOG", "warn");
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_limited(cmd)
}

/// The same job with in-process ranks (threads of one process).
fn in_process(root: &Path, env: &[(&str, &str)]) -> Outcome {
    let mut cmd = Command::new(BIN);
    cmd.args(["train", "--quiet"])
        .args(overrides(root, &[]))
        .env("RUST_LOG", "warn");
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_limited(cmd)
}

/// Collection directories (final names and unfinished `.tmp` ones) below `dir`.
fn collections(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if !p.is_dir() {
            continue;
        }
        if p.join("rlprof_raw").is_dir() {
            out.push(p);
        } else {
            out.extend(collections(&p));
        }
    }
    out.sort();
    out
}

/// The rank of a collection (its one raw file's name).
fn rank_of(collection: &Path) -> u32 {
    let files: Vec<String> = std::fs::read_dir(collection.join("rlprof_raw"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files.len(), 1, "one raw file per collection: {files:?}");
    files[0]
        .strip_prefix("rank_")
        .and_then(|s| s.strip_suffix(".rlraw"))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("raw file name {}", files[0]))
}

fn read_params(p: &Path) -> Vec<f32> {
    std::fs::read(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn analyse(path: &Path) -> Outcome {
    let mut cmd = Command::new(BIN);
    cmd.arg("analyse").arg(path);
    run_limited(cmd)
}

/// Per-rank step time (µs) from a parsed collection's `step_trace_time.csv`.
fn step_trace(collection: &Path) -> Vec<(String, f64)> {
    let csv = collection.join("ASCEND_PROFILER_OUTPUT/step_trace_time.csv");
    let text = std::fs::read_to_string(&csv).unwrap_or_else(|e| panic!("{}: {e}", csv.display()));
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let stage = header.iter().position(|c| *c == "Stage").unwrap();
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[1].to_string(), f[stage].parse().unwrap())
        })
        .collect()
}

#[test]
#[ignore = "needs mpirun (MPICH) and --features mpi"]
fn two_processes_train_collect_per_rank_and_match_in_process_ranks() {
    require_mpi_build();
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("mpi"), tmp.path().join("threads"));
    let pa = tmp.path().join("mpi.params");
    let pb = tmp.path().join("threads.params");
    let env_a = [("RLPROF_TEST_FINAL_PARAMS", pa.to_str().unwrap())];
    let env_b = [("RLPROF_TEST_FINAL_PARAMS", pb.to_str().unwrap())];
    let mpi = mpirun(&a, &[], &env_a, &[]);
    assert!(mpi.ok, "mpirun training failed:\n{}", mpi.text());
    let threads = in_process(&b, &env_b);
    assert!(
        threads.ok,
        "in-process training failed:\n{}",
        threads.text()
    );

    // Only rank 0 reports the run; every rank lists its own collection.
    assert_eq!(
        mpi.stdout.matches("trained 3 steps on 2 rank(s)").count(),
        1,
        "{}",
        mpi.text()
    );
    assert!(mpi.stdout.contains("rank 1: profiling: 1 collection(s)"));

    // One collection per process, distinct directories, each with only its own rank's file.
    let cols = collections(&a.join("prof"));
    assert_eq!(cols.len(), 2, "{cols:?}");
    let mut ranks: Vec<u32> = cols.iter().map(|c| rank_of(c)).collect();
    ranks.sort();
    assert_eq!(ranks, vec![0, 1]);
    let pid = |c: &Path| {
        c.file_name()
            .unwrap()
            .to_string_lossy()
            .split('_')
            .nth(1)
            .map(String::from)
    };
    assert_ne!(
        pid(&cols[0]),
        pid(&cols[1]),
        "each process names its own directory"
    );
    let mut clocks = Vec::new();
    for c in &cols {
        assert!(
            !c.to_string_lossy().ends_with(".tmp"),
            "{} unfinished",
            c.display()
        );
        let rank = rank_of(c);
        let info: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(c.join(format!("profiler_info_{rank}.json"))).unwrap(),
        )
        .unwrap();
        // Monotonic base and wall-clock offset recorded per rank.
        let start = &info["start_info"];
        assert!(start["clockMonotonicRaw"].as_u64().unwrap() > 0, "{start}");
        assert!(start["collectionTimeBegin"].as_u64().unwrap() > 1_600_000_000_000_000_000);
        clocks.push((
            start["clockMonotonicRaw"].as_u64().unwrap() as i128,
            start["collectionTimeBegin"].as_u64().unwrap() as i128,
        ));
        let steps = step_trace(c);
        assert_eq!(steps.len(), 1, "{steps:?}");
        assert_eq!(steps[0].0, "2");
        assert!(steps[0].1 > 0.0);
        let comm = c.join("ASCEND_PROFILER_OUTPUT/communication.json");
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&comm).unwrap()).unwrap();
        let ops = v["step2"]["collective"].as_object().unwrap();
        assert!(
            ops.keys().any(|k| k.starts_with("reduce_scatter")),
            "{ops:?}"
        );
        assert!(ops.keys().any(|k| k.starts_with("all_gather")), "{ops:?}");
    }
    // Same host: one monotonic base (both ranks started step 2 within a moment of each other
    // on it) and the same wall-clock offset, recorded by each rank.
    let ((m0, w0), (m1, w1)) = (clocks[0], clocks[1]);
    assert!(
        (m0 - m1).abs() < 2_000_000_000,
        "monotonic starts {m0} vs {m1}"
    );
    let skew = ((w0 - m0) - (w1 - m1)).abs();
    assert!(
        skew < 50_000_000,
        "wall - monotonic offsets differ by {skew} ns"
    );
    let r = analyse(&a.join("prof"));
    assert!(r.ok, "rlprof analyse:\n{}", r.text());

    let (x, y) = (read_params(&pa), read_params(&pb));
    assert_eq!(x.len(), y.len());
    assert!(!x.is_empty());
    let worst = x
        .iter()
        .zip(&y)
        .map(|(p, q)| (p - q).abs() / q.abs().max(1e-3))
        .fold(0f32, f32::max);
    assert!(
        worst < 1e-5,
        "MPI and in-process parameters differ (worst rel {worst})"
    );
}

#[test]
#[ignore = "needs mpirun (MPICH) and --features mpi"]
fn world_size_mismatch_is_a_clear_start_up_error() {
    require_mpi_build();
    let tmp = tempfile::tempdir().unwrap();
    let out = mpirun(tmp.path(), &[], &[], &["trainer.n_gpus_per_node=1"]);
    assert!(!out.ok, "{}", out.text());
    assert!(
        out.stderr
            .contains("= 1 ranks, but the launcher started 2 processes"),
        "{}",
        out.text()
    );
    assert!(collections(&tmp.path().join("prof")).is_empty());
}

#[test]
#[ignore = "needs mpirun (MPICH) and --features mpi"]
fn a_failing_rank_stops_the_job_naming_it_and_peers_keep_their_collection() {
    require_mpi_build();
    let tmp = tempfile::tempdir().unwrap();
    let out = mpirun(tmp.path(), &[], &[("RLPROF_TEST_FAIL_RANK", "1:2")], &[]);
    assert!(!out.ok, "{}", out.text());
    assert!(
        out.stderr
            .contains("error: rank 0: communication: rank 1 failed: injected test fault at step 2"),
        "{}",
        out.text()
    );
    // The step-2 collections of both ranks were closed on the way out and parse.
    let cols = collections(&tmp.path().join("prof"));
    assert_eq!(cols.len(), 2, "{cols:?}");
    let r = analyse(&tmp.path().join("prof"));
    assert!(r.ok, "{}", r.text());
    let rank0 = cols.iter().find(|c| rank_of(c) == 0).unwrap();
    assert!(!rank0.to_string_lossy().ends_with(".tmp"));
    assert_eq!(step_trace(rank0)[0].0, "2");
}

#[test]
#[ignore = "needs mpirun (MPICH) and --features mpi"]
fn a_crashed_rank_is_named_and_the_survivor_collection_parses() {
    require_mpi_build();
    let tmp = tempfile::tempdir().unwrap();
    // Without auto-cleanup hydra lets rank 0 notice the death itself (no SIGKILL).
    let out = mpirun(
        tmp.path(),
        &["-disable-auto-cleanup"],
        &[
            ("RLPROF_TEST_FAIL_RANK", "1:2:exit"),
            ("RLPROF_MPI_TIMEOUT_S", "60"),
        ],
        &[],
    );
    assert!(!out.ok, "{}", out.text());
    assert!(
        out.stderr
            .contains("rank 0: communication: rank 1 failed: process")
            && out.stderr.contains("exited without notice"),
        "{}",
        out.text()
    );
    assert!(
        out.elapsed < Duration::from_secs(60),
        "noticed by pid, not the deadline"
    );
    let cols = collections(&tmp.path().join("prof"));
    let rank0 = cols.iter().find(|c| rank_of(c) == 0).unwrap();
    assert!(
        !rank0.to_string_lossy().ends_with(".tmp"),
        "{}",
        rank0.display()
    );
    let r = analyse(rank0);
    assert!(r.ok, "{}", r.text());
    assert_eq!(step_trace(rank0)[0].0, "2");

    // With hydra's default clean-up the job ends at once, non-zero, naming the rank.
    let tmp2 = tempfile::tempdir().unwrap();
    let out = mpirun(
        tmp2.path(),
        &[],
        &[("RLPROF_TEST_FAIL_RANK", "1:2:exit")],
        &[],
    );
    assert!(!out.ok, "{}", out.text());
    assert!(
        out.stderr
            .contains("rank 1: RLPROF_TEST_FAIL_RANK: exiting at step 2"),
        "{}",
        out.text()
    );
}

/// Rows of a CSV file as header-keyed maps.
fn csv_rows(path: &Path) -> Vec<std::collections::HashMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    let header: Vec<String> = lines.next().unwrap().split(',').map(String::from).collect();
    lines
        .map(|l| {
            header
                .iter()
                .cloned()
                .zip(l.split(',').map(String::from))
                .collect()
        })
        .collect()
}

/// A slow-rank run (rank 1 sleeps 200 ms per step), steps 2 and 3 profiled, with the cluster
/// analysis done.
fn slow_rank_run(root: &Path) -> serde_json::Value {
    let out = mpirun(
        root,
        &[],
        &[("RLPROF_TEST_SLOW_RANK", "1:200ms")],
        &["global_profiler.steps=[2,3]"],
    );
    assert!(out.ok, "{}", out.text());
    let mut cmd = Command::new(BIN);
    cmd.args(["analyse", "--cluster"]).arg(root.join("prof"));
    let a = run_limited(cmd);
    assert!(a.ok, "{}", a.text());
    assert!(a.stdout.contains("slowest rank: 1"), "{}", a.text());
    let json = root.join("prof/cluster_analysis/cluster_analysis.json");
    serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap()
}

#[test]
#[ignore = "needs mpirun (MPICH) and --features mpi"]
fn a_slow_rank_is_named_slowest_with_a_gap_matching_its_delay() {
    require_mpi_build();
    let tmp = tempfile::tempdir().unwrap();
    let rep = slow_rank_run(tmp.path());
    let w = &rep["slowest"];
    assert_eq!(w["rank"], 1, "{w}");
    let gap = w["gap_ms"].as_f64().unwrap();
    assert!(
        (140.0..=260.0).contains(&gap),
        "gap {gap} ms for a 200 ms delay"
    );
    // Per rank and step: the split adds up, and the fast rank waited about the delay.
    let steps = rep["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 4, "2 ranks x 2 steps: {steps:?}");
    for s in steps {
        let f = |k: &str| s[k].as_f64().unwrap();
        let sum = f("computing_ms") + f("communication_not_overlapped_ms") + f("free_ms");
        assert!((sum - f("step_ms")).abs() < 1e-3, "{s}");
        if s["rank"] == 0 {
            assert!(f("wait_ms") > 140.0, "rank 0 waits for rank 1: {s}");
        }
    }
    // Step times agree with each rank's own step_trace_time.csv (same raw data, to rounding).
    for c in collections(&tmp.path().join("prof")) {
        let rank = rank_of(&c);
        for (step, stage_us) in step_trace(&c) {
            let ours = steps
                .iter()
                .find(|s| s["rank"] == rank && s["step"].as_str() == Some(step.as_str()))
                .unwrap_or_else(|| panic!("rank {rank} step {step} missing"));
            let ms = ours["step_ms"].as_f64().unwrap();
            assert!(
                (ms * 1000.0 - stage_us).abs() < 1.0,
                "rank {rank}: {ms} ms vs {stage_us} us"
            );
        }
    }
    // Roles per rank: both ranks ran the same role calls.
    let roles = rep["roles"].as_array().unwrap();
    for role in ["rollout_generate", "actor_compute_log_prob", "actor_update"] {
        for rank in [0, 1] {
            assert!(
                roles.iter().any(|r| r["role"] == role && r["rank"] == rank),
                "{role} on rank {rank}"
            );
        }
    }
    let bw = rep["bandwidth"].as_array().unwrap();
    assert!(
        bw.iter().any(|b| b["op"] == "reduce_scatter"
            && b["bandwidth_gbps"].as_f64().is_some_and(|g| g > 0.0))
    );
    let pairs = rep["pairs"].as_array().unwrap();
    assert!(pairs.iter().any(|p| p["src"] == 0 && p["dst"] == 1));
    assert!(pairs.iter().any(|p| p["src"] == 1 && p["dst"] == 0));
}

#[test]
#[ignore = "needs mpirun (MPICH), --features mpi and msprof-analyze in RLPROF_VENV"]
fn msprof_analyze_cluster_agrees_on_per_rank_step_times() {
    require_mpi_build();
    let venv = std::env::var("RLPROF_VENV").unwrap_or_else(|_| "/opt/rlprof-venv".into());
    let exe = Path::new(&venv).join("bin/msprof-analyze");
    assert!(exe.is_file(), "{} missing", exe.display());
    let tmp = tempfile::tempdir().unwrap();
    let rep = slow_rank_run(tmp.path());
    let out_dir = tmp.path().join("msprof_out");
    // verl's layout puts every step's end-to-end collections in `train/`; msprof-analyze gets
    // step 2's, one per rank, as a verl user would hand it one step.
    let step2 = tmp.path().join("step2_only");
    for c in collections(&tmp.path().join("prof/train")) {
        if step_trace(&c).iter().any(|(s, _)| s == "2") {
            copy_dir(&c, &step2.join(c.file_name().unwrap()));
        }
    }
    let mut cmd = Command::new(exe);
    cmd.args(["cluster", "-d"])
        .arg(&step2)
        .arg("-o")
        .arg(&out_dir);
    let r = run_limited(cmd);
    assert!(r.ok, "{}", r.text());
    let csv = collections_file(&out_dir, "cluster_step_trace_time.csv")
        .unwrap_or_else(|| panic!("no cluster_step_trace_time.csv:\n{}", r.text()));
    let rows: Vec<_> = csv_rows(&csv)
        .into_iter()
        .filter(|r| r["Type"] == "rank")
        .collect();
    assert_eq!(rows.len(), 2, "{rows:?}");
    for row in rows {
        let rank: u64 = row["Index"].parse().unwrap();
        let theirs: f64 = row["Stage"].parse().unwrap();
        let ours = rep["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["rank"] == rank && s["step"] == "2")
            .unwrap();
        let ours_us = ours["step_ms"].as_f64().unwrap() * 1000.0;
        assert!(
            (ours_us - theirs).abs() < 1.0,
            "rank {rank}: ours {ours_us} us, msprof {theirs} us"
        );
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

fn collections_file(dir: &Path, name: &str) -> Option<PathBuf> {
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        if p.file_name().is_some_and(|n| n == name) {
            return Some(p);
        }
        if p.is_dir()
            && let Some(f) = collections_file(&p, name)
        {
            return Some(f);
        }
    }
    None
}
