//! The `critic` section and GAE's `algorithm.gamma` / `algorithm.lam` (verl's `ppo_trainer.yaml`
//! names), read for `algorithm.adv_estimator: gae`. Unset critic keys follow the actor's, as
//! verl's interpolations do (`ppo_mini_batch_size`, `ppo_epochs`, `loss_agg_mode`, ...).

use crate::config_reader::{LossAgg, Reader, loss_agg, model_path, warmup_steps};
use std::path::{Path, PathBuf};

/// `critic` and GAE settings.
#[derive(Debug, Clone)]
pub struct CriticConfig {
    /// `algorithm.gamma`: discount.
    pub gamma: f32,
    /// `algorithm.lam`: GAE lambda.
    pub lam: f32,
    /// `critic.ppo_mini_batch_size` (prompts x rollout.n samples, as the actor's).
    pub ppo_mini_batch_size: usize,
    /// `critic.ppo_micro_batch_size_per_gpu`.
    pub ppo_micro_batch_size_per_gpu: usize,
    /// `critic.forward_micro_batch_size_per_gpu` (`compute_values`).
    pub forward_micro_batch_size_per_gpu: usize,
    /// `critic.ppo_epochs`.
    pub ppo_epochs: usize,
    /// `critic.cliprange_value`.
    pub cliprange_value: f32,
    /// `critic.grad_clip`.
    pub grad_clip: f32,
    /// `critic.loss_agg_mode`.
    pub loss_agg_mode: LossAgg,
    /// `critic.optim.lr`.
    pub lr: f64,
    /// `critic.optim.lr_warmup_steps`.
    pub lr_warmup_steps: u64,
    /// `critic.optim.weight_decay`.
    pub weight_decay: f64,
    /// `critic.model.path` when set (verl's default interpolates the actor's model path).
    pub model_path: Option<PathBuf>,
}

impl CriticConfig {
    /// What `train` with `adv_estimator: gae` cannot run although verl accepts it: a critic
    /// model other than the actor's (`actor_model_path`; the critic here is the actor's
    /// architecture with a scalar value head, initialised like the actor).
    pub fn start_errors(&self, actor_model_path: Option<&Path>) -> Vec<String> {
        match self.model_path.as_deref() {
            Some(p) if Some(p) != actor_model_path => vec![format!(
                "critic.model.path: '{}' differs from actor_rollout_ref.model.path; a separate \
                 critic model is not implemented: set critic.model.path to the actor's path or null \
                 (the critic is the actor's architecture with a scalar value head)",
                p.display()
            )],
            _ => Vec::new(),
        }
    }
}

/// The keys read, per section (for the near-miss warnings).
pub const KNOWN: &[(&str, &[&str])] = &[
    (
        "critic",
        &[
            "ppo_mini_batch_size",
            "ppo_micro_batch_size_per_gpu",
            "forward_micro_batch_size_per_gpu",
            "ppo_epochs",
            "cliprange_value",
            "grad_clip",
            "loss_agg_mode",
            "optim",
            "model",
            "profiler",
        ],
    ),
    ("critic.optim", &["lr", "lr_warmup_steps", "weight_decay"]),
];

/// The actor's settings that the critic's unset keys follow (verl's interpolations).
pub(crate) struct Inherited {
    /// `actor.optim.lr`.
    pub(crate) lr: f64,
    /// The actor's warm-up steps.
    pub(crate) lr_warmup_steps: u64,
    /// `actor.ppo_mini_batch_size`.
    pub(crate) ppo_mini_batch_size: usize,
    /// `actor.ppo_micro_batch_size_per_gpu`.
    pub(crate) ppo_micro_batch_size_per_gpu: usize,
    /// `actor.ppo_epochs`.
    pub(crate) ppo_epochs: usize,
    /// `actor.loss_agg_mode`.
    pub(crate) loss_agg_mode: LossAgg,
}

/// Reads the critic settings through the trainer's reader `r` (every problem goes onto its
/// list, with its YAML path); unset keys take the actor's values.
pub(crate) fn read(r: &mut Reader, actor: &Inherited) -> CriticConfig {
    let gamma = r.float("algorithm.gamma", 1.0, 0.0, 1.0) as f32;
    let lam = r.float("algorithm.lam", 1.0, 0.0, 1.0) as f32;
    let cliprange_value = r.float("critic.cliprange_value", 0.5, 0.0, 1e6) as f32;
    let grad_clip = r.float("critic.grad_clip", 1.0, 0.0, 1e9) as f32;
    let lr = r.float("critic.optim.lr", actor.lr, 0.0, 10.0);
    let weight_decay = r.float("critic.optim.weight_decay", 0.0, 0.0, 10.0);
    let mini = r.size("critic.ppo_mini_batch_size", actor.ppo_mini_batch_size);
    let micro = r.size(
        "critic.ppo_micro_batch_size_per_gpu",
        actor.ppo_micro_batch_size_per_gpu,
    );
    let fwd = r.size("critic.forward_micro_batch_size_per_gpu", micro);
    let epochs = r.size("critic.ppo_epochs", actor.ppo_epochs);
    let loss_agg_mode = loss_agg(r, "critic.loss_agg_mode", actor.loss_agg_mode);
    let lr_warmup_steps = warmup_steps(r, "critic", actor.lr_warmup_steps);
    let model_path = model_path(r, "critic.model.path");
    CriticConfig {
        gamma,
        lam,
        ppo_mini_batch_size: mini,
        ppo_micro_batch_size_per_gpu: micro,
        forward_micro_batch_size_per_gpu: fwd,
        ppo_epochs: epochs,
        cliprange_value,
        grad_clip,
        loss_agg_mode,
        lr,
        lr_warmup_steps,
        weight_decay,
        model_path,
    }
}
