//! Shared by the trainer's integration tests: the overrides of a small one-step job profiled
//! in discrete mode on rank 0.

use std::path::Path;

/// Overrides for one step of a small job (4 prompts x 2 samples, d_model 32, no warm-up) whose
/// actor, rollout and ref calls are collected in discrete mode on rank 0 under `save`, with
/// checkpoints under `ckpt` and no automatic analysis.
pub(crate) fn discrete_rank0_step(save: &Path, ckpt: &Path) -> Vec<String> {
    vec![
        format!("global_profiler.save_path={}", save.display()),
        "global_profiler.steps=[1]".into(),
        "actor_rollout_ref.actor.profiler.all_ranks=False".into(),
        // `+`: the built-in config does not write `ranks` (struct mode).
        "+actor_rollout_ref.actor.profiler.ranks=[0]".into(),
        "actor_rollout_ref.actor.profiler.tool_config.npu.discrete=True".into(),
        "actor_rollout_ref.actor.profiler.tool_config.npu.analysis=False".into(),
        "trainer.total_training_steps=1".into(),
        "trainer.sft_warmup_steps=0".into(),
        format!("trainer.default_local_dir={}", ckpt.display()),
        "data.train_batch_size=4".into(),
        "actor_rollout_ref.actor.ppo_mini_batch_size=2".into(),
        "actor_rollout_ref.rollout.n=2".into(),
        "actor_rollout_ref.model.hidden_size=32".into(),
        "actor_rollout_ref.model.intermediate_size=64".into(),
    ]
}
