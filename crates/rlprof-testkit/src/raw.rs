//! Crafted raw files.

use rlprof_profiler::clock::Calibration;
use rlprof_profiler::raw::{CollectionMeta, RawWriter};
use rlprof_profiler::record::Record;
use std::path::Path;

/// The tick (and monotonic nanosecond) at which crafted collections start.
pub const T0: u64 = 5_000_000_000;

/// The wall clock (ns since the epoch) at [`T0`].
pub const WALL0: u64 = 1_700_000_000_000_000_000;

/// A calibration point at `ticks` of a clock running at 1 ns per tick, [`WALL0`] at [`T0`].
pub fn calibration(ticks: u64) -> Calibration {
    Calibration {
        ticks,
        mono_ns: ticks,
        wall_ns: ticks - T0 + WALL0,
    }
}

/// The metadata of a crafted collection of rank `rank`: plan steps `[1]`, started at [`T0`]
/// ([`WALL0`]), 1 ns per tick, the rest default.
pub fn raw_meta(rank: u32) -> CollectionMeta {
    CollectionMeta {
        rank,
        steps: vec![1],
        start_wall_ns: WALL0,
        start_mono_ns: T0,
        ns_per_tick: Some(1.0),
        ..CollectionMeta::default()
    }
}

/// Writes a raw collection file chunk by chunk: [`RawFileBuilder::create`] writes the Meta
/// chunk and a first calibration at [`T0`], the test adds strings and records (or any chunk
/// through [`RawFileBuilder::writer`]), and [`RawFileBuilder::end`] closes it as a clean
/// collection does. A file never ended reads as a killed collection.
pub struct RawFileBuilder {
    w: RawWriter,
}

/// Bytes before a Records chunk's first record: the chunk header, then the thread id and the
/// record count.
const RECORDS_HEADER: u64 = 16 + 8;

/// Bytes of one record.
const RECORD_BYTES: u64 = 24;

impl RawFileBuilder {
    /// Creates `path` and writes `meta` and the first calibration point ([`T0`]).
    pub fn create(path: &Path, meta: &CollectionMeta) -> RawFileBuilder {
        let mut w =
            RawWriter::create(path).unwrap_or_else(|e| panic!("creating {}: {e}", path.display()));
        w.write_meta(meta).unwrap();
        w.write_calibration(calibration(T0)).unwrap();
        RawFileBuilder { w }
    }

    /// Writes a Strings chunk.
    pub fn strings(&mut self, strings: &[(u32, &str)]) -> &mut RawFileBuilder {
        self.w.write_strings(strings.iter().copied()).unwrap();
        self
    }

    /// Writes one Records chunk of `thread`; returns the byte offset of each record.
    pub fn records(&mut self, thread: u32, recs: &[Record]) -> Vec<u64> {
        let at = self.next_record_offset();
        self.w.write_records(thread, recs).unwrap();
        (0..recs.len() as u64)
            .map(|i| at + RECORD_BYTES * i)
            .collect()
    }

    /// The byte offset of the first record of the Records chunk written next.
    pub fn next_record_offset(&self) -> u64 {
        self.w.bytes_written() + RECORDS_HEADER
    }

    /// The writer, for chunks this builder has no method for.
    pub fn writer(&mut self) -> &mut RawWriter {
        &mut self.w
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        self.w.path()
    }

    /// Closes the collection cleanly: a second calibration point 2 s after [`T0`], then the End
    /// chunk counting `events` events (none dropped).
    pub fn end(&mut self, events: u64) -> &mut RawFileBuilder {
        self.w
            .write_calibration(calibration(T0 + 2_000_000_000))
            .unwrap();
        self.w.write_end(events, 0).unwrap();
        self
    }
}
