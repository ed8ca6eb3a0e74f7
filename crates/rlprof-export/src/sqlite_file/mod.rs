//! A bulk writer of new SQLite database files: tables are declared once, rows are appended in
//! rowid order, and the file is written front to back in SQLite's documented file format
//! (<https://sqlite.org/fileformat2.html>, format 4, UTF-8, rollback journal mode), one
//! B-tree per table, no indexes. What SQLite itself opens, checks (`PRAGMA integrity_check`)
//! and queries; the tests read every file back through SQLite (rusqlite).
//!
//! Why by hand: the Ascend DB layout's export is bound to cost no more CPU per event than the
//! text layout's. Through SQLite, with every bulk-load setting (multi-row prepared `INSERT`s,
//! constant columns as literals, no journal, no sync, exclusive lock, no indexes), it cost
//! 1.56x the text export (docs/benchmarks/history.md, "The Ascend profiler DB layout"): per row
//! SQLite runs about 25 bytecode operations and binds each value, 85% of the DB export's
//! instructions (`valgrind --tool=callgrind`, 200 000 events: 998 M of 1 176 M in the insert
//! path). Encoding a record and appending it to a page is what SQLite's `OP_MakeRecord` and a
//! B-tree append do, without the interpreter around them. No crate writes SQLite files without
//! SQLite.
//!
//! ```
//! use rlprof_export::sqlite_file::{Database, Table, Value};
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("t.db");
//! const T: Table = Table { name: "T", columns: &[("a", "INTEGER"), ("b", "TEXT")] };
//! let mut db = Database::create(&path, &[T]).unwrap();
//! db.insert(0, &[Value::Int(7), Value::Text("seven")]).unwrap();
//! db.finish().unwrap();
//! let conn = rusqlite::Connection::open(&path).unwrap();
//! let b: String = conn.query_row("SELECT b FROM T WHERE a = 7", [], |r| r.get(0)).unwrap();
//! assert_eq!(b, "seven");
//! ```

mod btree;
mod record;

pub use record::{Affinity, Value};

use btree::{DB_HEADER, PAGE, PageSink, TableTree};
use std::fs::File;
use std::io::{self, BufWriter, Seek, SeekFrom, Write};
use std::path::Path;

/// One table: its name and `(column, declared type)` list, in order.
#[derive(Debug, Clone, Copy)]
pub struct Table {
    /// Table name.
    pub name: &'static str,
    /// Columns with their declared SQLite types.
    pub columns: &'static [(&'static str, &'static str)],
}

impl Table {
    /// `CREATE TABLE` statement.
    pub fn create_sql(&self) -> String {
        let cols: Vec<String> = self
            .columns
            .iter()
            .map(|(c, t)| format!("{c} {t}"))
            .collect();
        format!("CREATE TABLE {} ({})", self.name, cols.join(", "))
    }
}

/// `SQLITE_VERSION_NUMBER` written in the header (the bundled SQLite's format, 3.46).
const WRITER_VERSION: u32 = 3_046_000;
/// Buffered bytes before a write to the file.
const WRITE_BUFFER: usize = 1 << 20;

/// A database file being written.
pub struct Database {
    sink: PageSink<BufWriter<File>>,
    tables: Vec<(Table, Vec<Affinity>, TableTree)>,
    /// The record being encoded (reused).
    record: Vec<u8>,
}

impl Database {
    /// Creates (or truncates) `path` with `tables`, empty; rows go to a table by its index in
    /// `tables`.
    pub fn create(path: &Path, tables: &[Table]) -> io::Result<Database> {
        let file = rlprof_profiler::collection::safe_fs::create(path)?;
        let sink = PageSink::new(BufWriter::with_capacity(WRITE_BUFFER, file))?;
        let tables = tables
            .iter()
            .map(|t| {
                let aff = t.columns.iter().map(|(_, ty)| Affinity::of(ty)).collect();
                (*t, aff, TableTree::new())
            })
            .collect();
        Ok(Database {
            sink,
            tables,
            record: Vec::with_capacity(256),
        })
    }

    /// The index of the table named `name`.
    ///
    /// # Panics
    /// If the database has no such table (a bug of the caller).
    pub fn table_index(&self, name: &str) -> usize {
        self.tables
            .iter()
            .position(|(t, ..)| t.name == name)
            .unwrap_or_else(|| panic!("no table {name}"))
    }

    /// Appends one row (a value per column) to table `table`.
    pub fn insert(&mut self, table: usize, row: &[Value<'_>]) -> io::Result<()> {
        let (t, aff, tree) = &mut self.tables[table];
        debug_assert_eq!(row.len(), aff.len(), "{}", t.name);
        self.record.clear();
        record::encode(row, aff, &mut self.record);
        tree.push(&mut self.sink, &self.record)
    }

    /// Writes the interior pages, the schema and the header, and flushes the file.
    pub fn finish(self) -> io::Result<()> {
        let Database {
            mut sink, tables, ..
        } = self;
        let mut schema = Vec::with_capacity(tables.len());
        for (t, _, tree) in tables {
            let root = tree.finish(&mut sink)?;
            schema.push(schema_record(&t, root));
        }
        let header = db_header(sink.pages());
        let page1 = btree::page_one(&header, &schema).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "the schema does not fit on page 1",
            )
        })?;
        let mut out = sink.into_inner();
        out.flush()?;
        let mut file = out.into_inner().map_err(|e| e.into_error())?;
        file.seek(SeekFrom::Start(0))?;
        file.write_all(&page1)?;
        file.sync_data()
    }
}

/// The `sqlite_schema` record of a table: type, name, table name, root page, SQL.
fn schema_record(t: &Table, root: u32) -> Vec<u8> {
    let sql = t.create_sql();
    let row = [
        Value::Text("table"),
        Value::Text(t.name),
        Value::Text(t.name),
        Value::Int(root as i64),
        Value::Text(&sql),
    ];
    use Affinity::{Integer, Text};
    let mut out = Vec::new();
    record::encode(&row, &[Text, Text, Text, Integer, Text], &mut out);
    out
}

/// The 100-byte database header (section 1.3 of the file format).
fn db_header(pages: u32) -> [u8; DB_HEADER] {
    let mut h = [0u8; DB_HEADER];
    h[..16].copy_from_slice(b"SQLite format 3\0");
    // A page size of 65 536 is written as 1.
    h[16..18].copy_from_slice(&((PAGE % 65_536) as u16).max(1).to_be_bytes());
    h[18] = 1; // file format write version: legacy (rollback journal)
    h[19] = 1; // read version
    h[20] = 0; // reserved bytes per page
    h[21] = 64; // maximum embedded payload fraction
    h[22] = 32; // minimum embedded payload fraction
    h[23] = 32; // leaf payload fraction
    h[24..28].copy_from_slice(&1u32.to_be_bytes()); // file change counter
    h[28..32].copy_from_slice(&pages.to_be_bytes()); // database size in pages
    // 32..40: no freelist.
    h[40..44].copy_from_slice(&1u32.to_be_bytes()); // schema cookie
    h[44..48].copy_from_slice(&4u32.to_be_bytes()); // schema format 4
    // 48..56: default cache size, no auto-vacuum.
    h[56..60].copy_from_slice(&1u32.to_be_bytes()); // UTF-8
    // 60..92: user version, incremental vacuum, application id, reserved: 0.
    h[92..96].copy_from_slice(&1u32.to_be_bytes()); // version-valid-for = change counter
    h[96..100].copy_from_slice(&WRITER_VERSION.to_be_bytes());
    h
}
