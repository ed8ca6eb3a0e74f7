//! The top level of a trace document and the parallel cut of its `traceEvents` array into
//! chunks at event boundaries, each chunk's start checked against where the previous one ended.

use super::chunk::{Buffers, Chunk};
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
    parse_text(text, path, limits, Release::None, p)?.finish(p);
    Ok(())
}

/// Parses a whole Chrome-trace text into `p`, giving each parsed stretch's pages back to
/// `release`; the events are merged into `p` a wave of chunks at a time, and what is known only
/// at the end is left in the result, applied by [`State::finish`] (which needs no text: the text
/// can be dropped first). On an error `p` may hold part of the events.
pub(super) fn parse_text(
    text: &str,
    path: &Path,
    limits: &Limits,
    release: Release<'_>,
    p: &mut Profile,
) -> Result<State, ReportError> {
    let mut st = State::default();
    let res = top(text, &mut st, limits, release, p);
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
    p: &mut Profile,
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
                            events_array(&mut r, 1, st, limits, release, p)?;
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
        Some(b'[') => events_array(&mut r, 0, st, limits, release, p)?,
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

/// Parses an array of events (the cursor at `[`, inside `open` containers) into `p`, a wave of
/// chunks at a time, each wave's chunks checked (event limit, syntax) before it is merged.
pub(super) fn events_array(
    r: &mut Reader<'_>,
    open: u32,
    st: &mut State,
    limits: &Limits,
    release: Release<'_>,
    p: &mut Profile,
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
    let max = limits.max_events;
    let merge = |wave: &mut [Chunk<'static>], scale: f64| {
        for c in wave.iter() {
            st.events += c.count;
            if st.events > max {
                return Err(Fail::Limit);
            }
            if let Some(e) = c.error {
                return Err(Fail::Json(e));
            }
        }
        st.merge_wave(wave, scale, p);
        Ok(())
    };
    r.pos = parse_chunks(r.text(), r.pos, open + 1, max, release, merge)?;
    Ok(())
}

/// Parses the elements of an events array from `first` (an element's first byte) in chunks,
/// in parallel, a wave of chunks at a time; hands each wave's chunks of the sequential parse,
/// in order, to `merge` (with how much more text the rest of the array is, for sizing what
/// it fills); returns where the last chunk stopped. Each chunk's stretch of text is given back
/// to `release` once parsed (a chunk parsed again reads it back).
///
/// A wave is a few chunks per thread (so the threads stay busy). After it, the text before
/// the checked position is given back (where only checked text may be: [`Release::Consumed`]),
/// the wave is merged, and its chunks' vectors are filled again by the next wave's chunks
/// ([`Buffers`]). So a load allocates, and the kernel zeroes, one wave's chunk vectors rather
/// than every chunk's: on the 78.6 MB trace of docs/benchmarks/history.md, 16,500 page faults per load instead
/// of 19,200 on two threads (16,100 instead of 18,800 on one; 15,600-15,900 with the other
/// vectors of a load sized once, see `merge`).
pub(super) fn parse_chunks(
    text: &str,
    first: usize,
    open: u32,
    cap: u64,
    release: Release<'_>,
    mut merge: impl FnMut(&mut [Chunk<'static>], f64) -> Result<(), Fail>,
) -> Result<usize, Fail> {
    let starts = chunk_starts(text.as_bytes(), first);
    let bound = |k: usize| starts.get(k + 1).copied().unwrap_or(usize::MAX);
    let wave = rayon::current_num_threads().max(1) * WAVE_PER_THREAD;
    let mut spare: Vec<Buffers> = Vec::with_capacity(wave);
    let mut checked = Vec::with_capacity(wave);
    let mut pos = first;
    for from in (0..starts.len()).step_by(wave) {
        let ks = from..(from + wave).min(starts.len());
        let mut bufs = std::mem::take(&mut spare);
        bufs.resize_with(ks.len(), Buffers::default);
        let guessed: Vec<Chunk<'static>> = ks
            .clone()
            .into_par_iter()
            .zip(bufs)
            .map(|(k, b)| {
                let c = Chunk::parse(text, starts[k], bound(k), open, cap, b);
                release.read(c.start, c.stop);
                c
            })
            .collect();
        let wave_start = pos;
        let mut done = false;
        for (k, c) in ks.zip(guessed) {
            if done || pos >= bound(k) {
                // Past the end, or the previous chunk ran past this whole one (its guessed
                // start was wrong).
                spare.push(c.into_buffers());
                continue;
            }
            let c = if c.start == pos {
                c
            } else {
                let c = Chunk::parse(text, pos, bound(k), open, cap, c.into_buffers());
                release.read(c.start, c.stop);
                c
            };
            pos = c.stop;
            done = c.error.is_some() || c.end || c.count > cap;
            checked.push(c);
        }
        if !done {
            // Everything before `pos` is parsed and checked; later chunks start at or after it.
            release.consumed(wave_start, pos);
        }
        let scale = (text.len() - wave_start) as f64 / (pos - wave_start).max(1) as f64;
        merge(&mut checked, scale)?;
        spare.extend(checked.drain(..).map(Chunk::into_buffers));
        if done {
            break;
        }
    }
    Ok(pos)
}

/// Where the chunks of an events array starting at `first` start: likely element starts
/// about [`CHUNK_BYTES`] apart (at most 16 chunks per thread). On one thread too the text is
/// cut, so that a chunk's text can be given back before the next one is parsed.
fn chunk_starts(b: &[u8], first: usize) -> Vec<usize> {
    let len = b.len() - first;
    let n = (len / CHUNK_BYTES).clamp(1, rayon::current_num_threads().max(1) * 16);
    let mut starts = vec![first];
    for i in 1..n {
        let from = (first + len / n * i).max(*starts.last().expect("non-empty") + 1);
        if let Some(s) = next_boundary(b, from)
            && s > *starts.last().expect("non-empty")
        {
            starts.push(s);
        }
    }
    starts
}

/// Chunks per thread in one wave of [`parse_chunks`].
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
