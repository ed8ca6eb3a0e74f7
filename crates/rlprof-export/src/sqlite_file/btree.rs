//! Table B-trees built bottom-up from rows that arrive in rowid order: cells fill a leaf page
//! until it is full, the leaf goes to the file, and once the table is complete its interior
//! levels are built over the list of leaves. Payloads too large for a page spill into overflow
//! pages. See <https://sqlite.org/fileformat2.html#b_tree_pages>.

use super::record::{put_varint, varint_len};
use std::io::{self, Write};

/// Page size: SQLite's default (a 64 KiB page measured no faster here and makes every small
/// table take 64 KiB).
pub(super) const PAGE: usize = 4096;
/// Bytes at the start of page 1 taken by the database header.
pub(super) const DB_HEADER: usize = 100;
/// Page type of a table B-tree leaf.
const LEAF: u8 = 0x0d;
/// Page type of a table B-tree interior page.
const INTERIOR: u8 = 0x05;
/// Header bytes of a leaf page.
const LEAF_HEADER: usize = 8;
/// Header bytes of an interior page.
const INTERIOR_HEADER: usize = 12;
/// The most payload a table leaf cell keeps on its page (`X` of the file format).
const MAX_LOCAL: usize = PAGE - 35;
/// The least payload a spilling cell keeps on its page (`M` of the file format).
const MIN_LOCAL: usize = (PAGE - 12) * 32 / 255 - 23;

/// Where pages go: they are numbered as they are handed out and must be written in that
/// order, so the file is written front to back; page 1 (the schema and the header) is
/// reserved at the start and written last.
pub(super) struct PageSink<W: Write> {
    out: W,
    /// The next page number to hand out.
    next: u32,
    /// Pages written so far (page 1 counts once it is reserved).
    written: u32,
}

impl<W: Write> PageSink<W> {
    /// A sink whose first page (page 1) is written as zeros, to be overwritten at the end.
    pub(super) fn new(mut out: W) -> io::Result<Self> {
        out.write_all(&[0u8; PAGE])?;
        Ok(PageSink {
            out,
            next: 2,
            written: 1,
        })
    }

    /// Hands out the next page number.
    fn alloc(&mut self) -> u32 {
        let p = self.next;
        self.next += 1;
        p
    }

    /// Writes page `pgno`, which must be the next one in the file.
    fn write(&mut self, pgno: u32, page: &[u8]) -> io::Result<()> {
        debug_assert_eq!(page.len(), PAGE);
        debug_assert_eq!(pgno, self.written + 1, "pages are written in order");
        self.out.write_all(page)?;
        self.written = pgno;
        Ok(())
    }

    /// The number of pages in the file.
    pub(super) fn pages(&self) -> u32 {
        self.written
    }

    /// The writer, once every page is written.
    pub(super) fn into_inner(self) -> W {
        self.out
    }
}

/// One page being filled with cells: cell pointers grow from the header, cell contents from
/// the end of the page down.
struct PageBuf {
    buf: Box<[u8]>,
    /// Where the page header starts (100 on page 1, else 0).
    at: usize,
    header: usize,
    cells: usize,
    /// Start of the cell content area.
    content: usize,
}

impl PageBuf {
    fn new(at: usize, header: usize) -> PageBuf {
        PageBuf {
            buf: vec![0u8; PAGE].into_boxed_slice(),
            at,
            header,
            cells: 0,
            content: PAGE,
        }
    }

    /// Whether a cell of `len` bytes (and its 2-byte pointer) still fits.
    #[inline]
    fn fits(&self, len: usize) -> bool {
        self.at + self.header + 2 * (self.cells + 1) + len <= self.content
    }

    /// Room for a cell of `len` bytes; the caller fills it.
    #[inline]
    fn cell(&mut self, len: usize) -> &mut [u8] {
        debug_assert!(self.fits(len));
        self.content -= len;
        let ptr = self.at + self.header + 2 * self.cells;
        self.buf[ptr..ptr + 2].copy_from_slice(&(self.content as u16).to_be_bytes());
        self.cells += 1;
        &mut self.buf[self.content..self.content + len]
    }

