//! The training job's config, read from the merged `ppo_trainer.yaml`-layout document.
//!
//! Only the keys this trainer implements are read; each is typed and range-checked, and every
//! problem is reported at once with its YAML path and the valid values. Keys of verl's full file
//! that this trainer does not implement are accepted and ignored (so a user's file loads).

pub use crate::config_reader::LossAgg;
use crate::config_reader::{Reader, kl_type, loss_agg, model_path, unrunnable, warmup_steps};
use crate::error::{Result, TrainerError};
use rlprof_config::Node;
use std::path::PathBuf;

/// Advantage estimator (`algorithm.adv_estimator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdvEstimator {
    /// Group-relative (GRPO, also used by DAPO).
    Grpo,
    /// Generalised advantage estimation with a critic (PPO; settings in [`TrainConfig::critic`]).
    Gae,
}

/// verl 0.9.1's advantage estimators (`verl/trainer/ppo/core_algos.py`), all accepted in a
/// config; grpo and gae (PPO with a critic) train here.
const VERL_ESTIMATORS: &[&str] = &[
    "gae",
    "grpo",
    "reinforce_plus_plus",
    "reinforce_plus_plus_baseline",
    "remax",
    "rloo",
    "opo",
    "grpo_passk",
    "gpg",
    "rloo_vectorized",
    "grpo_vectorized",
    "optimal_token_baseline",
    "tir_optimal_token_baseline",
    "gdpo",
];

/// Built-in task generator (`data.task.name`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskKind {
    /// `a+b=` with `data.task.digits`-digit operands.
    Arithmetic,
    /// Reach `target` with the given numbers and + - *.
    Countdown,
}

/// `data`.
#[derive(Debug, Clone)]
pub struct DataConfig {
    /// Prompts per step (global).
    pub train_batch_size: usize,
    /// Longest prompt in tokens (longer ones are dropped with a warning).
    pub max_prompt_length: usize,
    /// Longest response in tokens.
    pub max_response_length: usize,
    /// verl-style JSONL/parquet files; empty = built-in task.
    pub train_files: Vec<PathBuf>,
    /// Validation files; empty = built-in task.
    pub val_files: Vec<PathBuf>,
    /// Built-in task.
    pub task: TaskKind,
    /// Operand digits of the arithmetic task.
    pub digits: u32,
    /// Data seed.
    pub seed: u64,
}

/// `actor_rollout_ref.model`.
#[derive(Debug, Clone)]
pub struct ModelSection {
    /// Hugging Face directory; None = built-in tiny model and character tokenizer.
    pub path: Option<PathBuf>,
    /// Built-in model: hidden size.
    pub hidden_size: usize,
    /// Built-in model: layers.
    pub num_hidden_layers: usize,
    /// Built-in model: attention heads.
    pub num_attention_heads: usize,
    /// Built-in model: key/value heads (GQA).
    pub num_key_value_heads: usize,
    /// Built-in model: MLP width.
    pub intermediate_size: usize,
    /// Built-in model: tie LM head and embeddings.
    pub tie_word_embeddings: bool,
    /// Built-in model: rows of the embedding and LM head; 0 = the tokenizer's size. A larger
    /// value pads the vocabulary (as Hugging Face models pad theirs to a round size): the extra
    /// rows are trained and sampled from like any other, and decode to nothing.
    pub vocab_size: usize,
}

/// `actor_rollout_ref.actor`.
#[derive(Debug, Clone)]
pub struct ActorConfig {
    /// Prompts per mini-batch (global, times `rollout.n` samples).
    pub ppo_mini_batch_size: usize,
    /// Samples per micro-batch per rank.
    pub ppo_micro_batch_size_per_gpu: usize,
    /// Passes over the batch.
    pub ppo_epochs: usize,
    /// PPO clip (both sides unless low/high are set).
    pub clip_ratio_low: f32,
    /// Upper clip (DAPO clip-higher: 0.28).
    pub clip_ratio_high: f32,
    /// KL loss to the ref policy.
    pub use_kl_loss: bool,
    /// Its coefficient.
    pub kl_loss_coef: f32,
    /// Loss aggregation.
    pub loss_agg_mode: LossAgg,
    /// Entropy bonus coefficient.
    pub entropy_coeff: f32,
    /// Gradient-norm clip.
    pub grad_clip: f32,
    /// AdamW learning rate.
    pub lr: f64,
    /// Warm-up steps of the learning rate.
    pub lr_warmup_steps: u64,
    /// AdamW weight decay.
    pub weight_decay: f64,
    /// AdamW betas.
    pub betas: (f64, f64),
}

