//! Giving a memory-mapped input's pages back once they are read, so that the mapped text does
//! not count in the process's resident memory for the whole parse (issue 13's bound: peak RSS
//! of `report` within 1.5x of the input's text).
//!
//! Only for a read-only mapping of a file: `MADV_DONTNEED` there drops the process's page-table
//! entries (nothing is discarded: a read-only mapping has no pages of its own), and a page
//! touched again is read back from the file (page cache) with the same bytes, so every later read (a chunk parsed again from a corrected start, an error's
//! line and column, a `B` event's `args`) still sees the file's text. Text held in memory
//! (gunzipped, read from a stream, small files) is never released: there the pages *are* the
//! text.

/// Where a parse may give back pages of the text it has read: the mapping the text lies in,
/// if it is one.
#[derive(Clone, Copy, Default)]
pub(super) struct Release<'m> {
    map: Option<&'m memmap2::Mmap>,
}

/// Granule of what is given back: pages wholly inside a range (4 KiB pages; on a system with
/// larger pages the kernel rounds the start down, which only costs a re-read of a neighbour's
/// page).
const PAGE: usize = 4096;

impl<'m> Release<'m> {
    /// Nothing is given back (text held in memory).
    pub(super) const NONE: Release<'static> = Release { map: None };

    /// Pages of `map` may be given back; the text parsed must be `map`'s bytes.
    pub(super) fn of_map(map: &'m memmap2::Mmap) -> Release<'m> {
        Release { map: Some(map) }
    }

    /// Gives back the pages wholly inside `from..to` (byte offsets into the text).
    pub(super) fn range(&self, from: usize, to: usize) {
        let Some(map) = self.map else { return };
        let to = to.min(map.len());
        let start = from.div_ceil(PAGE) * PAGE;
        let end = to / PAGE * PAGE;
        if end <= start {
            return;
        }
        // SAFETY: `map` is a read-only mapping of a file that is not modified while a
        // report is built (the assumption under which it was mapped, see `file::read_into`);
        // dropping its pages only makes the next access read them back from the file, so the
        // bytes any `&str` into the text sees do not change. The range is inside the map.
        let res = unsafe {
            map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start)
        };
        // Failing to give pages back only costs memory, never correctness.
        let _ = res;
    }
}
