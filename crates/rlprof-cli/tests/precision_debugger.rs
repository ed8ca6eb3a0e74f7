//! `rlprof train global_profiler.tool=precision_debugger`: verl 0.9.1's msprobe dumps, in
//! msprobe's layout (`save_path/step_{global_step}/{stage}/step0/rank{R}/dump.json`, ...), of
//! the listed stages of the listed steps on both ranks of an in-process 2-rank job. The ignored
//! test runs msprobe's own `compare` on rank 0 against rank 1 (`.ci/parts/75-msprobe.sh`).

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_rlprof");

const STAGES: [&str; 2] = ["actor_update", "ref_compute_log_prob"];

/// Trains 2 steps on 2 ranks with the precision debugger on step 1 for [`STAGES`], msprobe
/// config `cfg`; returns the dump root.
fn train(root: &Path, cfg: &str) -> PathBuf {
    let cfg_path = root.join("config.json");
    std::fs::write(&cfg_path, cfg).unwrap();
    let prof = root.join("prof");
    let out = Command::new(BIN)
        .args(["train", "--quiet"])
        .args([
            "global_profiler.tool=precision_debugger".to_string(),
            format!("global_profiler.save_path={}", prof.display()),
            "global_profiler.steps=[1]".into(),
            format!(
                "+global_profiler.global_tool_config.precision_debugger.config_path={}",
                cfg_path.display()
            ),
            format!(
                "+global_profiler.global_tool_config.precision_debugger.stages=[{}]",
                STAGES.join(",")
            ),
            "trainer.total_training_steps=2".into(),
            "trainer.sft_warmup_steps=0".into(),
            "trainer.n_gpus_per_node=2".into(),
            format!("trainer.default_local_dir={}", root.join("ckpt").display()),
            "data.train_batch_size=4".into(),
            "actor_rollout_ref.actor.ppo_mini_batch_size=4".into(),
            "actor_rollout_ref.rollout.n=2".into(),
            "actor_rollout_ref.model.hidden_size=32".into(),
            "actor_rollout_ref.model.num_hidden_layers=2".into(),
            "actor_rollout_ref.model.intermediate_size=64".into(),
        ])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    prof
}

const STATISTICS_L1: &str = r#"{"task": "statistics", "level": "L1", "rank": [], "step": [],
  "statistics": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"}}"#;

fn rank_dir(prof: &Path, stage: &str, rank: u32) -> PathBuf {
    prof.join(format!("step_1/{stage}/step0/rank{rank}"))
}

fn dump(prof: &Path, stage: &str, rank: u32) -> Value {
    let p = rank_dir(prof, stage, rank).join("dump.json");
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p:?}: {e}")))
        .unwrap()
}

/// Every tensor statistic is consistent: Min <= Mean <= Max, and Norm^2 >= n * Mean^2
/// (Cauchy-Schwarz) for the tensor's element count n.
fn check_tensor(t: &Value, at: &str) {
    assert_eq!(t["type"], "torch.Tensor", "{at}: {t}");
    let n: f64 = t["shape"]
        .as_array()
        .unwrap_or_else(|| panic!("{at}: no shape in {t}"))
        .iter()
        .map(|d| d.as_f64().unwrap())
        .product();
    let f = |k: &str| t[k].as_f64().unwrap_or_else(|| panic!("{at}: {k} in {t}"));
    let (max, min, mean, norm) = (f("Max"), f("Min"), f("Mean"), f("Norm"));
    let tol = 1e-4 * (1.0 + max.abs().max(min.abs()));
    assert!(min <= mean + tol && mean <= max + tol, "{at}: {t}");
    assert!(
        norm * norm * (1.0 + 1e-4) + 1e-6 >= n * mean * mean,
        "{at}: {t}"
    );
}