/// `actor_rollout_ref.rollout`.
#[derive(Debug, Clone)]
pub struct RolloutConfig {
    /// Samples per prompt.
    pub n: usize,
    /// Sampling temperature.
    pub temperature: f32,
    /// Nucleus sampling.
    pub top_p: f32,
    /// Top-k (-1 = off).
    pub top_k: i64,
    /// Greedy decoding (`do_sample: false`).
    pub do_sample: bool,
    /// Samples per micro-batch of `compute_log_prob`.
    pub log_prob_micro_batch_size_per_gpu: usize,
    /// Generate `max_response_length` tokens regardless of EOS.
    pub ignore_eos: bool,
    /// Record each sampled token's log-prob at generation (`rollout_log_probs`; verl's
    /// `calculate_log_probs`, default true in verl 0.9.1).
    pub calculate_log_probs: bool,
}

/// DAPO dynamic sampling (`algorithm.filter_groups`).
#[derive(Debug, Clone)]
pub struct FilterGroups {
    /// On.
    pub enable: bool,
    /// Extra generation batches allowed (verl's 0 = no limit reads as `usize::MAX`).
    pub max_num_gen_batches: usize,
}

/// DAPO overlong reward shaping (`reward_model.overlong_buffer`).
#[derive(Debug, Clone)]
pub struct OverlongBuffer {
    /// On.
    pub enable: bool,
    /// Buffer length in tokens.
    pub len: usize,
    /// Penalty at the maximum length.
    pub penalty_factor: f32,
}

/// `algorithm`.
#[derive(Debug, Clone)]
pub struct AlgorithmConfig {
    /// Advantage estimator.
    pub adv_estimator: AdvEstimator,
    /// `algorithm.adv_estimator` as written (verl has more than this trainer implements).
    pub adv_estimator_name: String,
    /// Divide group-centred rewards by the group std.
    pub norm_adv_by_std_in_grpo: bool,
    /// Dynamic sampling.
    pub filter_groups: FilterGroups,
    /// `algorithm.rollout_correction`.
    pub rollout_correction: RolloutCorrection,
}

/// `algorithm.rollout_correction`: off-policy correction between the rollout and the actor.
#[derive(Debug, Clone)]
pub struct RolloutCorrection {
    /// Old log-probs are the rollout's own (`rollout_log_probs`), so `compute_log_prob` is
    /// skipped (verl's bypass mode, "2 policies").
    pub bypass_mode: bool,
    /// The loss of bypass mode (`ppo_clip` is implemented).
    pub loss_type: String,
    /// Importance-weighting level as written (not implemented).
    pub rollout_is: Option<String>,
    /// Rejection-sampling mode as written (not implemented).
    pub rollout_rs: Option<String>,
}

/// `trainer`.
#[derive(Debug, Clone)]
pub struct TrainerSection {
    /// Steps to run.
    pub total_training_steps: u64,
    /// Nodes.
    pub nnodes: u32,
    /// Ranks per node.
    pub n_gpus_per_node: u32,
    /// Supervised warm-up steps before RL (built-in task; 0 = none).
    pub sft_warmup_steps: u64,
    /// Learning rate of the warm-up.
    pub sft_lr: f64,
    /// Validation every N steps (0 = never; verl's -1 reads as 0).
    pub test_freq: u64,
    /// Prompts of the validation pass.
    pub val_batch_size: usize,
    /// Checkpoints and metrics.
    pub default_local_dir: PathBuf,
    /// Save every N steps (0 = only at the end when `save_final`; verl's -1 reads as 0).
    pub save_freq: u64,
    /// `disable` or `auto` (resume from the latest checkpoint) or a checkpoint path.
    pub resume_mode: String,
    /// Seed of model init, sampling and data.
    pub seed: u64,
}

