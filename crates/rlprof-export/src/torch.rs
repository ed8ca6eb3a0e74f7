//! The `torch` tool output: a PyTorch-profiler Chrome trace; and `torch_memory` snapshots.
use crate::decode::Index;
use crate::ExportError;
use std::path::{Path, PathBuf};

/// Writes the Chrome trace of one rank next to the collection directory.
pub fn export(dir: &Path, idx: &Index) -> Result<Vec<PathBuf>, ExportError> {
    let _ = (dir, idx);
    Ok(Vec::new())
}

/// Writes the memory snapshots of one rank.
pub fn export_memory(dir: &Path, idx: &Index) -> Result<Vec<PathBuf>, ExportError> {
    let _ = (dir, idx);
    Ok(Vec::new())
}
