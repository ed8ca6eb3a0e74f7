//! The bytes of a raw file for the parser's passes, without copying them.
//!
//! Large files are memory-mapped read-only, so chunks are decoded straight from the page cache
//! (a `read` into a buffer costs a copy per pass, about 40% of decode time on the benchmark).
//! To keep the process's resident memory bounded whatever the file size, the pages behind the
//! reader are handed back to the OS as it advances ([`RawBytes::release_before`]): they stay in
//! the page cache, but leave this process's RSS. Small files are simply read.
//!
//! The raw file of a completed collection is never written again (the profiler renames the
//! collection directory when it stops), which is what makes the mapping sound; a file
//! truncated by another process *while* it is parsed would fault the parser.

use crate::ExportError;
use memmap2::{Advice, Mmap, UncheckedAdvice};
use std::cell::Cell;
use std::fs::File;
use std::path::Path;

/// Files at least this large are mapped; smaller ones are read.
const MAP_MIN: u64 = 1 << 20;
/// Pages are released in steps of this many bytes.
const RELEASE_STEP: usize = 32 << 20;

/// A raw file's bytes.
#[derive(Debug)]
pub(crate) struct RawBytes {
    map: Option<Mmap>,
    owned: Vec<u8>,
    released: Cell<usize>,
}

impl RawBytes {
    /// Maps (or, when small, reads) the file at `path`.
    pub(crate) fn open(path: &Path) -> Result<RawBytes, ExportError> {
        let io = ExportError::io(path);
        let file = File::open(path).map_err(io)?;
        let len = file.metadata().map_err(ExportError::io(path))?.len();
        if len < MAP_MIN {
            let owned = std::fs::read(path).map_err(ExportError::io(path))?;
            return Ok(RawBytes {
                map: None,
                owned,
                released: Cell::new(0),
            });
        }
        // SAFETY: read-only shared mapping of a file nothing writes while it is parsed (see the
        // module docs); the bytes are only read through `&[u8]`.
        let map = unsafe { Mmap::map(&file) }.map_err(ExportError::io(path))?;
        // Advice only tunes readahead; failing to give it changes nothing.
        let _ = map.advise(Advice::Sequential);
        Ok(RawBytes {
            map: Some(map),
            owned: Vec::new(),
            released: Cell::new(0),
        })
    }

    /// The whole file.
    #[inline]
    pub(crate) fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&self.owned)
    }

    /// Drops this process's resident pages of the bytes before `offset` once a step's worth
    /// has been read past (their content is unchanged if touched again: it is re-read from
    /// the file).
    pub(crate) fn release_before(&self, offset: u64) {
        let Some(map) = &self.map else {
            return;
        };
        let upto = (offset as usize).min(map.len()) / RELEASE_STEP * RELEASE_STEP;
        let from = self.released.get();
        if upto <= from {
            return;
        }
        // SAFETY: MADV_DONTNEED on a read-only shared file mapping only drops page-table
        // entries; later reads fault the same file contents back in, so outstanding `&[u8]`
        // borrows stay valid and unchanged.
        let _ = unsafe { map.unchecked_advise_range(UncheckedAdvice::DontNeed, from, upto - from) };
        self.released.set(upto);
    }
}
