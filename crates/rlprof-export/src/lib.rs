//! rlprof-export: parse rlprof raw collections into the formats the ecosystem's tools read.
//!
//! Data flows one way: [`decode`] streams a raw file (`rlprof_raw/rank_{rank}.rlraw`, read
//! with `rlprof_profiler::raw::RawReader` one chunk at a time) into typed [`decode::Event`]s;
//! [`attrib`] attributes kernels to the host ops that issued them and computes self times;
//! the exporters write their outputs incrementally:
//! - [`npu`]: the Ascend profiler directory (`profiler_info_{rank}.json`,
//!   `profiler_metadata.json`, `ASCEND_PROFILER_OUTPUT/*`) that msprof-analyze and MindStudio
//!   Insight read, in the text layout or the DB layout ([`ascend_db_writer`], the default), the
//!   layout picked by [`ascend_writer`];
//! - [`torch`]: a PyTorch-profiler Chrome trace (`*.pt.trace.json.gz`) for Perfetto,
//!   chrome://tracing and HolisticTraceAnalysis;
//! - [`memory`]: PyTorch memory snapshot pickles for `torch.cuda._memory_viz`.
//!
//! [`analyse`] drives them: one collection ([`analyse_collection`], idempotent through a marker
//! file) or every unparsed collection below a path ([`analyse_tree`], parallel, resumable),
//! safe against concurrent runs and finishing interrupted collections through the collection
//! contract that the profiler owns (`rlprof_profiler::collection`: lock, staging names,
//! marker, recovery, the memory-mapped raw bytes).
//! Memory stays bounded whatever the collection size: only interned strings, step/collective
//! intervals, per-name aggregates and live allocations are held.

pub mod analyse;
pub mod ascend_db_writer;
pub mod ascend_writer;
pub mod attrib;
mod chrome_writer;
pub mod decode;
mod dense;
mod error;
pub mod memory;
pub mod npu;
mod pickle;
mod pipe;
mod rows;
pub mod sqlite_file;
mod text_format;
pub mod torch;

pub use analyse::{Outcome, Report, TreeEvent, TreeReport, analyse_collection, analyse_tree};
pub use error::ExportError;

/// The collection's truncation marker as JSON (`null` when no cap stopped it), written into the
/// metadata of every exported format.
pub(crate) fn truncation_json(idx: &decode::Index) -> serde_json::Value {
    match &idx.truncated {
        None => serde_json::Value::Null,
        Some(t) => serde_json::json!({
            "reason": match t.reason {
                rlprof_profiler::raw::TruncReason::Events => "max_events",
                rlprof_profiler::raw::TruncReason::Bytes => "max_bytes",
            },
            "events_kept": t.events_kept,
            "bytes_kept": t.bytes_kept,
        }),
    }
}
