//! Consumer test: `rlprof config show --json` against Hydra's own `compose(...)` +
//! `OmegaConf.to_container(resolve=True)` on verl 0.9.1's shipped configs, with override lists
//! from verl's example scripts and the Hydra grammar cases.
//!
//! Needs (set up by `.ci/parts/40-hydra.sh`):
//! - `RLPROF_VERL_ROOT`: a directory holding verl 0.9.1's `verl/trainer/config` and
//!   `verl/experimental/*/config` trees (unzipped from the wheel);
//! - `RLPROF_VERL_PKG`: a directory where `verl.trainer.config` imports without verl's
//!   dependencies (for `pkg://verl.trainer.config`);
//! - `RLPROF_HYDRA_PYTHON`: a Python with `hydra-core` and `omegaconf`.

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn env_path(name: &str) -> PathBuf {
    PathBuf::from(std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set; run .ci/parts/40-hydra.sh (it prepares verl's config tree and Hydra)")
    }))
}

struct Setup {
    root: PathBuf,
    pkg: PathBuf,
    python: PathBuf,
    script: PathBuf,
}

fn setup() -> Setup {
    let s = Setup {
        root: env_path("RLPROF_VERL_ROOT"),
        pkg: env_path("RLPROF_VERL_PKG"),
        python: env_path("RLPROF_HYDRA_PYTHON"),
        script: Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/hydra_compose.py"),
    };
    assert!(
        s.root
            .join("verl/trainer/config/ppo_trainer.yaml")
            .is_file(),
        "no verl config tree under {}",
        s.root.display()
    );
    s
}

/// (stdout JSON or the error text) of Hydra.
fn hydra(s: &Setup, dir: &str, name: &str, overrides: &[&str]) -> Result<Value, String> {
    let out = Command::new(&s.python)
        .arg(&s.script)
        .arg(dir)
        .arg(name)
        .args(overrides)
        .current_dir(&s.root)
        .env("PYTHONPATH", &s.pkg)
        .env("PROFILE_ON", "true")
        .output()
        .expect("run python");
    if out.status.success() {
        Ok(serde_json::from_slice(&out.stdout).expect("hydra json"))
    } else {
        Err(String::from_utf8_lossy(&out.stderr).to_string())
    }
}

/// `rlprof config SUB --config-path DIR --config-name NAME ARGS...` in verl's tree, as
/// `python -m verl.trainer.main_ppo --config-path ... --config-name ...` would be run.
fn rlprof_config(s: &Setup, sub: &str, dir: &str, name: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rlprof"))
        .args(["config", sub, "--config-path", dir, "--config-name", name])
        .args(args)
        .current_dir(&s.root)
        .env("RLPROF_PKG_PATH", &s.pkg)
        .env("PROFILE_ON", "true")
        .output()
        .expect("run rlprof")
}

fn rlprof(s: &Setup, dir: &str, name: &str, overrides: &[&str]) -> Result<Value, String> {
    let mut args = vec!["--json"];
    args.extend_from_slice(overrides);
    let out = rlprof_config(s, "show", dir, name, &args);
    if out.status.success() {
        Ok(serde_json::from_slice(&out.stdout).expect("rlprof json"))
    } else {
        Err(String::from_utf8_lossy(&out.stderr).to_string())
    }
}

const CONFIG: &str = "verl/trainer/config";

/// verl's top-level configs: (config dir, name).
fn top_level() -> Vec<(&'static str, &'static str)> {
    vec![
        (CONFIG, "ppo_trainer"),
        (CONFIG, "ppo_megatron_trainer"),
        (CONFIG, "_generated_ppo_trainer"),
        (CONFIG, "_generated_ppo_megatron_trainer"),
        (CONFIG, "_generated_ppo_torchtitan_trainer"),
        (CONFIG, "_generated_ppo_veomni_trainer"),
        (
            "verl/experimental/one_step_off_policy/config",
            "one_step_off_ppo_trainer",
        ),
        (
            "verl/experimental/one_step_off_policy/config",
            "one_step_off_ppo_megatron_trainer",
        ),
        (
            "verl/experimental/fully_async_policy/config",
            "fully_async_ppo_trainer",
        ),
        (
            "verl/experimental/fully_async_policy/config",
            "fully_async_ppo_megatron_trainer",
        ),
    ]
}