/// The whole job's config.
#[derive(Debug, Clone)]
pub struct TrainConfig {
    /// `data`.
    pub data: DataConfig,
    /// `actor_rollout_ref.model`.
    pub model: ModelSection,
    /// `actor_rollout_ref.actor`.
    pub actor: ActorConfig,
    /// `actor_rollout_ref.rollout`.
    pub rollout: RolloutConfig,
    /// Samples per micro-batch of `compute_ref_log_prob`.
    pub ref_log_prob_micro_batch_size_per_gpu: usize,
    /// `algorithm`.
    pub algorithm: AlgorithmConfig,
    /// `reward_model.overlong_buffer`.
    pub overlong: OverlongBuffer,
    /// `trainer`.
    pub trainer: TrainerSection,
    /// `critic` and GAE's `algorithm.gamma` / `lam` (used with `adv_estimator: gae`).
    pub critic: crate::critic_config::CriticConfig,
    /// Keys that look like misspellings of keys this trainer reads (they are ignored).
    pub warnings: Vec<String>,
    /// verl settings accepted by `config check` that this trainer cannot run (see
    /// [`TrainConfig::start_errors`]).
    pub unrunnable: Vec<String>,
}

/// The keys this trainer reads, per section (other keys of verl's file are accepted and ignored).
const KNOWN: &[(&str, &[&str])] = &[
    (
        "data",
        &[
            "train_batch_size",
            "max_prompt_length",
            "max_response_length",
            "train_files",
            "val_files",
            "seed",
            "task",
        ],
    ),
    ("data.task", &["name", "digits"]),
    (
        "actor_rollout_ref.model",
        &[
            "path",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "num_key_value_heads",
            "intermediate_size",
            "tie_word_embeddings",
            "vocab_size",
        ],
    ),
    (
        "actor_rollout_ref.actor",
        &[
            "ppo_mini_batch_size",
            "ppo_micro_batch_size_per_gpu",
            "ppo_epochs",
            "clip_ratio",
            "clip_ratio_low",
            "clip_ratio_high",
            "use_kl_loss",
            "kl_loss_coef",
            "kl_loss_type",
            "loss_agg_mode",
            "entropy_coeff",
            "grad_clip",
            "optim",
            "profiler",
        ],
    ),
    (
        "actor_rollout_ref.actor.optim",
        &[
            "lr",
            "lr_warmup_steps",
            "lr_warmup_steps_ratio",
            "weight_decay",
            "betas",
        ],
    ),
    (
        "actor_rollout_ref.rollout",
        &[
            "n",
            "temperature",
            "top_p",
            "top_k",
            "do_sample",
            "ignore_eos",
            "log_prob_micro_batch_size_per_gpu",
            "calculate_log_probs",
            "profiler",
        ],
    ),
    (
        "actor_rollout_ref.ref",
        &["log_prob_micro_batch_size_per_gpu", "profiler"],
    ),
    (
        "algorithm",
        &[
            "adv_estimator",
            "norm_adv_by_std_in_grpo",
            "filter_groups",
            "gamma",
            "lam",
            "rollout_correction",
        ],
    ),
    (
        "algorithm.rollout_correction",
        &["bypass_mode", "loss_type", "rollout_is", "rollout_rs"],
    ),
    (
        "algorithm.filter_groups",
        &["enable", "metric", "max_num_gen_batches"],
    ),
    (
        "reward_model.overlong_buffer",
        &["enable", "len", "penalty_factor"],
    ),
    (
        "trainer",
        &[
            "total_training_steps",
            "nnodes",
            "n_gpus_per_node",
            "sft_warmup_steps",
            "sft_lr",
            "test_freq",
            "val_batch_size",
            "default_local_dir",
            "save_freq",
            "resume_mode",
            "seed",
        ],
    ),
];

/// verl keys within the typo distance of ours that this trainer does not implement.
const VERL_NEIGHBOURS: &[&str] = &[
    "clip_ratio_c",
    "ppo_micro_batch_size",
    "log_prob_micro_batch_size",
    "ppo_max_token_len_per_gpu",
];

/// Warnings for keys within a small edit distance of a key this trainer reads: likely typos
/// that would otherwise be silently ignored (not errors: verl's own keys, e.g. `clip_ratio_c`,
/// can be that close to ours).
fn near_misses(doc: &Node) -> Vec<String> {
    let mut out = Vec::new();
    for (section, known) in KNOWN.iter().chain(crate::critic_config::KNOWN) {
        let mut v = doc;
        let mut found = true;
        for k in section.split('.') {
            match v.get(k) {
                Some(x) => v = x,
                None => found = false,
            }
            if !found {
                break;
            }
        }
        let Some(map) = v.as_map().filter(|_| found) else {
            continue;
        };
        for key in map.keys().map(String::as_str) {
            if known.contains(&key) || VERL_NEIGHBOURS.contains(&key) {
                continue;
            }
            let best = known
                .iter()
                .map(|k| (strsim::levenshtein(key, k), *k))
                .min()
                .filter(|(d, k)| *d <= 2 && *d * 4 < k.len());
            if let Some((_, k)) = best {
                out.push(format!(
                    "{section}.{key}: not a key this trainer reads (ignored); did you mean '{k}'?"
                ));
            }
        }
    }
    out
}