#[test]
fn precision_debugger_dumps_the_listed_stages_of_the_listed_steps_on_both_ranks() {
    let tmp = tempfile::tempdir().unwrap();
    let prof = train(tmp.path(), STATISTICS_L1);
    // Only the listed stages of step 1: actor_compute_log_prob is not listed, step 2 is not.
    let mut stage_dirs: Vec<String> = std::fs::read_dir(prof.join("step_1"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    stage_dirs.sort();
    assert_eq!(stage_dirs, ["actor_update", "ref_compute_log_prob"]);
    assert!(!prof.join("step_2").exists());
    for stage in STAGES {
        let mut names: Vec<BTreeSet<String>> = Vec::new();
        for rank in 0..2 {
            let dir = rank_dir(&prof, stage, rank);
            for f in ["dump.json", "stack.json", "construct.json"] {
                assert!(dir.join(f).is_file(), "{dir:?}/{f}");
            }
            let d = dump(&prof, stage, rank);
            assert_eq!(d["task"], "statistics");
            assert_eq!(d["level"], "L1");
            assert_eq!(d["framework"], "pytorch");
            let data = d["data"].as_object().unwrap();
            assert!(data.contains_key("Functional.linear.0.forward"), "{stage}");
            assert!(
                data.contains_key("Functional.rms_norm.0.forward"),
                "{stage}"
            );
            let backward = data.keys().filter(|k| k.ends_with(".backward")).count();
            if stage == "actor_update" {
                assert!(
                    data.contains_key("Functional.linear.0.backward"),
                    "{stage}: {:?}",
                    data.keys().collect::<Vec<_>>()
                );
            } else {
                assert_eq!(backward, 0, "{stage} runs no backward");
            }
            for (name, e) in data {
                let (ins, outs) = if name.ends_with(".forward") {
                    (&e["input_args"], &e["output"])
                } else {
                    (&e["input"], &e["output"])
                };
                for t in ins
                    .as_array()
                    .unwrap()
                    .iter()
                    .chain(outs.as_array().unwrap())
                {
                    if !t.is_null() {
                        check_tensor(t, &format!("{stage} rank{rank} {name}"));
                    }
                }
            }
            // The first linear (the first layer's q projection): its weight is the same on both
            // ranks, its activations are not (each rank has its own samples).
            names.push(data.keys().cloned().collect());
        }
        assert_eq!(names[0], names[1], "{stage}: both ranks run the same APIs");
        let (a, b) = (dump(&prof, stage, 0), dump(&prof, stage, 1));
        let w = |d: &Value| d["data"]["Functional.linear.0.forward"]["input_args"][1].clone();
        assert_eq!(
            w(&a),
            w(&b),
            "{stage}: the weights are the same on both ranks"
        );
        let x =
            |d: &Value| d["data"]["Functional.linear.0.forward"]["input_args"][0]["Norm"].clone();
        assert_ne!(x(&a), x(&b), "{stage}: the ranks' inputs differ");
    }
}

#[test]
fn msprobe_data_mode_and_list_filter_the_entries() {
    let tmp = tempfile::tempdir().unwrap();
    let prof = train(
        tmp.path(),
        r#"{"task": "statistics", "level": "L1", "rank": [1],
            "statistics": {"list": ["linear"], "data_mode": ["backward", "input"]}}"#,
    );
    assert!(
        !rank_dir(&prof, "actor_update", 0).exists(),
        "rank 0 is not listed"
    );
    let d = dump(&prof, "actor_update", 1);
    let data = d["data"].as_object().unwrap();
    assert!(!data.is_empty());
    for (name, e) in data {
        assert!(
            name.starts_with("Functional.linear.") && name.ends_with(".backward"),
            "{name}"
        );
        assert!(
            e.get("input").is_some() && e.get("output").is_none(),
            "{name}: {e}"
        );
    }
}

/// Copies one rank's step directory into `dst/step0/rankR` (msprobe compare wants exactly one
/// rank directory under the path it is given).
fn single_rank_copy(prof: &Path, stage: &str, rank: u32, dst: &Path) -> PathBuf {
    let to = dst.join(format!("rank{rank}_{stage}"));
    let inner = to.join(format!("rank{rank}"));
    std::fs::create_dir_all(&inner).unwrap();
    for f in ["dump.json", "stack.json", "construct.json"] {
        std::fs::copy(rank_dir(prof, stage, rank).join(f), inner.join(f)).unwrap();
    }
    to
}

#[test]
#[ignore = "needs msprobe (mindstudio-probe) in $RLPROF_MSPROBE_VENV; run by .ci/parts/75-msprobe.sh"]
fn msprobe_compare_matches_every_api_of_rank0_against_rank1() {
    let venv = std::env::var("RLPROF_MSPROBE_VENV").unwrap_or("/opt/rlprof-torch-venv".into());
    let msprobe = Path::new(&venv).join("bin/msprobe");
    let tmp = tempfile::tempdir().unwrap();
    let prof = train(tmp.path(), STATISTICS_L1);
    for stage in STAGES {
        let a = single_rank_copy(&prof, stage, 0, tmp.path());
        let b = single_rank_copy(&prof, stage, 1, tmp.path());
        let out_dir = tmp.path().join(format!("cmp_{stage}"));
        let out = Command::new(&msprobe)
            .args(["compare", "-tp"])
            .arg(&a)
            .arg("-gp")
            .arg(&b)
            .arg("-o")
            .arg(&out_dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let csv = std::fs::read_dir(&out_dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("compare_result"))
            })
            .unwrap_or_else(|| panic!("no compare_result in {out_dir:?}"));
        let text = std::fs::read_to_string(&csv).unwrap();
        let mut rows = text.lines();
        let header: Vec<&str> = rows.next().unwrap().split(',').collect();
        let col = |name: &str| {
            header
                .iter()
                .position(|h| *h == name)
                .unwrap_or_else(|| panic!("{name} not in {header:?}"))
        };
        let (npu, bench) = (col("NPU Name"), col("Bench Name"));
        let mut matched = BTreeSet::new();
        for row in rows {
            let cells: Vec<&str> = row.split(',').collect();
            if cells.len() <= bench.max(npu) || cells[bench] == "N/A" {
                continue;
            }
            // "Functional.linear.0.forward.input.0" -> its API call
            let api: Vec<&str> = cells[npu].split('.').collect();
            if let Some(i) = api.iter().position(|p| *p == "forward" || *p == "backward") {
                matched.insert(api[..=i].join("."));
            }
        }
        let d = dump(&prof, stage, 0);
        let apis: BTreeSet<String> = d["data"].as_object().unwrap().keys().cloned().collect();
        assert!(!apis.is_empty());
        let missing: Vec<&String> = apis.difference(&matched).collect();
        assert!(
            missing.is_empty(),
            "{stage}: not matched by msprobe compare: {missing:?}"
        );
    }
}

#[test]
fn report_compare_names_the_first_diverging_api_of_rank0_against_rank1() {
    let tmp = tempfile::tempdir().unwrap();
    let prof = train(tmp.path(), STATISTICS_L1);
    let report = |a: &Path, b: &Path| {
        let out = Command::new(BIN)
            .args(["report", "--format", "text"])
            .arg(a)
            .arg("--compare")
            .arg(b)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    // The same run against itself: every stage and rank pairs, nothing diverges.
    let same = report(&prof, &prof);
    for stage in STAGES {
        for rank in 0..2 {
            assert!(
                same.contains(&format!("step_1/{stage}/step0/rank{rank}: ")),
                "{same}"
            );
        }
    }
    assert_eq!(same.matches("no API diverges").count(), 4, "{same}");
    // Rank 0 against rank 1: their inputs differ from the first API on.
    let ranks = report(
        &rank_dir(&prof, "ref_compute_log_prob", 0),
        &rank_dir(&prof, "ref_compute_log_prob", 1),
    );
    assert!(
        ranks.contains("first diverging API: Functional.embedding.0.forward."),
        "{ranks}"
    );
    assert!(ranks.contains("largest relative differences:"), "{ranks}");
}
