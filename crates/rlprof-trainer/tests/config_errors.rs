//! Bad training config fails before any work, with every problem at once, each naming its YAML
//! path and the valid values.

use rlprof_trainer::{TrainConfig, TrainerError};

fn errors(yaml: &str) -> Vec<String> {
    let doc: serde_yaml::Value = serde_yaml::from_str(yaml).unwrap();
    match TrainConfig::from_doc(&doc) {
        Err(TrainerError::Config(e)) => e,
        other => panic!("expected a config error, got {other:?}"),
    }
}

#[test]
fn every_problem_is_reported_with_its_path_and_valid_values() {
    let e = errors(
        "data: {train_batch_size: 0, task: {name: sudoku}}
actor_rollout_ref:
  actor: {loss_agg_mode: token-sum, clip_ratio: -1, use_kl_loss: maybe}
  rollout: {top_k: 0, temperature: 0}
algorithm: {adv_estimator: gae}
trainer: {n_gpus_per_node: 2}",
    );
    let has = |path: &str, words: &[&str]| {
        assert!(
            e.iter()
                .any(|m| m.starts_with(path) && words.iter().all(|w| m.contains(w))),
            "no error for {path} with {words:?} in {e:#?}"
        )
    };
    has("data.train_batch_size", &[">= 1", "0"]);
    has("data.task.name", &["sudoku", "arithmetic, countdown"]);
    has(
        "actor_rollout_ref.actor.loss_agg_mode",
        &["token-sum", "token-mean"],
    );
    has("actor_rollout_ref.actor.clip_ratio", &["-1"]);
    has(
        "actor_rollout_ref.actor.use_kl_loss",
        &["true or false", "maybe"],
    );
    has("actor_rollout_ref.rollout.top_k", &["-1 (off)"]);
    has("actor_rollout_ref.rollout.temperature", &["0"]);
    has("algorithm.adv_estimator", &["gae", "grpo"]);
    assert!(e.len() >= 8, "{e:#?}");
}

#[test]
fn batch_that_does_not_split_over_ranks_is_an_error() {
    let e = errors("data: {train_batch_size: 5}\nactor_rollout_ref: {actor: {ppo_mini_batch_size: 5}}\ntrainer: {n_gpus_per_node: 2}");
    assert!(
        e.iter()
            .any(|m| m.starts_with("data.train_batch_size") && m.contains("2 ranks")),
        "{e:#?}"
    );
}

#[test]
fn the_shipped_configs_are_valid() {
    for (name, text) in [
        (
            "grpo_default",
            include_str!("../../../configs/grpo_default.yaml"),
        ),
        ("dapo", include_str!("../../../recipes/dapo.yaml")),
        (
            "bench",
            include_str!("../../../configs/bench_torch_peer.yaml"),
        ),
    ] {
        let doc: serde_yaml::Value = serde_yaml::from_str(text).unwrap();
        let cfg = TrainConfig::from_doc(&doc).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(cfg.world_size(), 2, "{name}");
    }
    let dapo: serde_yaml::Value =
        serde_yaml::from_str(include_str!("../../../recipes/dapo.yaml")).unwrap();
    let d = TrainConfig::from_doc(&dapo).unwrap();
    assert!(d.algorithm.filter_groups.enable && !d.actor.use_kl_loss && d.overlong.enable);
    assert_eq!(d.actor.clip_ratio_high, 0.28);
}

#[test]
fn likely_typos_warn_and_verl_keys_do_not() {
    let doc: serde_yaml::Value = serde_yaml::from_str(
        "trainer: {total_trainig_steps: 3}
actor_rollout_ref: {actor: {ppo_epoch: 2, clip_ratio_c: 3.0, use_dynamic_bsz: false}}",
    )
    .unwrap();
    let cfg = TrainConfig::from_doc(&doc).unwrap();
    assert_eq!(
        cfg.trainer.total_training_steps, 12,
        "the misspelt key is ignored"
    );
    let w = cfg.warnings.join("\n");
    assert!(
        w.contains("trainer.total_trainig_steps") && w.contains("'total_training_steps'"),
        "{w}"
    );
    assert!(
        w.contains("actor_rollout_ref.actor.ppo_epoch") && w.contains("'ppo_epochs'"),
        "{w}"
    );
    assert!(
        !w.contains("clip_ratio_c") && !w.contains("use_dynamic_bsz"),
        "{w}"
    );
    assert_eq!(cfg.warnings.len(), 2, "{w}");
}
