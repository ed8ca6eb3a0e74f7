//! Opening a trace file: memory-mapped or gunzipped under the size limit, the UTF-8 check
//! (in parallel pieces, lossy only when needed), sniffing whether a `.json` holds trace events,
//! and the rank a file name carries.

use super::parse::{limit, parse_text, read_text};
use super::release::Release;
use super::{CHUNK_BYTES, Limits, MAP_MIN_BYTES};
use crate::error::ReportError;
use crate::model::{Profile, SourceFormat};
use rayon::prelude::*;
use rlprof_profiler::collection::mmap::{AnonMapping, Mapping};
use std::borrow::Cow;
use std::io::Read;
use std::path::Path;

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
pub(super) const SNIFF_BYTES: u64 = 1 << 20;

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
    if gz {
        return read_gz(file, len, path, p, limits);
    }
    if len > limits.max_bytes {
        return Err(limit(path, "uncompressed size in bytes", limits.max_bytes));
    }
    if len < MAP_MIN_BYTES {
        let mut v = Vec::with_capacity(len as usize + 1);
        read_capped(&file, path, limits.max_bytes, &mut v)?;
        return read_text(&text_of(&v), path, p, limits);
    }
    // SAFETY: the map is only read while this function runs. Like every reader of a mapped
    // file, a concurrent writer truncating the file could fault the process; trace files are
    // written once by the profiler and not modified while a report is built. (Not
    // pre-faulted with `populate`, which maps every page on this thread: the parallel UTF-8
    // check touches the pages first, on every thread.)
    let map = unsafe { Mapping::map_file(&file) }.map_err(crate::error::io(path))?;
    let release = Release::File(&map);
    let text = text_of(&map);
    // Text that had to be repaired is a copy in memory: nothing of it can be given back.
    let release = match text {
        Cow::Borrowed(_) => release,
        Cow::Owned(_) => Release::None,
    };
    let parsed = parse_text(&text, path, limits, release, p);
    drop(text);
    // The pages are given back already; unmapping is page-table work off this thread.
    drop_in_background(map);
    parsed?.finish(p);
    Ok(())
}

/// Reads a gzip-compressed trace: the compressed file is read in small buffers (not mapped:
/// its pages would count as resident on top of the text) and decompressed into an anonymous
/// mapping sized by the gzip trailer, whose pages are given back as the parse passes them
/// ([`Release::Consumed`]); a trailer that understates the size (several gzip members, or
/// 4 GiB and more) moves the text into memory, parsed without giving pages back.
fn read_gz(
    file: std::fs::File,
    len: u64,
    path: &Path,
    p: &mut Profile,
    limits: &Limits,
) -> Result<(), ReportError> {
    use std::os::unix::fs::FileExt;
    // The gzip trailer holds the uncompressed size (mod 2^32) of the last member.
    let mut trailer = [0u8; 4];
    let hint = match len.checked_sub(4) {
        Some(at) if file.read_exact_at(&mut trailer, at).is_ok() => {
            u32::from_le_bytes(trailer) as u64
        }
        _ => 0,
    }
    .min(limits.max_bytes) as usize;
    let decoder = || -> std::io::Result<_> {
        let mut f = file.try_clone()?;
        std::io::Seek::rewind(&mut f)?;
        Ok(Capped {
            inner: flate2::read::MultiGzDecoder::new(std::io::BufReader::with_capacity(1 << 16, f)),
            left: limits.max_bytes,
            hit: false,
        })
    };
    let mut input = decoder().map_err(crate::error::io(path))?;
    // One byte more than the hint: filling it says the hint was short.
    let mut map = AnonMapping::new(hint + 1).map_err(crate::error::io(path))?;
    let mut filled = 0;
    while filled < map.len() {
        match input.read(&mut map[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(read_error(&input, path, limits, e)),
        }
    }
    if filled == map.len() {
        // Longer than the trailer says: the rest goes after it in memory.
        let mut text = Vec::with_capacity(filled * 2);
        text.extend_from_slice(&map[..filled]);
        drop(map);
        let left = input.left;
        read_capped(input.inner, path, left, &mut text)?;
        let parsed = parse_text(&text_of(&text), path, limits, Release::None, p);
        drop(text);
        parsed?.finish(p);
        return Ok(());
    }
    let map = map.into_read_only().map_err(crate::error::io(path))?;
    let text = text_of(&map[..filled]);
    let release = match text {
        Cow::Borrowed(_) => Release::Consumed(&map),
        Cow::Owned(_) => Release::None,
    };
    let parsed = parse_text(&text, path, limits, release, p);
    let waved = release.in_waves();
    drop(text);
    // Freed before what is known only at the end is applied (sorting and memory attribution
    // allocate, which would otherwise come on top of what is left of the text).
    drop(map);
    match parsed {
        Ok(st) => {
            st.finish(p);
            Ok(())
        }
        // Its line and column were counted over text given back: read it again in memory
        // for the same error with the right position (into `p`, which holds part of the
        // events already; on an error the caller drops it).
        Err(ReportError::Malformed { .. }) if waved => {
            let mut again = Vec::with_capacity(filled + 1);
            read_capped(
                decoder().map_err(crate::error::io(path))?,
                path,
                limits.max_bytes,
                &mut again,
            )?;
            read_text(&text_of(&again), path, p, limits)
        }
        Err(e) => Err(e),
    }
}

/// The error of a failed read of `input`: the size limit when it was reached.
fn read_error<R>(
    input: &Capped<R>,
    path: &Path,
    limits: &Limits,
    e: std::io::Error,
) -> ReportError {
    if input.hit {
        limit(path, "uncompressed size in bytes", limits.max_bytes)
    } else {
        crate::error::io(path)(e)
    }
}

/// Drops `v` on the rayon pool: unmapping an 80 MB mapping or freeing the text is a few
/// milliseconds of page-table work that need not hold up building the report (nothing
/// borrows the text once it is parsed).
pub(super) fn drop_in_background<T: Send + 'static>(v: T) {
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
pub(super) fn read_capped(
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
/// parallel pieces cut before ASCII bytes (always character boundaries). (A mapped text's pages
/// are not given back here: the parse would fault every page in again, which costs more
/// system time than the few milliseconds the whole text is resident saves.)
pub(super) fn text_of(bytes: &[u8]) -> Cow<'_, str> {
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

/// `..._rank3.pt.trace.json` / `rank_3` -> 3.
pub(super) fn rank_from_file_name(path: &Path) -> Option<u32> {
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
pub(super) struct Capped<R> {
    pub(super) inner: R,
    pub(super) left: u64,
    pub(super) hit: bool,
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
