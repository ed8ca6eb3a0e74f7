//! Foreign Chrome-trace JSON: PyTorch profiler traces (`*.pt.trace.json[.gz]`, an object with
//! `traceEvents`) and Ascend's `trace_view.json` (a bare array of events).
//!
//! How a file is read: a plain file is memory-mapped (no copy); a `.gz` file is decompressed
//! into memory (flate2 on the zlib-rs backend), counted against the size limit as it is read.
//! The text is checked as UTF-8 in parallel pieces; invalid UTF-8 is replaced by U+FFFD (one
//! copy, only then), so hostile bytes in names load as inert text.
//!
//! How it is parsed: the strict hand-written reader of [`crate::json_reader`] (why it is
//! hand-written is said there) walks the top level; the `traceEvents` array is cut into chunks
//! at event boundaries found by a cheap scan (`,` then `{"`), the chunks are parsed in parallel
//! on rayon, and each chunk's start is checked against where the previous chunk really ended
//! (a chunk whose guessed start was wrong, e.g. inside a string, is parsed again from the right
//! place), so the result is the sequential parse's. Events borrow their strings from the text;
//! `args` stays raw text and only the parts the report shows are decoded. Chunks intern names
//! and threads locally and are merged in file order, so string and thread numbering is the
//! sequential order too.
//!
//! Documented limits ([`Limits`]): at most 1 GiB of (uncompressed) JSON text, at most 20 million
//! events, at most 128 levels of JSON nesting (serde_json's recursion limit, which the reader
//! applies to the whole document; it never recurses, so the stack stays bounded), and each
//! event's extra arguments are kept up to 4 KiB of text. Past a limit the file is skipped with
//! an error that names the limit.

use crate::error::ReportError;
use crate::json_reader::{self as json, ErrorKind, RawStr, Reader};
use crate::model::{
    Detail, Event, MemEvent, NONE, Profile, RAW_DETAIL, RawDetails, RawSpan, SourceFormat, Track,
};
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

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

/// Role-call names as annotated by the reference system.
pub const ROLE_CALLS: [&str; 7] = [
    "generate_sequences",
    "compute_log_prob",
    "compute_ref_log_prob",
    "update_actor",
    "compute_values",
    "update_critic",
    "compute_rm_score",
];
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

/// Loads a PyTorch Chrome trace file (`.json` or `.json.gz`).
pub fn load_trace(path: &Path, group: &str, limits: &Limits) -> Result<Profile, ReportError> {
    let mut p = Profile::new(
        path.to_path_buf(),
        SourceFormat::TorchTrace,
        0,
        group.to_string(),
    );
    let rank = rank_from_file_name(path);
    read_into(path, &mut p, limits)?;
    if p.rank == 0
        && let Some(r) = rank
    {
        p.rank = r;
    }
    Ok(p)
}

/// How much of a file [`holds_trace_events`] looks at.
const SNIFF_BYTES: u64 = 1 << 20;

/// Whether a `.json` / `.json.gz` file holds Chrome trace events, from its first MiB
/// (decompressed): an object with a `traceEvents` key, or an array whose first element is an
/// object with a `ph` or `name` member.
pub fn holds_trace_events(path: &Path) -> Result<bool, ReportError> {
    let file = std::fs::File::open(path).map_err(crate::error::io(path))?;
    let mut head = Vec::new();
    let gz = path.extension().is_some_and(|e| e == "gz");
    let read = if gz {
        flate2::read::MultiGzDecoder::new(file)
            .take(SNIFF_BYTES)
            .read_to_end(&mut head)
    } else {
        file.take(SNIFF_BYTES).read_to_end(&mut head)
    };
    if let Err(e) = read
        && head.is_empty()
    {
        return Err(crate::error::io(path)(e));
    }
    let text = String::from_utf8_lossy(&head);
    let body = text.trim_start_matches(['\u{feff}', ' ', '\n', '\t', '\r']);
    Ok(if body.starts_with('{') {
        body.contains("\"traceEvents\"")
    } else if let Some(rest) = body.strip_prefix('[') {
        let rest = rest.trim_start();
        rest.starts_with(']')
            || (rest.starts_with('{') && (rest.contains("\"ph\"") || rest.contains("\"name\"")))
    } else {
        false
    })
}

/// Reads the events of a Chrome-trace file into `p`.
pub fn read_into(path: &Path, p: &mut Profile, limits: &Limits) -> Result<(), ReportError> {
    let file = std::fs::File::open(path).map_err(crate::error::io(path))?;
    let len = file.metadata().map_err(crate::error::io(path))?.len();
    let gz = path.extension().is_some_and(|e| e == "gz");
    if !gz && len > limits.max_bytes {
        return Err(limit(path, "uncompressed size in bytes", limits.max_bytes));
    }
    // SAFETY: the map is only read while this function runs. Like every reader of a mapped
    // file, a concurrent writer truncating the file could fault the process; trace files are
    // written once by the profiler and not modified while a report is built. (Not
    // pre-faulted with `populate`, which maps every page on this thread: the parallel UTF-8
    // check touches the pages first, on every thread.)
    let map = if len >= MAP_MIN_BYTES {
        // SAFETY: see above.
        Some(unsafe { memmap2::MmapOptions::new().map(&file) }.map_err(crate::error::io(path))?)
    } else {
        None
    };
    let small;
    let bytes: &[u8] = match &map {
        Some(m) => m,
        None => {
            let mut v = Vec::with_capacity(len as usize + 1);
            read_capped(&file, path, limits.max_bytes, &mut v)?;
            small = v;
            &small
        }
    };
    if gz {
        // The gzip trailer holds the uncompressed size (mod 2^32): a capacity hint.
        let hint = bytes
            .len()
            .checked_sub(4)
            .map(|i| u32::from_le_bytes(bytes[i..].try_into().expect("4 bytes")) as u64)
            .unwrap_or(0)
            .min(limits.max_bytes) as usize;
        let mut text = Vec::with_capacity(hint + 1);
        read_capped(
            flate2::bufread::MultiGzDecoder::new(bytes),
            path,
            limits.max_bytes,
            &mut text,
        )?;
        let res = read_text(&text_of(&text), path, p, limits);
        drop_in_background(text);
        return res;
    }
    let res = read_text(&text_of(bytes), path, p, limits);
    drop_in_background(map);
    res
}

/// Drops `v` on the rayon pool: unmapping an 80 MB mapping or freeing the text is a few
/// milliseconds of page-table work that need not hold up building the report (nothing
/// borrows the text once it is parsed).
fn drop_in_background<T: Send + 'static>(v: T) {
    rayon::spawn(move || drop(v));
}

/// Reads events from any reader (uncompressed JSON) into `p`.
///
/// The text is read into memory first (at most `limits.max_bytes`, counted as it is read) and
/// parsed from there.
pub fn read_stream(
    input: impl Read,
    path: &Path,
    p: &mut Profile,
    limits: &Limits,
) -> Result<(), ReportError> {
    let mut bytes = Vec::new();
    read_capped(input, path, limits.max_bytes, &mut bytes)?;
    read_text(&text_of(&bytes), path, p, limits)
}

/// Reads all of `input` into `out`, failing past `max` bytes.
fn read_capped(
    input: impl Read,
    path: &Path,
    max: u64,
    out: &mut Vec<u8>,
) -> Result<(), ReportError> {
    let mut counted = Capped {
        inner: input,
        left: max,
        hit: false,
    };
    let read = counted.read_to_end(out);
    if counted.hit {
        return Err(limit(path, "uncompressed size in bytes", max));
    }
    read.map_err(crate::error::io(path))?;
    Ok(())
}

/// The bytes as text, invalid UTF-8 replaced by U+FFFD (no copy when valid). Checked in
/// parallel pieces cut before ASCII bytes (always character boundaries).
fn text_of(bytes: &[u8]) -> Cow<'_, str> {
    let n = (bytes.len() / (4 * CHUNK_BYTES)).clamp(1, 64);
    let mut cuts = vec![0];
    for i in 1..n {
        let mut c = (bytes.len() * i / n).max(*cuts.last().expect("non-empty"));
        while c < bytes.len() && bytes[c] >= 0x80 {
            c += 1;
        }
        cuts.push(c);
    }
    cuts.push(bytes.len());
    let valid = cuts
        .par_windows(2)
        .all(|w| std::str::from_utf8(&bytes[w[0]..w[1]]).is_ok());
    if valid {
        // SAFETY: every piece is valid UTF-8 and each cut is before an ASCII byte (or at an
        // end), so the concatenation is valid UTF-8.
        Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(bytes) })
    } else {
        String::from_utf8_lossy(bytes)
    }
}

