//! Reading raw files chunk by chunk: a streaming reader ([`RawReader`]) and one over bytes in
//! memory ([`SliceReader`]), with the same checks and messages. Chunk-level only: pairing
//! records with their Ext, clock mapping and validation are in [`super::RawIndex`].

use super::{
    CHUNK_HEADER_LEN, CHUNK_MAGIC, ChunkKind, FILE_MAGIC, FORMAT_VERSION, HEADER_LEN, MAX_PAYLOAD,
    TruncReason, Truncation,
};
use crate::ProfilerError;
use crate::clock::Calibration;
use crate::record::{RECORD_SIZE, Record};
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

/// One decoded chunk.
#[derive(Debug, Clone, PartialEq)]
pub enum Chunk {
    /// Metadata JSON.
    Meta(serde_json::Value),
    /// `(id, text)` pairs.
    Strings(Vec<(u32, String)>),
    /// A thread's records.
    Records {
        /// Thread index within the collection.
        thread: u32,
        /// The records.
        records: Vec<Record>,
    },
    /// Calibration point.
    Calibration(Calibration),
    /// Thread name.
    Thread {
        /// Thread index.
        thread: u32,
        /// Name.
        name: String,
    },
    /// Truncation marker.
    Truncated(Truncation),
    /// Clean end.
    End {
        /// Events written.
        events: u64,
        /// Events dropped (buffer races at stop, failed writes).
        dropped: u64,
    },
}

/// Where and why reading stopped before the end of the file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Corruption {
    /// The file.
    pub path: PathBuf,
    /// Byte offset of the first unreadable chunk.
    pub offset: u64,
    /// What was wrong.
    pub reason: String,
}

impl std::fmt::Display for Corruption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: raw data readable up to byte {}; stopped there: {}",
            self.path.display(),
            self.offset,
            self.reason
        )
    }
}

/// Streams the chunks of a raw file. Iteration ends at the end of the file or at the first bad
/// chunk; [`RawReader::corruption`] then says where and why.
pub struct RawReader<R: Read = BufReader<File>> {
    input: R,
    path: PathBuf,
    offset: u64,
    corruption: Option<Corruption>,
    done: bool,
    buf: Vec<u8>,
}

impl RawReader {
    /// Opens a raw file and checks its header.
    pub fn open(path: &Path) -> Result<RawReader, ProfilerError> {
        let f = File::open(path).map_err(|source| ProfilerError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        RawReader::new(BufReader::with_capacity(1 << 20, f), path)
    }
}

impl<R: Read> RawReader<R> {
    /// Reads from any byte stream; `path` names it in messages.
    pub fn new(mut input: R, path: &Path) -> Result<RawReader<R>, ProfilerError> {
        let mut h = [0u8; HEADER_LEN];
        let corrupt = |reason: String| ProfilerError::Corrupt {
            path: path.to_path_buf(),
            offset: 0,
            reason,
        };
        read_full(&mut input, &mut h)
            .map_err(|e| corrupt(format!("cannot read header: {e}")))?
            .then_some(())
            .ok_or_else(|| corrupt("file shorter than its 16-byte header".into()))?;
        check_header(&h, path)?;
        Ok(RawReader {
            input,
            path: path.to_path_buf(),
            offset: HEADER_LEN as u64,
            corruption: None,
            done: false,
            buf: Vec::new(),
        })
    }

    /// Where reading stopped early, if it did.
    pub fn corruption(&self) -> Option<&Corruption> {
        self.corruption.as_ref()
    }

    /// Byte offset of the next chunk.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    fn fail<T>(&mut self, reason: String) -> Option<T> {
        self.corruption = Some(Corruption {
            path: self.path.clone(),
            offset: self.offset,
            reason,
        });
        self.done = true;
        None
    }

    fn next_chunk(&mut self) -> Option<Chunk> {
        let (kind, len) = self.next_payload()?;
        let chunk = match decode(kind, &self.buf[..len]) {
            Ok(c) => c,
            Err(reason) => return self.fail(reason),
        };
        self.offset += (CHUNK_HEADER_LEN + len) as u64;
        Some(chunk)
    }

