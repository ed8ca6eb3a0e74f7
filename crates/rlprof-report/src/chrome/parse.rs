//! The top level of a trace document and the parallel cut of its `traceEvents` array into
//! chunks at event boundaries, each chunk's start checked against where the previous one ended.

use super::chunk::Chunk;
use super::merge::State;
use super::release::Release;
use super::{CHUNK_BYTES, Limits, MAX_DEPTH};
use crate::error::ReportError;
use crate::json_reader::{self as json, ErrorKind, Reader};
use crate::model::Profile;
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
    parse_text(text, path, limits, Release::None)?.finish(p);
    Ok(())
}

/// Parses a whole Chrome-trace text, giving each parsed stretch's pages back to `release`.
/// What the events need is owned by the result: the text can be dropped before the result is
/// merged into a profile ([`State::finish`]), which is where most of the profile's memory is
/// allocated.
pub(super) fn parse_text(
    text: &str,
    path: &Path,
    limits: &Limits,
    release: Release<'_>,
) -> Result<State, ReportError> {
    let mut st = State::default();
    let res = top(text, &mut st, limits, release);
    match res {
        Ok(()) => Ok(st),
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
pub(super) fn top(
    text: &str,
    st: &mut State,
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
                            events_array(&mut r, 1, st, limits, release)?;
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
        Some(b'[') => events_array(&mut r, 0, st, limits, release)?,
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

/// Parses an array of events (the cursor at `[`, inside `open` containers) into chunks kept
/// in `st` (merged by [`State::finish`]).
pub(super) fn events_array(
    r: &mut Reader<'_>,
    open: u32,
    st: &mut State,
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
    st.arrays.push(chunks);
    Ok(())
}

/// Parses the elements of an events array from `first` (an element's first byte) in chunks,
/// in parallel; returns the chunks of the sequential parse, in order. Each chunk's stretch of
/// text is given back to `release` once parsed (a chunk parsed again reads it back).
pub(super) fn parse_chunks(
    text: &str,
    first: usize,
    open: u32,
    cap: u64,
    release: Release<'_>,
) -> Vec<Chunk<'static>> {
    let b = text.as_bytes();
    let len = b.len() - first;
    let threads = rayon::current_num_threads();
    // On one thread too the text is cut (into at most 16 chunks), so that a chunk's text can
    // be given back before the next one is parsed.
    let n = (len / CHUNK_BYTES).clamp(1, threads.max(1) * 16);
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
    // A text that is given back only once checked is parsed a wave of chunks at a time (a few
    // per thread, so the threads stay busy), the text before the checked position given back
    // after each wave; otherwise all chunks form one wave.
    let wave = if release.in_waves() {
        threads.max(1) * WAVE_PER_THREAD
    } else {
        starts.len()
    };
    let mut out = Vec::with_capacity(starts.len());
    let mut pos = first;
    for from in (0..starts.len()).step_by(wave.max(1)) {
        let ks = from..(from + wave).min(starts.len());
        let guessed: Vec<Chunk<'static>> = ks
            .clone()
            .into_par_iter()
            .map(|k| {
                let c = Chunk::parse(text, starts[k], bound(k), open, cap);
                release.read(c.start, c.stop);
                c
            })
            .collect();
        let wave_start = pos;
        for (k, c) in ks.zip(guessed) {
            if pos >= bound(k) {
                // The previous chunk ran past this whole one (its guessed start was wrong).
                continue;
            }
            let c = if c.start == pos {
                c
            } else {
                let c = Chunk::parse(text, pos, bound(k), open, cap);
                release.read(c.start, c.stop);
                c
            };
            pos = c.stop;
            let done = c.error.is_some() || c.end || c.count > cap;
            out.push(c);
            if done {
                return out;
            }
        }
        // Everything before `pos` is parsed and checked; later chunks start at or after it.
        release.consumed(wave_start, pos);
    }
    out
}

/// Chunks per thread in one wave of [`parse_chunks`] (when parsing in waves).
const WAVE_PER_THREAD: usize = 4;

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

/// The error of an input over one of the [`Limits`].
pub(super) fn limit(path: &Path, what: &'static str, limit: u64) -> ReportError {
    ReportError::Limit {
        path: path.to_path_buf(),
        what,
        limit,
    }
}
