//! Memory mapping, the one wrapper of `memmap2` in the workspace: read-only file mappings
//! ([`Mapping::map_file`]), anonymous buffers sealed read-only ([`AnonMapping`]), giving their
//! pages back to the OS as a reader advances, and the bytes of a raw file ([`RawBytes`]).
//!
//! Large raw files are memory-mapped read-only, so chunks are decoded straight from the page
//! cache (a `read` into a buffer costs a copy per pass, about 40% of decode time on the
//! benchmark). To keep the process's resident memory bounded whatever the file size, the pages
//! behind the reader are handed back to the OS as it advances ([`RawBytes::release_before`]):
//! they stay in the page cache, but leave this process's RSS. Small files are simply read.
//!
//! The raw file of a completed collection is never written again (the profiler renames the
//! collection directory when it stops), which is what makes the mapping sound; a file
//! truncated by another process *while* it is parsed would fault the parser.

use crate::ProfilerError;
use memmap2::{Advice, Mmap, MmapMut, UncheckedAdvice};
use std::cell::Cell;
use std::fs::File;
use std::path::Path;

/// Raw files at least this large are mapped; smaller ones are read.
const MAP_MIN: u64 = 1 << 20;
/// Pages of a raw file are released in steps of this many bytes: at most this much of the file
/// is resident behind a reader (8 MiB: `report` on 10 M events peaks at 1.39x the raw file, at
/// 1.49x with 32 MiB steps; a release is one `madvise` call per step).
const RELEASE_STEP: usize = 8 << 20;
/// Granule of what is given back: pages wholly inside a range (4 KiB pages; on a system with
/// larger pages the kernel rounds the start down, which for a file only costs a re-read of a
/// neighbour's page).
const PAGE: usize = 4096;

/// A read-only mapping: of a file, or of an anonymous buffer sealed by
/// [`AnonMapping::into_read_only`]. Reads as its bytes (`Deref<Target = [u8]>`).
#[derive(Debug)]
pub struct Mapping {
    map: Mmap,
    /// An anonymous buffer: its pages *are* the bytes (given back, they read as zeros).
    anon: bool,
}

impl Mapping {
    /// Maps `file` read-only.
    ///
    /// # Safety
    ///
    /// The file must not be modified (truncated, written) while the mapping lives: the bytes
    /// are handed out as `&[u8]`. rlprof maps only files written once and never again (the raw
    /// files of a completed collection, finished trace files).
    pub unsafe fn map_file(file: &File) -> std::io::Result<Mapping> {
        // SAFETY: the caller's contract (above).
        let map = unsafe { Mmap::map(file) }?;
        Ok(Mapping { map, anon: false })
    }

    /// Tells the OS the mapping is read front to back (readahead); failing changes nothing.
    pub fn advise_sequential(&self) {
        let _ = self.map.advise(Advice::Sequential);
    }

    /// Gives back this process's pages wholly inside `from..to` of a *file* mapping: they leave
    /// its resident memory, and a later read faults the same file contents back in, so every
    /// outstanding borrow still sees the same bytes. Does nothing on an anonymous mapping,
    /// whose pages are the bytes (see [`Mapping::discard_pages`]).
    pub fn release_pages(&self, from: usize, to: usize) {
        if !self.anon {
            // SAFETY: a file mapping (see above): dropping pages only makes the next access
            // read them back from the unchanged file.
            unsafe { self.give_back(from, to) }
        }
    }

    /// Gives back the pages wholly inside `from..to`, whatever the mapping: on an anonymous
    /// mapping they read as zeros afterwards.
    ///
    /// # Safety
    ///
    /// On an anonymous mapping, no byte of `from..to` may be read again (through a borrow
    /// taken before or after this call); on a file mapping this is [`Mapping::release_pages`].
    pub unsafe fn discard_pages(&self, from: usize, to: usize) {
        // SAFETY: the caller's contract.
        unsafe { self.give_back(from, to) }
    }

    /// `MADV_DONTNEED` on the pages wholly inside `from..to` (clamped to the mapping).
    ///
    /// # Safety
    ///
    /// As [`Mapping::discard_pages`].
    unsafe fn give_back(&self, from: usize, to: usize) {
        let to = to.min(self.map.len());
        let start = from.div_ceil(PAGE) * PAGE;
        let end = to / PAGE * PAGE;
        if end <= start {
            return;
        }
        // SAFETY: the range is inside the map; what the bytes read afterwards is the caller's
        // contract. Failing to give pages back only costs memory, never correctness.
        let _ = unsafe {
            self.map
                .unchecked_advise_range(UncheckedAdvice::DontNeed, start, end - start)
        };
    }
}

impl std::ops::Deref for Mapping {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        &self.map
    }
}