/// Why a parse stopped.
enum Fail {
    Json(json::Error),
    Limit,
    Shape(&'static str),
}

impl From<json::Error> for Fail {
    fn from(e: json::Error) -> Fail {
        Fail::Json(e)
    }
}

/// Parses a whole Chrome-trace text into `p`.
fn read_text(text: &str, path: &Path, p: &mut Profile, limits: &Limits) -> Result<(), ReportError> {
    let mut st = State::default();
    let res = top(text, &mut st, p, limits);
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
fn top<'a>(
    text: &'a str,
    st: &mut State<'a>,
    p: &mut Profile,
    limits: &Limits,
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
                            events_array(&mut r, 1, st, p, limits)?;
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
        Some(b'[') => events_array(&mut r, 0, st, p, limits)?,
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
fn events_array<'a>(
    r: &mut Reader<'a>,
    open: u32,
    st: &mut State<'a>,
    p: &mut Profile,
    limits: &Limits,
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
    let chunks = parse_chunks(r.text(), r.pos, open + 1, limits.max_events);
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
/// in parallel; returns the chunks of the sequential parse, in order.
fn parse_chunks<'a>(text: &'a str, first: usize, open: u32, cap: u64) -> Vec<Chunk<'a>> {
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
        .map(|k| Chunk::parse(text, starts[k], bound(k), open, cap))
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
            Chunk::parse(text, pos, bound(k), open, cap)
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
fn next_boundary(b: &[u8], from: usize) -> Option<usize> {
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

/// One event's fields as written (unknown fields skipped, validated).
#[derive(Default)]
struct RawEvent<'a> {
    ph: Option<RawStr<'a>>,
    name: Option<&'a str>,
    cat: Option<RawStr<'a>>,
    pid: Option<&'a str>,
    tid: Option<&'a str>,
    ts: Option<&'a str>,
    dur: Option<&'a str>,
    args: Option<&'a str>,
    /// `name` when it is a string.
    name_str: Option<RawStr<'a>>,
    /// Whether `args` is an object whose members were put in the chunk's `members`.
    args_members: bool,
}

/// An object's members: decoded key, value text.
type Members<'a> = Vec<(Cow<'a, str>, &'a str)>;

/// Compact text of array values already seen (shapes and dtype lists repeat across events).
type Cache<'a> = FxHashMap<&'a str, String>;

/// [`json::compact`] of `v`, remembered.
fn compact_cached<'c, 'a>(v: &'a str, cache: &'c mut Cache<'a>) -> &'c str {
    cache.entry(v).or_insert_with(|| {
        let mut s = String::new();
        json::compact(v, &mut s);
        s
    })
}

/// Field names in declaration order (an event may also be written as an array of them).
const FIELDS: [&str; 8] = ["ph", "name", "cat", "pid", "tid", "ts", "dur", "args"];

/// The index of a field name in [`FIELDS`] (compared as one little-endian word with its
/// length: no string comparisons).
#[inline]
fn field_index(k: &str) -> Option<usize> {
    const fn word(k: &[u8]) -> (usize, u32) {
        let mut w = [0u8; 4];
        let mut i = 0;
        while i < k.len() {
            w[i] = k[i];
            i += 1;
        }
        (k.len(), u32::from_le_bytes(w))
    }
    const W: [(usize, u32); 8] = [
        word(b"ph"),
        word(b"name"),
        word(b"cat"),
        word(b"pid"),
        word(b"tid"),
        word(b"ts"),
        word(b"dur"),
        word(b"args"),
    ];
    let b = k.as_bytes();
    if !(2..=4).contains(&b.len()) {
        return None;
    }
    // Byte by byte (a `copy_from_slice` of a variable length is a `memcpy` call).
    let at = |i: usize| b.get(i).copied().unwrap_or(0) as u32;
    let key = (b.len(), at(0) | at(1) << 8 | at(2) << 16 | at(3) << 24);
    W.iter().position(|&f| f == key)
}

impl<'a> RawEvent<'a> {
    /// Reads the field `i` of [`FIELDS`]; an object `args` has its members put in `members`.
    #[inline(always)]
    fn field(
        &mut self,
        r: &mut Reader<'a>,
        i: usize,
        open: u32,
        members: &mut Members<'a>,
    ) -> json::Result<()> {
        if i == 0 || i == 2 {
            let v = if r.null()? {
                None
            } else if r.peek() == Some(b'"') {
                Some(r.string()?)
            } else {
                return Err(r.err("invalid type: expected a string"));
            };
            if i == 0 {
                self.ph = v;
            } else {
                self.cat = v;
            }
            return Ok(());
        }
        if r.null()? {
            return Ok(());
        }
        let start = r.pos;
        // The common shapes directly; anything else through the general value reader.
        let v = match r.peek() {
            Some(b'"') => {
                let s = r.string()?;
                if i == 1 {
                    self.name_str = Some(s);
                }
                r.since(start)
            }
            Some(b'-' | b'0'..=b'9') => r.number()?,
            // A complete event (`X`) keeps its `args` as text, so its members are not needed;
            // other phases read them (when `ph` comes later they are read too).
            Some(b'{')
                if i == 7
                    && !matches!(
                        self.ph,
                        Some(RawStr {
                            raw: "X",
                            escaped: false
                        })
                    ) =>
            {
                r.open(open)?;
                r.pos += 1;
                members.clear();
                self.args_members = true;
                r.ws();
                if r.peek() == Some(b'}') {
                    r.pos += 1;
                } else {
                    loop {
                        let k = r.key()?;
                        let v = r.value(open + 1)?;
                        members.push((k.text(), v));
                        r.ws();
                        match r.peek() {
                            Some(b',') => r.pos += 1,
                            Some(b'}') => {
                                r.pos += 1;
                                break;
                            }
                            _ => return Err(r.err("expected `,` or `}`")),
                        }
                    }
                }
                r.since(start)
            }
            _ => r.value(open)?,
        };
        match i {
            1 => self.name = Some(v),
            3 => self.pid = Some(v),
            4 => self.tid = Some(v),
            5 => self.ts = Some(v),
            6 => self.dur = Some(v),
            _ => self.args = Some(v),
        }
        Ok(())
    }

    /// Reads one event (an object, or an array of the fields in order) inside `open` containers.
    fn read(
        r: &mut Reader<'a>,
        open: u32,
        members: &mut Members<'a>,
    ) -> json::Result<RawEvent<'a>> {
        let mut ev = RawEvent::default();
        r.ws();
        match r.peek() {
            Some(b'{') => {
                r.open(open)?;
                r.pos += 1;
                r.ws();
                if r.peek() == Some(b'}') {
                    r.pos += 1;
                    return Ok(ev);
                }
                let mut seen = 0u8;
                loop {
                    let key_at = r.pos;
                    let key = r.key()?;
                    let i = if key.escaped {
                        field_index(&key.text())
                    } else {
                        field_index(key.raw)
                    };
                    match i {
                        Some(i) => {
                            if seen & 1 << i != 0 {
                                r.pos = key_at;
                                return Err(r.err("duplicate field"));
                            }
                            seen |= 1 << i;
                            ev.field(r, i, open + 1, members)?;
                        }
                        None => {
                            r.value(open + 1)?;
                        }
                    }
                    r.ws();
                    match r.peek() {
                        Some(b',') => r.pos += 1,
                        Some(b'}') => {
                            r.pos += 1;
                            return Ok(ev);
                        }
                        None => return Err(r.err("EOF while parsing an object")),
                        _ => return Err(r.err("expected `,` or `}`")),
                    }
                }
            }
            Some(b'[') => {
                r.open(open)?;
                r.pos += 1;
                r.ws();
                if r.peek() == Some(b']') {
                    r.pos += 1;
                    return Ok(ev);
                }
                let mut i = 0;
                loop {
                    if i == FIELDS.len() {
                        return Err(r.err("invalid length: an event has 8 fields"));
                    }
                    ev.field(r, i, open + 1, members)?;
                    i += 1;
                    r.ws();
                    match r.peek() {
                        Some(b',') => r.pos += 1,
                        Some(b']') => {
                            r.pos += 1;
                            return Ok(ev);
                        }
                        None => return Err(r.err("EOF while parsing a list")),
                        _ => return Err(r.err("expected `,` or `]`")),
                    }
                }
            }
            None => Err(r.err("EOF while parsing a value")),
            Some(_) => Err(r.err("invalid type: expected a trace event object")),
        }
    }
}

/// A `B` event waiting for its `E`: start, name, args, category.
type OpenBegin<'a> = (i64, u32, Option<&'a str>, Option<Cow<'a, str>>);

/// What a chunk cannot settle alone (needs the events of earlier chunks): `B`/`E` pairs and
/// metadata.
enum Special<'a> {
    Begin(u32, OpenBegin<'a>),
    End(u32, i64),
    ProcessName(Cow<'a, str>, String),
    ThreadName(Cow<'a, str>, Cow<'a, str>, String),
}

/// A (pid, tid) as written and its chunk-local thread number.
type SeenThread<'a> = (Option<&'a str>, Option<&'a str>, u32);

/// The events of one stretch of the events array, with chunk-local name and thread numbers.
struct Chunk<'a> {
    /// Where it started and where it stopped (the next element, or past the array's `]`).
    start: usize,
    stop: usize,
    /// Whether it reached the end of the array.
    end: bool,
    /// Elements read.
    count: u64,
    /// The first error, if any (everything before it is kept).
    error: Option<json::Error>,
    events: Vec<Event>,
    details: Vec<Detail>,
    names: Vec<Cow<'a, str>>,
    name_ix: FxHashMap<Cow<'a, str>, u32>,
    threads: Vec<(Cow<'a, str>, Cow<'a, str>)>,
    thread_ix: FxHashMap<(Cow<'a, str>, Cow<'a, str>), u32>,
    /// The last few (pid, tid) texts seen and their numbers (host ops, kernels and memory
    /// events interleave a few threads), the next one to replace.
    last_threads: [Option<SeenThread<'a>>; 4],
    last_next: usize,
    memory: Vec<MemEvent>,
    mem_thread: Vec<u32>,
    mem_host: Vec<bool>,
    /// Specials with the number of events pushed before each.
    specials: Vec<(usize, Special<'a>)>,
    steps: Vec<u64>,
    members: Members<'a>,
    cache: Cache<'a>,
    /// Raw details: the `args` texts, and spans into them (arena 0).
    arena: String,
    spans: Vec<RawSpan>,
}

impl<'a> Chunk<'a> {
    /// Parses elements from `start` until the next element starts at or after `bound`, the
    /// array ends, an error, or more than `cap` elements.
    fn parse(text: &'a str, start: usize, bound: usize, open: u32, cap: u64) -> Chunk<'a> {
        let guess = (bound.min(text.len()) - start.min(text.len())) / 200;
        let mut c = Chunk {
            start,
            stop: start,
            end: false,
            count: 0,
            error: None,
            events: Vec::with_capacity(guess),
            details: Vec::with_capacity(guess / 2),
            names: Vec::new(),
            name_ix: FxHashMap::default(),
            threads: Vec::new(),
            thread_ix: FxHashMap::default(),
            last_threads: [None; 4],
            last_next: 0,
            memory: Vec::with_capacity(guess / 2),
            mem_thread: Vec::with_capacity(guess / 2),
            mem_host: Vec::with_capacity(guess / 2),
            specials: Vec::new(),
            steps: Vec::new(),
            members: Vec::new(),
            cache: Cache::default(),
            // About a third of a PyTorch trace's text is `args` of `X` events.
            arena: String::with_capacity(guess * 64),
            spans: Vec::with_capacity(guess / 2),
        };
        let mut r = Reader::new(text, start);
        loop {
            match RawEvent::read(&mut r, open, &mut c.members) {
                Ok(ev) => {
                    c.count += 1;
                    if c.count > cap {
                        c.stop = r.pos;
                        return c;
                    }
                    c.push(ev);
                }
                Err(e) => {
                    c.error = Some(e);
                    return c;
                }
            }
            r.ws();
            match r.peek() {
                Some(b',') => {
                    r.pos += 1;
                    r.ws();
                    if r.pos >= bound {
                        c.stop = r.pos;
                        return c;
                    }
                }
                Some(b']') => {
                    r.pos += 1;
                    c.stop = r.pos;
                    c.end = true;
                    return c;
                }
                None => {
                    c.error = Some(r.err("EOF while parsing a list"));
                    return c;
                }
                Some(_) => {
                    c.error = Some(r.err("expected `,` or `]`"));
                    return c;
                }
            }
        }
    }

    fn intern(&mut self, s: Cow<'a, str>) -> u32 {
        if let Some(&i) = self.name_ix.get(s.as_ref()) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(s.clone());
        self.name_ix.insert(s, i);
        i
    }

    fn thread(&mut self, pid: Option<&'a str>, tid: Option<&'a str>) -> u32 {
        for &(p, t, i) in self.last_threads.iter().flatten() {
            if p == pid && t == tid {
                return i;
            }
        }
        let key = (id_text(pid), id_text(tid));
        let i = match self.thread_ix.get(&key) {
            Some(&i) => i,
            None => {
                let i = self.threads.len() as u32;
                self.threads.push(key.clone());
                self.thread_ix.insert(key, i);
                i
            }
        };
        self.last_threads[self.last_next] = Some((pid, tid, i));
        self.last_next = (self.last_next + 1) % self.last_threads.len();
        i
    }

    fn special(&mut self, s: Special<'a>) {
        self.specials.push((self.events.len(), s));
    }

    /// Takes one event.
    fn push(&mut self, ev: RawEvent<'a>) {
        let name = match ev.name_str {
            Some(s) => s.text(),
            None => ev.name.map(json::value_text).unwrap_or_default(),
        };
        let ph = ev.ph.map(|s| s.text());
        match ph.as_deref().unwrap_or("") {
            "X" => {
                let t = self.thread(ev.pid, ev.tid);
                let start = us_to_ns(ev.ts);
                let dur = us_to_ns(ev.dur).max(0);
                let cat = ev.cat.map(|c| c.text());
                if is_whole_trace(cat.as_deref()) {
                    return;
                }
                let track = classify(cat.as_deref(), &name);
                if track == Track::Step {
                    self.steps.extend(step_number(&name));
                }
                let detail = match ev.args {
                    Some(a) if is_empty_object(a) => NONE,
                    Some(a) => match push_raw(&mut self.arena, &mut self.spans, 0, a, track) {
                        Some(i) => i,
                        None => {
                            let d = if ev.args_members {
                                detail_from_members(
                                    track,
                                    a.len(),
                                    &mut self.members,
                                    &mut self.cache,
                                )
                            } else {
                                detail_of(track, a, &mut self.members, &mut self.cache)
                            };
                            self.details.push(d);
                            (self.details.len() - 1) as u32
                        }
                    },
                    None => NONE,
                };
                let name = self.intern(name);
                self.events.push(Event {
                    start,
                    dur,
                    name,
                    detail,
                    thread: t,
                    depth: 0,
                    track,
                });
            }
            "B" => {
                let t = self.thread(ev.pid, ev.tid);
                let start = us_to_ns(ev.ts);
                let n = self.intern(name);
                let cat = ev.cat.map(|c| c.text());
                self.special(Special::Begin(t, (start, n, ev.args, cat)));
            }
            "E" => {
                let t = self.thread(ev.pid, ev.tid);
                let end = us_to_ns(ev.ts);
                self.special(Special::End(t, end));
            }
            "i" | "I" if name == "[memory]" => {
                if ev.args.is_none() {
                    return;
                }
                let (mut bytes, mut addr, mut total, mut device) = (None, None, None, None);
                if ev.args_members {
                    // Of repeated keys the last wins, as in a map.
                    for (k, v) in &self.members {
                        match k.as_ref() {
                            "Bytes" => bytes = Some(*v),
                            "Addr" => addr = Some(*v),
                            "Total Allocated" => total = Some(*v),
                            "Device Type" => device = Some(*v),
                            _ => {}
                        }
                    }
                }
                let t = self.thread(ev.pid, ev.tid);
                self.mem_thread.push(t);
                // c10's DeviceType: 0 is the CPU.
                self.mem_host
                    .push(device.and_then(json::value_i64) == Some(HOST_DEVICE_TYPE));
                self.memory.push(MemEvent {
                    t: us_to_ns(ev.ts),
                    delta: bytes.and_then(json::value_i64).unwrap_or(0),
                    addr: addr.and_then(json::value_i64).unwrap_or(0) as u64,
                    op: NONE,
                    total: total.and_then(json::value_i64),
                });
            }
            "M" => {
                if !ev.args_members {
                    return;
                }
                let (mut label_name, mut labels) = (None, None);
                for (k, v) in &self.members {
                    match k.as_ref() {
                        "name" => label_name = Some(*v),
                        "labels" => labels = Some(*v),
                        _ => {}
                    }
                }
                let Some(label) = label_name.or(labels) else {
                    return;
                };
                let label = json::value_text(label).into_owned();
                match name.as_ref() {
                    // `process_labels` (`CPU`/`NPU`) labels a process; it is not its name.
                    "process_name" => self.special(Special::ProcessName(id_text(ev.pid), label)),
                    "thread_name" => {
                        self.special(Special::ThreadName(id_text(ev.pid), id_text(ev.tid), label))
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
}

/// Appends the concatenation of `parts` to `out`, each part written by a rayon task straight
/// into `out`'s spare capacity (no serial copy, and the new pages are faulted in on every
/// thread).
fn par_append<T, I>(out: &mut Vec<T>, parts: Vec<I>)
where
    T: Send,
    I: ExactSizeIterator<Item = T> + Send,
{
    let n: usize = parts.iter().map(ExactSizeIterator::len).sum();
    out.reserve(n);
    let mut rest = &mut out.spare_capacity_mut()[..n];
    let mut slots = Vec::with_capacity(parts.len());
    for part in &parts {
        let (a, b) = std::mem::take(&mut rest).split_at_mut(part.len());
        slots.push(a);
        rest = b;
    }
    slots.into_par_iter().zip(parts).for_each(|(slots, part)| {
        let mut written = 0;
        for (slot, v) in slots.iter_mut().zip(part) {
            slot.write(v);
            written += 1;
        }
        // A part shorter than its `len()` would leave slots unwritten.
        assert_eq!(
            written,
            slots.len(),
            "an iterator yielded fewer items than its len"
        );
    });
    let len = out.len() + n;
    // SAFETY: the `n` slots after the old length are the disjoint `slots` pieces, and each was
    // written in full (asserted above; a failed assertion panics out of `for_each` before
    // this line, leaving the length as it was). `len` is within the reserved capacity.
    unsafe { out.set_len(len) };
}

/// Whether a (validated) value's text is an empty object: its detail is empty.
fn is_empty_object(v: &str) -> bool {
    v.strip_prefix('{').is_some_and(|r| {
        r.trim_start_matches([' ', '\n', '\t', '\r'])
            .starts_with('}')
    })
}

/// Keeps `args` (a validated, non-empty value's text) as a raw detail in `arena` (number
/// `arena_ix`); returns the event's detail reference, or `None` when it is too long to keep
/// as text (or past what a span can address), to be decoded now.
fn push_raw(
    arena: &mut String,
    spans: &mut Vec<RawSpan>,
    arena_ix: u32,
    args: &str,
    track: Track,
) -> Option<u32> {
    let off = u32::try_from(arena.len()).ok()?;
    let len = u32::try_from(args.len()).ok()?;
    if args.len() > MAX_RAW_ARGS || off.checked_add(len).is_none() {
        return None;
    }
    let i = u32::try_from(spans.len())
        .ok()
        .filter(|&i| i < RAW_DETAIL)?;
    arena.push_str(args);
    spans.push(RawSpan {
        arena: arena_ix,
        off,
        len,
        track,
    });
    Some(RAW_DETAIL | i)
}

/// `ProfilerStep#12` -> 12.
fn step_number(name: &str) -> Option<u64> {
    name.strip_prefix("ProfilerStep#")
        .and_then(|s| s.parse().ok())
}

/// Merges chunks in order and applies what is known only at the end.
#[derive(Default)]
struct State<'a> {
    events: u64,
    threads: HashMap<(String, String), u32>,
    thread_pid: Vec<String>,
    process_names: HashMap<String, String>,
    thread_names: HashMap<(String, String), String>,
    open: HashMap<u32, Vec<OpenBegin<'a>>>,
    mem_thread: Vec<u32>,
    /// Per memory event: whether it is host (CPU) memory.
    mem_host: Vec<bool>,
    steps: Vec<u64>,
    base_ns: Option<u64>,
    dist_rank: Option<u32>,
    /// Job metadata from the top level (world size, trace id, host).
    meta: crate::model::JobMeta,
    members: Members<'a>,
    cache: Cache<'a>,
    /// The arena (in `p.raw_details`) of matched `B`/`E` events' raw details, once there is one.
    pair_arena: Option<u32>,
}

impl<'a> State<'a> {
    fn thread(&mut self, pid: &str, tid: &str) -> u32 {
        let key = (pid.to_string(), tid.to_string());
        if let Some(&t) = self.threads.get(&key) {
            return t;
        }
        let t = self.thread_pid.len() as u32;
        self.thread_pid.push(key.0.clone());
        self.threads.insert(key, t);
        t
    }

    /// Appends a chunk's events to `p` (numbering its names, threads and details globally).
    fn merge(&mut self, mut c: Chunk<'a>, p: &mut Profile) {
        let tmap: Vec<u32> = c.threads.iter().map(|(a, b)| self.thread(a, b)).collect();
        let nmap: Vec<u32> = c.names.iter().map(|n| p.intern(n)).collect();
        let dbase = p.details.len() as u32;
        p.details.extend(c.details);
        let raw = &mut p.raw_details;
        let sbase = raw.spans.len() as u32;
        // Past what a reference can address: decoded now (not reached under the event limit).
        let fits = (sbase as usize + c.spans.len()) < RAW_DETAIL as usize;
        if !c.spans.is_empty() && fits {
            let a = raw.arenas.len() as u32;
            raw.arenas.push(std::mem::take(&mut c.arena));
            raw.spans
                .extend(c.spans.iter().map(|s| RawSpan { arena: a, ..*s }));
        }
        let detail = |d: u32, p: &mut Profile| {
            if d == NONE {
                NONE
            } else if d & RAW_DETAIL == 0 {
                d + dbase
            } else if fits {
                d + sbase
            } else {
                let s = c.spans[(d & !RAW_DETAIL) as usize];
                let text = &c.arena[s.off as usize..(s.off + s.len) as usize];
                p.add_detail(detail_of_text(s.track, text))
            }
        };
        let remap = |e: &Event, p: &mut Profile| Event {
            name: nmap[e.name as usize],
            thread: tmap[e.thread as usize],
            detail: detail(e.detail, p),
            ..*e
        };
        let mut done = 0;
        for (at, s) in c.specials {
            for e in &c.events[done..at] {
                let e = remap(e, p);
                p.events.push(e);
            }
            done = at;
            match s {
                Special::Begin(t, (start, n, args, cat)) => {
                    self.open.entry(tmap[t as usize]).or_default().push((
                        start,
                        nmap[n as usize],
                        args,
                        cat,
                    ));
                }
                Special::End(t, end) => {
                    let t = tmap[t as usize];
                    if let Some((start, n, args, cat)) = self.open.get_mut(&t).and_then(|v| v.pop())
                    {
                        self.end_event(p, t, n, cat.as_deref(), start, (end - start).max(0), args);
                    }
                }
                Special::ProcessName(pid, label) => {
                    self.process_names.insert(pid.into_owned(), label);
                }
                Special::ThreadName(pid, tid, label) => {
                    self.thread_names
                        .insert((pid.into_owned(), tid.into_owned()), label);
                }
            }
        }
        for e in &c.events[done..] {
            let e = remap(e, p);
            p.events.push(e);
        }
        p.memory.extend(c.memory);
        self.mem_thread
            .extend(c.mem_thread.iter().map(|&t| tmap[t as usize]));
        self.mem_host.extend(c.mem_host);
        self.steps.extend(c.steps);
    }

    /// [`State::merge`] of all chunks at once, for chunks without `B`/`E` events and with raw
    /// details that fit a reference: the numbering is done in order, the copying (events,
    /// memory events, raw detail spans) in parallel into the sized vectors.
    fn merge_parallel(&mut self, mut chunks: Vec<Chunk<'a>>, p: &mut Profile) {
        struct Map {
            names: Vec<u32>,
            threads: Vec<u32>,
            details: u32,
            spans: u32,
            arena: u32,
        }
        let mut maps = Vec::with_capacity(chunks.len());
        // Where each chunk's events, memory events and spans start in the new ones.
        let (mut ev_at, mut mem_at, mut span_at) = (vec![0], vec![0], vec![0]);
        let span_base = p.raw_details.spans.len();
        for c in &mut chunks {
            let threads: Vec<u32> = c.threads.iter().map(|(a, b)| self.thread(a, b)).collect();
            let names: Vec<u32> = c.names.iter().map(|n| p.intern(n)).collect();
            let details = p.details.len() as u32;
            p.details.append(&mut c.details);
            let arena = p.raw_details.arenas.len() as u32;
            if !c.spans.is_empty() {
                p.raw_details.arenas.push(std::mem::take(&mut c.arena));
            }
            for (_, s) in std::mem::take(&mut c.specials) {
                match s {
                    Special::ProcessName(pid, label) => {
                        self.process_names.insert(pid.into_owned(), label);
                    }
                    Special::ThreadName(pid, tid, label) => {
                        self.thread_names
                            .insert((pid.into_owned(), tid.into_owned()), label);
                    }
                    Special::Begin(..) | Special::End(..) => unreachable!("merged one by one"),
                }
            }
            self.steps.append(&mut c.steps);
            maps.push(Map {
                names,
                threads,
                details,
                spans: (span_base + span_at.last().expect("non-empty")) as u32,
                arena,
            });
            ev_at.push(ev_at.last().expect("non-empty") + c.events.len());
            mem_at.push(mem_at.last().expect("non-empty") + c.memory.len());
            span_at.push(span_at.last().expect("non-empty") + c.spans.len());
        }
        let chunks = &chunks;
        let maps = &maps;
        par_append(
            &mut p.events,
            (0..chunks.len())
                .map(|k| {
                    let m = &maps[k];
                    chunks[k].events.iter().map(move |e| Event {
                        name: m.names[e.name as usize],
                        thread: m.threads[e.thread as usize],
                        detail: if e.detail == NONE {
                            NONE
                        } else if e.detail & RAW_DETAIL == 0 {
                            e.detail + m.details
                        } else {
                            e.detail + m.spans
                        },
                        ..*e
                    })
                })
                .collect(),
        );
        par_append(
            &mut p.raw_details.spans,
            (0..chunks.len())
                .map(|k| {
                    let arena = maps[k].arena;
                    chunks[k].spans.iter().map(move |s| RawSpan { arena, ..*s })
                })
                .collect(),
        );
        par_append(
            &mut p.memory,
            chunks.iter().map(|c| c.memory.iter().copied()).collect(),
        );
        par_append(
            &mut self.mem_host,
            chunks.iter().map(|c| c.mem_host.iter().copied()).collect(),
        );
        par_append(
            &mut self.mem_thread,
            (0..chunks.len())
                .map(|k| {
                    let m = &maps[k];
                    chunks[k]
                        .mem_thread
                        .iter()
                        .map(move |&t| m.threads[t as usize])
                })
                .collect(),
        );
    }

    /// The event of a matched `B`/`E` pair.
    #[allow(clippy::too_many_arguments)]
    fn end_event(
        &mut self,
        p: &mut Profile,
        thread: u32,
        name: u32,
        cat: Option<&str>,
        start: i64,
        dur: i64,
        args: Option<&'a str>,
    ) {
        if is_whole_trace(cat) {
            return;
        }
        let track = classify(cat, p.str(name));
        if track == Track::Step {
            self.steps.extend(step_number(p.str(name)));
        }
        let detail = match args {
            Some(a) if is_empty_object(a) => NONE,
            Some(a) => {
                let raw = &mut p.raw_details;
                let ix = *self.pair_arena.get_or_insert_with(|| {
                    raw.arenas.push(String::new());
                    (raw.arenas.len() - 1) as u32
                });
                let RawDetails { arenas, spans } = raw;
                match push_raw(&mut arenas[ix as usize], spans, ix, a, track) {
                    Some(i) => i,
                    None => {
                        let d = detail_of(track, a, &mut self.members, &mut self.cache);
                        p.add_detail(d)
                    }
                }
            }
            None => NONE,
        };
        p.events.push(Event {
            start,
            dur,
            name,
            detail,
            thread,
            depth: 0,
            track,
        });
    }

    /// Applies what is known only at the end: process names (Ascend's device processes),
    /// thread names, memory attribution, the rank and the time base.
    fn finish(self, p: &mut Profile) {
        let State {
            threads,
            thread_pid,
            process_names,
            thread_names,
            mem_thread,
            mem_host,
            steps,
            base_ns,
            dist_rank,
            meta,
            ..
        } = self;
        let proc_of: Vec<&str> = thread_pid
            .iter()
            .map(|pid| process_names.get(pid).map(String::as_str).unwrap_or(""))
            .collect();
        let mut tid_of = vec![""; thread_pid.len()];
        for ((pid, tid), t) in &threads {
            tid_of[*t as usize] = thread_names
                .get(&(pid.clone(), tid.clone()))
                .map(String::as_str)
                .unwrap_or("");
        }
        crate::processes::apply(
            &mut p.events,
            &p.strings,
            |t| proc_of.get(t as usize).copied().unwrap_or(""),
            |t| tid_of.get(t as usize).copied().unwrap_or(""),
        );
        if let Some(pid) = p
            .events
            .iter()
            .find(|e| matches!(e.track, Track::Op | Track::Step))
            .and_then(|e| thread_pid.get(e.thread as usize))
        {
            p.meta.pid = Some(pid.clone());
        }
        let mut names = vec![String::new(); thread_pid.len()];
        for ((pid, tid), t) in &threads {
            let proc_name = process_names
                .get(pid)
                .cloned()
                .unwrap_or_else(|| format!("pid {pid}"));
            let th = thread_names
                .get(&(pid.clone(), tid.clone()))
                .cloned()
                .unwrap_or_else(|| format!("tid {tid}"));
            names[*t as usize] = format!("{proc_name} / {th}");
        }
        p.threads = names;
        p.origin_ns = base_ns.unwrap_or(0);
        if let Some(r) = dist_rank {
            p.rank = r;
        }
        p.steps.extend(steps);
        p.steps.sort_unstable();
        p.steps.dedup();
        attribute_memory(p, &mem_thread);
        split_host_memory(p, &mem_host);
        let m = &mut p.meta;
        m.world_size = meta.world_size.or(m.world_size);
        m.trace_id = meta.trace_id.or(m.trace_id.take());
        m.host = meta.host.or(m.host.take());
        p.sort();
    }
}

/// Moves the memory events marked as host (CPU) memory into [`Profile::host_memory`].
pub(crate) fn split_host_memory(p: &mut Profile, host: &[bool]) {
    if !host.iter().any(|&h| h) {
        return;
    }
    let all = std::mem::take(&mut p.memory);
    for (m, &h) in all
        .into_iter()
        .zip(host.iter().chain(std::iter::repeat(&false)))
    {
        if h {
            p.host_memory.push(m);
        } else {
            p.memory.push(m);
        }
    }
}

fn limit(path: &Path, what: &'static str, limit: u64) -> ReportError {
    ReportError::Limit {
        path: path.to_path_buf(),
        what,
        limit,
    }
}

/// `..._rank3.pt.trace.json` / `rank_3` -> 3.
fn rank_from_file_name(path: &Path) -> Option<u32> {
    let name = path.file_name()?.to_str()?;
    let i = name.find("rank")? + 4;
    let digits: String = name[i..]
        .trim_start_matches(['_', '-'])
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits.parse().ok()
}

/// A reader that fails once more than `left` bytes were read.
struct Capped<R> {
    inner: R,
    left: u64,
    hit: bool,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n as u64 > self.left {
            self.hit = true;
            return Err(std::io::Error::other("input size limit reached"));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// Sets each memory event's op to the innermost host op open on its thread at that time
/// (the lookups run in parallel).
fn attribute_memory(p: &mut Profile, mem_thread: &[u32]) {
    let mut ops: FxHashMap<u32, Vec<(i64, i64, u32)>> = FxHashMap::default();
    for e in p.events.iter().filter(|e| e.track == Track::Op) {
        ops.entry(e.thread)
            .or_default()
            .push((e.start, e.end(), e.name));
    }
    ops.par_iter_mut().for_each(|(_, v)| v.sort_unstable());
    // In pieces: memory events come in time order, so within a piece the next event's
    // partition point is usually a few ops past the previous one (walked to, not searched).
    p.memory
        .par_chunks_mut(4096)
        .zip(mem_thread.par_chunks(4096))
        .for_each(|(ms, ts)| {
            let mut last: Option<(u32, i64, usize)> = None;
            for (m, &t) in ms.iter_mut().zip(ts) {
                let Some(v) = ops.get(&t) else { continue };
                let i = match last {
                    Some((lt, lm, li)) if lt == t && lm <= m.t => {
                        // `partition_point` of everything up to `lm`, so the answer is at
                        // or after `li`.
                        let mut i = li;
                        let mut steps = 0;
                        while i < v.len() && v[i].0 <= m.t {
                            i += 1;
                            steps += 1;
                            if steps == 16 {
                                i += v[i..].partition_point(|o| o.0 <= m.t);
                                break;
                            }
                        }
                        i
                    }
                    _ => v.partition_point(|o| o.0 <= m.t),
                };
                last = Some((t, m.t, i));
                attribute_one(m, &v[..i]);
            }
        });
}

/// Sets `m.op` to the innermost of `before` (ops starting at or before it, sorted) still open
/// at its time.
#[inline]
fn attribute_one(m: &mut MemEvent, before: &[(i64, i64, u32)]) {
    m.op = before
        .iter()
        .rev()
        .take(256)
        .find(|o| o.1 >= m.t)
        .map(|o| o.2)
        .unwrap_or(NONE);
}

/// c10's `DeviceType` of the CPU, as written in `[memory]` events' `Device Type`.
const HOST_DEVICE_TYPE: i64 = 0;

/// Whether an event is the profiler's own whole-trace span (category `Trace`, e.g.
/// `PyTorch Profiler (0)`): not an op, and dropped so it does not squeeze the timeline.
pub(crate) fn is_whole_trace(cat: Option<&str>) -> bool {
    cat.is_some_and(|c| c.eq_ignore_ascii_case("trace"))
}

/// Track of an event from its category and name. Categories are matched case-insensitively,
/// with every kineto schema's names: current (`cpu_op`, `kernel`, `gpu_memcpy`, `cuda_runtime`,
/// ...) and 2021's (`Operator`, `Kernel`, `Memcpy`, `Memset`, `Runtime`). `ProfilerStep#N`
/// is a step whatever its category (torch_npu writes it as a `cpu_op`).
pub fn classify(cat: Option<&str>, name: &str) -> Track {
    let cat = cat.unwrap_or("");
    // Today's names first, as written (the common case: no case folding).
    match cat {
        "kernel" => return kernel_track(name),
        "cpu_op" => return op_track(name),
        "cuda_runtime" | "cuda_driver" => return Track::Api,
        "gpu_memcpy" | "gpu_memset" => return Track::Memcpy,
        _ => {}
    }
    let is = |c: &str| cat.eq_ignore_ascii_case(c);
    if name.starts_with("ProfilerStep#") && !is_device_category(cat) {
        Track::Step
    } else if is("cpu_op") || is("operator") {
        Track::Op
    } else if is("user_annotation") {
        if ROLE_CALLS.contains(&name) {
            Track::RoleCall
        } else if PHASES.contains(&name) {
            Track::Phase
        } else {
            Track::User
        }
    } else if is("cuda_runtime") || is("cuda_driver") || is("runtime") || is("driver") {
        Track::Api
    } else if is("kernel") {
        kernel_track(name)
    } else if is("gpu_memcpy") || is("gpu_memset") || is("memcpy") || is("memset") {
        Track::Memcpy
    } else if is("python_function") || is("python") {
        Track::Span
    } else {
        Track::User
    }
}

/// A kernel: a collective by name, else a compute kernel.
fn kernel_track(name: &str) -> Track {
    if is_comm_name(name) {
        Track::Comm
    } else {
        Track::Kernel
    }
}

/// A host op, or the step when it is `ProfilerStep#N` (torch_npu writes steps as `cpu_op`).
fn op_track(name: &str) -> Track {
    if name.starts_with("ProfilerStep#") {
        Track::Step
    } else {
        Track::Op
    }
}

/// Categories of device activity (a `ProfilerStep#N` there is the step's GPU-side mirror,
/// `gpu_user_annotation`, not the step).
fn is_device_category(cat: &str) -> bool {
    [
        "kernel",
        "gpu_memcpy",
        "gpu_memset",
        "memcpy",
        "memset",
        "gpu_user_annotation",
    ]
    .iter()
    .any(|c| cat.eq_ignore_ascii_case(c))
}

/// NCCL/HCCL collectives by name (`nccl*`, `hcom*`, `hccl*`, `lccl*`, `lcoc*`, or `allreduce`
/// anywhere, case-insensitive).
pub(crate) fn is_comm_name(name: &str) -> bool {
    // Case-insensitive without lower-casing a copy (this runs for every kernel).
    let b = name.as_bytes();
    let starts = |p: &[u8]| b.len() >= p.len() && b[..p.len()].eq_ignore_ascii_case(p);
    starts(b"nccl")
        || starts(b"hcom")
        || starts(b"hccl")
        || starts(b"lccl")
        || starts(b"lcoc")
        || b.windows(9).any(|w| w.eq_ignore_ascii_case(b"allreduce"))
}

/// [`detail_of`] on a parsed value (the reference the raw-text path is tested against).
#[cfg(test)]
fn detail_of_value(track: Track, args: serde_json::Value) -> Detail {
    let serde_json::Value::Object(mut m) = args else {
        return Detail {
            args: Some(clip(value_text_of(&args))),
            ..Detail::default()
        };
    };
    let mut take = |k: &str| m.remove(k).map(|v| clip(value_text_of(&v)));
    let mut d = Detail {
        shapes: take("Input Dims"),
        dtypes: take("Input type"),
        stack: take("Call stack"),
        module: take("Module Hierarchy"),
        ..Detail::default()
    };
    if track == Track::Comm {
        let n = m.get("In msg nelems").and_then(value_i64_of);
        let size = m
            .get("dtype")
            .map(value_text_of)
            .and_then(|t| dtype_size(&t));
        d.bytes = n.zip(size).map(|(n, s)| n.max(0) as u64 * s);
        d.group = m.get("Process Group Name").map(value_text_of);
    }
    if !m.is_empty() {
        d.args = Some(clip(serde_json::Value::Object(m).to_string()));
    }
    d
}

/// [`detail_of`] with scratch space of its own: decodes a raw detail
/// ([`crate::model::RawDetails`]) when it is shown.
pub(crate) fn detail_of_text(track: Track, args: &str) -> Detail {
    detail_of(track, args, &mut Members::new(), &mut Cache::default())
}

/// The detail of an event from its raw `args` text: the shown keys decoded, the rest kept as
/// compact JSON text with sorted keys (what serde_json's map gives), each clipped to
/// [`MAX_ARGS_TEXT`]. `members` is scratch space.
fn detail_of<'a>(
    track: Track,
    args: &'a str,
    members: &mut Members<'a>,
    cache: &mut Cache<'a>,
) -> Detail {
    if !args.starts_with('{') {
        return Detail {
            args: Some(clip(json::value_text(args).into_owned())),
            ..Detail::default()
        };
    }
    members.clear();
    if Reader::new(args, 0)
        .members(|k, v| members.push((k.text(), v)))
        .is_err()
    {
        // Not reached: the text was validated by the same reader when the event was read.
        debug_assert!(false, "validated args did not re-read: {args}");
        return Detail::default();
    }
    detail_from_members(track, args.len(), members, cache)
}

/// [`detail_of`] on the members of an `args` object (`len`: its text's length).
fn detail_from_members<'a>(
    track: Track,
    len: usize,
    members: &mut Members<'a>,
    cache: &mut Cache<'a>,
) -> Detail {
    if cache.len() > 4096 {
        cache.clear();
    }
    if !members.is_sorted_by(|a, b| a.0 <= b.0) {
        members.sort_by(|a, b| a.0.cmp(&b.0));
    }
    // Of equal keys the last one written wins, as in a map.
    members.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            std::mem::swap(later, kept);
        }
        same
    });
    let mut d = Detail::default();
    let (mut nelems, mut dtype, mut group) = (None, None, None);
    let mut taken = 0;
    for (k, v) in members.iter() {
        let slot = match k.as_ref() {
            "Input Dims" => &mut d.shapes,
            "Input type" => &mut d.dtypes,
            "Call stack" => &mut d.stack,
            "Module Hierarchy" => &mut d.module,
            "In msg nelems" => {
                nelems = Some(*v);
                continue;
            }
            "dtype" => {
                dtype = Some(*v);
                continue;
            }
            "Process Group Name" => {
                group = Some(*v);
                continue;
            }
            _ => continue,
        };
        *slot = Some(clip(if v.starts_with('[') {
            compact_cached(v, cache).to_string()
        } else {
            json::value_text(v).into_owned()
        }));
        taken += 1;
    }
    if track == Track::Comm {
        let n = nelems.and_then(json::value_i64);
        let size = dtype.map(json::value_text).and_then(|t| dtype_size(&t));
        d.bytes = n.zip(size).map(|(n, s)| n.max(0) as u64 * s);
        d.group = group.map(|v| json::value_text(v).into_owned());
    }
    if members.len() > taken {
        let mut s = String::with_capacity(len);
        s.push('{');
        for (k, v) in members.iter() {
            if matches!(
                k.as_ref(),
                "Input Dims" | "Input type" | "Call stack" | "Module Hierarchy"
            ) {
                continue;
            }
            if s.len() > 1 {
                s.push(',');
            }
            if k.bytes().any(|c| c == b'"' || c == b'\\' || c < 0x20) {
                s.push_str(&serde_json::Value::from(k.as_ref()).to_string());
            } else {
                s.push('"');
                s.push_str(k);
                s.push('"');
            }
            s.push(':');
            if v.starts_with('[') {
                s.push_str(compact_cached(v, cache));
            } else {
                json::compact(v, &mut s);
            }
        }
        s.push('}');
        d.args = Some(clip(s));
    }
    d
}

fn dtype_size(t: &str) -> Option<u64> {
    Some(match t {
        "Float" | "Int" | "float32" | "int32" => 4,
        "Half" | "BFloat16" | "Short" | "float16" | "bfloat16" => 2,
        "Double" | "Long" | "float64" | "int64" => 8,
        "Byte" | "Char" | "Bool" | "uint8" | "int8" => 1,
        _ => return None,
    })
}

fn clip(mut s: String) -> String {
    if s.len() > MAX_ARGS_TEXT {
        let mut cut = MAX_ARGS_TEXT;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("… (truncated)");
    }
    s
}

#[cfg(test)]
fn value_text_of(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
fn value_i64_of(v: &serde_json::Value) -> Option<i64> {
    v.as_i64()
        .or_else(|| v.as_f64().map(|f| f as i64))
        .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
}

/// A pid/tid as text (empty when absent).
fn id_text(v: Option<&str>) -> Cow<'_, str> {
    v.map(json::value_text).unwrap_or_default()
}

/// Microseconds (number or numeric string) to nanoseconds.
#[inline]
fn us_to_ns(v: Option<&str>) -> i64 {
    let us = match v.and_then(|v| v.as_bytes().first().map(|c| (c, v))) {
        Some((b'"', v)) => json::value_text(v).trim().parse().unwrap_or(0.0),
        Some((b'-' | b'0'..=b'9', v)) => {
            if let Some(ns) = decimal_us_to_ns(v) {
                return ns;
            }
            json::number_f64(v).unwrap_or(0.0)
        }
        _ => 0.0,
    };
    (us * 1000.0).round() as i64
}

/// [`us_to_ns`] of a number token in integer arithmetic, for the common case that gives the
/// same result: no exponent, at most 3 decimals, under 2^50 ns. (The float path divides the
/// digits by 10^decimals once, exactly rounded, and multiplies by 1000, rounded again: a
/// relative error under 2^-52, so under 0.25 ns below 2^50 ns, and the exact value is an
/// integer, which rounding then gives back.)
#[inline]
fn decimal_us_to_ns(tok: &str) -> Option<i64> {
    const MAX: u64 = 1 << 50;
    let (neg, body) = match tok.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, tok),
    };
    let (mut int, mut frac, mut decimals, mut dot) = (0u64, 0u64, 0u32, false);
    for c in body.bytes() {
        match c {
            b'0'..=b'9' if dot => {
                decimals += 1;
                if decimals > 3 {
                    return None;
                }
                frac = frac * 10 + (c - b'0') as u64;
            }
            b'0'..=b'9' => {
                int = int * 10 + (c - b'0') as u64;
                if int >= MAX / 1000 {
                    return None;
                }
            }
            b'.' => dot = true,
            _ => return None,
        }
    }
    let ns = int * 1000 + frac * 10u64.pow(3 - decimals);
    let ns = ns as i64;
    Some(if neg { -ns } else { ns })
}

#[cfg(test)]
mod tests {
    //! The hand-written reader against serde_json: the old serde_json loader
    //! (`chrome_reference.rs`) plus `serde_json::Value` (which bounds nesting, checks surrogates
    //! and number range everywhere) must accept exactly the documents this loader accepts, and
    //! build the same profile from them.
    use super::*;
    use crate::model::SourceFormat;

    type View = (
        Vec<(Track, String, i64, i64, String, Option<Detail>)>,
        Vec<(i64, i64, u64, String, Option<i64>)>,
        Vec<String>,
        Vec<u64>,
        u64,
        u32,
    );

    fn view(p: &Profile) -> View {
        let events = p
            .events
            .iter()
            .map(|e| {
                (
                    e.track,
                    p.str(e.name).to_string(),
                    e.start,
                    e.dur,
                    p.threads[e.thread as usize].clone(),
                    p.detail(e).map(Cow::into_owned),
                )
            })
            .collect();
        let memory = p
            .memory
            .iter()
            .map(|m| (m.t, m.delta, m.addr, p.str(m.op).to_string(), m.total))
            .collect();
        (
            events,
            memory,
            p.threads.clone(),
            p.steps.clone(),
            p.origin_ns,
            p.rank,
        )
    }

    fn profile() -> Profile {
        Profile::new("t.json".into(), SourceFormat::TorchTrace, 0, "g".into())
    }

    fn ours(doc: &str, max_events: u64) -> Result<View, String> {
        let mut p = profile();
        let limits = Limits {
            max_bytes: 1 << 30,
            max_events,
        };
        read_text(doc, Path::new("t.json"), &mut p, &limits)
            .map(|()| view(&p))
            .map_err(|e| e.to_string())
    }

    fn reference(doc: &str, max_events: u64) -> Result<View, String> {
        serde_json::from_str::<serde_json::Value>(doc).map_err(|e| e.to_string())?;
        let mut p = profile();
        crate::chrome_reference::read_text(doc, &mut p, max_events)?;
        Ok(view(&p))
    }

    /// Checks one document; returns whether it was accepted.
    fn check(doc: &str) -> bool {
        let want = reference(doc, u64::MAX);
        let got = ours(doc, u64::MAX);
        match (&want, &got) {
            (Ok(w), Ok(g)) => {
                assert_eq!(g, w, "{doc}");
                true
            }
            (Err(_), Err(_)) => false,
            _ => panic!("{doc}\nserde_json: {want:?}\nours: {got:?}"),
        }
    }

    const EV: &str = r#"{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":2,"ts":10.5,"dur":3,"args":{"Input Dims":[[4, 8], [8, 16]],"Input type":["float32","float32"],"External id":7}}"#;

    fn corpus() -> Vec<String> {
        let wrap = |evs: &str| format!(r#"{{"traceEvents":[{evs}]}}"#);
        let mut v: Vec<String> = [
            EV,
            r#"{"ph":"X","cat":"user_annotation","name":"ProfilerStep#3","pid":"1","tid":"2","ts":"5","dur":"100"}"#,
            r#"{"ph":"X","cat":"kernel","name":"ncclAllReduce","pid":0,"tid":7,"ts":1,"dur":2,"args":{"In msg nelems":262144,"dtype":"Float","Process Group Name":"0","z":null,"a":[1,2.50,-0,1e3]}}"#,
            r#"{"ph":"B","cat":"user_annotation","name":"generate_sequences","pid":1,"tid":1,"ts":0,"args":{"k":"v"}},{"ph":"E","pid":1,"tid":1,"ts":50}"#,
            r#"{"ph":"E","pid":1,"tid":9,"ts":50}"#,
            r#"{"ph":"i","name":"[memory]","pid":1,"tid":2,"ts":11,"args":{"Bytes":4096,"Addr":123,"Total Allocated":8192}},{"ph":"i","name":"[memory]","pid":1,"tid":2,"ts":12,"args":{"Bytes":-4096,"Addr":"123","Total Allocated":4096.7}}"#,
            r#"{"ph":"i","name":"[memory]","pid":1,"tid":2,"ts":12}"#,
            r#"{"ph":"I","name":"[memory]","pid":1,"tid":2,"ts":12,"args":[1]}"#,
            r#"{"ph":"M","name":"process_name","pid":5,"args":{"name":"Ascend Hardware"}},{"ph":"X","name":"MatMul","pid":5,"tid":1,"ts":1,"dur":1},{"ph":"M","name":"thread_name","pid":5,"tid":1,"args":{"labels":"stream 1"}}"#,
            r#"{"ph":"M","name":"process_name","pid":6,"args":{"name":"Overlap Analysis"}},{"ph":"X","name":"Computing","pid":6,"tid":1,"ts":1,"dur":1}"#,
            r#"["X","pos_name","cpu_op",1,2,3,4,{"Call stack":"a;b"}]"#,
            r#"["X","pos_name"]"#,
            r#"["X","n","c",1,2,3,4,{},5]"#,
            r#"{"p\u0068":"X","name":"esc\"aped\\ \u00e9 \ud83d\ude00 <script>","pid":1,"tid":1,"ts":1,"dur":1,"args":{"k\"ey":"v\u0041\/","Module Hierarchy":"a\nb"}}"#,
            r#"{"ph":"X","name":"中文 é 😀","pid":1,"tid":1,"ts":1,"dur":1,"args":"just text"}"#,
            r#"{"ph":"X","name":12,"pid":1.5,"tid":-0,"ts":1e3,"dur":-5,"args":[1,{"b":2,"a":1}]}"#,
            r#"{"ph":"X","name":null,"cat":null,"pid":null,"ts":null,"args":null}"#,
            r#"{"ph":"X","name":"dup","ph":"X"}"#,
            r#"{"ph":1,"name":"bad ph"}"#,
            r#"{"ph":"X","cat":["x"],"name":"bad cat"}"#,
            r#"{"ph":"X","name":"x","unknown":{"deep":[1,{"x":[]}]},"args":{"dup":1,"dup":2}}"#,
            r#"{"ph":"X","name":"x","args":{"n":1e400}}"#,
            r#"{"ph":"X","name":"x","ignored":1e400}"#,
            r#"{"ph":"X","name":"\ud800"}"#,
            r#"{"ph":"X","name":"x","ignored":"\ud800"}"#,
            r#"{"ph":"X","name":"ctl	tab"}"#,
            r#"1"#,
            r#"null"#,
            r#"{"ph":"X","name":"a"},"#,
            r#"{"ph":"X","name":"a"} {"ph":"X","name":"b"}"#,
            r#"{"ph":"X","name":"a",}"#,
            r#"{"ph":"X","name":"long","args":{"Call stack":"LONG"}}"#,
            // Raw details: too long to keep as text (decoded while loading), empty objects
            // with whitespace, `ph` after `args`, a `B`/`E` pair's, and a track re-assigned
            // after reading (the detail is what the track read gave).
            r#"{"ph":"X","name":"huge","args":{"Call stack":"HUGE","k":[1, 2]}}"#,
            r#"{"ph":"X","name":"huge text","args":"HUGE"}"#,
            r#"{"ph":"B","name":"huge pair","pid":1,"tid":1,"ts":0,"args":{"Input Dims":"HUGE","z":1}},{"ph":"E","pid":1,"tid":1,"ts":5}"#,
            r#"{"ph":"X","name":"empty","args":{ 	 }},{"ph":"B","name":"empty pair","pid":1,"tid":1,"ts":0,"args":{ }},{"ph":"E","pid":1,"tid":1,"ts":5}"#,
            r#"{"name":"late ph","args":{"Module Hierarchy":"m","x":[ 1 ]},"ph":"X"},{"name":"[memory]","args":{"Bytes":4,"Addr":9},"ph":"i","pid":1,"tid":2,"ts":1}"#,
            r#"{"ph":"B","name":"p1","pid":1,"tid":1,"ts":0,"args":{"a":1}},{"ph":"B","name":"p2","pid":1,"tid":1,"ts":1,"args":[2]},{"ph":"E","pid":1,"tid":1,"ts":2},{"ph":"X","name":"between","args":{"b":2}},{"ph":"E","pid":1,"tid":1,"ts":3}"#,
            r#"{"ph":"M","name":"process_name","pid":5,"args":{"name":"Communication"}},{"ph":"X","name":"hcom_allReduce_","pid":5,"tid":1,"ts":1,"dur":1,"args":{"In msg nelems":4,"dtype":"Float","Process Group Name":"g"}}"#,
            "",
        ]
        .iter()
        .map(|e| {
            wrap(
                &e.replace("LONG", &"x".repeat(5000))
                    .replace("HUGE", &"y".repeat(MAX_RAW_ARGS)),
            )
        })
        .collect();
        v.extend(
            [
                r#"[]"#,
                r#"{}"#,
                r#"{"traceEvents":[]}"#,
                r#"{"traceEvents":{}}"#,
                r#"{"traceEvents":null}"#,
                r#"{"other":1}"#,
                r#"{"traceEvents":[EV],"traceEvents":[EV]}"#,
                r#"{"distributedInfo":{"rank":3,"x":[1]},"traceEvents":[EV],"baseTimeNanoseconds":1700000000000000000}"#,
                r#"{"traceEvents":[EV],"baseTimeNanoseconds":null}"#,
                r#"{"traceEvents":[EV],"baseTimeNanoseconds":-1}"#,
                r#"{"traceEvents":[EV],"baseTimeNanoseconds":1.5}"#,
                r#"{"traceEvents":[EV],"baseTimeNanoseconds":"1"}"#,
                r#"{"traceEvents":[EV],"baseTimeNanoseconds":18446744073709551616}"#,
                r#"{"traceEvents":[EV]} x"#,
                r#"{"traceEvents":[EV]}  "#,
                r#"{"traceEvents":[EV],}"#,
                r#"{"traceEvents":[EV]"#,
                r#"{"traceEvents":[EV"#,
                r#"[EV,EV]"#,
                " \n[ EV ,\n EV ] \n",
                r#"{"traceEvents":[EV],"deviceProperties":[{"a":1},{"b":2}]}"#,
                r#"{"traceEvents":[EV],"ignored":"\ud800"}"#,
                r#"{"traceEvents":[EV],"ignored":1e999}"#,
            ]
            .iter()
            .map(|d| d.replace("EV", EV)),
        );
        for depth in [120, 124, 125, 126, 127, 200] {
            let nest = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
            v.push(format!(
                r#"{{"traceEvents":[{{"ph":"X","name":"a","args":{nest}}}]}}"#
            ));
            v.push(format!(
                r#"{{"traceEvents":[{{"ph":"X","name":"a","ignored":{nest}}}]}}"#
            ));
            v.push(format!(r#"{{"traceEvents":[EV],"x":{nest}}}"#).replace("EV", EV));
        }
        let whole = wrap(&[EV; 3].join(","));
        for cut in (0..whole.len()).step_by(7) {
            v.push(whole[..cut].to_string());
        }
        v
    }

    #[test]
    fn accepts_rejects_and_loads_like_the_serde_json_loader() {
        let docs = corpus();
        let accepted = docs.iter().filter(|d| check(d)).count();
        // Both kinds are well represented.
        assert!(
            accepted >= 30 && docs.len() - accepted >= 60,
            "{accepted} of {}",
            docs.len()
        );
    }

    /// The checked-in PyTorch traces (hand-written and real, plain and gzipped).
    #[test]
    fn the_test_traces_load_like_the_serde_json_loader() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
        let mut n = 0;
        for sub in ["torch", "torch_real"] {
            for f in std::fs::read_dir(dir.join(sub)).unwrap() {
                let f = f.unwrap().path();
                let mut text = String::new();
                let file = std::fs::File::open(&f).unwrap();
                if f.extension().is_some_and(|e| e == "gz") {
                    flate2::read::MultiGzDecoder::new(file).read_to_string(&mut text)
                } else {
                    std::io::BufReader::new(file).read_to_string(&mut text)
                }
                .unwrap();
                let want = reference(&text, u64::MAX).unwrap();
                assert!(!want.0.is_empty());
                assert_eq!(ours(&text, u64::MAX).unwrap(), want, "{}", f.display());
                n += 1;
            }
        }
        assert!(n >= 4);
    }

    #[test]
    fn the_event_limit_counts_like_the_serde_json_loader() {
        let doc = format!(r#"{{"traceEvents":[{}]}}"#, [EV; 10].join(","));
        for max in [0, 5, 9, 10, 11] {
            let want = reference(&doc, max).is_ok();
            let got = ours(&doc, max);
            assert_eq!(got.is_ok(), want, "{max}: {got:?}");
            if let Err(e) = got {
                assert!(
                    e.contains(&format!("events exceeds the limit of {max}")),
                    "{e}"
                );
            }
        }
    }

    /// A trace of several MB whose strings are full of `,{"` (false event boundaries), parsed
    /// in chunks on 4 threads: the same profile as the sequential serde_json loader.
    #[test]
    fn chunked_parallel_parse_equals_the_sequential_one() {
        let fake = r#",{\"ph\":\"X\",\"name\":\"fake\"},{\"x\":1}"#.repeat(2000);
        let mut evs = Vec::new();
        for i in 0..30_000u32 {
            let name = if i % 997 == 0 {
                format!("trap{fake}")
            } else {
                format!("op{}", i % 13)
            };
            evs.push(format!(
                r#"{{"ph":"X","cat":"{}","name":"{name}","pid":1,"tid":{},"ts":{}.{:03},"dur":{},"args":{{"Input Dims":[[{i}]],"n":{{"x":[{{"y":1}},{{"z":2}}]}}}}}}"#,
                if i % 3 == 0 { "cpu_op" } else { "kernel" },
                i % 4,
                i * 10,
                i % 1000,
                i % 50
            ));
            if i % 100 == 0 {
                evs.push(format!(
                    r#"{{"ph":"i","name":"[memory]","pid":1,"tid":0,"ts":{},"args":{{"Bytes":{},"Addr":{}}}}}"#,
                    i * 10 + 1,
                    if i % 200 == 0 { 64 } else { -64 },
                    i % 7
                ));
            }
        }
        let doc = format!(
            "{{\"traceEvents\":[\n  {}\n],\"deviceProperties\":[{{\"a\":1}},{{\"b\":2}}]}}",
            evs.join(",\n  ")
        );
        assert!(doc.len() > 4 * CHUNK_BYTES, "{}", doc.len());
        let want = reference(&doc, u64::MAX).unwrap();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap();
        let got = pool.install(|| ours(&doc, u64::MAX)).unwrap();
        assert_eq!(got, want);
        // With a `B`/`E` pair (matched across chunks) the chunks are merged one by one.
        let paired = doc
            .replacen(
                "[\n  ",
                "[\n  {\"ph\":\"B\",\"name\":\"pair\",\"pid\":1,\"tid\":1,\"ts\":0,\"args\":{\"a\":1}},",
                1,
            )
            .replacen(
                "\n]",
                ",{\"ph\":\"E\",\"pid\":1,\"tid\":1,\"ts\":9}\n]",
                1,
            );
        assert_ne!(paired, doc);
        let want_paired = reference(&paired, u64::MAX).unwrap();
        assert_eq!(
            pool.install(|| ours(&paired, u64::MAX)).unwrap(),
            want_paired
        );
        assert_eq!(want_paired.0.len(), want.0.len() + 1);
        // The cut guesses did land inside strings (so the re-parse path ran).
        let first = doc.find('[').unwrap() + 4;
        let n = (doc.len() - first) / CHUNK_BYTES;
        let wrong = (1..n)
            .filter_map(|i| next_boundary(doc.as_bytes(), first + (doc.len() - first) / n * i))
            .filter(|&s| !doc[..s].ends_with(",\n  "))
            .count();
        assert!(wrong > 0);
        // An error far into the array is found, with its line.
        let bad = doc.replacen("\"op5\"", "\"op5\" x", 1);
        let err = pool.install(|| ours(&bad, u64::MAX)).unwrap_err();
        assert!(
            err.contains("not a Chrome trace: expected `,` or `}` at line"),
            "{err}"
        );
    }

    #[test]
    fn details_are_kept_as_text_unless_too_long_and_decode_like_serde_json() {
        let huge = "y".repeat(MAX_RAW_ARGS);
        let doc = format!(
            r#"{{"traceEvents":[{EV},{{"ph":"X","name":"huge","args":{{"Call stack":"{huge}"}}}},{{"ph":"B","name":"pair","pid":1,"tid":1,"ts":0,"args":{{"k":[1, 2]}}}},{{"ph":"E","pid":1,"tid":1,"ts":5}},{{"ph":"X","name":"none","args":{{}}}}]}}"#
        );
        let mut p = profile();
        read_text(&doc, Path::new("t.json"), &mut p, &Limits::default()).unwrap();
        let v: serde_json::Value = serde_json::from_str(&doc).unwrap();
        let args = |name: &str| {
            let ev = v["traceEvents"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["name"] == name)
                .unwrap();
            ev["args"].clone()
        };
        let by_name = |name: &str| *p.events.iter().find(|e| p.str(e.name) == name).unwrap();
        for (name, raw) in [("aten::mm", true), ("pair", true), ("huge", false)] {
            let e = by_name(name);
            assert_eq!(e.detail & RAW_DETAIL != 0, raw, "{name}");
            let want = detail_of_value(e.track, args(name));
            assert_eq!(p.detail(&e).unwrap().into_owned(), want, "{name}");
        }
        assert_eq!(by_name("none").detail, NONE);
        assert!(p.detail(&by_name("none")).is_none());
        // The one too long to keep is clipped, as every shown field is.
        let huge = p.detail(&by_name("huge")).unwrap();
        assert!(huge.stack.as_ref().unwrap().ends_with("… (truncated)"));
        // Kept text: the two short ones, in two arenas (the chunk's and the pairs').
        assert_eq!(p.raw_details.spans.len(), 2);
        assert_eq!(p.raw_details.arenas.len(), 2);
    }

    #[test]
    fn times_convert_to_ns_like_the_float_path() {
        let float = |tok: &str| (json::number_f64(tok).unwrap() * 1000.0).round() as i64;
        let mut toks: Vec<String> = [
            "0",
            "-0",
            "-0.0",
            "1",
            "1.002",
            "1.07",
            "0.5",
            "0.0005",
            "2.5e3",
            "1E2",
            "-17.125",
            "1125899906842.623",
            "1125899906842.624",
            "1125899906842.625",
            "9007199254740.993",
            "1700000000000000.123",
            "123456789.999",
            "80.125",
            "0.001",
            "10.100",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut seed = 11u64;
        for _ in 0..20_000 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let int = (seed >> 20) % [10, 100_000, 1 << 40, 1 << 51][(seed % 4) as usize];
            let decimals = (seed >> 8) % 5;
            let frac = (seed >> 12) % 10u64.pow(decimals as u32);
            let sign = if seed >> 63 == 1 { "-" } else { "" };
            toks.push(match decimals {
                0 => format!("{sign}{int}"),
                d => format!("{sign}{int}.{frac:0w$}", w = d as usize),
            });
        }
        let mut fast = 0;
        for tok in &toks {
            let v = Some(tok.as_str());
            assert_eq!(us_to_ns(v), float(tok), "{tok}");
            fast += decimal_us_to_ns(tok).is_some() as usize;
        }
        assert!(fast > toks.len() / 2, "{fast}");
        assert_eq!(decimal_us_to_ns("1.0005"), None);
        assert_eq!(decimal_us_to_ns("1e3"), None);
        assert_eq!(decimal_us_to_ns("1125899906842.624"), None);
        assert_eq!(
            decimal_us_to_ns("1125899906841.999"),
            Some(1125899906841999)
        );
    }

    #[test]
    fn memory_is_attributed_like_a_search_per_event() {
        let mut seed = 3u64;
        let mut rand = |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        let mut p = profile();
        for i in 0..3000 {
            p.events.push(Event {
                start: rand(100_000) as i64,
                dur: rand(if i % 10 == 0 { 5000 } else { 40 }) as i64,
                name: i,
                detail: NONE,
                thread: rand(3) as u32,
                depth: 0,
                track: if i % 7 == 0 { Track::Kernel } else { Track::Op },
            });
        }
        // Mostly in time order (long stretches, gaps of many ops), some out of order, some on
        // a thread without ops.
        let mut t = 0i64;
        let mut threads = Vec::new();
        for i in 0..20_000 {
            t += rand(if i % 500 == 0 { 20_000 } else { 30 }) as i64;
            let at = if i % 97 == 0 {
                rand(100_000) as i64
            } else {
                t % 100_000
            };
            p.memory.push(MemEvent {
                t: at,
                delta: 1,
                addr: 0,
                op: NONE,
                total: None,
            });
            threads.push(if i % 1000 < 900 { 1 } else { rand(4) as u32 });
        }
        let want: Vec<u32> = p
            .memory
            .iter()
            .zip(&threads)
            .map(|(m, &th)| {
                let mut ops: Vec<(i64, i64, u32)> = p
                    .events
                    .iter()
                    .filter(|e| e.track == Track::Op && e.thread == th)
                    .map(|e| (e.start, e.end(), e.name))
                    .collect();
                ops.sort_unstable();
                let i = ops.partition_point(|o| o.0 <= m.t);
                let mut m = *m;
                attribute_one(&mut m, &ops[..i]);
                m.op
            })
            .collect();
        attribute_memory(&mut p, &threads);
        let got: Vec<u32> = p.memory.iter().map(|m| m.op).collect();
        assert_eq!(got, want);
        assert!(got.iter().filter(|&&o| o != NONE).count() > 1000);
    }

    #[test]
    fn par_append_concatenates_in_order() {
        let mut out = vec![1, 2];
        let parts: Vec<Vec<u64>> = vec![vec![], (3..1000).collect(), vec![], vec![1000], vec![]];
        par_append(&mut out, parts.iter().map(|p| p.iter().copied()).collect());
        assert_eq!(out, (1..=1000).collect::<Vec<u64>>());
        par_append(&mut out, Vec::<std::vec::IntoIter<u64>>::new());
        assert_eq!(out.len(), 1000);
    }

    #[test]
    fn field_names_are_found_exactly() {
        for (i, f) in FIELDS.iter().enumerate() {
            assert_eq!(field_index(f), Some(i));
        }
        for k in [
            "", "p", "ph\0", "ph\0\0", "phx", "nam", "names", "Ph", "arg", "argss", "s", "id", "bp",
        ] {
            assert_eq!(field_index(k), None, "{k:?}");
        }
    }

    #[test]
    fn comm_names_are_matched_ignoring_case_like_a_lower_cased_copy() {
        for n in [
            "ncclAllReduce",
            "NCCL_x",
            "hcom_allReduce__1",
            "HCOMbroadcast",
            "my_AllReduce_k",
            "allreduc",
            "gemm",
            "",
            "é_allreduce",
            "xnccl",
        ] {
            let l = n.to_lowercase();
            let want = l.starts_with("nccl") || l.starts_with("hcom") || l.contains("allreduce");
            assert_eq!(is_comm_name(n), want, "{n}");
        }
    }

    #[test]
    fn utf8_is_checked_in_pieces_and_replaced_when_invalid() {
        let mut bytes = "é".repeat(3 * CHUNK_BYTES).into_bytes();
        assert!(matches!(text_of(&bytes), Cow::Borrowed(_)));
        let at = bytes.len() / 2 + 1;
        bytes[at] = 0xff;
        let t = text_of(&bytes);
        assert!(matches!(t, Cow::Owned(_)));
        assert!(t.contains('\u{FFFD}'));
        assert_eq!(t, String::from_utf8_lossy(&bytes));
    }
}
