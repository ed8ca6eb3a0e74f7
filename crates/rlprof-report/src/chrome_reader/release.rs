//! Giving the pages of an input's text back once they are read, so that the text does not
//! count in the process's resident memory for the whole parse (issue 13's bound: peak RSS of
//! `report` within 1.5x of the input's text, or of the decompressed trace).
//!
//! Two kinds of text can give pages back:
//!
//! - A read-only mapping of a file (a plain `.json`): `MADV_DONTNEED` drops the process's
//!   page-table entries (nothing is discarded: a read-only mapping has no pages of its own),
//!   and a page touched again is read back from the file with the same bytes. So pages can be
//!   given back as soon as they are parsed (each chunk, on the thread that parsed it), and every later
//!   read (a chunk parsed again from a corrected start, an error's line and column) still
//!   sees the file's text.
//! - An anonymous mapping holding a gunzipped text: there the pages *are* the text, and a page
//!   given back reads as zeros afterwards. So only text that will never be read again is given
//!   back: the stretch of the events array before the last chunk whose start was checked
//!   (chunks are parsed in waves for this, see `parse::parse_chunks`). An error's line and
//!   column, which need the text before it, are found by reading the file again
//!   (`file::read_gz`).
//!
//! Text held in a `Vec` (small files, streams, text repaired as UTF-8) gives nothing back.
//! The mappings are `rlprof_profiler::collection::mmap`'s, the workspace's one wrapper.

use rlprof_profiler::collection::mmap::Mapping;

/// Where a parse may give back pages of the text it has read: the mapping the text lies in,
/// if it is one, and which kind.
#[derive(Clone, Copy)]
pub(super) enum Release<'m> {
    /// Nothing is given back.
    None,
    /// A read-only file mapping: any page, at any time.
    File(&'m Mapping),
    /// An anonymous mapping (the text itself): only text that was parsed and checked.
    Consumed(&'m Mapping),
}

impl Release<'_> {
    /// Gives back the pages wholly inside `from..to` of a file mapping, just read (nothing for
    /// an anonymous text: it may still be read).
    pub(super) fn read(&self, from: usize, to: usize) {
        if let Release::File(map) = self {
            give_back(map, from, to);
        }
    }

    /// Gives back the pages wholly inside `from..to`, text that was parsed, checked, and is
    /// never read again.
    pub(super) fn consumed(&self, from: usize, to: usize) {
        match self {
            Release::File(map) | Release::Consumed(map) => give_back(map, from, to),
            Release::None => {}
        }
    }

    /// Whether pages are given back only once parsed and checked (after each wave of the
    /// parse): an error's line and column then need the text read again.
    pub(super) fn in_waves(&self) -> bool {
        matches!(self, Release::Consumed(_))
    }
}

/// Gives back the pages wholly inside `from..to` (the wrapper rounds to whole pages: 4 KiB,
/// on a system with larger pages the kernel rounds the start down, which for a file only costs
/// a re-read of a neighbour's page; an anonymous text is only ever given back up to a checked
/// position, with the whole page before it consumed too).
fn give_back(map: &Mapping, from: usize, to: usize) {
    // SAFETY: for a file mapping (read-only, of a file not modified while a report is built:
    // the assumption it was mapped under, see `file::read_into`), dropping pages only makes
    // the next access read them back from the file, so the bytes any `&str` into the text
    // sees do not change. For an anonymous text, `consumed` is only called on text before the
    // position a checked parse has passed; nothing reads it again (later chunks, the rest of
    // the document, and each chunk's results own what they keep; an error's position is
    // mapped to a line by reading the file again). Failing to give pages back only costs
    // memory, never correctness.
    unsafe { map.discard_pages(from, to) }
}
