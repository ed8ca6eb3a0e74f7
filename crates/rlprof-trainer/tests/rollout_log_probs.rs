//! Rollout log-probs (`rollout.calculate_log_probs`) and verl's bypass mode
//! (`algorithm.rollout_correction.bypass_mode`): generation keeps each sampled token's log-prob,
//! equal to what `compute_log_prob` recomputes with the same weights; in bypass mode they are
//! the old log-probs and `compute_log_prob` is neither run nor profiled.

use rlprof_config::{build_plan, load_document_str, parse_yaml};
use rlprof_trainer::comm::InProcess;
use rlprof_trainer::data::Prompt;
use rlprof_trainer::engine::Sampling;
use rlprof_trainer::job::build_engine;
use rlprof_trainer::{RunSummary, TrainConfig};
use std::path::Path;

mod support;

const DEFAULT: &str = include_str!("../../../configs/grpo_default.yaml");

fn prompt(text: &str) -> Prompt {
    Prompt {
        text: text.into(),
        ground_truth: String::new(),
        data_source: "arithmetic".into(),
        solution: None,
    }
}

/// `model.vocab_size` pads the built-in model's embedding and LM head past the character
/// tokenizer's 52 symbols: generation samples over every row (near-uniform at initialisation, so
/// padding ids appear) and the rollout's log-probs over the padded vocabulary equal the
/// recomputed ones.
#[test]
fn a_padded_vocabulary_is_sampled_whole_and_scored_alike() {
    let doc = parse_yaml(
        "actor_rollout_ref: {model: {hidden_size: 32, num_hidden_layers: 1, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 64, vocab_size: 1000}}\ntrainer: {seed: 3}\n",
    )
    .unwrap();
    let cfg = TrainConfig::from_doc(&doc).unwrap();
    assert_eq!(cfg.model.vocab_size, 1000);
    let eng = build_engine(&cfg, InProcess::group(1).pop().unwrap()).unwrap();
    let s = Sampling {
        temperature: 1.0,
        top_p: 1.0,
        top_k: -1,
        do_sample: true,
        max_tokens: 16,
        seed: 5,
        ignore_eos: true,
    };
    let mut samples = eng.generate(&[prompt("12+7=")], 4, s, 0).unwrap();
    let ids: Vec<u32> = samples.iter().flat_map(|x| x.response.clone()).collect();
    assert_eq!(ids.len(), 64);
    assert!(ids.iter().all(|&t| t < 1000), "{ids:?}");
    assert!(ids.iter().any(|&t| t >= 52), "no padding id in {ids:?}");
    eng.log_probs(&mut samples, false).unwrap();
    for x in &samples {
        for (a, b) in x.old_logp.iter().zip(&x.rollout_logp) {
            assert!((a - b).abs() < 1e-4, "{a} vs {b}");
        }
    }
}

#[test]
fn rollout_log_probs_equal_the_recomputed_old_log_probs() {
    // A temperature other than 1 and prompts of different lengths (left padding), sampled.
    let doc = parse_yaml(
        "actor_rollout_ref: {model: {hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 64}, rollout: {temperature: 0.7}}\ntrainer: {seed: 3}\n",
    )
    .unwrap();
    let cfg = TrainConfig::from_doc(&doc).unwrap();
    let eng = build_engine(&cfg, InProcess::group(1).pop().unwrap()).unwrap();
    let prompts = [prompt("12+7="), prompt("3+45="), prompt("9=")];
    let s = Sampling {
        temperature: 0.7,
        top_p: 1.0,
        top_k: -1,
        do_sample: true,
        max_tokens: 10,
        seed: 5,
        ignore_eos: false,
    };
    let mut samples = eng.generate(&prompts, 2, s, 0).unwrap();
    for x in &samples {
        assert_eq!(
            x.rollout_logp.len(),
            x.response.len(),
            "one log-prob a token"
        );
        assert!(x.rollout_logp.iter().all(|l| l.is_finite() && *l <= 0.0));
    }
    eng.log_probs(&mut samples, false).unwrap();
    let mut worst = 0f32;
    for x in &samples {
        assert_eq!(x.old_logp.len(), x.response.len());
        for (a, b) in x.old_logp.iter().zip(&x.rollout_logp) {
            worst = worst.max((a - b).abs());
        }
    }
    assert!(
        worst < 1e-4,
        "rollout vs recomputed log-probs differ by {worst}"
    );
    // Not trivially equal: the tokens were not all equally likely.
    let all: Vec<f32> = samples
        .iter()
        .flat_map(|x| x.rollout_logp.clone())
        .collect();
    assert!(all.iter().any(|l| (l - all[0]).abs() > 1e-3), "{all:?}");
}

