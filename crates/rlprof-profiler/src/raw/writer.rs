//! Writing raw files: one self-checking chunk per `write`.

use super::{CHUNK_HEADER_LEN, CHUNK_MAGIC, ChunkKind, FILE_MAGIC, FORMAT_VERSION, HEADER_LEN};
use crate::ProfilerError;
use crate::clock::Calibration;
use crate::record::{RECORD_SIZE, Record};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Appends chunks to a raw file. Each chunk is assembled in memory and written with a single
/// `write_all` straight to the file (no user-space buffering), so after `write_*` returns the
/// chunk is in the kernel and survives the process being killed.
pub struct RawWriter {
    file: File,
    path: PathBuf,
    scratch: Vec<u8>,
    bytes: u64,
}

impl RawWriter {
    /// Creates the file (it must not exist) and writes the header.
    pub fn create(path: &Path) -> Result<RawWriter, ProfilerError> {
        let io = |source| ProfilerError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = File::options()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(io)?;
        RawWriter::from_file(file, path)
    }

    /// Writes the header into an already open file.
    pub fn from_file(mut file: File, path: &Path) -> Result<RawWriter, ProfilerError> {
        let io = |source| ProfilerError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut h = Vec::with_capacity(HEADER_LEN);
        h.extend_from_slice(FILE_MAGIC);
        h.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        h.extend_from_slice(&(RECORD_SIZE as u32).to_le_bytes());
        file.write_all(&h).map_err(io)?;
        Ok(RawWriter {
            file,
            path: path.to_path_buf(),
            scratch: Vec::with_capacity(1 << 16),
            bytes: HEADER_LEN as u64,
        })
    }

    /// Bytes written so far.
    pub fn bytes_written(&self) -> u64 {
        self.bytes
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn write_chunk(
        &mut self,
        kind: ChunkKind,
        fill: impl FnOnce(&mut Vec<u8>),
    ) -> Result<(), ProfilerError> {
        self.scratch.clear();
        self.scratch.resize(CHUNK_HEADER_LEN, 0);
        fill(&mut self.scratch);
        let payload_len = self.scratch.len() - CHUNK_HEADER_LEN;
        let crc = crc32fast::hash(&self.scratch[CHUNK_HEADER_LEN..]);
        self.scratch[0..4].copy_from_slice(&CHUNK_MAGIC.to_le_bytes());
        self.scratch[4..6].copy_from_slice(&(kind as u16).to_le_bytes());
        self.scratch[8..12].copy_from_slice(&(payload_len as u32).to_le_bytes());
        self.scratch[12..16].copy_from_slice(&crc.to_le_bytes());
        self.file
            .write_all(&self.scratch)
            .map_err(|source| ProfilerError::Io {
                path: self.path.clone(),
                source,
            })?;
        self.bytes += self.scratch.len() as u64;
        Ok(())
    }

    /// Writes the metadata chunk: a [`super::CollectionMeta`] (or, in tests of old or odd
    /// files, any JSON).
    pub fn write_meta(&mut self, meta: &impl serde::Serialize) -> Result<(), ProfilerError> {
        let text = serde_json::to_string(meta).map_err(|e| ProfilerError::Io {
            path: self.path.clone(),
            source: e.into(),
        })?;
        self.write_chunk(ChunkKind::Meta, |b| b.extend_from_slice(text.as_bytes()))
    }

    /// Writes interned strings `(id, text)`.
    pub fn write_strings<'a>(
        &mut self,
        strings: impl IntoIterator<Item = (u32, &'a str)>,
    ) -> Result<(), ProfilerError> {
        self.write_chunk(ChunkKind::Strings, |b| {
            for (id, s) in strings {
                b.extend_from_slice(&id.to_le_bytes());
                b.extend_from_slice(&(s.len() as u32).to_le_bytes());
                b.extend_from_slice(s.as_bytes());
            }
        })
    }

    /// Writes one thread's records.
    pub fn write_records(&mut self, thread: u32, records: &[Record]) -> Result<(), ProfilerError> {
        self.write_chunk(ChunkKind::Records, |b| {
            b.reserve(8 + records.len() * RECORD_SIZE);
            b.extend_from_slice(&thread.to_le_bytes());
            b.extend_from_slice(&0u32.to_le_bytes());
            #[cfg(target_endian = "little")]
            {
                // SAFETY: Record is repr(C), 24 bytes with no padding (asserted in record.rs),
                // so its in-memory bytes on a little-endian target are exactly the file encoding.
                let bytes = unsafe {
                    std::slice::from_raw_parts(
                        records.as_ptr() as *const u8,
                        std::mem::size_of_val(records),
                    )
                };
                b.extend_from_slice(bytes);
            }
            #[cfg(not(target_endian = "little"))]
            for r in records {
                r.to_bytes(b);
            }
        })
    }

    /// Writes a calibration point.
    pub fn write_calibration(&mut self, c: Calibration) -> Result<(), ProfilerError> {
        self.write_chunk(ChunkKind::Calibration, |b| {
            b.extend_from_slice(&c.ticks.to_le_bytes());
            b.extend_from_slice(&c.mono_ns.to_le_bytes());
            b.extend_from_slice(&c.wall_ns.to_le_bytes());
        })
    }

    /// Names a thread.
    pub fn write_thread(&mut self, thread: u32, name: &str) -> Result<(), ProfilerError> {
        self.write_chunk(ChunkKind::Thread, |b| {
            b.extend_from_slice(&thread.to_le_bytes());
            b.extend_from_slice(name.as_bytes());
        })
    }

    /// Writes the truncation marker.
    pub fn write_truncated(&mut self, t: Truncation) -> Result<(), ProfilerError> {
        self.write_chunk(ChunkKind::Truncated, |b| {
            b.extend_from_slice(&t.events_kept.to_le_bytes());
            b.extend_from_slice(&t.bytes_kept.to_le_bytes());
            b.push(t.reason as u8);
        })
    }

    /// Writes the clean-end marker.
    pub fn write_end(&mut self, events: u64, dropped: u64) -> Result<(), ProfilerError> {
        self.write_chunk(ChunkKind::End, |b| {
            b.extend_from_slice(&events.to_le_bytes());
            b.extend_from_slice(&dropped.to_le_bytes());
        })
    }

    /// Asks the OS to put the data on disk.
    pub fn sync(&mut self) -> Result<(), ProfilerError> {
        self.file.sync_data().map_err(|source| ProfilerError::Io {
            path: self.path.clone(),
            source,
        })
    }
}

/// Why a collection was truncated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[repr(u8)]
pub enum TruncReason {
    /// `max_events` reached.
    Events = 1,
    /// `max_bytes` reached.
    Bytes = 2,
}

/// A truncation marker's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Truncation {
    /// Events kept.
    pub events_kept: u64,
    /// Raw bytes kept.
    pub bytes_kept: u64,
    /// Which cap was hit.
    pub reason: TruncReason,
}
