//! A CSV file written row by row from a reusable line buffer (no per-field allocation).
//!
//! Text fields are escaped with [`text_format::csv_field`] (the `csv` crate's rule), so the bytes are
//! those the `csv` crate writes for the same fields.

use crate::ExportError;
use crate::text_format;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The line buffer goes to the file (one `write`, no second buffer) beyond this many bytes.
const FLUSH_AT: usize = 1 << 20;

/// One CSV output file.
pub(crate) struct CsvOut {
    w: File,
    buf: Vec<u8>,
    path: PathBuf,
    in_row: bool,
    ts: text_format::UsCache,
}

impl CsvOut {
    /// Creates the file and writes the header row.
    pub(crate) fn create(path: &Path, header: &[&str]) -> Result<CsvOut, ExportError> {
        let f =
            rlprof_profiler::collection::safe_fs::create(path).map_err(ExportError::io(path))?;
        let mut c = CsvOut {
            w: f,
            buf: Vec::with_capacity(FLUSH_AT + (1 << 12)),
            path: path.to_path_buf(),
            in_row: false,
            ts: text_format::UsCache::default(),
        };
        for h in header {
            c.str(h);
        }
        c.end_row()?;
        Ok(c)
    }

    #[inline]
    fn sep(&mut self) {
        if self.in_row {
            self.buf.push(b',');
        }
        self.in_row = true;
    }

    /// A text field (escaped).
    #[inline]
    pub(crate) fn str(&mut self, s: &str) {
        self.sep();
        text_format::csv_field(&mut self.buf, s);
    }

    /// A field already in CSV form (numbers, cached escaped names).
    #[inline]
    pub(crate) fn raw(&mut self, b: &[u8]) {
        self.sep();
        self.buf.extend_from_slice(b);
    }

    /// An empty field.
    #[inline]
    pub(crate) fn empty(&mut self) {
        self.sep();
    }

    /// Microseconds with 3 decimals.
    #[inline]
    pub(crate) fn us(&mut self, ns: u64) {
        self.sep();
        self.ts.us3(&mut self.buf, ns);
    }

    /// An integer.
    #[inline]
    pub(crate) fn uint(&mut self, v: u64) {
        self.sep();
        text_format::uint(&mut self.buf, v);
    }

    /// `format!("{:.D$}", x)`.
    #[inline]
    pub(crate) fn fixed(&mut self, x: f64, decimals: u32) {
        self.sep();
        text_format::fixed(&mut self.buf, x, decimals);
    }

    /// Ends the row.
    pub(crate) fn end_row(&mut self) -> Result<(), ExportError> {
        self.buf.push(b'\n');
        self.in_row = false;
        if self.buf.len() >= FLUSH_AT {
            self.w
                .write_all(&self.buf)
                .map_err(ExportError::io(&self.path))?;
            self.buf.clear();
        }
        Ok(())
    }

    /// Writes what is buffered and closes the file.
    pub(crate) fn finish(mut self) -> Result<(), ExportError> {
        self.w
            .write_all(&self.buf)
            .map_err(ExportError::io(&self.path))?;
        self.w.flush().map_err(ExportError::io(&self.path))
    }
}
