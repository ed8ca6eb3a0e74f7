//! The crate's one error type.

use std::path::PathBuf;

/// Everything that can go wrong while building or writing a report.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// An rlprof raw file could not be opened (bad header, version).
    #[error("{path}: {message}")]
    Raw {
        /// The raw file.
        path: PathBuf,
        /// What the profiler's reader said.
        message: String,
    },
    /// A foreign file is not in the expected shape.
    #[error("{path}: {message}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the position where known.
        message: String,
    },
    /// A foreign file is past one of the documented input limits ([`crate::Limits`]).
    #[error(
        "{path}: {what} exceeds the limit of {limit} (see rlprof-report's Limits; the data was not loaded)"
    )]
    Limit {
        /// The file.
        path: PathBuf,
        /// Which limit (`uncompressed size in bytes`, `events`, `JSON nesting depth`).
        what: &'static str,
        /// The limit's value.
        limit: u64,
    },
    /// Nothing under the given path could be loaded.
    #[error(
        "{path}: no rlprof collection, Chrome trace (*.json[.gz] with trace events) or Ascend profiler directory (*_ascend_pt) found{detail}"
    )]
    NothingFound {
        /// The path given.
        path: PathBuf,
        /// Files that were skipped and why, when any.
        detail: String,
    },
    /// Serialising the report failed.
    #[error("cannot serialise the report: {0}")]
    Json(#[from] serde_json::Error),
}

/// Shorthand for an I/O error on a path.
pub(crate) fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> ReportError + '_ {
    move |source| ReportError::Io {
        path: path.to_path_buf(),
        source,
    }
}
