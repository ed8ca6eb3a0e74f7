//! RL works: with a fixed seed, GRPO and DAPO raise the exact-match accuracy of sampled responses
//! on the built-in arithmetic task (mean of the last steps vs the first steps), after the short
//! supervised warm-up. Profiling is off here; see `profiled.rs` for the instrumented run.

use rlprof_profiler::{ProfilePlan, Profiler};

const DEFAULT: &str = include_str!("../../../configs/grpo_default.yaml");
const DAPO: &str = include_str!("../../../recipes/dapo.yaml");

fn accuracy_trend(base: &str, extra: &[&str]) -> (f64, f64, Vec<f64>) {
    let tmp = tempfile::tempdir().unwrap();
    let mut overrides: Vec<String> = vec![
        format!("trainer.default_local_dir={}", tmp.path().display()),
        "trainer.total_training_steps=20".into(),
    ];
    overrides.extend(extra.iter().map(|s| s.to_string()));
    let doc = rlprof_config::load_document_str(base, "test", &overrides).unwrap();
    let summary = rlprof_trainer::run(
        &cfg(&doc),
        Profiler::new(ProfilePlan::disabled(2)),
        Default::default(),
    )
    .unwrap();
    let acc: Vec<f64> = summary.metrics.iter().map(|m| m.accuracy).collect();
    let mean = |s: &[f64]| s.iter().sum::<f64>() / s.len() as f64;
    (mean(&acc[..5]), mean(&acc[acc.len() - 5..]), acc)
}

#[test]
fn grpo_improves_accuracy() {
    let (first, last, all) = accuracy_trend(DEFAULT, &[]);
    assert!(first > 0.05, "the warm-up gives a non-zero start: {all:?}");
    assert!(
        last > first + 0.08,
        "first {first:.3} last {last:.3}: {all:?}"
    );
}

#[test]
fn dapo_improves_accuracy() {
    let (first, last, all) = accuracy_trend(DAPO, &[]);
    assert!(
        last > first + 0.08,
        "first {first:.3} last {last:.3}: {all:?}"
    );
}

#[test]
fn ppo_with_gae_improves_accuracy() {
    let (first, last, all) = accuracy_trend(
        DEFAULT,
        &["algorithm.adv_estimator=gae", "+critic.ppo_epochs=1"],
    );
    assert!(
        last > first + 0.08,
        "first {first:.3} last {last:.3}: {all:?}"
    );
}

/// The job config of `doc` (read once, as the CLI does, and passed to the run).
fn cfg(doc: &rlprof_config::Node) -> rlprof_trainer::TrainConfig {
    rlprof_trainer::TrainConfig::from_doc(doc).unwrap()
}