    /// Fills in the page header (type, cell count, content start; no free blocks) and the
    /// right-most child of an interior page.
    fn seal(&mut self, kind: u8, right: Option<u32>) -> &[u8] {
        let h = &mut self.buf[self.at..self.at + self.header];
        h[0] = kind;
        h[1..3].fill(0);
        h[3..5].copy_from_slice(&(self.cells as u16).to_be_bytes());
        // A content area starting at 65 536 is written as 0.
        h[5..7].copy_from_slice(&((self.content % 65_536) as u16).to_be_bytes());
        h[7] = 0;
        if let Some(r) = right {
            h[8..12].copy_from_slice(&r.to_be_bytes());
        }
        // The unallocated space between the pointers and the cells still holds the cells of
        // the page this buffer held before.
        let gap = self.at + self.header + 2 * self.cells;
        self.buf[gap..self.content].fill(0);
        &self.buf
    }

    /// Empties the page for reuse (what it held is overwritten or cleared by [`Self::seal`]).
    fn reset(&mut self) {
        self.cells = 0;
        self.content = PAGE;
    }
}

/// One table's B-tree as its rows arrive.
pub(super) struct TableTree {
    leaf: PageBuf,
    /// The last rowid given out.
    rowid: i64,
    /// The leaves written so far: (page, largest rowid).
    leaves: Vec<(u32, i64)>,
}

impl TableTree {
    /// An empty table.
    pub(super) fn new() -> TableTree {
        TableTree {
            leaf: PageBuf::new(0, LEAF_HEADER),
            rowid: 0,
            leaves: Vec::new(),
        }
    }

    /// Appends a row whose record is `payload`, with the next rowid.
    pub(super) fn push<W: Write>(
        &mut self,
        sink: &mut PageSink<W>,
        payload: &[u8],
    ) -> io::Result<()> {
        let rowid = self.rowid + 1;
        let (local, spills) = local_size(payload.len());
        let head = varint_len(payload.len() as u64) + varint_len(rowid as u64);
        let len = head + local + if spills { 4 } else { 0 };
        if !self.leaf.fits(len) {
            self.flush_leaf(sink)?;
        }
        self.rowid = rowid;
        let first_overflow = if spills {
            write_overflow(sink, &payload[local..])?
        } else {
            0
        };
        let cell = self.leaf.cell(len);
        let mut n = put_varint(cell, payload.len() as u64);
        n += put_varint(&mut cell[n..], rowid as u64);
        cell[n..n + local].copy_from_slice(&payload[..local]);
        if spills {
            cell[n + local..].copy_from_slice(&first_overflow.to_be_bytes());
        }
        Ok(())
    }

    /// Writes the leaf being filled; its largest rowid is the last one given out.
    fn flush_leaf<W: Write>(&mut self, sink: &mut PageSink<W>) -> io::Result<()> {
        let pgno = sink.alloc();
        sink.write(pgno, self.leaf.seal(LEAF, None))?;
        self.leaves.push((pgno, self.rowid));
        self.leaf.reset();
        Ok(())
    }

    /// Writes what is left and the interior levels; returns the root page.
    pub(super) fn finish<W: Write>(mut self, sink: &mut PageSink<W>) -> io::Result<u32> {
        if self.leaf.cells > 0 || self.leaves.is_empty() {
            self.flush_leaf(sink)?;
        }
        let mut level = self.leaves;
        while level.len() > 1 {
            level = interior_level(sink, &level)?;
        }
        Ok(level[0].0)
    }
}

