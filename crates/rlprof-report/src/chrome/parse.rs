//! The top level of a trace document and the parallel cut of its `traceEvents` array into
//! chunks at event boundaries, each chunk's start checked against where the previous one ended.

use super::chunk::{Chunk, Special};
use super::file::limit;
use super::merge::State;
use super::release::Release;
use super::{CHUNK_BYTES, Limits, MAX_DEPTH};
use crate::error::ReportError;
use crate::json_reader::{self as json, ErrorKind, Reader};
use crate::model::{Profile, RAW_DETAIL};
use rayon::prelude::*;
use std::path::Path;

/// Why a parse stopped.
pub(super) enum Fail {
    Json(json::Error),
    Limit,
    Shape(&'static str),
}

impl From<json::Error> for Fail {
    fn from(e: json::Error) -> Fail {
        Fail::Json(e)
    }
}

/// Parses a whole Chrome-trace text (held in memory) into `p`.
pub(super) fn read_text(
    text: &str,
    path: &Path,
    p: &mut Profile,
    limits: &Limits,
) -> Result<(), ReportError> {
    read_text_released(text, path, p, limits, Release::NONE)
}

/// Parses a whole Chrome-trace text into `p`, giving each parsed stretch's pages back to
/// `release`.
pub(super) fn read_text_released(
    text: &str,
    path: &Path,
    p: &mut Profile,
    limits: &Limits,
    release: Release<'_>,
) -> Result<(), ReportError> {
    let mut st = State::default();
    let res = top(text, &mut st, p, limits, release);
    match res {
        Ok(()) => {
            st.finish(p);
            Ok(())
        }
        Err(Fail::Limit) => Err(limit(path, "events", limits.max_events)),
        Err(Fail::Json(e)) if e.kind == ErrorKind::Depth => {
            Err(limit(path, "JSON nesting depth", MAX_DEPTH))
        }
        Err(Fail::Json(e)) => {
            let what = match e.kind {
                ErrorKind::Syntax(s) => s,
                ErrorKind::Depth => "too deep",
            };
            let before = &text.as_bytes()[..e.offset.min(text.len())];
            let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
            let col = before.len()
                - before
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |i| i + 1)
                + 1;
            Err(ReportError::Malformed {
                path: path.to_path_buf(),
                message: format!("not a Chrome trace: {what} at line {line} column {col}"),
            })
        }
        Err(Fail::Shape(what)) => Err(ReportError::Malformed {
            path: path.to_path_buf(),
            message: format!("not a Chrome trace: {what}"),
        }),
    }
}

/// The top level: an object with `traceEvents` (and `baseTimeNanoseconds`, `distributedInfo`),
/// or a bare array of events; then only whitespace.
pub(super) fn top<'a>(
    text: &'a str,
    st: &mut State<'a>,
    p: &mut Profile,
    limits: &Limits,
    release: Release<'_>,
) -> Result<(), Fail> {
    let mut r = Reader::new(text, 0);
    r.ws();
    match r.peek() {
        Some(b'{') => {
            r.pos += 1;
            r.ws();
            let mut saw_events = false;
            if r.peek() == Some(b'}') {
                r.pos += 1;
            } else {
                loop {
                    let key = r.key()?.text();
                    match key.as_ref() {
                        "traceEvents" => {
                            saw_events = true;
                            events_array(&mut r, 1, st, p, limits, release)?;
                        }
                        "baseTimeNanoseconds" => {
                            st.base_ns = if r.null()? {
                                None
                            } else {
                                let v = r.value(1)?;
                                Some(
                                    v.parse::<u64>()
                                        .ok()
                                        .filter(|_| v.bytes().all(|c| c.is_ascii_digit()))
                                        .ok_or(Fail::Shape(
                                            "baseTimeNanoseconds is not an unsigned integer",
                                        ))?,
                                )
                            };
                        }
                        "distributedInfo" => {
                            let v = r.value(1)?;
                            let v: serde_json::Value = serde_json::from_str(v)
                                .map_err(|_| Fail::Shape("distributedInfo is not JSON"))?;
                            st.dist_rank = v.get("rank").and_then(|r| r.as_u64()).map(|r| r as u32);
                            st.meta.world_size = v
                                .get("world_size")
                                .and_then(|r| r.as_u64())
                                .map(|r| r as u32);
                        }
                        "trace_id" | "host_name" => {
                            let v = r.value(1)?;
                            let text = json::value_text(v).into_owned();
                            if key.as_ref() == "trace_id" {
                                st.meta.trace_id = Some(text);
                            } else {
                                st.meta.host = Some(text);
                            }
                        }
                        _ => {
                            r.value(1)?;
                        }
                    }
                    r.ws();
                    match r.peek() {
                        Some(b',') => r.pos += 1,
                        Some(b'}') => {
                            r.pos += 1;
                            break;
                        }
                        _ => return Err(r.err("expected `,` or `}`").into()),
                    }
                }
            }
            if !saw_events {
                return Err(Fail::Shape("no traceEvents array"));
            }
        }
        Some(b'[') => events_array(&mut r, 0, st, p, limits, release)?,
        _ => {
            return Err(Fail::Json(r.err(
                "expected a Chrome trace object with traceEvents, or an array of events",
            )));
        }
    }
    r.ws();
    if r.pos != text.len() {
        return Err(r.err("trailing characters").into());
    }
    Ok(())
}

