//! What the text layout holds at each level and with each content (the level/content matrix):
//! the output directory, the files, the `kernel_details.csv` columns, and which layout a
//! collection takes.

use super::columns::{KERNEL_BASE, KERNEL_METRICS, KERNEL_SHAPES};
use rlprof_profiler::plan::{Content, Level};
use rlprof_profiler::raw::CollectionMeta;

/// Output directory name.
pub const OUTPUT_DIR: &str = "ASCEND_PROFILER_OUTPUT";

/// The npu level as a number: -1 = level_none, 0..=2.
pub fn level_rank(level: Level) -> i32 {
    match level {
        Level::LevelNone => -1,
        Level::Level0 => 0,
        Level::Level1 => 1,
        Level::Level2 => 2,
    }
}

/// Whether the collection holds the content named `name` (see [`CollectionMeta::has`]).
pub(super) fn has_content(m: &CollectionMeta, name: &str) -> bool {
    Content::parse(name).is_some_and(|c| m.has(c))
}

/// The files of `ASCEND_PROFILER_OUTPUT/` for a level (-1 = level_none) and contents.
pub fn files_for(level: i32, has: impl Fn(&str) -> bool) -> Vec<&'static str> {
    let mut v = vec!["trace_view.json"];
    if level >= 0 {
        v.push("step_trace_time.csv");
        if has("npu") {
            v.push("kernel_details.csv");
        }
    }
    if has("cpu") {
        v.push("operator_details.csv");
    }
    if has("memory") {
        v.push("memory_record.csv");
        v.push("operator_memory.csv");
    }
    if level >= 1 {
        if has("npu") {
            v.push("op_statistic.csv");
        }
        v.push("api_statistic.csv");
        v.push("communication.json");
        v.push("communication_matrix.json");
    }
    v
}

/// The `kernel_details.csv` header for the given flags.
pub fn kernel_header(steps: bool, shapes: bool, level: i32) -> Vec<&'static str> {
    let mut h = Vec::new();
    if steps {
        h.push("Step Id");
    }
    h.extend(KERNEL_BASE.iter().copied().filter(|c| !c.is_empty()));
    if shapes {
        h.extend(KERNEL_SHAPES);
    }
    if level >= 1 {
        h.extend(KERNEL_METRICS);
    }
    h
}

/// Which layout the `npu` tool's output takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `ascend_pytorch_profiler_{rank}.db` + `analysis.db`.
    Db,
    /// `trace_view.json`, CSVs and JSON files.
    Text,
}

impl Layout {
    /// `db` or `text` (the `export_type` value).
    pub fn as_str(self) -> &'static str {
        match self {
            Layout::Db => "db",
            Layout::Text => "text",
        }
    }

    /// The layout a collection recorded in its metadata (`export_type`). A collection made
    /// before the key existed only knew the text layout, so it keeps it: an existing
    /// collection is never re-exported into the other layout unless asked
    /// ([`crate::ascend_writer::export_as`]).
    pub fn of(meta: &CollectionMeta) -> Layout {
        match meta.export_type {
            Some(rlprof_profiler::plan::ExportType::Db) => Layout::Db,
            _ => Layout::Text,
        }
    }
}