/// Writes one interior level over `children` (page, largest rowid), spread evenly over as few
/// pages as hold them (so that every page has two children or more); returns the new level.
fn interior_level<W: Write>(
    sink: &mut PageSink<W>,
    children: &[(u32, i64)],
) -> io::Result<Vec<(u32, i64)>> {
    // A cell is a 4-byte child and a varint key of at most 9 bytes, plus its 2-byte pointer;
    // the right-most child lives in the header.
    let per_page = (PAGE - INTERIOR_HEADER) / (4 + 9 + 2) + 1;
    let pages = children.len().div_ceil(per_page);
    let chunk = children.len().div_ceil(pages);
    let mut page = PageBuf::new(0, INTERIOR_HEADER);
    let mut up = Vec::with_capacity(pages);
    for group in children.chunks(chunk) {
        let (last, rest) = group.split_last().expect("chunks are not empty");
        for &(child, key) in rest {
            let len = 4 + varint_len(key as u64);
            let cell = page.cell(len);
            cell[..4].copy_from_slice(&child.to_be_bytes());
            put_varint(&mut cell[4..], key as u64);
        }
        let pgno = sink.alloc();
        sink.write(pgno, page.seal(INTERIOR, Some(last.0)))?;
        up.push((pgno, last.1));
        page.reset();
    }
    Ok(up)
}

/// How much of a payload of `len` bytes stays on the leaf page, and whether the rest spills.
#[inline]
fn local_size(len: usize) -> (usize, bool) {
    if len <= MAX_LOCAL {
        return (len, false);
    }
    let k = MIN_LOCAL + (len - MIN_LOCAL) % (PAGE - 4);
    (if k <= MAX_LOCAL { k } else { MIN_LOCAL }, true)
}

/// Writes `rest` as a chain of overflow pages; returns the first page's number.
fn write_overflow<W: Write>(sink: &mut PageSink<W>, rest: &[u8]) -> io::Result<u32> {
    let chunks: Vec<&[u8]> = rest.chunks(PAGE - 4).collect();
    let first = sink.next;
    let mut page = vec![0u8; PAGE];
    for (i, c) in chunks.iter().enumerate() {
        let pgno = sink.alloc();
        let next = if i + 1 < chunks.len() { pgno + 1 } else { 0 };
        page[..4].copy_from_slice(&next.to_be_bytes());
        page[4..4 + c.len()].copy_from_slice(c);
        page[4 + c.len()..].fill(0);
        sink.write(pgno, &page)?;
    }
    Ok(first)
}

/// Page 1: the database header and the schema table's only page, a leaf holding `rows` (the
/// records of `sqlite_schema`, rowids from 1). Returns None when they do not fit on one page.
pub(super) fn page_one(header: &[u8; DB_HEADER], rows: &[Vec<u8>]) -> Option<Vec<u8>> {
    let mut page = PageBuf::new(DB_HEADER, LEAF_HEADER);
    for (i, payload) in rows.iter().enumerate() {
        let rowid = i as u64 + 1;
        if local_size(payload.len()).1 {
            return None;
        }
        let len = varint_len(payload.len() as u64) + varint_len(rowid) + payload.len();
        if !page.fits(len) {
            return None;
        }
        let cell = page.cell(len);
        let mut n = put_varint(cell, payload.len() as u64);
        n += put_varint(&mut cell[n..], rowid);
        cell[n..].copy_from_slice(payload);
    }
    let mut out = page.seal(LEAF, None).to_vec();
    out[..DB_HEADER].copy_from_slice(header);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_sizes_follow_the_file_format() {
        assert_eq!(local_size(10), (10, false));
        assert_eq!(local_size(MAX_LOCAL), (MAX_LOCAL, false));
        let (local, spills) = local_size(MAX_LOCAL + 1);
        assert!(spills);
        assert!((MIN_LOCAL..=MAX_LOCAL).contains(&local));
        // What spills fills whole overflow pages when K would not fit.
        let len = 3 * PAGE;
        let (local, _) = local_size(len);
        let k = MIN_LOCAL + (len - MIN_LOCAL) % (PAGE - 4);
        assert_eq!(local, if k <= MAX_LOCAL { k } else { MIN_LOCAL });
    }
}
