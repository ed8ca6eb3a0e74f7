//! The crate's error type.

use std::path::PathBuf;

/// Errors of the profiler crate.
#[derive(Debug, thiserror::Error)]
pub enum ProfilerError {
    /// An I/O failure on a file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Raw data that cannot be read.
    #[error("{path}: corrupt raw data at byte {offset}: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Byte offset of the first bad chunk.
        offset: u64,
        /// What was wrong.
        reason: String,
    },
    /// A raw file from which nothing can be recovered (no readable metadata).
    #[error("{path}: nothing recoverable: {reason}")]
    Unrecoverable {
        /// The file.
        path: PathBuf,
        /// What was wrong, with the byte offset where known.
        reason: String,
    },
}
