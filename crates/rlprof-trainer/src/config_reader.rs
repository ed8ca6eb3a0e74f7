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

/// verl 0.9.1's loss aggregation modes: [`LossAgg::NAMES`] and the ones `config check`
/// accepts but `train` cannot run ([`unrunnable`] names them).
pub(crate) const VERL_LOSS_AGG: [&str; 4] = [
    "token-mean",
    "seq-mean-token-sum",
    "seq-mean-token-mean",
    "seq-mean-token-sum-norm",
];

/// verl 0.9.1's KL estimators (`kl_penalty`): each also with a `+` suffix (straight-through
/// gradient). This trainer implements `low_var_kl`.
pub(crate) const VERL_KL: [&str; 8] = ["kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3", "full"];

/// `{p}.loss_agg_mode`, one of verl's modes; one this trainer cannot run reads as the default
/// here and is named by [`unrunnable`].
pub(crate) fn loss_agg(r: &mut Reader, path: &str, default: LossAgg) -> LossAgg {
    match r.choice(path, default.name(), &VERL_LOSS_AGG).as_str() {
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

/// `{p}.kl_loss_type`: one of verl's estimators ([`VERL_KL`], optionally `+`-suffixed).
pub(crate) fn kl_type(r: &mut Reader, path: &str) -> String {
    let v = r.string(path, "low_var_kl");
    if VERL_KL.contains(&v.trim_end_matches('+')) {
        v
    } else {
        let valid: Vec<String> = VERL_KL
            .iter()
            .flat_map(|k| [k.to_string(), format!("{k}+")])
            .collect();
        let valid: Vec<&str> = valid.iter().map(String::as_str).collect();
        r.choice(path, "low_var_kl", &valid)
    }
}

/// The verl settings of `doc` that `config check` accepts but this trainer cannot run, one line
/// each naming the key (`train` refuses to start on them).
pub(crate) fn unrunnable(doc: &Node, use_kl_loss: bool) -> Vec<String> {
    let get = |path: &str| {
        let segs: Vec<String> = path.split('.').map(str::to_string).collect();
        doc.get_path(&segs)
            .and_then(Node::as_str)
            .map(str::to_string)
    };
    let mut out = Vec::new();
    let kl = "actor_rollout_ref.actor.kl_loss_type";
    if use_kl_loss
        && let Some(k) = get(kl)
        && k != "low_var_kl"
    {
        out.push(format!(
            "{kl}: '{k}' is a verl KL estimator this trainer does not implement; use {kl}=low_var_kl (or actor_rollout_ref.actor.use_kl_loss=False)"
        ));
    }
    for p in [
        "actor_rollout_ref.actor.loss_agg_mode",
        "critic.loss_agg_mode",
    ] {
        if let Some(m) = get(p)
            && VERL_LOSS_AGG.contains(&m.as_str())
            && !LossAgg::NAMES.contains(&m.as_str())
        {
            out.push(format!(
                "{p}: '{m}' is a verl loss aggregation this trainer does not implement; use one of {}",
                LossAgg::NAMES.join(", ")
            ));
        }
    }
    out
}