    /// The next chunk borrowed from the reader's buffer: a Records chunk comes as its raw
    /// record bytes (decode them with [`records_of`]), so streaming readers copy and allocate
    /// nothing per chunk. Same validation and [`RawReader::corruption`] as the iterator.
    pub fn next_ref(&mut self) -> Option<ChunkRef<'_>> {
        let (kind, len) = self.next_payload()?;
        let other = match chunk_ref(kind, &self.buf[..len]) {
            Ok(ChunkRef::Other(c)) => Some(c),
            Ok(ChunkRef::Records { .. }) => None,
            Err(reason) => return self.fail(reason),
        };
        self.offset += (CHUNK_HEADER_LEN + len) as u64;
        Some(match other {
            Some(c) => ChunkRef::Other(c),
            None => ChunkRef::Records {
                thread: u32::from_le_bytes(self.buf[0..4].try_into().expect("4")),
                body: &self.buf[8..len],
            },
        })
    }

    /// Reads and checks the next chunk's header and payload into `self.buf`; returns its kind
    /// and payload length (the offset is not yet advanced).
    fn next_payload(&mut self) -> Option<(ChunkKind, usize)> {
        if self.done {
            return None;
        }
        let mut h = [0u8; CHUNK_HEADER_LEN];
        match read_prefix(&mut self.input, &mut h) {
            Ok(0) => {
                self.done = true;
                return None;
            }
            Ok(n) if n < CHUNK_HEADER_LEN => {
                return self.fail(format!("truncated chunk header ({n} of 16 bytes)"));
            }
            Ok(_) => {}
            Err(e) => return self.fail(format!("read error: {e}")),
        }
        let (kind_raw, len, crc) = match chunk_head(&h) {
            Ok(v) => v,
            Err(reason) => return self.fail(reason),
        };
        self.buf.resize(len, 0);
        match read_prefix(&mut self.input, &mut self.buf) {
            Ok(n) if n < len => {
                return self.fail(format!("truncated chunk payload ({n} of {len} bytes)"));
            }
            Ok(_) => {}
            Err(e) => return self.fail(format!("read error: {e}")),
        }
        match check_payload(kind_raw, crc, &self.buf) {
            Ok(kind) => Some((kind, len)),
            Err(reason) => self.fail(reason),
        }
    }
}

fn check_header(h: &[u8; HEADER_LEN], path: &Path) -> Result<(), ProfilerError> {
    let corrupt = |reason: String| ProfilerError::Corrupt {
        path: path.to_path_buf(),
        offset: 0,
        reason,
    };
    if &h[0..8] != FILE_MAGIC {
        return Err(corrupt("not an rlprof raw file (bad magic)".into()));
    }
    let version = u32::from_le_bytes(h[8..12].try_into().expect("4"));
    if version != FORMAT_VERSION {
        return Err(corrupt(format!(
            "raw format version {version}, this build reads {FORMAT_VERSION}"
        )));
    }
    let rs = u32::from_le_bytes(h[12..16].try_into().expect("4"));
    if rs as usize != RECORD_SIZE {
        return Err(corrupt(format!("record size {rs}, expected {RECORD_SIZE}")));
    }
    Ok(())
}

/// A chunk header's `(kind, payload length, crc)`, checked for magic and length limit.
fn chunk_head(h: &[u8; CHUNK_HEADER_LEN]) -> Result<(u16, usize, u32), String> {
    let magic = u32::from_le_bytes(h[0..4].try_into().expect("4"));
    if magic != CHUNK_MAGIC {
        return Err("bad chunk magic".into());
    }
    let kind_raw = u16::from_le_bytes(h[4..6].try_into().expect("2"));
    let len = u32::from_le_bytes(h[8..12].try_into().expect("4")) as usize;
    let crc = u32::from_le_bytes(h[12..16].try_into().expect("4"));
    if len > MAX_PAYLOAD {
        return Err(format!(
            "chunk length {len} exceeds the {MAX_PAYLOAD}-byte limit"
        ));
    }
    Ok((kind_raw, len, crc))
}

/// Checks a complete payload's CRC (when `crc` is given) and kind.
fn check_payload(kind_raw: u16, crc: u32, payload: &[u8]) -> Result<ChunkKind, String> {
    if crc32fast::hash(payload) != crc {
        return Err("checksum mismatch".into());
    }
    ChunkKind::from_u16(kind_raw).ok_or_else(|| format!("unknown chunk kind {kind_raw}"))
}

