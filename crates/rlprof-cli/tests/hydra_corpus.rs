//! Corpus test: every case composed by Hydra 1.3 (`compose(...)` +
//! `OmegaConf.to_container(resolve=True)`) and by `rlprof config show --json`; the trees must be
//! equal (keys, values, types), or both must refuse.
//!
//! The cases:
//! - `tests/corpus/verl_scripts.jsonl`: the override lists of verl's and verl-recipe's launch
//!   scripts, extracted by `scripts/extract_verl_overrides.py` (each with its script and commit);
//! - `tests/corpus/hydra_grammar.jsonl`: the override grammar and OmegaConf resolver cases of
//!   Hydra's and OmegaConf's documentation, on verl's `ppo_trainer`;
//! - every YAML of verl 0.9.1's config tree as the config name: `actor/dp_actor` in
//!   `verl/trainer/config`, and `dp_actor` with its own directory as the config path.
//!
//! Needs what `.ci/parts/40-hydra.sh` prepares: `RLPROF_VERL_ROOT`, `RLPROF_VERL_PKG`,
//! `RLPROF_HYDRA_PYTHON` (see `hydra_consumer.rs`).

mod support;

use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn env_path(name: &str) -> PathBuf {
    PathBuf::from(std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set; run .ci/parts/40-hydra.sh (it prepares verl's config tree and Hydra)")
    }))
}

#[derive(Clone)]
struct Case {
    source: String,
    dir: String,
    name: String,
    overrides: Vec<String>,
}

fn read_corpus(file: &str) -> Vec<Case> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(file);
    let text = std::fs::read_to_string(&path).expect("corpus file");
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{file}: {e}: {l}"));
            Case {
                source: v["source"].as_str().expect("source").to_string(),
                dir: v["dir"].as_str().expect("dir").to_string(),
                name: v["name"].as_str().expect("name").to_string(),
                overrides: v["overrides"]
                    .as_array()
                    .expect("overrides")
                    .iter()
                    .map(|o| o.as_str().expect("override").to_string())
                    .collect(),
            }
        })
        .collect()
}

/// Every YAML below `root/verl` as a config name, twice: from the top config directory of its
/// tree (`actor/dp_actor`) and from its own directory (`dp_actor`).
fn yaml_cases(root: &Path) -> Vec<Case> {
    let mut files = Vec::new();
    let mut stack = vec![root.join("verl")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "yaml") {
                files.push(p.strip_prefix(root).expect("under root").to_path_buf());
            }
        }
    }
    files.sort();
    assert!(files.len() >= 40, "only {} YAML files", files.len());
    let mut out = Vec::new();
    for f in files {
        let s = f.to_string_lossy().to_string();
        let top = s.find("/config/").map(|i| &s[..i + "/config".len()]);
        let Some(top) = top else { continue };
        let rel = s[top.len() + 1..].trim_end_matches(".yaml").to_string();
        out.push(Case {
            source: format!("verl 0.9.1 wheel: {s}"),
            dir: top.to_string(),
            name: rel.clone(),
            overrides: vec![],
        });
        if let Some((sub, name)) = rel.rsplit_once('/') {
            out.push(Case {
                source: format!("verl 0.9.1 wheel: {s} (its own directory)"),
                dir: format!("{top}/{sub}"),
                name: name.to_string(),
                overrides: vec![],
            });
        }
    }
    out
}

/// Hydra's results, one per case, from one Python process.
fn hydra_all(root: &Path, pkg: &Path, python: &Path, cases: &[Case]) -> Vec<Result<Value, String>> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/hydra_compose_batch.py");
    let mut child = Command::new(python)
        .arg(&script)
        .current_dir(root)
        .env("PYTHONPATH", pkg)
        .env("PROFILE_ON", "true")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run python");
    let mut input = String::new();
    for c in cases {
        input
            .push_str(&json!({"dir": c.dir, "name": c.name, "overrides": c.overrides}).to_string());
        input.push('\n');
    }
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()).expect("write"));
    let out = child.wait_with_output().expect("python output");
    writer.join().expect("writer");
    assert!(out.status.success(), "hydra_compose_batch.py failed");
    let results: Vec<Result<Value, String>> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).expect("result line");
            match v.get_mut("ok") {
                Some(t) => Ok(t.take()),
                None => Err(v["error"].as_str().unwrap_or("?").to_string()),
            }
        })
        .collect();
    assert_eq!(results.len(), cases.len(), "one Hydra result per case");
    results
}

