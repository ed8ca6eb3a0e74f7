//! Reading values out of a SQLite file that another program wrote (the Ascend profiler DB,
//! [`crate::ascend_db`]).
//!
//! A DB from torch_npu or CANN is not typed the way ours is: torch_npu declares
//! `PYTORCH_API`'s times TEXT, SQLite keeps each value in the storage class it was inserted
//! with, and columns come and go between releases. So every column is selected by name with a
//! missing one read as NULL ([`select`]), and every integer is taken from whatever class holds
//! it ([`opt`]).
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

use rusqlite::types::ValueRef;
use rusqlite::{Connection, Row, Statement};

/// Whether `table` exists.
pub fn has_table(conn: &Connection, table: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type='table' AND name=?1",
        [table],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
}

/// A `SELECT` of `cols` from `table`, in storage order. A column the file's schema lacks reads
/// as NULL, so that a reader of one release's layout still reads another's.
pub fn select<'c>(
    conn: &'c Connection,
    table: &str,
    cols: &[&str],
) -> rusqlite::Result<Statement<'c>> {
    let mut have = Vec::new();
    let mut st = conn.prepare("SELECT name FROM pragma_table_info(?1)")?;
    let mut rows = st.query([table])?;
    while let Some(r) = rows.next()? {
        have.push(text(r, 0)?);
    }
    let list: Vec<String> = cols
        .iter()
        .map(|c| {
            if have.iter().any(|h| h.eq_ignore_ascii_case(c)) {
                format!("\"{c}\"")
            } else {
                "NULL".to_string()
            }
        })
        .collect();
    conn.prepare(&format!("SELECT {} FROM \"{table}\"", list.join(", ")))
}

/// An integer column whatever its storage class (integer, real, or decimal text). `None` for
/// NULL, a text that is not a number, and a blob.
#[inline]
pub fn opt(r: &Row, i: usize) -> rusqlite::Result<Option<i64>> {
    Ok(match r.get_ref(i)? {
        ValueRef::Integer(v) => Some(v),
        ValueRef::Real(v) if v.is_finite() => Some(v as i64),
        ValueRef::Text(t) => std::str::from_utf8(t).ok().and_then(parse_int),
        _ => None,
    })
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
