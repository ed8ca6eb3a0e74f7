//! Reading values out of a SQLite file that another program wrote (the Ascend profiler DB,
//! [`crate::ascend_db_reader`]).
//!
//! A DB from torch_npu or CANN is not typed the way ours is: torch_npu declares
//! `PYTORCH_API`'s times TEXT, SQLite keeps each value in the storage class it was inserted
//! with, and columns come and go between releases. So every column is selected by name with a
//! missing one read as NULL ([`select`]), and every integer is taken from whatever class holds
//! it ([`opt`]).
//!
//! A DB is also untrusted input ([`open_untrusted`]): it is opened read-only and immutable,
//! only when it is a regular file, with SQLite's length limits lowered, its schema's SQL
//! functions untrusted and a deadline after which any statement is interrupted; only real
//! tables are read ([`has_table`], [`select`]), never a view, a virtual table or a generated
//! column, which would run SQL of the file's choosing.
//!
//! ```
//! use rlprof_report::sqlite_values as sql;
//! let c = rusqlite::Connection::open_in_memory().unwrap();
//! c.execute_batch("CREATE TABLE T (a TEXT); INSERT INTO T VALUES ('42');").unwrap();
//! let mut st = sql::select(&c, "T", &["a", "b"]).unwrap();
//! let mut rows = st.raw_query();
//! let r = rows.next().unwrap().unwrap();
//! assert_eq!(sql::opt(r, 0).unwrap(), Some(42));
//! assert_eq!(sql::opt(r, 1).unwrap(), None); // `b` is not in this schema
//! ```

use rusqlite::limits::Limit;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags, Row, Statement};
use std::path::Path;
use std::time::{Duration, Instant};

/// Longest string or blob SQLite makes or reads out of an untrusted DB (`SQLITE_LIMIT_LENGTH`):
/// a longer one (a `zeroblob` of 200 MB in a generated column) is an error, not an allocation.
pub const MAX_VALUE_BYTES: i32 = 16 << 20;
/// Longest SQL statement accepted by an untrusted DB's connection (ours are short).
const MAX_SQL_BYTES: i32 = 64 << 10;
/// The part of a DB's time limit that does not depend on its size (see [`db_time_limit`]).
pub const DB_BASE_TIME: Duration = Duration::from_secs(10);
/// Bytes of DB per further second of its time limit. A 1 M-task torch_npu DB loads in 0.8 s
/// (BENCHMARKS.md), more than 100 MB/s: 16 MiB/s leaves a margin of over 6x on a slower machine.
pub const DB_BYTES_PER_SECOND: u64 = 16 << 20;

/// Time allowed for reading the DB at `path`: past it, the running statement is interrupted and
/// the DB reported as an error, so that a pathological file ends in bounded time. It grows with
/// the bytes the file really holds on disk (a sparse file's holes give it no more time):
/// [`DB_BASE_TIME`] plus a second per [`DB_BYTES_PER_SECOND`].
pub fn db_time_limit(path: &Path) -> Duration {
    let held = std::fs::metadata(path).map_or(0, |m| {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            m.len().min(m.blocks().saturating_mul(512))
        }
        #[cfg(not(unix))]
        {
            m.len()
        }
    });
    DB_BASE_TIME + Duration::from_secs(held / DB_BYTES_PER_SECOND)
}
/// SQLite virtual-machine steps between two deadline checks.
const PROGRESS_STEPS: i32 = 10_000;

/// What kind of file `path` is when it is not a regular file (after following links).
pub fn non_regular_kind(meta: &std::fs::Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    if t.is_file() {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return Some("a FIFO");
        }
        if t.is_char_device() || t.is_block_device() {
            return Some("a device");
        }
        if t.is_socket() {
            return Some("a socket");
        }
    }
    Some(if t.is_dir() {
        "a directory"
    } else {
        "not a file"
    })
}