/// One discrete-profiled step of a small job with `extra` overrides; the run summary and the
/// role-call directories of step 1.
fn profiled_step(dir: &Path, extra: &[&str]) -> (RunSummary, Vec<String>) {
    let save = dir.join("prof");
    let mut overrides = support::discrete_rank0_step(&save, &dir.join("ckpt"));
    overrides.extend(
        [
            "data.max_response_length=8",
            "actor_rollout_ref.model.num_hidden_layers=1",
        ]
        .map(String::from),
    );
    overrides.extend(extra.iter().map(|s| s.to_string()));
    let doc = load_document_str(DEFAULT, "default", &overrides).unwrap();
    let profiler = rlprof_profiler::Profiler::new(build_plan(&doc).unwrap());
    let summary = rlprof_trainer::run(&cfg(&doc), profiler, Default::default()).unwrap();
    let mut roles = Vec::new();
    let mut stack = vec![save.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                // verl's layout: discrete collections go to {save}/{stage}/.
                if p.parent() == Some(save.as_path()) {
                    roles.push(e.file_name().to_string_lossy().into_owned());
                }
                stack.push(p);
            }
        }
    }
    roles.sort();
    (summary, roles)
}

#[test]
fn bypass_mode_takes_old_log_probs_from_the_rollout_and_skips_compute_log_prob() {
    let tmp = tempfile::tempdir().unwrap();
    let (recompute, roles) = profiled_step(&tmp.path().join("a"), &[]);
    let m = &recompute.metrics[0];
    assert!(m.timing_s.contains_key("old_log_prob"), "{:?}", m.timing_s);
    assert!(
        roles.iter().any(|r| r == "actor_compute_log_prob"),
        "{roles:?}"
    );
    // verl's debug metrics compare the two: same weights, so (numerically) the same values.
    let diff = m.values["training/rollout_probs_diff_max"];
    assert!((0.0..1e-4).contains(&diff), "{diff}");
    assert_eq!(m.values["training/rollout_probs_diff_valid"], 1.0);

    let (bypass, roles) = profiled_step(
        &tmp.path().join("b"),
        &["algorithm.rollout_correction.bypass_mode=true"],
    );
    let m = &bypass.metrics[0];
    assert!(!m.timing_s.contains_key("old_log_prob"), "{:?}", m.timing_s);
    assert!(m.timing_s.contains_key("update_actor"));
    assert!(!m.values.contains_key("training/rollout_probs_diff_max"));
    assert!(
        !roles.iter().any(|r| r == "actor_compute_log_prob"),
        "no compute_log_prob collection in bypass mode: {roles:?}"
    );
    assert!(roles.iter().any(|r| r == "actor_update"), "{roles:?}");
}

#[test]
fn rollout_correction_settings_without_an_implementation_are_refused_at_start() {
    let doc = parse_yaml(
        "algorithm: {rollout_correction: {bypass_mode: true, loss_type: reinforce, rollout_is: token, rollout_rs: seq_sum_k1}}",
    )
    .unwrap();
    let cfg = TrainConfig::from_doc(&doc).expect("valid verl settings pass the config check");
    let e = cfg.start_errors();
    for key in ["rollout_is", "rollout_rs", "loss_type"] {
        let path = format!("algorithm.rollout_correction.{key}");
        assert!(e.iter().any(|m| m.starts_with(&path)), "{path}: {e:#?}");
    }
    // Bypass without rollout log-probs cannot work: a config error naming both keys.
    let doc = parse_yaml(
        "actor_rollout_ref: {rollout: {calculate_log_probs: false}}\nalgorithm: {rollout_correction: {bypass_mode: true, loss_type: nope}}",
    )
    .unwrap();
    let Err(rlprof_trainer::TrainerError::Config(e)) = TrainConfig::from_doc(&doc) else {
        panic!("expected config errors");
    };
    assert!(
        e.iter().any(
            |m| m.starts_with("algorithm.rollout_correction.bypass_mode")
                && m.contains("actor_rollout_ref.rollout.calculate_log_probs")
        ),
        "{e:#?}"
    );
    assert!(
        e.iter()
            .any(|m| m.starts_with("algorithm.rollout_correction.loss_type")
                && m.contains("ppo_clip, reinforce")),
        "{e:#?}"
    );
}

/// The job config of `doc` (read once, as the CLI does, and passed to the run).
fn cfg(doc: &rlprof_config::Node) -> rlprof_trainer::TrainConfig {
    rlprof_trainer::TrainConfig::from_doc(doc).unwrap()
}