const AAR: &str = "actor_rollout_ref";

impl TrainConfig {
    /// Reads and validates the job config from the merged document (all errors at once).
    pub fn from_doc(doc: &Node) -> Result<TrainConfig> {
        let mut r = Reader::new(doc);
        let data = read_data(&mut r);
        let model = read_model(&mut r);
        let actor = read_actor(&mut r);
        let rollout = read_rollout(&mut r);
        let ref_mb = r.size(&format!("{AAR}.ref.log_prob_micro_batch_size_per_gpu"), 16);
        let algorithm = read_algorithm(&mut r);
        let overlong = OverlongBuffer {
            enable: r.boolean("reward_model.overlong_buffer.enable", false),
            // verl's recipes write `len: 0` with the buffer disabled.
            len: r.uint("reward_model.overlong_buffer.len", 4, 0) as usize,
            penalty_factor: r.float("reward_model.overlong_buffer.penalty_factor", 1.0, 0.0, 1e3)
                as f32,
        };
        let trainer = read_trainer(&mut r);
        let critic = crate::critic_config::read(
            &mut r,
            &crate::critic_config::Inherited {
                lr: actor.lr,
                lr_warmup_steps: actor.lr_warmup_steps,
                ppo_mini_batch_size: actor.ppo_mini_batch_size,
                ppo_micro_batch_size_per_gpu: actor.ppo_micro_batch_size_per_gpu,
                ppo_epochs: actor.ppo_epochs,
                loss_agg_mode: actor.loss_agg_mode,
            },
        );
        let unrun = unrunnable(doc, actor.use_kl_loss);
        let cfg = TrainConfig {
            data,
            model,
            actor,
            rollout,
            ref_log_prob_micro_batch_size_per_gpu: ref_mb,
            algorithm,
            overlong,
            trainer,
            unrunnable: unrun,
            critic,
            warnings: near_misses(doc),
        };
        // Cross-field checks come after every single-value issue, as they always have.
        let mut errors = r.into_messages();
        cfg.check_consistency(&mut errors);
        if errors.is_empty() {
            Ok(cfg)
        } else {
            Err(TrainerError::Config(errors))
        }
    }

    /// What `config check` accepts but `train` cannot run yet (one line each).
    pub fn start_errors(&self) -> Vec<String> {
        let mut e = match self.algorithm.adv_estimator_name.as_str() {
            "grpo" => Vec::new(),
            "gae" => self.critic.start_errors(self.model.path.as_deref()),
            other => vec![format!(
                "algorithm.adv_estimator: '{other}' is a verl estimator this trainer does not implement; use algorithm.adv_estimator=grpo or gae"
            )],
        };
        e.extend(self.algorithm.rollout_correction.start_errors());
        e.extend(self.unrunnable.iter().cloned());
        // verl accepts batch sizes that its own world size divides; this trainer splits every
        // batch evenly over its ranks.
        let world = self.world_size();
        let bs = self.data.train_batch_size;
        if world > 0 && !bs.is_multiple_of(world) {
            e.push(format!(
                "data.train_batch_size: {bs} prompts do not split evenly over {world} ranks \
                 (trainer.nnodes * trainer.n_gpus_per_node), as this trainer needs"
            ));
        }
        let mini = self.actor.ppo_mini_batch_size;
        if mini > bs || !bs.is_multiple_of(mini) {
            e.push(format!(
                "{AAR}.actor.ppo_mini_batch_size: {mini} must divide data.train_batch_size ({bs}) for this trainer"
            ));
        }
        if self.overlong.enable && self.overlong.len == 0 {
            e.push(
                "reward_model.overlong_buffer.len: 0 with the buffer enabled (the penalty divides by it); set a length or reward_model.overlong_buffer.enable=False".to_string(),
            );
        }
        e
    }

