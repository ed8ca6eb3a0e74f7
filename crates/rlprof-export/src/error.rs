//! The crate's error type.

use std::path::PathBuf;

/// Errors of the exporters and the analysis driver.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// An I/O failure on a file or directory (unwritable output, disk full, ...).
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Raw data from which nothing could be recovered (bad header, no metadata).
    #[error("{path}: nothing recoverable: {reason}")]
    Unrecoverable {
        /// The raw file or collection.
        path: PathBuf,
        /// What was wrong, with the byte offset where known.
        reason: String,
    },
    /// A directory that is not a collection (no `rlprof_raw/rank_*.rlraw`).
    #[error("{0}: not a collection directory (no rlprof_raw/rank_*.rlraw inside)")]
    NotACollection(PathBuf),
    /// A path that does not exist.
    #[error("{0}: no such file or directory")]
    Missing(PathBuf),
    /// A collection another process holds: still being written, or recovered right now.
    #[error("{0}: still being written (or recovered by another process); skipped")]
    Busy(PathBuf),
    /// Writing JSON failed.
    #[error("{path}: {source}")]
    Json {
        /// The output file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// Writing CSV failed.
    #[error("{path}: {source}")]
    Csv {
        /// The output file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: csv::Error,
    },
    /// Any other failure of the profiler crate's collection code (not expected there).
    #[error(transparent)]
    Profiler(rlprof_profiler::ProfilerError),
    /// Writing an Ascend profiler DB failed, or reading one back.
    #[error("{path}: {source}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: rusqlite::Error,
    },
}

impl ExportError {
    /// A closure mapping an `io::Error` on `path` to [`ExportError::Io`].
    pub fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> ExportError + '_ {
        move |source| ExportError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// The collection contract's errors (`rlprof_profiler::collection`: lock, staging, marker,
/// recovery) as the exporter's: an I/O failure stays [`ExportError::Io`] on the same path.
impl From<rlprof_profiler::ProfilerError> for ExportError {
    fn from(e: rlprof_profiler::ProfilerError) -> ExportError {
        use rlprof_profiler::ProfilerError;
        match e {
            ProfilerError::Io { path, source } => ExportError::Io { path, source },
            ProfilerError::Unrecoverable { path, reason } => {
                ExportError::Unrecoverable { path, reason }
            }
            other => ExportError::Profiler(other),
        }
    }
}
