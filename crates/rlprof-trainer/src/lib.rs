//! The GRPO/DAPO trainer (verl's roles, algorithms and config names, as in verl's
//! `verl/trainer/config/ppo_trainer.yaml`): a Qwen2/Llama-family model on candle,
//! batched KV-cache rollout, GRPO and DAPO updates on sharded data-parallel ranks, instrumented
//! with `rlprof-profiler` (step scopes, role calls, phases, every tensor op, every collective).
//!
//! Modules, in data-flow order: [`config`] (the job's YAML) -> [`data`] / [`reward`] (prompts and
//! rule-based rewards) -> [`tokenizer`] / [`model`] (the network and its op layer) ->
//! [`engine`] (one rank's roles) using [`algo`] (GRPO/DAPO numerics), [`optim`] (sharded AdamW)
//! and [`comm`] (collectives) -> [`job`] (the loop, metrics, checkpoints via [`checkpoint`]).
//!
//! ```no_run
//! let doc = rlprof_config::parse_yaml("trainer: {total_training_steps: 2}").unwrap();
//! let cfg = rlprof_trainer::TrainConfig::from_doc(&doc).unwrap();
//! let profiler = rlprof_profiler::Profiler::new(rlprof_profiler::ProfilePlan::disabled(1));
//! let summary = rlprof_trainer::run(&cfg, profiler, Default::default()).unwrap();
//! assert_eq!(summary.steps, 2);
//! ```

pub mod algo;
pub mod checkpoint;
pub mod comm;
pub mod config;
mod config_reader;
pub mod critic;
pub mod critic_config;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod data;
pub mod engine;
pub mod error;
pub mod faults;
pub mod job;
pub mod model;
pub mod optim;
pub mod reward;
pub mod tokenizer;

use std::collections::BTreeMap;
use std::path::PathBuf;

pub use config::TrainConfig;
pub use error::TrainerError;
pub use job::{Event, RankOutcome, run, run_process, run_rank};

/// The profiler handle the trainer reports to.
pub type ProfilerHandle = rlprof_profiler::Profiler;

/// Metrics of one step.
#[derive(Debug, Clone, Default)]
pub struct StepMetrics {
    /// Step number (1-based).
    pub step: u64,
    /// Mean reward of the step's responses.
    pub reward_mean: f64,
    /// Fraction of exactly right answers.
    pub accuracy: f64,
    /// `timing_s/*` values (`gen`, `reward`, `old_log_prob`, `ref`, `adv`, `update_actor`,
    /// `update_weights`, `step`).
    pub timing_s: BTreeMap<String, f64>,
    /// Tokens (prompt + response) processed per second over the step, all ranks.
    pub tokens_per_s: f64,
    /// Other metrics under verl's names (`actor/pg_loss`, `critic/score/mean`, ...).
    pub values: BTreeMap<String, f64>,
}

/// Callback per finished step.
pub type StepCallback = Box<dyn Fn(&StepMetrics) + Send + Sync>;

/// Callback per supervised warm-up step: (step, total, loss).
pub type WarmupCallback = Box<dyn Fn(u64, u64, f32) + Send + Sync>;

/// Options of [`run`].
#[derive(Default)]
pub struct RunOptions {
    /// Called after each step (on the driver thread).
    pub on_step: Option<StepCallback>,
    /// Called after each warm-up step.
    pub on_warmup: Option<WarmupCallback>,
    /// Stop after this many steps (overrides the config when set).
    pub max_steps: Option<u64>,
    /// Where metrics JSONL goes (default `{trainer.default_local_dir}/metrics-{ms}-{pid}.jsonl`);
    /// the file must not exist (another run's metrics are never truncated).
    pub metrics_path: Option<PathBuf>,
}

/// What a run did.
#[derive(Debug, Clone)]
pub struct RunSummary {
    /// Steps run.
    pub steps: u64,
    /// Ranks.
    pub world_size: u32,
    /// Wall time.
    pub wall_s: f64,
    /// Metrics file.
    pub metrics_path: PathBuf,
    /// Per-step metrics.
    pub metrics: Vec<StepMetrics>,
    /// Rank 0's final actor parameters, flat.
    pub final_params: Vec<f32>,
    /// Optimizer state elements per rank (sharded: about `num_params / world` each).
    pub optimizer_state_len: Vec<usize>,
    /// Model parameters.
    pub num_params: usize,
}

/// Number of ranks: `trainer.nnodes * trainer.n_gpus_per_node`.
pub fn world_size(doc: &rlprof_config::Node) -> u32 {
    let get = |k: &str| {
        doc.get("trainer")
            .and_then(|t| t.get(k))
            .and_then(|v| v.as_u64())
            .unwrap_or(1) as u32
    };
    get("nnodes") * get("n_gpus_per_node")
}