    /// Number of ranks.
    pub fn world_size(&self) -> usize {
        (self.trainer.nnodes * self.trainer.n_gpus_per_node) as usize
    }

    fn check_consistency(&self, errors: &mut Vec<String>) {
        let world = self.world_size();
        if world == 0 {
            return;
        }
        self.check_memory(errors, memory_limit());
        if self.algorithm.rollout_correction.bypass_mode && !self.rollout.calculate_log_probs {
            errors.push(format!(
                "algorithm.rollout_correction.bypass_mode: true takes the old log-probs from the \
                 rollout, which needs {AAR}.rollout.calculate_log_probs: true (it is false)"
            ));
        }
        if self.overlong.enable && self.overlong.len >= self.data.max_response_length {
            errors.push(format!(
                "reward_model.overlong_buffer.len: {} must be below data.max_response_length ({})",
                self.overlong.len, self.data.max_response_length
            ));
        }
        if self.model.path.is_none()
            && !self
                .model
                .hidden_size
                .is_multiple_of(self.model.num_attention_heads)
        {
            errors.push(format!(
                "{AAR}.model.hidden_size: {} is not a multiple of num_attention_heads ({})",
                self.model.hidden_size, self.model.num_attention_heads
            ));
        }
        if !self
            .model
            .num_attention_heads
            .is_multiple_of(self.model.num_key_value_heads)
        {
            errors.push(format!(
                "{AAR}.model.num_key_value_heads: {} must divide num_attention_heads ({})",
                self.model.num_key_value_heads, self.model.num_attention_heads
            ));
        }
    }
}

/// The memory a single process may plan for: the machine's (`MemTotal`), else 1 TiB.
fn memory_limit() -> u128 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u128>().ok())
        })
        .map_or(1 << 40, |kb| kb * 1024)
}

fn gib(bytes: u128) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

impl TrainConfig {
    /// Sizes whose buffers could never fit are errors naming the key and the memory, instead of
    /// an abort in the allocator.
    fn check_memory(&self, errors: &mut Vec<String>, limit: u128) {
        let d = &self.data;
        let seq = d.max_prompt_length as u128 + d.max_response_length as u128;
        let samples = d.train_batch_size as u128 * self.rollout.n as u128;
        // Token ids, log-probs (policy, old, ref) and advantages: 4 bytes each per token.
        let rollout_bytes = samples.saturating_mul(seq).saturating_mul(20);
        if rollout_bytes > limit {
            let factors = [
                (
                    "data.max_response_length",
                    d.max_response_length as f64 / 8.0,
                ),
                ("data.max_prompt_length", d.max_prompt_length as f64 / 32.0),
                ("actor_rollout_ref.rollout.n", self.rollout.n as f64 / 8.0),
                ("data.train_batch_size", d.train_batch_size as f64 / 16.0),
            ];
            let (key, _) = factors
                .iter()
                .copied()
                .fold(factors[0], |a, b| if b.1 > a.1 { b } else { a });
            errors.push(format!(
                "{key}: the rollout buffers would need {} (data.train_batch_size {} x rollout.n {} x (max_prompt_length {} + max_response_length {}) tokens x 20 bytes), more than this machine's {}",
                gib(rollout_bytes),
                d.train_batch_size,
                self.rollout.n,
                d.max_prompt_length,
                d.max_response_length,
                gib(limit)
            ));
        }
        if self.model.path.is_none() {
            let m = &self.model;
            let h = m.hidden_size as u128;
            let layer = 4 * h * h + 3 * h * m.intermediate_size as u128;
            let params = (m.num_hidden_layers as u128).saturating_mul(layer)
                + 256 * h
                + 2 * m.vocab_size as u128 * h;
            // Weights, gradients and AdamW's two moments, f32.
            let bytes = params.saturating_mul(16);
            if bytes > limit {
                let key = if h * h >= h * m.intermediate_size as u128 {
                    "hidden_size"
                } else {
                    "intermediate_size"
                };
                errors.push(format!(
                    "{AAR}.model.{key}: the built-in model would need {} for weights, gradients and optimizer state ({params} parameters x 16 bytes), more than this machine's {}",
                    gib(bytes),
                    gib(limit)
                ));
            }
        }
    }
}

