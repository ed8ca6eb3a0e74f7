//! The `npu` tool output: an Ascend profiler directory, laid out as torch_npu's profiler writes
//! it, so that msprof-analyze and MindStudio Insight read it.
//!
//! The collection directory is already named `{host}_{pid}_{ts17}_ascend_pt` and holds our raw
//! data (`rlprof_raw/`). Next to it this writes `profiler_info_{rank}.json`,
//! `profiler_metadata.json` and `ASCEND_PROFILER_OUTPUT/` (built under a `.tmp` name, renamed
//! when complete). Which files and columns appear follows the collection's level and contents,
//! as in torch_npu (level0: kernels and step times; level1 adds op and API statistics,
//! per-kernel metrics and the communication files; `cpu` adds operator details, `memory` the
//! memory files): see [`files_for`] and [`kernel_header`].
//!
//! `trace_view.json` (almost nine tenths of the bytes) is formatted and written on its own
//! thread (`TraceFeed`), fed batches of the attributed events, while this thread decodes,
//! attributes and writes the CSV files; the two outputs depend on nothing of each other.

mod columns;
mod exporter;
mod info;
mod matrix;
mod summary_files;
mod trace_feed;

pub use columns::{
    API_STATISTIC, KERNEL_METRICS, MEMORY_RECORD, OP_STATISTIC, OPERATOR_DETAILS, OPERATOR_MEMORY,
    STEP_TRACE, us,
};
pub(crate) use exporter::{StepTimeline, step_trace_row};
pub(crate) use info::write_info_files;
pub use info::{profiler_info, profiler_metadata};
pub use matrix::{Layout, OUTPUT_DIR, files_for, kernel_header, level_rank};

use crate::ExportError;
use crate::attrib::Attributor;
use crate::decode::Index;
use exporter::Exporter;
use matrix::has_content;
use rlprof_profiler::collection::staging::staging_name;
use std::path::{Path, PathBuf};
use trace_feed::{TraceFeed, trace_writer};

/// Writes the text layout (`trace_view.json`, CSVs, JSON) of one rank.
pub fn export_text(dir: &Path, idx: &Index) -> Result<Vec<PathBuf>, ExportError> {
    let mut outputs = write_info_files(dir, idx, Layout::Text)?;

    let final_dir = dir.join(OUTPUT_DIR);
    let tmp = staging_name(&final_dir);
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(ExportError::io(&tmp))?;
    }
    std::fs::create_dir(&tmp).map_err(ExportError::io(&tmp))?;
    let files = files_for(level_rank(idx.meta.level), |c| has_content(&idx.meta, c));
    let trace_path = tmp.join("trace_view.json");
    let trace = trace_writer(idx, &trace_path)?;
    std::thread::scope(|scope| {
        let (feed, worker) =
            TraceFeed::start(scope, idx, trace).map_err(ExportError::io(&trace_path))?;
        // On error the feed is dropped, which ends the trace thread.
        let mut ex = Exporter::new(idx, &tmp, &files, feed)?;
        let mut attr = Attributor::default();
        let replayed = idx.replay(|ev| attr.push(ev, &mut |o| ex.push(&o)));
        attr.finish(&mut |o| ex.push(&o));
        ex.w.trace.close();
        let trace = worker
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("trace thread panicked")));
        replayed?;
        let trace = trace.map_err(ExportError::io(&trace_path))?;
        ex.finish(&files, trace)
    })?;
    if final_dir.exists() {
        std::fs::remove_dir_all(&final_dir).map_err(ExportError::io(&final_dir))?;
    }
    std::fs::rename(&tmp, &final_dir).map_err(ExportError::io(&final_dir))?;
    rlprof_profiler::collection::safe_fs::write(&final_dir.join("analyse.done"), b"")
        .map_err(ExportError::io(&final_dir))?;
    outputs.extend(files.iter().map(|f| final_dir.join(f)));
    Ok(outputs)
}
