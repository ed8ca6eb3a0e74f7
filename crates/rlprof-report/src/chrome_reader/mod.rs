//! Foreign Chrome-trace JSON: PyTorch profiler traces (`*.pt.trace.json[.gz]`, an object with
//! `traceEvents`) and Ascend's `trace_view.json` (a bare array of events).
//!
//! How a file is read: a plain file is memory-mapped (no copy); a `.gz` file is decompressed
//! into memory (flate2 on the zlib-rs backend), counted against the size limit as it is read.
//! The text is checked as UTF-8 in parallel pieces; invalid UTF-8 is replaced by U+FFFD (one
//! copy, only then), so hostile bytes in names load as inert text. A mapped file's pages, and
//! a gunzipped text's, are given back as the parse passes them ([`release`]), so the text does
//! not stay resident while the report is built.
//!
//! How it is parsed: the strict hand-written reader of [`crate::json_reader`] (why it is
//! hand-written is said there) walks the top level; the `traceEvents` array is cut into chunks
//! at event boundaries found by a cheap scan (`,` then `{"`), the chunks are parsed in parallel
//! on rayon, and each chunk's start is checked against where the previous chunk really ended
//! (a chunk whose guessed start was wrong, e.g. inside a string, is parsed again from the right
//! place), so the result is the sequential parse's. Events borrow their strings from the text;
//! `args` stays raw text and only the parts the report shows are decoded. Chunks intern names
//! and threads locally and are merged in file order, so string and thread numbering is the
//! sequential order too. The chunks go a wave of a few per thread at a time: each wave is merged
//! into the profile before the next is parsed, whose chunks fill the same vectors again (fewer
//! fresh pages for the kernel to zero), and the text before it can be given back.
//!
//! Documented limits ([`Limits`]): at most 1 GiB of (uncompressed) JSON text, at most 20 million
//! events, at most 128 levels of JSON nesting (serde_json's recursion limit, which the reader
//! applies to the whole document; it never recurses, so the stack stays bounded), and each
//! event's extra arguments are kept up to 4 KiB of text. Past a limit the file is skipped with
//! an error that names the limit.
//!
//! One concern per file: [`file`] opens and checks the text, [`parse`] walks the top level and
//! cuts the events array into chunks, [`event`] reads one event's fields, [`chunk`] builds what
//! one chunk holds, [`merge`] joins the chunks in file order and finishes the profile,
//! [`tracks`] puts events on tracks, [`detail`] decodes the arguments the report shows,
//! [`time`] turns timestamps into integer nanoseconds, and [`release`] gives a mapped text's
//! pages back once read.

use crate::json_reader as json;

/// Size limits for foreign inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest JSON text accepted, in bytes after decompression.
    pub max_bytes: u64,
    /// Most events accepted per file.
    pub max_events: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_bytes: 1 << 30,
            max_events: 20_000_000,
        }
    }
}

/// serde_json's nesting limit, applied by the reader (documented here because the error names it).
pub const MAX_DEPTH: u64 = json::MAX_DEPTH as u64;
/// Longest argument text kept per event.
pub const MAX_ARGS_TEXT: usize = 4096;
/// Longest `args` text kept as text (decoded when shown); longer ones are decoded (and
/// clipped to [`MAX_ARGS_TEXT`] per field) while loading, so what is kept stays bounded.
const MAX_RAW_ARGS: usize = 4 * MAX_ARGS_TEXT;

/// Trainer phase names.
pub const PHASES: [&str; 10] = [
    "step",
    "gen",
    "reward",
    "old_log_prob",
    "ref",
    "adv",
    "update_actor",
    "update_weights",
    "testing",
    "save_checkpoint",
];

/// Files smaller than this are read rather than mapped.
const MAP_MIN_BYTES: u64 = 1 << 20;
/// Target size of one parallel parse chunk.
const CHUNK_BYTES: usize = 1 << 20;

mod chunk;
mod detail;
mod event;
mod file;
mod merge;
mod parse;
mod release;
#[cfg(test)]
mod tests;
mod time;
mod tracks;

pub use file::{holds_trace_events, load_trace, read_into, read_stream};
pub use tracks::classify;
#[cfg(test)]
pub(crate) use {
    merge::{rl_steps, split_host_memory},
    tracks::{demote_nested_role_calls, is_whole_trace},
};
