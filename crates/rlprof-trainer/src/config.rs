//! The training job's config, read from the merged `ppo_trainer.yaml`-layout document.
//!
//! Only the keys this trainer implements are read; each is typed and range-checked, and every
//! problem is reported at once with its YAML path and the valid values. Keys of verl's full file
//! that this trainer does not implement are accepted and ignored (so a user's file loads).

use crate::error::{Result, TrainerError};
use serde_yaml::Value;
use std::path::PathBuf;

/// Advantage estimator (`algorithm.adv_estimator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdvEstimator {
    /// Group-relative (GRPO, also used by DAPO).
    Grpo,
}

/// Loss aggregation (`actor.loss_agg_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossAgg {
    /// Sum over all response tokens of the mini-batch / their count (DAPO).
    TokenMean,
    /// Mean over sequences of the per-sequence token sum.
    SeqMeanTokenSum,
    /// Mean over sequences of the per-sequence token mean (original GRPO).
    SeqMeanTokenMean,
}

impl LossAgg {
    const NAMES: [&'static str; 3] = ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean"];
}

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
}

/// DAPO dynamic sampling (`algorithm.filter_groups`).
#[derive(Debug, Clone)]
pub struct FilterGroups {
    /// On.
    pub enable: bool,
    /// Extra generation batches allowed.
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
    /// Divide group-centred rewards by the group std.
    pub norm_adv_by_std_in_grpo: bool,
    /// Dynamic sampling.
    pub filter_groups: FilterGroups,
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
    /// Validation every N steps (0 = never).
    pub test_freq: u64,
    /// Prompts of the validation pass.
    pub val_batch_size: usize,
    /// Checkpoints and metrics.
    pub default_local_dir: PathBuf,
    /// Save every N steps (0 = only at the end when `save_final`).
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
    /// Keys that look like misspellings of keys this trainer reads (they are ignored).
    pub warnings: Vec<String>,
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
        &["lr", "lr_warmup_steps", "weight_decay", "betas"],
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
            "profiler",
        ],
    ),
    (
        "actor_rollout_ref.ref",
        &["log_prob_micro_batch_size_per_gpu", "profiler"],
    ),
    (
        "algorithm",
        &["adv_estimator", "norm_adv_by_std_in_grpo", "filter_groups"],
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
fn near_misses(doc: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for (section, known) in KNOWN {
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
        let Some(map) = v.as_mapping().filter(|_| found) else {
            continue;
        };
        for key in map.keys().filter_map(|k| k.as_str()) {
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

/// Reads typed values by dotted path, collecting every problem.
struct Reader<'a> {
    doc: &'a Value,
    errors: Vec<String>,
}

impl<'a> Reader<'a> {
    fn get(&self, path: &str) -> Option<&'a Value> {
        let mut v = self.doc;
        for k in path.split('.') {
            v = v.get(k)?;
        }
        (!v.is_null()).then_some(v)
    }

    fn uint(&mut self, path: &str, default: u64, min: u64) -> u64 {
        match self.get(path) {
            None => default,
            Some(v) => match v.as_u64() {
                Some(n) if n >= min => n,
                _ => {
                    self.errors.push(format!(
                        "{path}: expected an integer >= {min}, got {}",
                        show(v)
                    ));
                    default
                }
            },
        }
    }

    fn size(&mut self, path: &str, default: usize) -> usize {
        self.uint(path, default as u64, 1) as usize
    }

    fn float(&mut self, path: &str, default: f64, lo: f64, hi: f64) -> f64 {
        match self.get(path) {
            None => default,
            Some(v) => match v.as_f64() {
                Some(x) if x.is_finite() && x >= lo && x <= hi => x,
                _ => {
                    self.errors.push(format!(
                        "{path}: expected a number in [{lo}, {hi}], got {}",
                        show(v)
                    ));
                    default
                }
            },
        }
    }

    fn boolean(&mut self, path: &str, default: bool) -> bool {
        match self.get(path) {
            None => default,
            Some(Value::Bool(b)) => *b,
            Some(v) => {
                self.errors
                    .push(format!("{path}: expected true or false, got {}", show(v)));
                default
            }
        }
    }

    fn string(&mut self, path: &str, default: &str) -> String {
        match self.get(path) {
            None => default.to_string(),
            Some(Value::String(s)) => s.clone(),
            Some(v) => {
                self.errors
                    .push(format!("{path}: expected a string, got {}", show(v)));
                default.to_string()
            }
        }
    }

    fn choice(&mut self, path: &str, default: &str, valid: &[&str]) -> String {
        let s = self.string(path, default);
        if valid.contains(&s.as_str()) {
            s
        } else {
            self.errors.push(format!(
                "{path}: unknown value '{s}'; valid values: {}",
                valid.join(", ")
            ));
            default.to_string()
        }
    }

    fn paths(&mut self, path: &str) -> Vec<PathBuf> {
        match self.get(path) {
            None => Vec::new(),
            Some(Value::String(s)) if s.is_empty() => Vec::new(),
            Some(Value::String(s)) => vec![PathBuf::from(s)],
            Some(Value::Sequence(items)) => items
                .iter()
                .filter_map(|i| match i {
                    Value::String(s) => Some(PathBuf::from(s)),
                    other => {
                        self.errors
                            .push(format!("{path}: expected file paths, got {}", show(other)));
                        None
                    }
                })
                .collect(),
            Some(v) => {
                self.errors.push(format!(
                    "{path}: expected a file path or a list of them, got {}",
                    show(v)
                ));
                Vec::new()
            }
        }
    }
}

fn show(v: &Value) -> String {
    serde_yaml::to_string(v)
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| format!("{v:?}"))
}

const AAR: &str = "actor_rollout_ref";

impl TrainConfig {
    /// Reads and validates the job config from the merged document (all errors at once).
    pub fn from_doc(doc: &Value) -> Result<TrainConfig> {
        let mut r = Reader {
            doc,
            errors: Vec::new(),
        };
        let data = read_data(&mut r);
        let model = read_model(&mut r);
        let actor = read_actor(&mut r);
        let rollout = read_rollout(&mut r);
        let ref_mb = r.size(&format!("{AAR}.ref.log_prob_micro_batch_size_per_gpu"), 16);
        let algorithm = read_algorithm(&mut r);
        let overlong = OverlongBuffer {
            enable: r.boolean("reward_model.overlong_buffer.enable", false),
            len: r.uint("reward_model.overlong_buffer.len", 4, 1) as usize,
            penalty_factor: r.float("reward_model.overlong_buffer.penalty_factor", 1.0, 0.0, 1e3)
                as f32,
        };
        let trainer = read_trainer(&mut r);
        let cfg = TrainConfig {
            data,
            model,
            actor,
            rollout,
            ref_log_prob_micro_batch_size_per_gpu: ref_mb,
            algorithm,
            overlong,
            trainer,
            warnings: near_misses(doc),
        };
        cfg.check_consistency(&mut r.errors);
        if r.errors.is_empty() {
            Ok(cfg)
        } else {
            Err(TrainerError::Config(r.errors))
        }
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
        let bs = self.data.train_batch_size;
        if !bs.is_multiple_of(world) {
            errors.push(format!(
                "data.train_batch_size: {bs} prompts do not split evenly over {world} ranks \
                 (trainer.nnodes * trainer.n_gpus_per_node)"
            ));
        }
        let mini = self.actor.ppo_mini_batch_size;
        if mini > bs || !bs.is_multiple_of(mini) {
            errors.push(format!(
                "{AAR}.actor.ppo_mini_batch_size: {mini} must divide data.train_batch_size ({bs})"
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
    let path = r
        .get(&format!("{p}.path"))
        .and_then(|v| v.as_str())
        .and_then(|s| (!s.is_empty() && s != "builtin:tiny").then(|| PathBuf::from(s)));
    let heads = r.size(&format!("{p}.num_attention_heads"), 4);
    ModelSection {
        path,
        hidden_size: r.size(&format!("{p}.hidden_size"), 128),
        num_hidden_layers: r.size(&format!("{p}.num_hidden_layers"), 4),
        num_attention_heads: heads,
        num_key_value_heads: r.size(&format!("{p}.num_key_value_heads"), 2),
        intermediate_size: r.size(&format!("{p}.intermediate_size"), 384),
        tie_word_embeddings: r.boolean(&format!("{p}.tie_word_embeddings"), true),
    }
}

fn read_actor(r: &mut Reader) -> ActorConfig {
    let p = format!("{AAR}.actor");
    let clip = r.float(&format!("{p}.clip_ratio"), 0.2, 0.0, 10.0);
    let agg = r.choice(&format!("{p}.loss_agg_mode"), "token-mean", &LossAgg::NAMES);
    let kl_type = format!("{p}.kl_loss_type");
    r.choice(&kl_type, "low_var_kl", &["low_var_kl"]);
    let betas = match r.get(&format!("{p}.optim.betas")) {
        None => (0.9, 0.999),
        Some(Value::Sequence(s)) if s.len() == 2 && s.iter().all(|x| x.as_f64().is_some()) => {
            (s[0].as_f64().unwrap_or(0.9), s[1].as_f64().unwrap_or(0.999))
        }
        Some(v) => {
            r.errors.push(format!(
                "{p}.optim.betas: expected [beta1, beta2], got {}",
                show(v)
            ));
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
        loss_agg_mode: match agg.as_str() {
            "seq-mean-token-sum" => LossAgg::SeqMeanTokenSum,
            "seq-mean-token-mean" => LossAgg::SeqMeanTokenMean,
            _ => LossAgg::TokenMean,
        },
        entropy_coeff: r.float(&format!("{p}.entropy_coeff"), 0.0, -1e3, 1e3) as f32,
        grad_clip: r.float(&format!("{p}.grad_clip"), 1.0, 0.0, 1e9) as f32,
        lr: r.float(&format!("{p}.optim.lr"), 5e-4, 0.0, 10.0),
        lr_warmup_steps: r.uint(&format!("{p}.optim.lr_warmup_steps"), 2, 0),
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
                    r.errors.push(format!(
                        "{p}.top_k: expected -1 (off) or a positive integer, got {}",
                        show(v)
                    ));
                    -1
                }
            },
        },
        do_sample: r.boolean(&format!("{p}.do_sample"), true),
        ignore_eos: r.boolean(&format!("{p}.ignore_eos"), false),
        log_prob_micro_batch_size_per_gpu: r
            .size(&format!("{p}.log_prob_micro_batch_size_per_gpu"), 32),
    }
}

fn read_algorithm(r: &mut Reader) -> AlgorithmConfig {
    r.choice("algorithm.adv_estimator", "grpo", &["grpo"]);
    let filter = FilterGroups {
        enable: r.boolean("algorithm.filter_groups.enable", false),
        max_num_gen_batches: r.uint("algorithm.filter_groups.max_num_gen_batches", 4, 1) as usize,
    };
    if r.get("algorithm.filter_groups.metric").is_some() {
        r.choice("algorithm.filter_groups.metric", "acc", &["acc", "score"]);
    }
    AlgorithmConfig {
        adv_estimator: AdvEstimator::Grpo,
        norm_adv_by_std_in_grpo: r.boolean("algorithm.norm_adv_by_std_in_grpo", true),
        filter_groups: filter,
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
        test_freq: r.uint("trainer.test_freq", 0, 0),
        val_batch_size: r.size("trainer.val_batch_size", 64),
        default_local_dir: PathBuf::from(
            r.string("trainer.default_local_dir", "outputs/checkpoints"),
        ),
        save_freq: r.uint("trainer.save_freq", 0, 0),
        resume_mode: r.string("trainer.resume_mode", "disable"),
        seed: r.uint("trainer.seed", 1, 0),
    }
}
