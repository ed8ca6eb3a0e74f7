//! Raw files: a header followed by self-checking chunks (length + CRC-32), so that a process
//! killed at any point leaves a file whose complete chunks can all be read back.
//!
//! Format version 1, all integers little-endian (see `docs/raw-format.md`):
//! ```text
//! file   = header chunk*
//! header = "RLPROFRW" u32 version u32 record_size
//! chunk  = u32 magic "CHNK" | u16 kind | u16 reserved | u32 payload_len | u32 crc32(payload) | payload
//! ```
//! Writer and reader live together, so that the format has one meaning:
//! - `writer`: [`RawWriter`], used by the flusher, never on the hot path;
//! - `reader`: chunk-level reading, streaming ([`RawReader`]) or over bytes in memory
//!   ([`SliceReader`]), one chunk at a time, so memory stays bounded whatever the file size;
//! - `meta`: the Meta chunk, [`CollectionMeta`], in the plan's own types;
//! - `names`: the string table;
//! - `event` and `decode`: the one decoder every reader uses, [`RawIndex`] (clock mapping,
//!   Ext pairing into typed [`Event`]s, validation of impossible contents).
//!
//! Where raw files live in a collection, and what they are called, is [`crate::collection`]'s.

mod decode;
mod event;
mod meta;
mod names;
mod reader;
mod writer;

pub use decode::{ClockWindow, RawIndex, RawWarning, WarningKind};
pub use event::{CommEv, Event, KernelEv, MemEv, RangeEv};
pub use meta::{CollectionMeta, RoleSchedule};
pub use reader::{Chunk, ChunkRef, Corruption, RawReader, RawSummary, SliceReader, records_of};
pub use writer::{RawWriter, TruncReason, Truncation};

/// File magic.
pub const FILE_MAGIC: &[u8; 8] = b"RLPROFRW";
/// Raw format version.
pub const FORMAT_VERSION: u32 = 1;
/// Chunk magic ("CHNK" little-endian).
pub const CHUNK_MAGIC: u32 = u32::from_le_bytes(*b"CHNK");
const HEADER_LEN: usize = 16;
const CHUNK_HEADER_LEN: usize = 16;
/// Largest payload a reader accepts (guards against a corrupt length).
pub const MAX_PAYLOAD: usize = 64 << 20;

/// Chunk kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum ChunkKind {
    /// JSON collection metadata.
    Meta = 1,
    /// Interned strings: repeated `u32 id, u32 len, bytes`.
    Strings = 2,
    /// Records of one thread: `u32 thread, u32 reserved, record*`.
    Records = 3,
    /// A calibration point: `u64 ticks, u64 mono_ns, u64 wall_ns`.
    Calibration = 4,
    /// A thread's name: `u32 thread, bytes`.
    Thread = 5,
    /// Truncation marker: `u64 events_kept, u64 bytes_kept, u8 reason (1 events, 2 bytes)`.
    Truncated = 6,
    /// Clean end: `u64 events, u64 dropped`.
    End = 7,
}

impl ChunkKind {
    fn from_u16(v: u16) -> Option<ChunkKind> {
        Some(match v {
            1 => ChunkKind::Meta,
            2 => ChunkKind::Strings,
            3 => ChunkKind::Records,
            4 => ChunkKind::Calibration,
            5 => ChunkKind::Thread,
            6 => ChunkKind::Truncated,
            7 => ChunkKind::End,
            _ => return None,
        })
    }
}
