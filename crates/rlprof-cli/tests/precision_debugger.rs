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
    train_with(root, cfg, &[], &[])
}

/// [`train`] with more overrides `extra` (later ones win) and environment `env`.
fn train_with(root: &Path, cfg: &str, extra: &[String], env: &[(&str, &str)]) -> PathBuf {
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
        .args(extra)
        .envs(env.iter().copied())
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
/// (Cauchy-Schwarz) for the tensor's element count n. A Python scalar argument (`{"type":
/// "int", "value": -1}`, as msprobe writes one) has a value of its type.
fn check_tensor(t: &Value, at: &str) {
    match t["type"].as_str() {
        Some("int") => return assert!(t["value"].is_i64(), "{at}: {t}"),
        Some("float") => return assert!(t["value"].is_number(), "{at}: {t}"),
        Some("bool") => return assert!(t["value"].is_boolean(), "{at}: {t}"),
        _ => {}
    }
    assert_eq!(t["type"], "torch.Tensor", "{at}: {t}");
    let n: f64 = t["shape"]
        .as_array()
        .unwrap_or_else(|| panic!("{at}: no shape in {t}"))
        .iter()
        .map(|d| d.as_f64().unwrap())
        .product();
    let f = |k: &str| t[k].as_f64().unwrap_or_else(|| panic!("{at}: {k} in {t}"));
    let dtype = t["dtype"].as_str().unwrap_or_default();
    if dtype.starts_with("torch.int") || dtype.starts_with("torch.uint") {
        // msprobe writes an integer tensor's Mean and Norm as null
        assert!(t["Mean"].is_null() && t["Norm"].is_null(), "{at}: {t}");
        assert!(f("Min") <= f("Max"), "{at}: {t}");
        return;
    }
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
            // RMSNorm and SwiGLU are written as the PyTorch calls they stand for
            for api in [
                "Tensor.pow.0.forward",
                "Torch.rsqrt.0.forward",
                "Functional.silu.0.forward",
            ] {
                assert!(data.contains_key(api), "{stage}: {api}");
            }
            assert!(
                !data.keys().any(|k| k.starts_with("Functional.rms_norm.")
                    || k.starts_with("Functional.silu_mul."))
                    || stage == "actor_update",
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
        let text = msprobe_compare(&msprobe, &a, &b, &out_dir);
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

/// Runs `msprobe compare -tp TP -gp GP -o OUT` and returns its `compare_result*.csv`.
fn msprobe_compare(msprobe: &Path, tp: &Path, gp: &Path, out_dir: &Path) -> String {
    let out = Command::new(msprobe)
        .args(["compare", "-tp"])
        .arg(tp)
        .arg("-gp")
        .arg(gp)
        .arg("-o")
        .arg(out_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = std::fs::read_dir(out_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("compare_result"))
        })
        .unwrap_or_else(|| panic!("no compare_result in {out_dir:?}"));
    std::fs::read_to_string(&csv).unwrap()
}

/// The records of a CSV text (msprobe quotes the fields holding commas or newlines: shapes,
/// stack frames).
fn csv_records(text: &str) -> Vec<Vec<String>> {
    let mut records = Vec::new();
    let mut rec = vec![String::new()];
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                chars.next();
                rec.last_mut().unwrap().push('"');
            }
            '"' => quoted = !quoted,
            ',' if !quoted => rec.push(String::new()),
            '\r' if !quoted => {}
            '\n' if !quoted => records.push(std::mem::replace(&mut rec, vec![String::new()])),
            _ => rec.last_mut().unwrap().push(c),
        }
    }
    if rec.len() > 1 || !rec[0].is_empty() {
        records.push(rec);
    }
    records
}

/// Every row name `msprobe compare` makes of a dump.json (`{api}.forward.input.{i}`,
/// `.output.{i}`, nested lists as `.{i}.{j}`).
fn row_names(dump: &Value) -> BTreeSet<String> {
    fn walk(v: &Value, name: String, out: &mut BTreeSet<String>) {
        match v {
            Value::Array(a) => a
                .iter()
                .enumerate()
                .for_each(|(i, x)| walk(x, format!("{name}.{i}"), out)),
            Value::Object(o) if !o.contains_key("type") => o
                .iter()
                .for_each(|(k, x)| walk(x, format!("{name}.{k}"), out)),
            _ => {
                out.insert(name);
            }
        }
    }
    let mut out = BTreeSet::new();
    for (api, e) in dump["data"].as_object().unwrap() {
        for (key, side) in [
            ("input_args", "input"),
            ("input_kwargs", "input"),
            ("input", "input"),
            ("output", "output"),
        ] {
            if let Some(v) = e.get(key) {
                walk(v, format!("{api}.{side}"), &mut out);
            }
        }
    }
    out
}