/// A writable anonymous buffer (zero-filled pages, reserved but not resident until written),
/// sealed read-only with [`AnonMapping::into_read_only`].
#[derive(Debug)]
pub struct AnonMapping(MmapMut);

impl AnonMapping {
    /// A buffer of `len` bytes.
    pub fn new(len: usize) -> std::io::Result<AnonMapping> {
        MmapMut::map_anon(len).map(AnonMapping)
    }

    /// The buffer, read-only from now on.
    pub fn into_read_only(self) -> std::io::Result<Mapping> {
        Ok(Mapping {
            map: self.0.make_read_only()?,
            anon: true,
        })
    }
}

impl std::ops::Deref for AnonMapping {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl std::ops::DerefMut for AnonMapping {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.0
    }
}

/// A raw file's bytes (`rlprof_raw/rank_N.rlraw`), mapped or, when small, read.
#[derive(Debug)]
pub struct RawBytes {
    map: Option<Mapping>,
    owned: Vec<u8>,
    released: Cell<usize>,
}

impl RawBytes {
    /// Maps (or, when small, reads) the raw file at `path`.
    pub fn open(path: &Path) -> Result<RawBytes, ProfilerError> {
        let io = |source| ProfilerError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        if len < MAP_MIN {
            let owned = std::fs::read(path).map_err(io)?;
            return Ok(RawBytes {
                map: None,
                owned,
                released: Cell::new(0),
            });
        }
        // SAFETY: the raw file of a collection is not written again once the collection is
        // complete (see the module docs); the bytes are only read through `&[u8]`.
        let map = unsafe { Mapping::map_file(&file) }.map_err(io)?;
        map.advise_sequential();
        Ok(RawBytes {
            map: Some(map),
            owned: Vec::new(),
            released: Cell::new(0),
        })
    }

    /// The whole file.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&self.owned)
    }

    /// Starts another pass from the beginning: [`RawBytes::release_before`] releases again the
    /// pages the pass touches (the pages released by an earlier pass are faulted back in as it
    /// reads them).
    pub fn restart(&self) {
        self.released.set(0);
    }

    /// Drops this process's resident pages of the bytes before `offset` once a step's worth
    /// has been read past (their content is unchanged if touched again: it is re-read from
    /// the file).
    pub fn release_before(&self, offset: u64) {
        let Some(map) = &self.map else {
            return;
        };
        let upto = (offset as usize).min(map.len()) / RELEASE_STEP * RELEASE_STEP;
        let from = self.released.get();
        if upto <= from {
            return;
        }
        map.release_pages(from, upto);
        self.released.set(upto);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_files_are_read_large_ones_mapped() {
        let d = tempfile::tempdir().unwrap();
        let small = d.path().join("small");
        std::fs::write(&small, b"abc").unwrap();
        let b = RawBytes::open(&small).unwrap();
        assert!(b.map.is_none());
        assert_eq!(b.bytes(), b"abc");
        let large = d.path().join("large");
        let data: Vec<u8> = (0..(RELEASE_STEP + 3 * PAGE)).map(|i| i as u8).collect();
        std::fs::write(&large, &data).unwrap();
        let b = RawBytes::open(&large).unwrap();
        assert!(b.map.is_some());
        b.release_before(data.len() as u64);
        assert_eq!(b.released.get(), RELEASE_STEP);
        assert_eq!(b.bytes(), &data[..], "released pages read back the same");
        b.release_before(data.len() as u64);
        assert_eq!(
            b.released.get(),
            RELEASE_STEP,
            "a pass releases a range once"
        );
        b.restart();
        assert_eq!(b.released.get(), 0);
        b.release_before(data.len() as u64);
        assert_eq!(
            b.released.get(),
            RELEASE_STEP,
            "the next pass releases it again"
        );
        assert_eq!(b.bytes(), &data[..]);
        assert!(matches!(
            RawBytes::open(&d.path().join("missing")),
            Err(ProfilerError::Io { .. })
        ));
    }

    #[test]
    fn an_anonymous_buffer_seals_and_discards() {
        let mut a = AnonMapping::new(3 * PAGE).unwrap();
        a[..3].copy_from_slice(b"xyz");
        a[2 * PAGE] = 7;
        let m = a.into_read_only().unwrap();
        assert_eq!(&m[..3], b"xyz");
        m.release_pages(0, 3 * PAGE);
        assert_eq!(
            &m[..3],
            b"xyz",
            "release_pages leaves an anonymous buffer alone"
        );
        // SAFETY: the first two pages are not read again below.
        unsafe { m.discard_pages(0, 2 * PAGE) };
        assert_eq!(m[2 * PAGE], 7);
    }
}
