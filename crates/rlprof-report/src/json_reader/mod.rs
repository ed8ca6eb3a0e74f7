//! A strict, borrowing JSON reader for the Chrome-trace loader ([`crate::chrome_reader`]).
//!
//! Why this is hand-written rather than serde_json: going through serde costs per event (a
//! visitor dispatch per field, an owned `String` or `serde_json::Value` per field, and the
//! `args` map built and re-serialised), which was most of the load time of an 80 MB trace
//! (docs/benchmarks/history.md, "Loading a foreign Chrome trace"); and serde_json cannot start
//! parsing in the middle of an array, which the parallel chunked parse needs. This reader walks bytes, returns
//! borrowed spans of the input, never allocates on the valid path, and never recurses (nesting
//! is tracked in a bit stack), so the stack stays bounded on hostile input.
//!
//! What it accepts is exactly what `serde_json::from_str::<serde_json::Value>` accepts
//! (RFC 8259 JSON: whitespace, literals, numbers without leading zeros, numbers that do not
//! overflow an `f64`, strings without raw control characters, valid escapes with paired UTF-16
//! surrogates) with at most [`MAX_DEPTH`]` - 1` nested arrays/objects (serde_json's recursion
//! limit). The tests in this module and in `chrome.rs` check that against serde_json.

mod reader;
mod values;

pub(crate) use reader::*;
pub(crate) use values::*;

#[cfg(test)]
mod tests;