/// Parses an array of events (the cursor at `[`, inside `open` containers) into `p`.
pub(super) fn events_array<'a>(
    r: &mut Reader<'a>,
    open: u32,
    st: &mut State<'a>,
    p: &mut Profile,
    limits: &Limits,
    release: Release<'_>,
) -> Result<(), Fail> {
    r.ws();
    if r.peek() != Some(b'[') {
        return Err(r.err("expected an array of trace events").into());
    }
    r.open(open)?;
    r.pos += 1;
    r.ws();
    if r.peek() == Some(b']') {
        r.pos += 1;
        return Ok(());
    }
    let chunks = parse_chunks(r.text(), r.pos, open + 1, limits.max_events, release);
    // Sized once: growing these while merging would copy them (and fault their pages) again.
    let sum = |f: fn(&Chunk) -> usize| chunks.iter().map(f).sum::<usize>();
    p.events.reserve(sum(|c| c.events.len() + c.specials.len()));
    p.details
        .reserve(sum(|c| c.details.len() + c.specials.len()));
    p.memory.reserve(sum(|c| c.memory.len()));
    st.mem_thread.reserve(sum(|c| c.memory.len()));
    st.mem_host.reserve(sum(|c| c.memory.len()));
    for c in &chunks {
        st.events += c.count;
        if st.events > limits.max_events {
            return Err(Fail::Limit);
        }
        if let Some(e) = c.error {
            return Err(Fail::Json(e));
        }
        r.pos = c.stop;
    }
    // `B`/`E` pairs are matched in file order across chunks, so chunks with them are merged
    // one by one; otherwise the copying is done in parallel.
    let pairs = chunks.iter().any(|c| {
        c.specials
            .iter()
            .any(|(_, s)| matches!(s, Special::Begin(..) | Special::End(..)))
    });
    let spans = p.raw_details.spans.len() + sum(|c| c.spans.len());
    if pairs || spans >= RAW_DETAIL as usize {
        for c in chunks {
            st.merge(c, p);
        }
    } else {
        st.merge_parallel(chunks, p);
    }
    Ok(())
}

/// Parses the elements of an events array from `first` (an element's first byte) in chunks,
/// in parallel; returns the chunks of the sequential parse, in order. Each chunk's stretch of
/// text is given back to `release` once parsed (a chunk parsed again reads it back).
pub(super) fn parse_chunks<'a>(
    text: &'a str,
    first: usize,
    open: u32,
    cap: u64,
    release: Release<'_>,
) -> Vec<Chunk<'a>> {
    let b = text.as_bytes();
    let len = b.len() - first;
    let threads = rayon::current_num_threads();
    let n = if threads <= 1 {
        1
    } else {
        (len / CHUNK_BYTES).clamp(1, threads * 16)
    };
    let mut starts = vec![first];
    for i in 1..n {
        let from = (first + len / n * i).max(*starts.last().expect("non-empty") + 1);
        if let Some(s) = next_boundary(b, from)
            && s > *starts.last().expect("non-empty")
        {
            starts.push(s);
        }
    }
    let bound = |k: usize| starts.get(k + 1).copied().unwrap_or(usize::MAX);
    let guessed: Vec<Chunk<'a>> = (0..starts.len())
        .into_par_iter()
        .map(|k| {
            let c = Chunk::parse(text, starts[k], bound(k), open, cap);
            release.range(c.start, c.stop);
            c
        })
        .collect();
    let mut out = Vec::with_capacity(guessed.len());
    let mut pos = first;
    for (k, c) in guessed.into_iter().enumerate() {
        if pos >= bound(k) {
            // The previous chunk ran past this whole one (its guessed start was wrong).
            continue;
        }
        let c = if c.start == pos {
            c
        } else {
            let c = Chunk::parse(text, pos, bound(k), open, cap);
            release.range(c.start, c.stop);
            c
        };
        pos = c.stop;
        let done = c.error.is_some() || c.end || c.count > cap;
        out.push(c);
        if done {
            break;
        }
    }
    out
}

/// The first likely event start at or after `from`: a `{` after a `,` and before a `"` or `}`
/// (whitespace allowed between). Only a guess: [`parse_chunks`] checks it.
pub(super) fn next_boundary(b: &[u8], from: usize) -> Option<usize> {
    let is_ws = |c: u8| matches!(c, b' ' | b'\n' | b'\t' | b'\r');
    let mut at = from;
    while let Some(i) = memchr::memchr(b'{', b.get(at..)?) {
        let s = at + i;
        let before = b[..s].iter().rev().find(|&&c| !is_ws(c));
        let after = b[s + 1..].iter().find(|&&c| !is_ws(c));
        if before == Some(&b',') && matches!(after, Some(b'"' | b'}')) {
            return Some(s);
        }
        at = s + 1;
    }
    None
}
