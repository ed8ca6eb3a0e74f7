//! The trainer's error type.

use std::path::PathBuf;

/// Everything that can stop a training run. Messages name the YAML path, file or step involved.
#[derive(Debug, thiserror::Error)]
pub enum TrainerError {
    /// A config value is invalid (all problems at once, each starting with its YAML path).
    #[error("invalid training config:\n  {}", .0.join("\n  "))]
    Config(Vec<String>),
    /// A checkpoint / model directory or file is unusable.
    #[error("{}: {message}", path.display())]
    Checkpoint {
        /// The file or directory.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A dataset file is unusable.
    #[error("{}: {message}", path.display())]
    Data {
        /// The file.
        path: PathBuf,
        /// What is wrong (with the line where known).
        message: String,
    },
    /// The loss or gradients became NaN/inf.
    #[error("step {step}: non-finite {what} ({value}); lower the learning rate or check the data")]
    NonFinite {
        /// Training step (0 = supervised warm-up).
        step: u64,
        /// `loss`, `grad_norm`, ...
        what: &'static str,
        /// The value seen.
        value: f64,
    },
    /// A collective failed (another rank stopped, or the transport failed).
    #[error("communication: {0}")]
    Comm(String),
    /// A tensor engine error.
    #[error("tensor engine: {0}")]
    Engine(#[from] candle_core::Error),
    /// A tokenizer error.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// File system error.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A test-only fault (`RLPROF_TEST_FAIL_RANK`) stopped this rank.
    #[error("injected test fault at step {step} (RLPROF_TEST_FAIL_RANK={rank}:{step})")]
    InjectedFault {
        /// The rank.
        rank: usize,
        /// The RL step.
        step: u64,
    },
    /// A rank's worker thread panicked.
    #[error("rank {rank} panicked: {message}")]
    RankPanicked {
        /// The rank.
        rank: usize,
        /// The panic message.
        message: String,
    },
}

/// Result alias.
pub type Result<T, E = TrainerError> = std::result::Result<T, E>;

impl TrainerError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> TrainerError {
        TrainerError::Io {
            path: path.into(),
            source,
        }
    }

    /// A checkpoint error on `path`.
    pub fn checkpoint(path: impl Into<PathBuf>, message: impl Into<String>) -> TrainerError {
        TrainerError::Checkpoint {
            path: path.into(),
            message: message.into(),
        }
    }
}
