//! Reading a profiler DB another program wrote (torch_npu's, or a file claiming to be one) as
//! untrusted input, for [`super::read`]: the same rules as rlprof-report's `sqlite_values`
//! (which this crate cannot reach). The file must be a regular file (a FIFO would block the
//! open); it is opened read-only and immutable with SQLite's length limits lowered, the
//! schema's functions untrusted and a deadline after which any statement is interrupted; only
//! real tables are read, never a view, a virtual table or a generated column (each runs SQL of
//! the file's choosing); values are taken from whatever storage class holds them.

use rusqlite::limits::Limit;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags, Row, Statement};
use std::path::Path;
use std::time::{Duration, Instant};

/// Longest string or blob SQLite makes or reads out of the DB (`SQLITE_LIMIT_LENGTH`).
pub const MAX_VALUE_BYTES: i32 = 16 << 20;
/// Time allowed for reading one DB; past it the running statement is interrupted.
pub const DB_TIME_LIMIT: Duration = Duration::from_secs(300);

/// An SQLite error carrying `message` (shown as it is).
pub(crate) fn refused(message: String) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ERROR),
        Some(message),
    )
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

/// What `meta` is when it is not a regular file.
fn non_regular_kind(meta: &std::fs::Metadata) -> Option<&'static str> {
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

/// Opens `path` as an untrusted DB; every statement on it stops once `time_limit` has passed.
pub fn open(path: &Path, time_limit: Duration) -> rusqlite::Result<Connection> {
    let meta = std::fs::metadata(path).map_err(|e| refused(e.to_string()))?;
    if let Some(kind) = non_regular_kind(&meta) {
        return Err(refused(format!("not a regular file ({kind}); not opened")));
    }
    let conn = Connection::open_with_flags(
        format!("{}?immutable=1", file_uri(path)),
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    let deadline = Instant::now() + time_limit;
    conn.progress_handler(10_000, Some(move || Instant::now() >= deadline));
    conn.set_limit(Limit::SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES);
    conn.set_limit(Limit::SQLITE_LIMIT_SQL_LENGTH, 64 << 10);
    conn.set_limit(Limit::SQLITE_LIMIT_EXPR_DEPTH, 100);
    conn.set_limit(Limit::SQLITE_LIMIT_COMPOUND_SELECT, 16);
    conn.set_limit(Limit::SQLITE_LIMIT_TRIGGER_DEPTH, 1);
    conn.set_limit(Limit::SQLITE_LIMIT_LIKE_PATTERN_LENGTH, 1000);
    conn.execute_batch(
        "PRAGMA trusted_schema = OFF; PRAGMA cell_size_check = ON; PRAGMA query_only = ON;",
    )?;
    Ok(conn)
}

/// `table`'s schema type and whether it is virtual; `None` when there is no such name.
fn schema_kind(conn: &Connection, table: &str) -> rusqlite::Result<Option<(String, bool)>> {
    let mut st =
        conn.prepare("SELECT type, sql FROM sqlite_master WHERE name = ?1 COLLATE NOCASE")?;
    let mut rows = st.query([table])?;
    let mut found: Option<(String, bool)> = None;
    while let Some(r) = rows.next()? {
        let ty = text(r, 0)?;
        let virt = text(r, 1)?
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
pub fn has(conn: &Connection, table: &str) -> rusqlite::Result<bool> {
    Ok(schema_kind(conn, table)?.is_some_and(|(ty, virt)| ty == "table" && !virt))
}

/// A `SELECT` of `cols` from the real table `table`, a column it lacks read as NULL; a view,
/// a virtual table or a generated column among `cols` is an error.
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
        have.push((text(r, 0)?, opt(r, 1)?.unwrap_or(0)));
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

/// An integer column of any storage class (integer, real, decimal text); `None` for NULL, a
/// text that is not a number and a blob.
pub fn opt(r: &Row, i: usize) -> rusqlite::Result<Option<i64>> {
    Ok(match r.get_ref(i)? {
        ValueRef::Integer(v) => Some(v),
        ValueRef::Real(v) if v.is_finite() => Some(v as i64),
        ValueRef::Text(t) => std::str::from_utf8(t).ok().and_then(|s| {
            let s = s.trim();
            s.parse::<i64>().ok().or_else(|| {
                s.parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite())
                    .map(|v| v as i64)
            })
        }),
        _ => None,
    })
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