fn rlprof(root: &Path, pkg: &Path, c: &Case) -> Result<Value, String> {
    let out = Command::new(env!("CARGO_BIN_EXE_rlprof"))
        .args([
            "config",
            "show",
            "--json",
            "--config-path",
            &c.dir,
            "--config-name",
            &c.name,
        ])
        .args(&c.overrides)
        .current_dir(root)
        .env("RLPROF_PKG_PATH", pkg)
        .env("PROFILE_ON", "true")
        .output()
        .expect("run rlprof");
    if out.status.success() {
        Ok(serde_json::from_slice(&out.stdout).expect("rlprof json"))
    } else {
        Err(String::from_utf8_lossy(&out.stderr).to_string())
    }
}

#[test]
#[ignore = "needs hydra-core, omegaconf and verl's config tree"]
fn corpus_composes_as_hydra_does() {
    let root = env_path("RLPROF_VERL_ROOT");
    let pkg = env_path("RLPROF_VERL_PKG");
    let python = env_path("RLPROF_HYDRA_PYTHON");
    let mut cases = read_corpus("verl_scripts.jsonl");
    let scripts = cases.len();
    cases.extend(read_corpus("hydra_grammar.jsonl"));
    let grammar = cases.len() - scripts;
    cases.extend(yaml_cases(&root));
    let yamls = cases.len() - scripts - grammar;
    let hydra = hydra_all(&root, &pkg, &python, &cases);
    let (mut equal, mut refused) = (0, 0);
    let mut failures = Vec::new();
    for (c, h) in cases.iter().zip(&hydra) {
        let r = rlprof(&root, &pkg, c);
        let what = format!("{} [{} / {}] {:?}", c.source, c.dir, c.name, c.overrides);
        match (h, &r) {
            (Ok(a), Ok(b)) => {
                let mut d = Vec::new();
                support::diff(a, b, "", 10, &mut d);
                if d.is_empty() {
                    equal += 1;
                } else {
                    failures.push(format!("{what}:\n  {}", d.join("\n  ")));
                }
            }
            (Err(_), Err(_)) => refused += 1,
            (Ok(_), Err(e)) => {
                failures.push(format!("{what}: rlprof refused, Hydra composed:\n{e}"))
            }
            (Err(e), Ok(_)) => {
                failures.push(format!("{what}: Hydra refused, rlprof composed:\n{e}"))
            }
        }
    }
    println!(
        "hydra corpus: {} cases ({scripts} script overrides, {grammar} grammar, {yamls} YAML names): {equal} equal, {refused} refused by both, {} differ",
        cases.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// `rlprof config SUB --config-path verl/trainer/config --config-name ppo_trainer ARGS...`:
/// (exit code, stderr).
fn rlprof_on_ppo_trainer(root: &Path, pkg: &Path, sub: &str, args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rlprof"))
        .args(sub.split(' '))
        .args([
            "--config-path",
            "verl/trainer/config",
            "--config-name",
            "ppo_trainer",
        ])
        .args(args)
        .current_dir(root)
        .env("RLPROF_PKG_PATH", pkg)
        .output()
        .expect("run rlprof");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// verl 0.9.1 accepts these values, so `config check` does; where this trainer cannot run one,
/// `train` refuses at start and names the key (before any training or profiling starts).
#[test]
#[ignore = "needs hydra-core, omegaconf and verl's config tree"]
fn config_check_accepts_what_verl_accepts_and_train_names_what_it_cannot_run() {
    let root = env_path("RLPROF_VERL_ROOT");
    let pkg = env_path("RLPROF_VERL_PKG");
    let cases: &[(&[&str], Option<&str>)] = &[
        (
            &[
                "actor_rollout_ref.actor.use_kl_loss=True",
                "actor_rollout_ref.actor.kl_loss_type=mse",
            ],
            Some("kl_loss_type"),
        ),
        (
            &[
                "actor_rollout_ref.actor.use_kl_loss=True",
                "actor_rollout_ref.actor.kl_loss_type=k3+",
            ],
            Some("kl_loss_type"),
        ),
        (
            &["actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-sum-norm"],
            Some("loss_agg_mode"),
        ),
        (
            &["data.train_batch_size=1001"],
            Some("data.train_batch_size"),
        ),
        (
            &[
                "+reward_model.overlong_buffer.enable=False",
                "+reward_model.overlong_buffer.len=0",
            ],
            None,
        ),
        (
            &["+global_profiler.global_tool_config.nsys.all_ranks=False"],
            None,
        ),
    ];
    for (args, refused_key) in cases {
        let (code, err) = rlprof_on_ppo_trainer(&root, &pkg, "config check", args);
        assert_eq!(code, 0, "config check refused {args:?}:\n{err}");
        if let Some(key) = refused_key {
            assert!(
                err.contains("refuses to start") && err.contains(key),
                "{args:?}: {err}"
            );
            let (code, err) = rlprof_on_ppo_trainer(&root, &pkg, "train --quiet", args);
            assert_ne!(code, 0, "train accepted {args:?}");
            assert!(
                err.contains(key),
                "train's refusal of {args:?} does not name {key}: {err}"
            );
        }
    }
}
