//! One rank of the job: the actor (trainable, sharded optimizer), the rollout engine (its own
//! weights, synced from the actor each step), the frozen reference policy, and the role calls of
//! a GRPO/DAPO step. All ranks run the same code on their own data shard; they meet only in the
//! collectives of their [`Communicator`].

mod batch;
mod experience;
mod grads;
mod ppo;
mod rollout;
mod setup;
mod update;

pub use batch::SeqBatch;
pub(crate) use grads::{Zero2, backward_into, param_modules};
pub(crate) use ppo::{MicroBatchUpdate, PpoSchedule, for_each_micro_batch};
pub use rollout::{mix, sample_token};
pub(crate) use update::finite_loss;

use crate::comm::Communicator;
use crate::config::TrainConfig;
use crate::model::{ModelConfig, ParamStore, Transformer};
use crate::optim::ShardedAdamW;
use crate::tokenizer::Tok;
use candle_core::Device;
use rlprof_profiler::{NameId, name};

/// One generated response and everything computed about it during the step.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Index of its prompt (group) in this rank's batch.
    pub group: usize,
    /// Prompt tokens.
    pub prompt_ids: Vec<u32>,
    /// Response tokens (ending with EOS unless cut at the length limit).
    pub response: Vec<u32>,
    /// Rule-based score (0/1) before shaping.
    pub score: f32,
    /// Reward after shaping.
    pub reward: f32,
    /// Advantage.
    pub adv: f32,
    /// Old log-probs of the update's ratio: `compute_log_prob`'s, or the rollout's own in
    /// bypass mode.
    pub old_logp: Vec<f32>,
    /// Log-probs of the sampled tokens as generation drew them (`rollout_log_probs`; empty
    /// unless `rollout.calculate_log_probs`).
    pub rollout_logp: Vec<f32>,
    /// Reference log-probs (`compute_ref_log_prob`).
    pub ref_logp: Vec<f32>,
    /// Per-token advantages (GAE); empty: `adv` on every token (GRPO).
    pub token_adv: Vec<f32>,
    /// Critic values per response token (`compute_values`, GAE only).
    pub values: Vec<f32>,
    /// GAE returns per response token.
    pub returns: Vec<f32>,
}

/// Decoded rows: the tokens of each row and, when asked for, their log-probs (else empty rows).
pub type Decoded = (Vec<Vec<u32>>, Vec<Vec<f32>>);

/// Sampling settings of one generation call.
#[derive(Debug, Clone, Copy)]
pub struct Sampling {
    /// Temperature.
    pub temperature: f32,
    /// Nucleus mass.
    pub top_p: f32,
    /// Top-k (-1 = off).
    pub top_k: i64,
    /// false = greedy.
    pub do_sample: bool,
    /// Longest response.
    pub max_tokens: usize,
    /// Base seed; every row draws from its own stream keyed by its global index.
    pub seed: u64,
    /// Keep generating past EOS up to `max_tokens` (benchmarks: fixed response length).
    pub ignore_eos: bool,
}

/// Statistics of one `update_actor` call, summed over micro-batches and ranks.
#[derive(Debug, Clone, Default)]
pub struct UpdateStats {
    /// Mean policy-gradient loss.
    pub pg_loss: f64,
    /// Mean KL to the reference.
    pub kl: f64,
    /// Mean entropy.
    pub entropy: f64,
    /// Fraction of clipped tokens.
    pub clipfrac: f64,
    /// Mean global grad norm (before clipping).
    pub grad_norm: f64,
    /// Optimizer updates done.
    pub updates: u64,
}

/// The models and optimizer of one rank.
pub struct Engine<C: Communicator> {
    /// Job config.
    pub cfg: TrainConfig,
    /// Collectives.
    pub comm: C,
    /// Model config.
    pub mcfg: ModelConfig,
    /// Tokenizer.
    pub tok: Tok,
    /// Actor weights.
    pub actor: ParamStore,
    train_model: Transformer,
    eval_model: Transformer,
    rollout_params: ParamStore,
    rollout_model: Transformer,
    ref_params: Option<ParamStore>,
    ref_model: Option<Transformer>,
    /// Optimizer state of this rank's shard.
    pub opt: ShardedAdamW,
    /// Full flat parameters (padded to `world * shard`), the optimizer's master copy.
    flat: Vec<f32>,
    /// Shard length.
    shard: usize,
    pub(crate) device: Device,
    /// Module path of each actor parameter (its name without `.weight`/`.bias`).
    param_modules: Vec<NameId>,
}

/// Module path of host-side input preparation.
pub(crate) fn data_module() -> NameId {
    name!("data")
}

/// Module path of the loss ops.
pub(crate) fn loss_module() -> NameId {
    name!("loss")
}
