//! Bulk inserts: rows are buffered and inserted [`ROWS`] at a time with one multi-row `INSERT`
//! statement, prepared once per table. A column that is the same in every row is written into
//! the statement as a literal, and one that is always NULL is left out, so that only what
//! varies is bound (binding is most of the cost of an insert).

use super::schema::Table;
use rusqlite::{Connection, Statement};

/// Rows per multi-row statement.
pub const ROWS: usize = 256;

/// How a column gets its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Col {
    /// Bound per row (a value of [`Batch::push`]).
    Bind,
    /// The same integer in every row.
    Lit(i64),
    /// Always NULL (left out of the statement).
    Null,
}

/// The pending rows of one table.
pub struct Batch<'c> {
    table: Table,
    cols: Vec<Col>,
    conn: &'c Connection,
    full: Statement<'c>,
    bound: usize,
    vals: Vec<Option<i64>>,
    rows: usize,
}

impl<'c> Batch<'c> {
    /// Prepares the [`ROWS`]-row insert of `table` with every column bound.
    pub fn new(conn: &'c Connection, table: Table) -> rusqlite::Result<Batch<'c>> {
        Self::with(conn, table, &vec![Col::Bind; table.columns.len()])
    }

    /// Prepares the [`ROWS`]-row insert of `table` (the table must exist); `cols` has one entry
    /// per column of the table.
    pub fn with(conn: &'c Connection, table: Table, cols: &[Col]) -> rusqlite::Result<Batch<'c>> {
        assert_eq!(cols.len(), table.columns.len(), "{}", table.name);
        let full = conn.prepare(&multi_insert(&table, cols, ROWS))?;
        let bound = cols.iter().filter(|c| **c == Col::Bind).count();
        Ok(Batch {
            table,
            cols: cols.to_vec(),
            conn,
            full,
            bound,
            vals: Vec::with_capacity(ROWS * bound),
            rows: 0,
        })
    }

    /// Queues one row: the values of the bound columns, in column order.
    #[inline]
    pub fn push(&mut self, row: &[Option<i64>]) -> rusqlite::Result<()> {
        debug_assert_eq!(row.len(), self.bound, "{}", self.table.name);
        self.vals.extend_from_slice(row);
        self.rows += 1;
        if self.rows == ROWS {
            bind_all(&mut self.full, &self.vals)?;
            self.full.raw_execute()?;
            self.vals.clear();
            self.rows = 0;
        }
        Ok(())
    }

    /// Inserts the rows still queued.
    pub fn flush(&mut self) -> rusqlite::Result<()> {
        if self.rows == 0 {
            return Ok(());
        }
        let mut st = self
            .conn
            .prepare(&multi_insert(&self.table, &self.cols, self.rows))?;
        bind_all(&mut st, &self.vals)?;
        st.raw_execute()?;
        self.vals.clear();
        self.rows = 0;
        Ok(())
    }
}

fn bind_all(st: &mut Statement, vals: &[Option<i64>]) -> rusqlite::Result<()> {
    for (i, v) in vals.iter().enumerate() {
        st.raw_bind_parameter(i + 1, v)?;
    }
    Ok(())
}

/// `INSERT INTO t (cols) VALUES (?,..),(?,..),...` for `rows` rows, NULL columns left out.
fn multi_insert(t: &Table, cols: &[Col], rows: usize) -> String {
    let (mut names, mut vals) = (Vec::new(), Vec::new());
    for ((name, _), c) in t.columns.iter().zip(cols) {
        match c {
            Col::Bind => vals.push("?".to_string()),
            Col::Lit(v) => vals.push(v.to_string()),
            Col::Null => continue,
        }
        names.push(*name);
    }
    let one = format!("({})", vals.join(","));
    format!(
        "INSERT INTO {} ({}) VALUES {}",
        t.name,
        names.join(","),
        vec![one; rows].join(",")
    )
}