/// Every statistic must agree with PyTorch's within this relative difference, except the
/// documented [`exception`]s. msprobe's own threshold (its `Warning`) is a relative difference
/// above 0.5, which no row may reach.
const TIGHT: f64 = 1e-3;

/// The one documented exception to [`TIGHT`]: the Min of RMSNorm's squares (`Tensor.pow`'s
/// output, `Tensor.mean`'s input) is the square of the residual-stream element nearest zero, a
/// near-cancelling `r + y` whose last bits depend on the gemm's summation order (ours against
/// PyTorch's CPU BLAS): a large relative difference of a value that is tiny against the tensor.
/// Allowed when its absolute difference is below 1e-6 of the tensor's largest magnitude.
fn exception(name: &str, stat: &str, abs_diff: f64, magnitude: f64) -> bool {
    let squares = (name.starts_with("Tensor.pow.") && name.ends_with(".forward.output.0"))
        || (name.starts_with("Tensor.mean.") && name.ends_with(".forward.input.0"));
    squares && stat == "Min" && abs_diff <= 1e-6 * magnitude
}

/// Trains 2 ranks with the precision debugger on `ref_compute_log_prob`, at the shapes of
/// configs/bench_torch_peer.yaml (d_model 128, 4 heads, 2 layers, SwiGLU 344, untied head);
/// reruns rank 0's stage in scripts/torch_reference_model.py under msprobe's own
/// PrecisionDebugger on the same weights and inputs; `msprobe compare` of ours against that
/// golden dump must match every row on both sides, dtypes and shapes equal, and the statistics
/// must agree (see [`TIGHT`]).
#[test]
#[ignore = "needs torch and msprobe (mindstudio-probe) in $RLPROF_MSPROBE_VENV; run by .ci/parts/75-msprobe.sh"]
fn msprobe_compare_matches_our_dump_against_a_pytorch_reference_golden_dump() {
    let venv = std::env::var("RLPROF_MSPROBE_VENV").unwrap_or("/opt/rlprof-torch-venv".into());
    let (python, msprobe) = (
        Path::new(&venv).join("bin/python"),
        Path::new(&venv).join("bin/msprobe"),
    );
    let tmp = tempfile::tempdir().unwrap();
    // rollout.n=1: every row has its own prompt, so the log-prob pass is the full forward pass
    // (with n > 1 rows share their prompt's pass through a KV cache, which the reference does
    // not rerun)
    let shapes = [
        "actor_rollout_ref.model.hidden_size=128",
        "actor_rollout_ref.model.num_hidden_layers=2",
        "actor_rollout_ref.model.num_attention_heads=4",
        "actor_rollout_ref.model.num_key_value_heads=4",
        "actor_rollout_ref.model.intermediate_size=344",
        "actor_rollout_ref.model.tie_word_embeddings=false",
        "actor_rollout_ref.rollout.n=1",
        "data.train_batch_size=8",
        "actor_rollout_ref.actor.ppo_mini_batch_size=8",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2",
    ];
    let extra: Vec<String> = shapes.iter().map(|s| s.to_string()).collect();
    let prof = train_with(
        tmp.path(),
        STATISTICS_L1,
        &extra,
        &[("RLPROF_PRECISION_GOLDEN", "1")],
    );
    let stage = "ref_compute_log_prob";
    let ours_dir = rank_dir(&prof, stage, 0);
    for f in [
        "rlprof_model.json",
        "rlprof_weights.safetensors",
        "rlprof_inputs.safetensors",
        "rlprof_inputs.json",
    ] {
        assert!(ours_dir.join(f).is_file(), "{ours_dir:?}/{f}");
    }
    let meta: Value = serde_json::from_str(
        &std::fs::read_to_string(ours_dir.join("rlprof_inputs.json")).unwrap(),
    )
    .unwrap();
    assert!(
        meta["calls"].as_u64().unwrap() >= 2,
        "several micro-batches: {meta}"
    );

    // the golden dump: msprobe's PrecisionDebugger around the PyTorch reference
    let golden_root = tmp.path().join("golden");
    let cfg = tmp.path().join("golden_config.json");
    std::fs::write(&cfg, STATISTICS_L1).unwrap();
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/torch_reference_model.py");
    let out = Command::new(&python)
        .arg(&script)
        .arg(&ours_dir)
        .arg(&cfg)
        .arg(&golden_root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let golden_rank = golden_root.join("step0/rank0");
    let golden: Value =
        serde_json::from_str(&std::fs::read_to_string(golden_rank.join("dump.json")).unwrap())
            .unwrap();
    let ours = dump(&prof, stage, 0);

    // every row on both sides
    let (ours_rows, golden_rows) = (row_names(&ours), row_names(&golden));
    let only_ours: Vec<&String> = ours_rows.difference(&golden_rows).collect();
    let only_golden: Vec<&String> = golden_rows.difference(&ours_rows).collect();
    assert!(
        only_ours.is_empty() && only_golden.is_empty(),
        "rows only in ours: {only_ours:?}\nrows only in the golden dump: {only_golden:?}"
    );

    // msprobe's own comparison
    let ours_copy = single_rank_copy(&prof, stage, 0, tmp.path());
    let out_dir = tmp.path().join("cmp_golden");
    let text = msprobe_compare(&msprobe, &ours_copy, &golden_root.join("step0"), &out_dir);
    let mut records = csv_records(&text).into_iter();
    let header = records.next().unwrap();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("{name} not in {header:?}"))
    };
    let (npu, bench) = (col("NPU Name"), col("Bench Name"));
    let (nd, bd, ns, bs) = (
        col("NPU Dtype"),
        col("Bench Dtype"),
        col("NPU Tensor Shape"),
        col("Bench Tensor Shape"),
    );
    let rel: Vec<usize> = [
        "MaxRelativeErr",
        "MinRelativeErr",
        "MeanRelativeErr",
        "NormRelativeErr",
    ]
    .iter()
    .map(|c| col(c))
    .collect();
    let result = col("Result");
    let mut rows = 0;
    let mut worst: Vec<(f64, String, &str)> = Vec::new();
    let mut loose = Vec::new();
    for cells in records {
        assert_eq!(cells.len(), header.len(), "{cells:?}");
        rows += 1;
        let name = &cells[npu];
        assert_eq!(&cells[bench], name, "row {name} matched by name");
        assert_eq!(cells[nd], cells[bd], "{name}: dtypes");
        assert_eq!(cells[ns], cells[bs], "{name}: shapes");
        assert_ne!(
            cells[result], "Warning",
            "{name}: beyond msprobe's threshold: {cells:?}"
        );
        for (i, c) in rel.iter().zip(["Max", "Min", "Mean", "Norm"]) {
            // msprobe writes a relative difference in percent, "0" when equal, "N/A" against 0
            let v = cells[*i].as_str();
            let Ok(x) = v.trim_end_matches('%').parse::<f64>() else {
                assert_eq!(v, "N/A", "{name} {c}");
                continue;
            };
            let x = if v.ends_with('%') { x / 100.0 } else { x };
            worst.push((x, name.clone(), c));
            if x > TIGHT {
                let num = |h: &str| cells[col(h)].parse::<f64>().unwrap_or(f64::NAN);
                let lower = if c == "Norm" {
                    "l2norm".into()
                } else {
                    c.to_lowercase()
                };
                let diff = num(&format!(
                    "{}{} diff",
                    &lower[..1].to_uppercase(),
                    &lower[1..]
                ));
                let magnitude = num("NPU max").abs().max(num("NPU min").abs());
                let row = format!(
                    "{name} {c}: {x:.2e} (absolute {diff:.2e}, tensor magnitude {magnitude:.2e})"
                );
                eprintln!("beyond {TIGHT}: {row}");
                if !exception(name, c, diff.abs(), magnitude) {
                    loose.push(row);
                }
            }
        }
    }
    assert_eq!(rows, ours_rows.len(), "one CSV row per row of our dump");
    worst.sort_by(|a, b| b.0.total_cmp(&a.0));
    eprintln!(
        "msprobe compare, ours vs PyTorch reference: {rows} rows matched ({} APIs); largest relative differences: {:?}",
        ours["data"].as_object().unwrap().len(),
        &worst[..worst.len().min(4)]
    );
    for stat in ["Max", "Min", "Mean", "Norm"] {
        let w = worst.iter().find(|(_, n, c)| {
            *c == stat
                && !(stat == "Min"
                    && (n.starts_with("Tensor.pow.") || n.starts_with("Tensor.mean.")))
        });
        eprintln!("largest {stat} relative difference (RMSNorm's squares aside): {w:?}");
    }
    // the documented exception only
    assert!(loose.is_empty(), "beyond {TIGHT}: {loose:?}");
}
