//! The value kinds more than one section of the trainer's config reads (loss aggregation,
//! warm-up steps, model paths), on top of `rlprof_config`'s [`Reader`] (typed, range-checked
//! values by dotted YAML path, every problem collected as an issue naming its path and the
//! valid values; the profiler's plan is read through the same reader). `config` (the job's
//! sections) and `critic_config` (the critic's) both read through it.

use rlprof_config::Node;
pub(crate) use rlprof_config::typed::Reader;
use std::path::PathBuf;

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
    pub(crate) const NAMES: [&'static str; 3] =
        ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean"];

    /// verl's name of the mode.
    pub(crate) fn name(self) -> &'static str {
        match self {
            LossAgg::TokenMean => Self::NAMES[0],
            LossAgg::SeqMeanTokenSum => Self::NAMES[1],
            LossAgg::SeqMeanTokenMean => Self::NAMES[2],
        }
    }
}

/// A model path key: `None` for the built-in model (unset, empty or `builtin:tiny`).
pub(crate) fn model_path(r: &Reader, path: &str) -> Option<PathBuf> {
    r.get(path)
        .and_then(Node::as_str)
        .filter(|s| !s.is_empty() && *s != "builtin:tiny")
        .map(PathBuf::from)
}

/// `{p}.loss_agg_mode`, one of [`LossAgg::NAMES`].
pub(crate) fn loss_agg(r: &mut Reader, path: &str, default: LossAgg) -> LossAgg {
    match r.choice(path, default.name(), &LossAgg::NAMES).as_str() {
        "seq-mean-token-sum" => LossAgg::SeqMeanTokenSum,
        "seq-mean-token-mean" => LossAgg::SeqMeanTokenMean,
        _ => LossAgg::TokenMean,
    }
}

/// `{p}.optim.lr_warmup_steps` (`default` when unset); verl's -1 means "use
/// `lr_warmup_steps_ratio` of the total steps".
pub(crate) fn warmup_steps(r: &mut Reader, p: &str, default: u64) -> u64 {
    match r.uint_or_sentinel(&format!("{p}.optim.lr_warmup_steps"), default) {
        Some(n) => n,
        None => {
            let ratio = r.float(&format!("{p}.optim.lr_warmup_steps_ratio"), 0.0, 0.0, 1.0);
            let total = r
                .get("trainer.total_training_steps")
                .and_then(Node::as_u64)
                .unwrap_or(12);
            (ratio * total as f64).floor() as u64
        }
    }
}