/// `file:` URI of a path, every byte but unreserved ones and `/` percent-encoded.
fn file_uri(path: &Path) -> String {
    #[cfg(unix)]
    let bytes = {
        use std::os::unix::ffi::OsStrExt;
        path.as_os_str().as_bytes().to_vec()
    };
    #[cfg(not(unix))]
    let bytes = path.to_string_lossy().into_owned().into_bytes();
    let mut s = String::from("file:");
    for b in bytes {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}

/// Opens a DB another program wrote, as untrusted input: refused unless it is a regular file
/// (checked after following links, before SQLite opens it: a FIFO would block the open);
/// opened read-only and immutable (no locks, no journal, no WAL: the file is a finished
/// profile), with the schema's functions untrusted (`trusted_schema=OFF`), cell sizes checked,
/// values longer than [`MAX_VALUE_BYTES`] refused, and every statement interrupted once
/// `time_limit` has passed since the open.
pub fn open_untrusted(
    path: &Path,
    time_limit: Duration,
) -> Result<Connection, crate::error::ReportError> {
    let meta = std::fs::metadata(path).map_err(crate::error::io(path))?;
    if let Some(kind) = non_regular_kind(&meta) {
        return Err(crate::error::ReportError::Malformed {
            path: path.to_path_buf(),
            message: format!("not a regular file ({kind}); not opened"),
        });
    }
    let sqlite = |e: rusqlite::Error| crate::error::ReportError::Malformed {
        path: path.to_path_buf(),
        message: format!("SQLite: {e}"),
    };
    let conn = Connection::open_with_flags(
        format!("{}?immutable=1", file_uri(path)),
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sqlite)?;
    harden(&conn, time_limit).map_err(sqlite)?;
    Ok(conn)
}

/// The limits of [`open_untrusted`] on an open connection.
pub fn harden(conn: &Connection, time_limit: Duration) -> rusqlite::Result<()> {
    let deadline = Instant::now() + time_limit;
    conn.progress_handler(PROGRESS_STEPS, Some(move || Instant::now() >= deadline));
    conn.set_limit(Limit::SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES);
    conn.set_limit(Limit::SQLITE_LIMIT_SQL_LENGTH, MAX_SQL_BYTES);
    conn.set_limit(Limit::SQLITE_LIMIT_EXPR_DEPTH, 100);
    conn.set_limit(Limit::SQLITE_LIMIT_COMPOUND_SELECT, 16);
    conn.set_limit(Limit::SQLITE_LIMIT_TRIGGER_DEPTH, 1);
    conn.set_limit(Limit::SQLITE_LIMIT_LIKE_PATTERN_LENGTH, 1000);
    conn.execute_batch(
        "PRAGMA trusted_schema = OFF; PRAGMA cell_size_check = ON; PRAGMA query_only = ON;",
    )
}

/// How `table` is in the schema: `None` when there is no such name, else its type (`table`,
/// `view`, ...) and whether it is a virtual table.
fn schema_kind(conn: &Connection, table: &str) -> rusqlite::Result<Option<(String, bool)>> {
    let mut st =
        conn.prepare("SELECT type, sql FROM sqlite_master WHERE name = ?1 COLLATE NOCASE")?;
    let mut rows = st.query([table])?;
    let mut found: Option<(String, bool)> = None;
    while let Some(r) = rows.next()? {
        let ty = text(r, 0)?;
        let sql = text(r, 1)?;
        let virt = sql
            .trim_start()
            .get(..14)
            .is_some_and(|p| p.eq_ignore_ascii_case("CREATE VIRTUAL"));
        if found.as_ref().is_none_or(|f| f.0 != "table" || f.1) {
            found = Some((ty, virt));
        }
    }
    Ok(found)
}

/// Whether `table` exists as a real table (not a view, not a virtual table).
pub fn has_table(conn: &Connection, table: &str) -> rusqlite::Result<bool> {
    Ok(schema_kind(conn, table)?.is_some_and(|(ty, virt)| ty == "table" && !virt))
}

/// An error that names what is refused in a DB's schema.
fn refused(what: String) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ERROR),
        Some(what),
    )
}