/// Override lists: none, verl's GRPO/GSM8K example, its profiling example, DAPO's, and the
/// Hydra grammar cases.
fn override_lists() -> Vec<Vec<&'static str>> {
    vec![
        vec![],
        vec![
            "algorithm.adv_estimator=grpo",
            "data.train_files=/root/data/gsm8k/train.parquet",
            "data.val_files=/root/data/gsm8k/test.parquet",
            "data.train_batch_size=1024",
            "data.max_prompt_length=512",
            "data.max_response_length=1024",
            "data.filter_overlong_prompts=True",
            "data.truncation='error'",
            "actor_rollout_ref.model.path=Qwen/Qwen2-7B-Instruct",
            "actor_rollout_ref.actor.optim.lr=1e-6",
            "actor_rollout_ref.model.use_remove_padding=True",
            "actor_rollout_ref.actor.ppo_mini_batch_size=256",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=40",
            "actor_rollout_ref.actor.use_kl_loss=True",
            "actor_rollout_ref.actor.kl_loss_coef=0.001",
            "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
            "actor_rollout_ref.actor.entropy_coeff=0",
            "actor_rollout_ref.model.enable_gradient_checkpointing=True",
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=40",
            "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
            "actor_rollout_ref.rollout.name=vllm",
            "actor_rollout_ref.rollout.gpu_memory_utilization=0.6",
            "actor_rollout_ref.rollout.n=5",
            "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=40",
            "algorithm.use_kl_in_reward=False",
            "trainer.critic_warmup=0",
            "trainer.logger=[\"console\",\"wandb\"]",
            "trainer.project_name='verl_grpo_example_gsm8k'",
            "trainer.experiment_name='qwen2_7b_function_rm'",
            "trainer.n_gpus_per_node=8",
            "trainer.nnodes=1",
            "trainer.save_freq=20",
            "trainer.test_freq=5",
            "trainer.total_epochs=15",
        ],
        vec![
            "global_profiler.tool=torch",
            "global_profiler.steps=[1,2,5]",
            "global_profiler.save_path=./outputs/profile",
            "actor_rollout_ref.actor.profiler.enable=True",
            "actor_rollout_ref.actor.profiler.all_ranks=True",
            "actor_rollout_ref.actor.profiler.tool_config.torch.discrete=True",
            "actor_rollout_ref.actor.profiler.tool_config.torch.contents=[cuda,cpu]",
            "+actor_rollout_ref.actor.profiler.tool_config.torch.schedule={wait:2,active:3}",
        ],
        vec![
            "algorithm.adv_estimator=grpo",
            "algorithm.filter_groups.enable=True",
            "algorithm.filter_groups.metric=acc",
            "algorithm.filter_groups.max_num_gen_batches=10",
            "actor_rollout_ref.actor.clip_ratio_low=0.2",
            "actor_rollout_ref.actor.clip_ratio_high=0.28",
            "actor_rollout_ref.actor.loss_agg_mode=token-mean",
            "actor_rollout_ref.actor.optim.lr_warmup_steps=10",
            "actor_rollout_ref.actor.optim.weight_decay=0.1",
            "actor_rollout_ref.rollout.temperature=1.0",
            "actor_rollout_ref.rollout.top_p=1.0",
            "actor_rollout_ref.rollout.top_k=-1",
        ],
        vec![
            "+x={wait:2,active:3,list:[1,[2,3]],q:null}",
            "~trainer.esi_redundant_time",
            "~trainer.v1",
            "++trainer.val_before_train=False",
            "+trainer.note='two words, one comma'",
            "trainer.experiment_name=run\\ one",
            "+trainer.ckpt_dir=${trainer.default_local_dir}/ckpt",
            "+trainer.rel=${.project_name}",
            "actor_rollout_ref.actor.profiler.enable=${oc.env:PROFILE_ON,true}",
            "+trainer.fallback=${oc.select:trainer.nope,7}",
            "+trainer.decoded=${oc.decode:'[1, 2]'}",
            "actor_rollout_ref.model.path=null",
            "+trainer.floats=[1e-6,.5,1_000,inf,-3]",
            "trainer.logger=[console]",
        ],
        vec!["model_engine=megatron"],
    ]
}

