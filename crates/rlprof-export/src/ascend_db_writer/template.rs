//! Row templates: each table's rows name only the values that vary; a column that is the same
//! in every row is filled in as a literal, and one that is always NULL as NULL.

use crate::sqlite_file::{Database, Table, Value};
use std::io;

/// How a column gets its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Col {
    /// Given per row (a value of [`RowTemplate::push`]).
    Bind,
    /// The same integer in every row.
    Lit(i64),
    /// Always NULL.
    Null,
}

/// The columns of one table and where each value comes from.
pub struct RowTemplate {
    table: usize,
    name: &'static str,
    cols: Vec<Col>,
    bound: usize,
    /// The whole row being built (reused).
    row: Vec<Value<'static>>,
}

impl RowTemplate {
    /// Every column of `table` given per row.
    pub fn new(db: &Database, table: Table) -> RowTemplate {
        Self::with(db, table, &vec![Col::Bind; table.columns.len()])
    }

    /// `cols` has one entry per column of `table`, which must be a table of `db`.
    pub fn with(db: &Database, table: Table, cols: &[Col]) -> RowTemplate {
        assert_eq!(cols.len(), table.columns.len(), "{}", table.name);
        RowTemplate {
            table: db.table_index(table.name),
            name: table.name,
            cols: cols.to_vec(),
            bound: cols.iter().filter(|c| **c == Col::Bind).count(),
            row: Vec::with_capacity(cols.len()),
        }
    }

    /// Appends one row: the values of the [`Col::Bind`] columns, in column order.
    #[inline]
    pub fn push(&mut self, db: &mut Database, values: &[Option<i64>]) -> io::Result<()> {
        debug_assert_eq!(values.len(), self.bound, "{}", self.name);
        let mut given = values.iter();
        self.row.clear();
        self.row.extend(self.cols.iter().map(|c| match c {
            Col::Bind => given.next().copied().flatten().into(),
            Col::Lit(v) => Value::Int(*v),
            Col::Null => Value::Null,
        }));
        db.insert(self.table, &self.row)
    }
}