/// A `SELECT` of `cols` from `table`, in storage order. A column the file's schema lacks reads
/// as NULL, so that a reader of one release's layout still reads another's. Only a real table
/// is read: a view or a virtual table of that name, or a generated column among `cols`, is an
/// error (each would run SQL of the file's choosing on every row).
pub fn select<'c>(
    conn: &'c Connection,
    table: &str,
    cols: &[&str],
) -> rusqlite::Result<Statement<'c>> {
    match schema_kind(conn, table)? {
        None => return Err(refused(format!("no table {table}"))),
        Some((ty, virt)) if ty != "table" || virt => {
            let kind = if virt { "virtual table" } else { ty.as_str() };
            return Err(refused(format!(
                "{table} is a {kind}, not a table; not read"
            )));
        }
        Some(_) => {}
    }
    // `hidden`: 2 and 3 are generated columns (virtual and stored).
    let mut have: Vec<(String, i64)> = Vec::new();
    let mut st = conn.prepare("SELECT name, hidden FROM pragma_table_xinfo(?1)")?;
    let mut rows = st.query([table])?;
    while let Some(r) = rows.next()? {
        have.push((text(r, 0)?, int(r, 1)?));
    }
    let mut list: Vec<String> = Vec::with_capacity(cols.len());
    for c in cols {
        match have.iter().find(|h| h.0.eq_ignore_ascii_case(c)) {
            Some((_, 2 | 3)) => {
                return Err(refused(format!(
                    "{table}.{c} is a generated column; not read"
                )));
            }
            Some(_) => list.push(format!("\"{c}\"")),
            None => list.push("NULL".to_string()),
        }
    }
    conn.prepare(&format!("SELECT {} FROM \"{table}\"", list.join(", ")))
}

/// An integer of any storage class (integer, real, or decimal text, as [`opt`] reads a column).
#[inline]
pub fn value_i64(v: ValueRef<'_>) -> Option<i64> {
    match v {
        ValueRef::Integer(v) => Some(v),
        ValueRef::Real(v) if v.is_finite() => Some(v as i64),
        ValueRef::Text(t) => std::str::from_utf8(t).ok().and_then(parse_int),
        _ => None,
    }
}

/// An integer column whatever its storage class (integer, real, or decimal text). `None` for
/// NULL, a text that is not a number, and a blob.
#[inline]
pub fn opt(r: &Row, i: usize) -> rusqlite::Result<Option<i64>> {
    Ok(value_i64(r.get_ref(i)?))
}

/// An integer column, 0 when it has none.
#[inline]
pub fn int(r: &Row, i: usize) -> rusqlite::Result<i64> {
    Ok(opt(r, i)?.unwrap_or(0))
}

/// A text column; a number is written out, NULL and a blob are empty.
pub fn text(r: &Row, i: usize) -> rusqlite::Result<String> {
    Ok(match r.get_ref(i)? {
        ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
        ValueRef::Integer(v) => v.to_string(),
        ValueRef::Real(v) => v.to_string(),
        _ => String::new(),
    })
}

/// A decimal integer in text (`"123"`, `" 123 "`, `"123.0"`).
#[inline]
fn parse_int(s: &str) -> Option<i64> {
    let s = s.trim();
    s.parse::<i64>().ok().or_else(|| {
        s.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .map(|v| v as i64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_read_from_every_storage_class() {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE TABLE T (v);
             INSERT INTO T VALUES (7), (7.9), ('8'), (' 9 '), ('10.0'), ('x'), (''), (NULL),
                                  (x'01');",
        )
        .unwrap();
        let mut st = select(&c, "T", &["v"]).unwrap();
        let mut rows = st.raw_query();
        let mut got = Vec::new();
        while let Some(r) = rows.next().unwrap() {
            got.push(opt(r, 0).unwrap());
        }
        assert_eq!(
            got,
            [
                Some(7),
                Some(7),
                Some(8),
                Some(9),
                Some(10),
                None,
                None,
                None,
                None
            ]
        );
    }

    #[test]
    fn a_missing_column_reads_as_null_and_names_are_matched_without_case() {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch("CREATE TABLE T (startNs INTEGER); INSERT INTO T VALUES (5);")
            .unwrap();
        let mut st = select(&c, "T", &["STARTNS", "endNs"]).unwrap();
        let mut rows = st.raw_query();
        let r = rows.next().unwrap().unwrap();
        assert_eq!((int(r, 0).unwrap(), opt(r, 1).unwrap()), (5, None));
        assert_eq!(text(r, 0).unwrap(), "5");
        assert!(has_table(&c, "T").unwrap());
        assert!(!has_table(&c, "U").unwrap());
    }
}
