//! The GRPO/DAPO trainer (see `shared/spec/trainer.md`).
//!
//! API contract used by the `rlprof` binary: [`TrainConfig::from_doc`], [`run`],
//! [`RunOptions`], [`StepMetrics`], [`RunSummary`], [`world_size`]. The engine is being rebuilt;
//! until it lands [`run`] returns [`TrainerError::NotBuilt`].

use std::collections::BTreeMap;
use std::path::PathBuf;

/// The profiler handle the trainer reports to.
pub type ProfilerHandle = rlprof_profiler::Profiler;

/// Errors of the trainer.
#[derive(Debug, thiserror::Error)]
pub enum TrainerError {
    /// A config value is invalid.
    #[error("config: {path}: {message}")]
    Config {
        /// YAML path.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The engine is not built in this revision.
    #[error("the training engine is not built in this revision")]
    NotBuilt,
}

/// `trainer` section.
#[derive(Debug, Clone)]
pub struct TrainerSection {
    /// Steps to run.
    pub total_training_steps: u64,
}

/// The whole job's config.
#[derive(Debug, Clone)]
pub struct TrainConfig {
    /// `trainer`.
    pub trainer: TrainerSection,
}

impl TrainConfig {
    /// Reads the job config from the merged document.
    pub fn from_doc(doc: &serde_yaml::Value) -> Result<TrainConfig, TrainerError> {
        let steps = doc
            .get("trainer")
            .and_then(|t| t.get("total_training_steps"))
            .and_then(|v| v.as_u64())
            .unwrap_or(4);
        Ok(TrainConfig {
            trainer: TrainerSection {
                total_training_steps: steps,
            },
        })
    }
}

/// Metrics of one step.
#[derive(Debug, Clone, Default)]
pub struct StepMetrics {
    /// Step number (1-based).
    pub step: u64,
    /// Mean reward of the step's responses.
    pub reward_mean: f64,
    /// Fraction of exactly right answers.
    pub accuracy: f64,
    /// `timing_s/*` values (`gen`, `reward`, `old_log_prob`, `ref`, `adv`, `update_actor`, `step`).
    pub timing_s: BTreeMap<String, f64>,
    /// Tokens processed per second over the step.
    pub tokens_per_s: f64,
}

/// Callback per finished step.
pub type StepCallback = Box<dyn Fn(&StepMetrics) + Send + Sync>;

/// Options of [`run`].
#[derive(Default)]
pub struct RunOptions {
    /// Called after each step (on the driver thread).
    pub on_step: Option<StepCallback>,
    /// Stop after this many steps (overrides the config when set).
    pub max_steps: Option<u64>,
    /// Where metrics JSONL goes (default `{trainer.default_local_dir}/metrics.jsonl`).
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
}

/// Number of ranks: `trainer.nnodes * trainer.n_gpus_per_node`.
pub fn world_size(doc: &serde_yaml::Value) -> u32 {
    let get = |k: &str| {
        doc.get("trainer")
            .and_then(|t| t.get(k))
            .and_then(|v| v.as_u64())
            .unwrap_or(1) as u32
    };
    get("nnodes") * get("n_gpus_per_node")
}

/// Runs the job.
pub fn run(
    doc: &serde_yaml::Value,
    profiler: ProfilerHandle,
    opts: RunOptions,
) -> Result<RunSummary, TrainerError> {
    let _ = (doc, profiler, opts);
    Err(TrainerError::NotBuilt)
}
