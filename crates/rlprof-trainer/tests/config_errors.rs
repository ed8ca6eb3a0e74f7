//! Bad training config fails before any work, with every problem at once, each naming its YAML
//! path and the valid values.

use rlprof_config::parse_yaml;
use rlprof_trainer::{TrainConfig, TrainerError};

fn errors(yaml: &str) -> Vec<String> {
    let doc = parse_yaml(yaml).unwrap();
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
algorithm: {adv_estimator: rloo}
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
    assert!(e.len() >= 7, "{e:#?}");
}

/// verl's other estimators are valid configuration (verl accepts them), so `config check` passes;
/// `train` refuses them before any work, naming the key and what this trainer implements.
#[test]
fn a_verl_estimator_without_an_implementation_is_refused_at_start_not_at_check() {
    let doc = parse_yaml("algorithm: {adv_estimator: rloo}").unwrap();
    let cfg = TrainConfig::from_doc(&doc).expect("rloo is a valid verl estimator");
    let e = cfg.start_errors();
    assert_eq!(e.len(), 1, "{e:#?}");
    assert!(
        e[0].starts_with("algorithm.adv_estimator")
            && e[0].contains("rloo")
            && e[0].contains("grpo or gae"),
        "{e:#?}"
    );
    for ok in ["grpo", "gae"] {
        let doc = parse_yaml(&format!("algorithm: {{adv_estimator: {ok}}}")).unwrap();
        assert!(
            TrainConfig::from_doc(&doc)
                .unwrap()
                .start_errors()
                .is_empty(),
            "{ok}"
        );
    }
}

#[test]
fn batch_that_does_not_split_over_ranks_is_accepted_but_refused_at_start() {
    // verl accepts it (its world size is its own); this trainer cannot split it evenly, so
    // `config check` passes and `train` refuses at start, naming the key.
    let doc = parse_yaml(
        "data: {train_batch_size: 5}\nactor_rollout_ref: {actor: {ppo_mini_batch_size: 5}}\ntrainer: {n_gpus_per_node: 2}",
    )
    .unwrap();
    let cfg = TrainConfig::from_doc(&doc).expect("verl's values are accepted");
    let e = cfg.start_errors();
    assert!(
        e.iter()
            .any(|m| m.starts_with("data.train_batch_size") && m.contains("2 ranks")),
        "{e:#?}"
    );
}

#[test]
fn verl_values_this_trainer_cannot_run_are_refused_at_start_by_key() {
    let doc = parse_yaml(
        "actor_rollout_ref: {actor: {use_kl_loss: true, kl_loss_type: k3+, loss_agg_mode: seq-mean-token-sum-norm}}\nreward_model: {overlong_buffer: {enable: false, len: 0}}",
    )
    .unwrap();
    let cfg = TrainConfig::from_doc(&doc).expect("verl's values are accepted");
    let e = cfg.start_errors().join("\n");
    assert!(
        e.contains("actor_rollout_ref.actor.kl_loss_type: 'k3+'"),
        "{e}"
    );
    assert!(
        e.contains("actor_rollout_ref.actor.loss_agg_mode: 'seq-mean-token-sum-norm'"),
        "{e}"
    );
    assert!(!e.contains("overlong_buffer"), "{e}");
    // An unknown estimator is still a config error.
    let e = errors("actor_rollout_ref: {actor: {kl_loss_type: k9}}");
    assert!(e.iter().any(|m| m.contains("kl_loss_type")), "{e:#?}");
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
        (
            "bench_base",
            include_str!("../../../configs/bench_torch_peer_base.yaml"),
        ),
    ] {
        let doc = parse_yaml(text).unwrap();
        let cfg = TrainConfig::from_doc(&doc).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(cfg.world_size(), 2, "{name}");
    }
    let base = parse_yaml(include_str!("../../../configs/bench_torch_peer_base.yaml")).unwrap();
    let b = TrainConfig::from_doc(&base).unwrap();
    assert_eq!((b.model.vocab_size, b.model.hidden_size), (8192, 256));
    let dapo = parse_yaml(include_str!("../../../recipes/dapo.yaml")).unwrap();
    let d = TrainConfig::from_doc(&dapo).unwrap();
    assert!(d.algorithm.filter_groups.enable && !d.actor.use_kl_loss && d.overlong.enable);
    assert_eq!(d.actor.clip_ratio_high, 0.28);
}

#[test]
fn likely_typos_warn_and_verl_keys_do_not() {
    let doc = parse_yaml(
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

/// verl's critic defaults: `lr_warmup_steps: -1` (use the ratio) and a `critic.model.path`
/// interpolated from the actor's are valid; a different critic model is refused at `train` with
/// `gae` only (with `grpo` the critic is not used).
#[test]
fn verl_critic_defaults_are_accepted_and_a_separate_critic_model_is_refused_at_start() {
    let base = "actor_rollout_ref: {model: {path: /m/actor}}\n\
                trainer: {total_training_steps: 10}\n";
    let doc = parse_yaml(&format!(
        "{base}algorithm: {{adv_estimator: gae}}\n\
         critic: {{model: {{path: /m/actor}}, optim: {{lr_warmup_steps: -1, lr_warmup_steps_ratio: 0.5}}}}"
    ))
    .unwrap();
    let cfg = TrainConfig::from_doc(&doc).expect("verl's critic defaults are valid");
    assert_eq!(cfg.critic.lr_warmup_steps, 5);
    assert!(cfg.start_errors().is_empty(), "{:?}", cfg.start_errors());
    for est in ["gae", "grpo"] {
        let doc = parse_yaml(&format!(
            "{base}algorithm: {{adv_estimator: {est}}}\ncritic: {{model: {{path: /m/critic}}}}"
        ))
        .unwrap();
        let e = TrainConfig::from_doc(&doc)
            .expect("a separate critic model is valid verl configuration")
            .start_errors();
        if est == "gae" {
            assert!(
                e.len() == 1 && e[0].starts_with("critic.model.path") && e[0].contains("/m/critic"),
                "{e:#?}"
            );
        } else {
            assert!(e.is_empty(), "{e:#?}");
        }
    }
}
