//! The `npu` tool's export: one rank's Ascend outputs in the layout the collection asked for,
//! the torch_npu SQLite layout ([`crate::ascend_db_writer`]) or the text layout ([`crate::npu`]). It sits
//! above both so that neither depends on the other's exporter.

use crate::ExportError;
use crate::decode::Index;
use crate::npu::Layout;
use std::path::{Path, PathBuf};

/// Writes the Ascend outputs of one rank into the collection directory `dir`, in the layout
/// the collection asked for (`tool_config.npu.export_type`, see [`Layout`]).
pub fn export(dir: &Path, idx: &Index) -> Result<Vec<PathBuf>, ExportError> {
    export_as(dir, idx, Layout::of(&idx.meta))
}

/// Writes the Ascend outputs of one rank in `layout`.
pub fn export_as(dir: &Path, idx: &Index, layout: Layout) -> Result<Vec<PathBuf>, ExportError> {
    match layout {
        Layout::Db => crate::ascend_db_writer::export(dir, idx),
        Layout::Text => crate::npu::export_text(dir, idx),
    }
}