/// A checked payload as a [`ChunkRef`]: records stay borrowed, other kinds are decoded.
fn chunk_ref(kind: ChunkKind, p: &[u8]) -> Result<ChunkRef<'_>, String> {
    if kind != ChunkKind::Records {
        return decode(kind, p).map(ChunkRef::Other);
    }
    if p.len() < 8 {
        return Err("Records chunk too short".into());
    }
    if !(p.len() - 8).is_multiple_of(RECORD_SIZE) {
        return Err("records chunk length is not a multiple of 24".into());
    }
    Ok(ChunkRef::Records {
        thread: u32::from_le_bytes(p[0..4].try_into().expect("4")),
        body: &p[8..],
    })
}

/// Reads the chunks of a raw file held in memory (for instance memory-mapped) without copying:
/// records are borrowed from `data`. Same validation, messages and [`SliceReader::corruption`]
/// as [`RawReader`].
pub struct SliceReader<'a> {
    data: &'a [u8],
    path: PathBuf,
    offset: usize,
    end: usize,
    corruption: Option<Corruption>,
    verify: bool,
}

impl<'a> SliceReader<'a> {
    /// Checks the header of `data`; `path` names it in messages.
    pub fn new(data: &'a [u8], path: &Path) -> Result<SliceReader<'a>, ProfilerError> {
        let Some(h) = data.get(..HEADER_LEN) else {
            return Err(ProfilerError::Corrupt {
                path: path.to_path_buf(),
                offset: 0,
                reason: "file shorter than its 16-byte header".into(),
            });
        };
        check_header(h.try_into().expect("16"), path)?;
        Ok(SliceReader {
            data,
            path: path.to_path_buf(),
            offset: HEADER_LEN,
            end: data.len(),
            corruption: None,
            verify: true,
        })
    }

    /// Reads only the first `valid_bytes` and trusts their checksums: for a second pass over
    /// data a first pass has verified up to that offset.
    pub fn verified_prefix(mut self, valid_bytes: u64) -> SliceReader<'a> {
        self.end = (valid_bytes as usize).min(self.data.len());
        self.verify = false;
        self
    }

    /// Where reading stopped early, if it did.
    pub fn corruption(&self) -> Option<&Corruption> {
        self.corruption.as_ref()
    }

    /// Byte offset of the next chunk.
    pub fn offset(&self) -> u64 {
        self.offset as u64
    }

    fn fail<T>(&mut self, reason: String) -> Option<T> {
        self.corruption = Some(Corruption {
            path: self.path.clone(),
            offset: self.offset as u64,
            reason,
        });
        self.end = self.offset;
        None
    }

    /// The next chunk, or None at the end of the data or at the first bad chunk.
    pub fn next_ref(&mut self) -> Option<ChunkRef<'a>> {
        let rest = &self.data[self.offset..self.end];
        if rest.is_empty() {
            return None;
        }
        let Some(h) = rest.get(..CHUNK_HEADER_LEN) else {
            let n = rest.len();
            return self.fail(format!("truncated chunk header ({n} of 16 bytes)"));
        };
        let (kind_raw, len, crc) = match chunk_head(h.try_into().expect("16")) {
            Ok(v) => v,
            Err(reason) => return self.fail(reason),
        };
        let Some(payload) = rest.get(CHUNK_HEADER_LEN..CHUNK_HEADER_LEN + len) else {
            let n = rest.len() - CHUNK_HEADER_LEN;
            return self.fail(format!("truncated chunk payload ({n} of {len} bytes)"));
        };
        let kind = if self.verify {
            check_payload(kind_raw, crc, payload)
        } else {
            ChunkKind::from_u16(kind_raw).ok_or_else(|| format!("unknown chunk kind {kind_raw}"))
        };
        let chunk = match kind.and_then(|k| chunk_ref(k, payload)) {
            Ok(c) => c,
            Err(reason) => return self.fail(reason),
        };
        self.offset += CHUNK_HEADER_LEN + len;
        Some(chunk)
    }
}

/// A chunk borrowed from a [`RawReader`] ([`RawReader::next_ref`]).
#[derive(Debug)]
pub enum ChunkRef<'a> {
    /// A thread's records, undecoded (a multiple of 24 bytes).
    Records {
        /// Thread index within the collection.
        thread: u32,
        /// The record bytes.
        body: &'a [u8],
    },
    /// Any other chunk, decoded.
    Other(Chunk),
}

