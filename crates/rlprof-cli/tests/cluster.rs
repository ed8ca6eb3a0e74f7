//! `rlprof analyse PATH --cluster` on a 2-rank in-process run (no MPI needed): a rank made slow
//! by the test-only `RLPROF_TEST_SLOW_RANK` hook is named slowest, with a gap matching its
//! delay, and the outputs are written and consistent.

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_rlprof");

fn train(root: &Path, slow: &str) {
    train_with(root, slow, &[]);
}

fn train_with(root: &Path, slow: &str, extra: &[&str]) {
    let out = Command::new(BIN)
        .args(["train", "--quiet"])
        .args(extra)
        .args([
            format!("global_profiler.save_path={}", root.join("prof").display()),
            "global_profiler.steps=[2,3]".into(),
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
        ])
        .env("RLPROF_TEST_SLOW_RANK", slow)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn cluster(root: &Path) -> (String, serde_json::Value) {
    let out = Command::new(BIN)
        .args(["analyse", "--cluster"])
        .arg(root.join("prof"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = root.join("prof/cluster_analysis/cluster_analysis.json");
    let v = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    (stdout, v)
}

#[test]
fn slow_in_process_rank_is_named_with_its_delay() {
    let tmp = tempfile::tempdir().unwrap();
    train(tmp.path(), "0:150ms");
    let (table, rep) = cluster(tmp.path());
    assert!(table.contains("slowest rank: 0"), "{table}");
    let gap = rep["slowest"]["gap_ms"].as_f64().unwrap();
    assert!(
        (100.0..=210.0).contains(&gap),
        "gap {gap} ms for a 150 ms delay"
    );
    let steps = rep["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 4, "2 ranks x 2 steps");
    for s in steps {
        let f = |k: &str| s[k].as_f64().unwrap();
        let parts = f("computing_ms") + f("communication_not_overlapped_ms") + f("free_ms");
        assert!((parts - f("step_ms")).abs() < 1e-3, "{s}");
        assert!(
            (f("busy_ms") + f("wait_ms") - f("step_ms")).abs() < 1e-3,
            "{s}"
        );
        if s["rank"] == 1 {
            assert!(
                f("wait_ms") > 100.0,
                "the fast rank waits for the slow one: {s}"
            );
        }
    }
    for name in [
        "cluster_step.csv",
        "cluster_roles.csv",
        "cluster_bandwidth.csv",
        "cluster_pairs.csv",
    ] {
        let p = tmp.path().join("prof/cluster_analysis").join(name);
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.lines().count() > 1, "{name} has no rows");
    }
    let step_csv =
        std::fs::read_to_string(tmp.path().join("prof/cluster_analysis/cluster_step.csv")).unwrap();
    assert_eq!(step_csv.lines().count(), 1 + steps.len());
}

#[test]
fn cluster_on_a_path_without_collections_fails() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["analyse", "--cluster"])
        .arg(tmp.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
}

fn remove_raw_data(d: &Path) {
    for e in std::fs::read_dir(d).unwrap().flatten() {
        let p = e.path();
        if p.file_name().is_some_and(|n| n == "rlprof_raw") {
            std::fs::remove_dir_all(&p).unwrap();
        } else if p.is_dir() {
            remove_raw_data(&p);
        }
    }
}

/// A tree of Ascend profiler DBs only (as a verl user on Ascend brings: torch_npu's DBs, here
/// our `npu` tool's with its raw data removed): `analyse --cluster` reads the DBs instead of
/// failing for want of raw data.
#[test]
fn cluster_reads_a_tree_of_profiler_dbs_without_raw_data() {
    let tmp = tempfile::tempdir().unwrap();
    train_with(tmp.path(), "0:0ms", &["global_profiler.tool=npu"]);
    remove_raw_data(&tmp.path().join("prof"));
    let (table, rep) = cluster(tmp.path());
    assert!(table.contains("no rlprof collection"), "{table}");
    assert!(table.contains("cluster: 2 rank(s)"), "{table}");
    let steps = rep["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 4, "2 ranks x 2 steps: {rep}");
    for s in steps {
        // CANN's figures as the DB layout's `analysis.db` holds them.
        assert_eq!(s["source"], "StepTraceTime", "{s}");
        assert!(s["step_ms"].as_f64().unwrap() > 0.0, "{s}");
        assert!(s["communication_ms"].as_f64().unwrap() > 0.0, "{s}");
    }
}
