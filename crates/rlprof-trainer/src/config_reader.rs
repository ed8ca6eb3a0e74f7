//! Reading the trainer's config document: a [`Reader`] of typed, range-checked values by
//! dotted YAML path that collects every problem (each naming its path and the valid values),
//! and the value kinds more than one section reads (loss aggregation, warm-up steps, model
//! paths). `config` (the job's sections) and `critic_config` (the critic's) both read through
//! it.

use rlprof_profiler::config::Node;
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

/// Reads typed values by dotted path, collecting every problem.
pub(crate) struct Reader<'a> {
    doc: &'a Node,
    /// Every problem found so far, each naming its YAML path.
    pub(crate) errors: Vec<String>,
}

impl<'a> Reader<'a> {
    /// A reader over `doc` with no problems yet.
    pub(crate) fn new(doc: &'a Node) -> Reader<'a> {
        Reader {
            doc,
            errors: Vec::new(),
        }
    }

    pub(crate) fn get(&self, path: &str) -> Option<&'a Node> {
        let mut v = self.doc;
        for k in path.split('.') {
            v = v.get(k)?;
        }
        (!v.is_null()).then_some(v)
    }

    pub(crate) fn uint(&mut self, path: &str, default: u64, min: u64) -> u64 {
        match self.get(path) {
            None => default,
            Some(v) => match v.as_u64() {
                Some(n) if n >= min => n,
                _ => {
                    self.errors.push(format!(
                        "{path}: expected an integer >= {min}, got {}",
                        v.show()
                    ));
                    default
                }
            },
        }
    }

    /// An integer >= 0 where verl writes -1 (any negative) for "off / not set": returns `None`
    /// for the sentinel.
    pub(crate) fn uint_or_sentinel(&mut self, path: &str, default: u64) -> Option<u64> {
        match self.get(path) {
            None => Some(default),
            Some(v) => match v.as_i64() {
                Some(n) if n >= 0 => Some(n as u64),
                Some(_) => None,
                None => {
                    self.errors.push(format!(
                        "{path}: expected an integer (-1 = off, as in verl), got {}",
                        v.show()
                    ));
                    Some(default)
                }
            },
        }
    }

    pub(crate) fn size(&mut self, path: &str, default: usize) -> usize {
        self.uint(path, default as u64, 1) as usize
    }

    pub(crate) fn float(&mut self, path: &str, default: f64, lo: f64, hi: f64) -> f64 {
        match self.get(path) {
            None => default,
            Some(v) => match v.as_f64() {
                Some(x) if x.is_finite() && x >= lo && x <= hi => x,
                _ => {
                    self.errors.push(format!(
                        "{path}: expected a number in [{lo}, {hi}], got {}",
                        v.show()
                    ));
                    default
                }
            },
        }
    }

    pub(crate) fn boolean(&mut self, path: &str, default: bool) -> bool {
        match self.get(path) {
            None => default,
            Some(Node::Bool(b)) => *b,
            Some(v) => {
                self.errors
                    .push(format!("{path}: expected true or false, got {}", v.show()));
                default
            }
        }
    }

    pub(crate) fn string(&mut self, path: &str, default: &str) -> String {
        match self.get(path) {
            None => default.to_string(),
            Some(Node::Str(s)) => s.clone(),
            Some(v) => {
                self.errors
                    .push(format!("{path}: expected a string, got {}", v.show()));
                default.to_string()
            }
        }
    }

    pub(crate) fn choice(&mut self, path: &str, default: &str, valid: &[&str]) -> String {
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

    pub(crate) fn paths(&mut self, path: &str) -> Vec<PathBuf> {
        match self.get(path) {
            None => Vec::new(),
            Some(Node::Str(s)) if s.is_empty() => Vec::new(),
            Some(Node::Str(s)) => vec![PathBuf::from(s)],
            Some(Node::List(items)) => items
                .iter()
                .filter_map(|i| match i {
                    Node::Str(s) => Some(PathBuf::from(s)),
                    other => {
                        self.errors
                            .push(format!("{path}: expected file paths, got {}", other.show()));
                        None
                    }
                })
                .collect(),
            Some(v) => {
                self.errors.push(format!(
                    "{path}: expected a file path or a list of them, got {}",
                    v.show()
                ));
                Vec::new()
            }
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