impl ChunkRef<'_> {
    /// The owned [`Chunk`] (records decoded).
    pub fn into_owned(self) -> Chunk {
        match self {
            ChunkRef::Records { thread, body } => Chunk::Records {
                thread,
                records: records_of(body).collect(),
            },
            ChunkRef::Other(c) => c,
        }
    }
}

/// Decodes the records of a [`ChunkRef::Records`] body lazily.
#[inline]
pub fn records_of(body: &[u8]) -> impl ExactSizeIterator<Item = Record> + '_ {
    body.chunks_exact(RECORD_SIZE).map(Record::from_bytes)
}

impl<R: Read> Iterator for RawReader<R> {
    type Item = Chunk;
    fn next(&mut self) -> Option<Chunk> {
        self.next_chunk()
    }
}

fn decode(kind: ChunkKind, p: &[u8]) -> Result<Chunk, String> {
    let u64_at = |i: usize| -> Result<u64, String> {
        p.get(i..i + 8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8")))
            .ok_or_else(|| format!("{kind:?} chunk too short"))
    };
    let u32_at = |i: usize| -> Result<u32, String> {
        p.get(i..i + 4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4")))
            .ok_or_else(|| format!("{kind:?} chunk too short"))
    };
    Ok(match kind {
        ChunkKind::Meta => Chunk::Meta(
            serde_json::from_slice(p).map_err(|e| format!("metadata is not JSON: {e}"))?,
        ),
        ChunkKind::Strings => {
            let mut out = Vec::new();
            let mut i = 0;
            while i < p.len() {
                let id = u32_at(i)?;
                let n = u32_at(i + 4)? as usize;
                let s = p
                    .get(i + 8..i + 8 + n)
                    .ok_or_else(|| "string runs past its chunk".to_string())?;
                out.push((id, String::from_utf8_lossy(s).into_owned()));
                i += 8 + n;
            }
            Chunk::Strings(out)
        }
        ChunkKind::Records => {
            let thread = u32_at(0)?;
            let body = &p[8.min(p.len())..];
            if !body.len().is_multiple_of(RECORD_SIZE) {
                return Err("records chunk length is not a multiple of 24".into());
            }
            Chunk::Records {
                thread,
                records: body
                    .chunks_exact(RECORD_SIZE)
                    .map(Record::from_bytes)
                    .collect(),
            }
        }
        ChunkKind::Calibration => Chunk::Calibration(Calibration {
            ticks: u64_at(0)?,
            mono_ns: u64_at(8)?,
            wall_ns: u64_at(16)?,
        }),
        ChunkKind::Thread => Chunk::Thread {
            thread: u32_at(0)?,
            name: String::from_utf8_lossy(&p[4.min(p.len())..]).into_owned(),
        },
        ChunkKind::Truncated => Chunk::Truncated(Truncation {
            events_kept: u64_at(0)?,
            bytes_kept: u64_at(8)?,
            reason: if p.get(16) == Some(&2) {
                TruncReason::Bytes
            } else {
                TruncReason::Events
            },
        }),
        ChunkKind::End => Chunk::End {
            events: u64_at(0)?,
            dropped: u64_at(8)?,
        },
    })
}

/// Reads until `buf` is full or EOF; returns bytes read.
fn read_prefix(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<bool> {
    Ok(read_prefix(r, buf)? == buf.len())
}

/// Summary of a whole raw file, read in one streaming pass (for tests and quick checks).
#[derive(Debug, Default)]
pub struct RawSummary {
    /// Metadata, if present.
    pub meta: Option<serde_json::Value>,
    /// Number of records per kind byte.
    pub records: u64,
    /// All records with their thread (only when collected with `keep_records`).
    pub kept: Vec<(u32, Record)>,
    /// id -> string.
    pub strings: std::collections::HashMap<u32, String>,
    /// Calibration points.
    pub calibrations: Vec<Calibration>,
    /// Truncation marker.
    pub truncated: Option<Truncation>,
    /// Clean-end marker `(events, dropped)`.
    pub end: Option<(u64, u64)>,
    /// Early stop.
    pub corruption: Option<Corruption>,
}

impl RawSummary {
    /// Reads `path` completely; with `keep_records` all records are kept in memory.
    pub fn read(path: &Path, keep_records: bool) -> Result<RawSummary, ProfilerError> {
        let mut r = RawReader::open(path)?;
        let mut s = RawSummary::default();
        for c in r.by_ref() {
            match c {
                Chunk::Meta(m) => s.meta = Some(m),
                Chunk::Strings(v) => s.strings.extend(v),
                Chunk::Records { thread, records } => {
                    s.records += records.len() as u64;
                    if keep_records {
                        s.kept.extend(records.into_iter().map(|r| (thread, r)));
                    }
                }
                Chunk::Calibration(c) => s.calibrations.push(c),
                Chunk::Thread { .. } => {}
                Chunk::Truncated(t) => s.truncated = Some(t),
                Chunk::End { events, dropped } => s.end = Some((events, dropped)),
            }
        }
        s.corruption = r.corruption().cloned();
        Ok(s)
    }

    /// The string for an id (empty when unknown).
    pub fn name(&self, id: u32) -> &str {
        self.strings.get(&id).map(|s| s.as_str()).unwrap_or("")
    }
}

#[cfg(test)]
mod reader_tests {
    use super::*;
    use crate::raw::RawWriter;
    use crate::record::Kind;

    fn sample(path: &Path) -> Vec<u8> {
        let mut w = RawWriter::create(path).unwrap();
        w.write_meta(&serde_json::json!({"rank": 0})).unwrap();
        w.write_strings([(1, "a"), (2, "bb")]).unwrap();
        let rec = |ts| Record {
            ts,
            a: ts + 5,
            name: 1,
            kind: Kind::Range as u8,
            cat: 4,
            aux: 0,
        };
        w.write_records(3, &[rec(1), rec(2), rec(3)]).unwrap();
        w.write_thread(3, "main").unwrap();
        w.write_records(3, &[rec(9)]).unwrap();
        w.write_end(4, 0).unwrap();
        std::fs::read(path).unwrap()
    }

    fn via_reader(bytes: &[u8], path: &Path) -> (Vec<Chunk>, Option<Corruption>, u64) {
        let mut r = RawReader::new(bytes, path).unwrap();
        let mut v = Vec::new();
        while let Some(c) = r.next_ref() {
            v.push(c.into_owned());
        }
        (v, r.corruption().cloned(), r.offset())
    }

    fn via_slice(bytes: &[u8], path: &Path) -> (Vec<Chunk>, Option<Corruption>, u64) {
        let mut r = SliceReader::new(bytes, path).unwrap();
        let mut v = Vec::new();
        while let Some(c) = r.next_ref() {
            v.push(c.into_owned());
        }
        (v, r.corruption().cloned(), r.offset())
    }

    #[test]
    fn slice_reader_matches_stream_reader_on_damaged_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.rlraw");
        let good = sample(&path);
        let full: Vec<Chunk> = RawReader::new(&good[..], &path).unwrap().collect();
        assert_eq!(full.len(), 6);
        assert_eq!(via_slice(&good, &path).0, full);
        let mut cases: Vec<Vec<u8>> = (17..good.len())
            .step_by(7)
            .map(|n| good[..n].to_vec())
            .collect();
        for at in [16, 20, 24, 40, 60, good.len() - 3] {
            let mut b = good.clone();
            b[at] ^= 0x5a;
            cases.push(b);
        }
        for b in cases {
            let (a, ca, oa) = via_reader(&b, &path);
            let (s, cs, os) = via_slice(&b, &path);
            assert_eq!(a, s);
            assert_eq!(ca, cs);
            assert_eq!(oa, os);
            let iter: Vec<Chunk> = RawReader::new(&b[..], &path).unwrap().collect();
            assert_eq!(iter, a);
        }
    }

    #[test]
    fn verified_prefix_stops_at_the_valid_end_without_checksums() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.rlraw");
        let good = sample(&path);
        let (all, _, end) = via_slice(&good, &path);
        let mut r = SliceReader::new(&good, &path)
            .unwrap()
            .verified_prefix(end - 20);
        let mut n = 0;
        while r.next_ref().is_some() {
            n += 1;
        }
        assert!(n < all.len());
        assert!(
            r.corruption().is_some(),
            "a prefix cutting a chunk reports it"
        );
    }
}