#[test]
#[ignore = "needs hydra-core, omegaconf and verl's config tree"]
fn config_show_matches_hydra_compose() {
    let s = setup();
    let mut failures = Vec::new();
    let mut compared = 0;
    for (dir, name) in top_level() {
        for ov in override_lists() {
            let h = hydra(&s, dir, name, &ov);
            let r = rlprof(&s, dir, name, &ov);
            match (&h, &r) {
                (Ok(a), Ok(b)) => {
                    compared += 1;
                    let mut d = Vec::new();
                    support::diff(a, b, "", 20, &mut d);
                    if !d.is_empty() {
                        failures.push(format!("{name} {ov:?}:\n  {}", d.join("\n  ")));
                    }
                }
                (Err(_), Err(_)) => {}
                (Ok(_), Err(e)) => failures.push(format!(
                    "{name} {ov:?}: rlprof failed, Hydra composed:\n{e}"
                )),
                (Err(e), Ok(_)) => failures.push(format!(
                    "{name} {ov:?}: Hydra failed, rlprof composed:\n{e}"
                )),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // Every top-level config composes with the example override lists.
    assert!(
        compared >= top_level().len() * 4,
        "only {compared} comparisons ran"
    );
}

#[test]
#[ignore = "needs hydra-core, omegaconf and verl's config tree"]
fn bad_overrides_fail_in_both() {
    let s = setup();
    for ov in [
        vec!["trainer.no_such_key=1"],
        vec!["+trainer.nnodes=2"],
        vec!["~trainer.no_such_key"],
        vec!["trainer.nnodes=[1,2"],
        vec!["model_engine=no_such_engine"],
        vec!["trainer.nnodes=1,2"],
    ] {
        let h = hydra(&s, CONFIG, "ppo_trainer", &ov);
        let r = rlprof(&s, CONFIG, "ppo_trainer", &ov);
        assert!(h.is_err(), "Hydra accepted {ov:?}");
        assert!(r.is_err(), "rlprof accepted {ov:?}");
    }
}

/// `rlprof config check` with verl's own selection: (exit code, stdout, stderr).
fn config_check(s: &Setup, dir: &str, name: &str, extra: &[&str]) -> (i32, String, String) {
    let out = rlprof_config(s, "check", dir, name, extra);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
#[ignore = "needs hydra-core, omegaconf and verl's config tree"]
fn config_check_accepts_every_shipped_config_unchanged() {
    let s = setup();
    let failures: Vec<String> = top_level()
        .into_iter()
        .filter_map(|(dir, name)| {
            let (code, out, err) = config_check(&s, dir, name, &[]);
            (code != 0).then(|| format!("{dir}/{name}: exit {code}\n{out}\n{err}"))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The user document's end-to-end and discrete examples (verl's Ascend profiling guide,
/// `docs/ascend_tutorial/ascend_profiling_zh.rst` of 2025-08: steps `[1, 2, 5]`, the actor
/// enabled on all ranks), applied as overrides on verl's `ppo_trainer`: the plan collects steps
/// 1, 2 and 5 (one group each) with the `npu` tool on every one of verl's 8 ranks, rollout and
/// ref following the actor.
#[test]
#[ignore = "needs hydra-core, omegaconf and verl's config tree"]
fn user_document_examples_on_ppo_trainer_plan_as_the_guide_says() {
    let s = setup();
    for discrete in [false, true] {
        let flag = format!("actor_rollout_ref.actor.profiler.tool_config.npu.discrete={discrete}");
        let (code, out, err) = config_check(
            &s,
            CONFIG,
            "ppo_trainer",
            &[
                "--json",
                "global_profiler.steps=[1,2,5]",
                "actor_rollout_ref.actor.profiler.enable=True",
                "actor_rollout_ref.actor.profiler.all_ranks=True",
                &flag,
            ],
        );
        assert_eq!(code, 0, "{out}\n{err}");
        let plan: Value = serde_json::from_str(&out).expect("plan JSON");
        assert_eq!(plan["tool"], "npu", "{plan}");
        assert_eq!(plan["world_size"], 8, "{plan}");
        assert_eq!(plan["steps"], serde_json::json!([1, 2, 5]));
        assert_eq!(plan["step_groups"], serde_json::json!([[1], [2], [5]]));
        let all: Vec<u64> = (0..8).collect();
        // Rollout and ref follow the actor, as the user document says.
        for role in ["actor", "rollout", "ref"] {
            let r = &plan["roles"][role];
            assert_eq!(r["enable"], true, "{role}: {r}");
            assert_eq!(r["discrete"], discrete, "{role}: {r}");
            assert_eq!(r["ranks"], serde_json::json!(all), "{role}: {r}");
        }
        assert_eq!(plan["roles"]["critic"]["enable"], false);
    }
}