fn read_data(r: &mut Reader) -> DataConfig {
    let task = match r
        .choice("data.task.name", "arithmetic", &["arithmetic", "countdown"])
        .as_str()
    {
        "countdown" => TaskKind::Countdown,
        _ => TaskKind::Arithmetic,
    };
    DataConfig {
        train_batch_size: r.size("data.train_batch_size", 16),
        max_prompt_length: r.size("data.max_prompt_length", 32),
        max_response_length: r.size("data.max_response_length", 8),
        train_files: r.paths("data.train_files"),
        val_files: r.paths("data.val_files"),
        task,
        digits: r.uint("data.task.digits", 2, 1).min(9) as u32,
        seed: r.uint("data.seed", 1, 0),
    }
}

fn read_model(r: &mut Reader) -> ModelSection {
    let p = format!("{AAR}.model");
    let path = model_path(r, &format!("{p}.path"));
    let heads = r.size(&format!("{p}.num_attention_heads"), 4);
    ModelSection {
        path,
        hidden_size: r.size(&format!("{p}.hidden_size"), 128),
        num_hidden_layers: r.size(&format!("{p}.num_hidden_layers"), 4),
        num_attention_heads: heads,
        num_key_value_heads: r.size(&format!("{p}.num_key_value_heads"), 2),
        intermediate_size: r.size(&format!("{p}.intermediate_size"), 384),
        tie_word_embeddings: r.boolean(&format!("{p}.tie_word_embeddings"), true),
        vocab_size: r.uint(&format!("{p}.vocab_size"), 0, 0).min(1 << 20) as usize,
    }
}

fn read_actor(r: &mut Reader) -> ActorConfig {
    let p = format!("{AAR}.actor");
    let clip = r.float(&format!("{p}.clip_ratio"), 0.2, 0.0, 10.0);
    let loss_agg_mode = loss_agg(r, &format!("{p}.loss_agg_mode"), LossAgg::TokenMean);
    kl_type(r, &format!("{p}.kl_loss_type"));
    let betas = match r.get(&format!("{p}.optim.betas")) {
        None => (0.9, 0.999),
        Some(Node::List(s)) if s.len() == 2 && s.iter().all(|x| x.as_f64().is_some()) => {
            (s[0].as_f64().unwrap_or(0.9), s[1].as_f64().unwrap_or(0.999))
        }
        Some(v) => {
            r.expected(&format!("{p}.optim.betas"), "[beta1, beta2]", v);
            (0.9, 0.999)
        }
    };
    ActorConfig {
        ppo_mini_batch_size: r.size(&format!("{p}.ppo_mini_batch_size"), 8),
        ppo_micro_batch_size_per_gpu: r.size(&format!("{p}.ppo_micro_batch_size_per_gpu"), 16),
        ppo_epochs: r.size(&format!("{p}.ppo_epochs"), 1),
        clip_ratio_low: r.float(&format!("{p}.clip_ratio_low"), clip, 0.0, 10.0) as f32,
        clip_ratio_high: r.float(&format!("{p}.clip_ratio_high"), clip, 0.0, 10.0) as f32,
        use_kl_loss: r.boolean(&format!("{p}.use_kl_loss"), true),
        kl_loss_coef: r.float(&format!("{p}.kl_loss_coef"), 0.001, 0.0, 1e3) as f32,
        loss_agg_mode,
        entropy_coeff: r.float(&format!("{p}.entropy_coeff"), 0.0, -1e3, 1e3) as f32,
        grad_clip: r.float(&format!("{p}.grad_clip"), 1.0, 0.0, 1e9) as f32,
        lr: r.float(&format!("{p}.optim.lr"), 5e-4, 0.0, 10.0),
        lr_warmup_steps: warmup_steps(r, &p, 2),
        weight_decay: r.float(&format!("{p}.optim.weight_decay"), 0.0, 0.0, 10.0),
        betas,
    }
}

fn read_rollout(r: &mut Reader) -> RolloutConfig {
    let p = format!("{AAR}.rollout");
    RolloutConfig {
        n: r.size(&format!("{p}.n"), 8),
        temperature: r.float(&format!("{p}.temperature"), 1.0, 1e-3, 100.0) as f32,
        top_p: r.float(&format!("{p}.top_p"), 1.0, 1e-6, 1.0) as f32,
        top_k: match r.get(&format!("{p}.top_k")) {
            None => -1,
            Some(v) => match v.as_i64() {
                Some(k) if k == -1 || k > 0 => k,
                _ => {
                    r.expected(&format!("{p}.top_k"), "-1 (off) or a positive integer", v);
                    -1
                }
            },
        },
        do_sample: r.boolean(&format!("{p}.do_sample"), true),
        ignore_eos: r.boolean(&format!("{p}.ignore_eos"), false),
        log_prob_micro_batch_size_per_gpu: r
            .size(&format!("{p}.log_prob_micro_batch_size_per_gpu"), 32),
        calculate_log_probs: r.boolean(&format!("{p}.calculate_log_probs"), true),
    }
}

