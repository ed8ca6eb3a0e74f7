//! Checkpoints and reproducibility: a fixed seed reproduces a run exactly; a run stopped after
//! a checkpoint and resumed (`resume_mode: auto`) ends with the same parameters as an
//! uninterrupted one; non-finite values stop training with an error naming the step.

use rlprof_config::{Node, parse_yaml};
use rlprof_profiler::{ProfilePlan, Profiler};
use rlprof_trainer::comm::InProcess;
use rlprof_trainer::engine::Sample;
use rlprof_trainer::job::build_engine;
use rlprof_trainer::{TrainConfig, TrainerError};

const DEFAULT: &str = include_str!("../../../configs/grpo_default.yaml");

fn small(dir: &std::path::Path, extra: &[String]) -> Node {
    let mut o: Vec<String> = vec![
        format!("trainer.default_local_dir={}", dir.display()),
        "trainer.sft_warmup_steps=3".into(),
        "data.train_batch_size=4".into(),
        "actor_rollout_ref.actor.ppo_mini_batch_size=2".into(),
        "actor_rollout_ref.rollout.n=2".into(),
        "actor_rollout_ref.model.hidden_size=32".into(),
        "actor_rollout_ref.model.num_hidden_layers=2".into(),
        "actor_rollout_ref.model.intermediate_size=64".into(),
    ];
    o.extend_from_slice(extra);
    rlprof_config::load_document_str(DEFAULT, "test", &o).unwrap()
}

fn params(doc: &Node) -> Vec<f32> {
    rlprof_trainer::run(
        &cfg(doc),
        Profiler::new(ProfilePlan::disabled(2)),
        Default::default(),
    )
    .unwrap()
    .final_params
}

#[test]
fn fixed_seed_reproduces_and_resume_continues_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    let steps = |n: u64| format!("trainer.total_training_steps={n}");
    let a = params(&small(&tmp.path().join("a"), &[steps(3)]));
    let a2 = params(&small(&tmp.path().join("a2"), &[steps(3)]));
    assert_eq!(a, a2, "same seed, same rank count: same parameters");

    let b = tmp.path().join("b");
    params(&small(&b, &[steps(2), "trainer.save_freq=2".into()]));
    let ckpt = b.join("global_step_2/actor");
    for f in [
        "huggingface/config.json",
        "huggingface/model.safetensors",
        "huggingface/tokenizer.json",
        "optim_world_size_2_rank_0.safetensors",
        "optim_world_size_2_rank_1.safetensors",
    ] {
        assert!(ckpt.join(f).is_file(), "{f}");
    }
    assert_eq!(
        std::fs::read_to_string(b.join("latest_checkpointed_iteration.txt")).unwrap(),
        "2"
    );
    let resumed = rlprof_trainer::run(
        &cfg(&small(&b, &[steps(3), "trainer.resume_mode=auto".into()])),
        Profiler::new(ProfilePlan::disabled(2)),
        Default::default(),
    )
    .unwrap();
    assert_eq!(resumed.steps, 1, "only step 3 runs after resuming at 2");
    assert_eq!(resumed.metrics[0].step, 3);
    assert_eq!(
        resumed.final_params, a,
        "resumed run equals the uninterrupted one"
    );
}

#[test]
fn non_finite_loss_is_an_error_naming_the_step() {
    let doc = parse_yaml(
        "actor_rollout_ref: {model: {hidden_size: 32, num_hidden_layers: 1, intermediate_size: 64}}",
    )
    .unwrap();
    let cfg = TrainConfig::from_doc(&doc).unwrap();
    let mut eng = build_engine(&cfg, InProcess::group(1).pop().unwrap()).unwrap();
    let mut flat = eng.actor_flat().to_vec();
    flat[0] = f32::NAN; // a poisoned embedding row
    eng.load_actor_flat(&flat).unwrap();
    let mut resp = eng.tok.encode("3").unwrap();
    resp.push(eng.tok.eos_id);
    // Token 0 (<pad>) has the poisoned embedding row: make it part of the prompt.
    let s = Sample {
        group: 0,
        prompt_ids: vec![0, 2, 3],
        response: resp.clone(),
        score: 1.0,
        reward: 1.0,
        adv: 1.0,
        old_logp: vec![0.0; resp.len()],
        rollout_logp: vec![],
        ref_logp: vec![0.0; resp.len()],
        token_adv: vec![],
        values: vec![],
        returns: vec![],
    };
    let err = eng.update_actor(&[s.clone(), s], 7).unwrap_err();
    assert!(
        matches!(err, TrainerError::NonFinite { step: 7, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("step 7"), "{err}");
}

/// The job config of `doc` (read once, as the CLI does, and passed to the run).
fn cfg(doc: &rlprof_config::Node) -> rlprof_trainer::TrainConfig {
    rlprof_trainer::TrainConfig::from_doc(doc).unwrap()
}