fn read_algorithm(r: &mut Reader) -> AlgorithmConfig {
    let name = r.choice("algorithm.adv_estimator", "grpo", VERL_ESTIMATORS);
    let max_gen = match r.uint("algorithm.filter_groups.max_num_gen_batches", 4, 0) {
        0 => usize::MAX,
        n => usize::try_from(n).unwrap_or(usize::MAX),
    };
    let filter = FilterGroups {
        enable: r.boolean("algorithm.filter_groups.enable", false),
        max_num_gen_batches: max_gen,
    };
    if r.get("algorithm.filter_groups.metric").is_some() {
        r.choice(
            "algorithm.filter_groups.metric",
            "acc",
            &["acc", "score", "reward", "seq_reward", "seq_final_reward"],
        );
    }
    AlgorithmConfig {
        adv_estimator: if name == "gae" {
            AdvEstimator::Gae
        } else {
            AdvEstimator::Grpo
        },
        adv_estimator_name: name,
        norm_adv_by_std_in_grpo: r.boolean("algorithm.norm_adv_by_std_in_grpo", true),
        filter_groups: filter,
        rollout_correction: read_rollout_correction(r),
    }
}

/// `algorithm.rollout_correction`, as verl accepts it; what this trainer does not implement
/// (importance weighting, rejection sampling, the REINFORCE loss) is refused at start.
fn read_rollout_correction(r: &mut Reader) -> RolloutCorrection {
    const P: &str = "algorithm.rollout_correction";
    let set = |key: &str| r.get(&format!("{P}.{key}")).map(|v| v.show());
    let (rollout_is, rollout_rs) = (set("rollout_is"), set("rollout_rs"));
    RolloutCorrection {
        bypass_mode: r.boolean(&format!("{P}.bypass_mode"), false),
        loss_type: r.choice(
            &format!("{P}.loss_type"),
            "ppo_clip",
            &["ppo_clip", "reinforce"],
        ),
        rollout_is,
        rollout_rs,
    }
}

impl RolloutCorrection {
    /// Why `train` cannot run this setting; empty when it can.
    fn start_errors(&self) -> Vec<String> {
        const P: &str = "algorithm.rollout_correction";
        let mut e = Vec::new();
        for (key, v) in [
            ("rollout_is", &self.rollout_is),
            ("rollout_rs", &self.rollout_rs),
        ] {
            if let Some(v) = v {
                e.push(format!(
                    "{P}.{key}: {v} is a verl setting this trainer does not implement; use null"
                ));
            }
        }
        if self.bypass_mode && self.loss_type != "ppo_clip" {
            e.push(format!(
                "{P}.loss_type: '{}' is a verl loss this trainer does not implement; use ppo_clip",
                self.loss_type
            ));
        }
        e
    }
}

fn read_trainer(r: &mut Reader) -> TrainerSection {
    let nnodes = r.uint("trainer.nnodes", 1, 1) as u32;
    let gpus = r.uint("trainer.n_gpus_per_node", 1, 1) as u32;
    TrainerSection {
        total_training_steps: r.uint("trainer.total_training_steps", 12, 1),
        nnodes,
        n_gpus_per_node: gpus,
        sft_warmup_steps: r.uint("trainer.sft_warmup_steps", 60, 0),
        sft_lr: r.float("trainer.sft_lr", 3e-3, 0.0, 10.0),
        test_freq: r.uint_or_sentinel("trainer.test_freq", 0).unwrap_or(0),
        val_batch_size: r.size("trainer.val_batch_size", 64),
        default_local_dir: PathBuf::from(
            r.string("trainer.default_local_dir", "outputs/checkpoints"),
        ),
        save_freq: r.uint_or_sentinel("trainer.save_freq", 0).unwrap_or(0),
        resume_mode: r.string("trainer.resume_mode", "disable"),
        seed: r.uint("trainer.seed", 1, 0),
    }
}
