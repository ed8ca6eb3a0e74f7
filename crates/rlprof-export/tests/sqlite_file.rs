//! The hand-written SQLite file writer against SQLite itself: the same rows written by
//! `sqlite_file` and inserted through SQLite (rusqlite) read back equal, value by value and
//! storage class by storage class, and SQLite's `PRAGMA integrity_check` passes, for trees of
//! one leaf, two levels and three levels, payloads that spill into overflow chains, and every
//! column affinity.

use rlprof_export::sqlite_file::{Database, Table, Value};
use rusqlite::Connection;
use std::path::Path;

const MIXED: Table = Table {
    name: "MIXED",
    columns: &[
        ("i", "INTEGER"),
        ("n", "NUMERIC"),
        ("t", "TEXT"),
        ("r", "REAL"),
        ("b", ""),
    ],
};
const NARROW: Table = Table {
    name: "NARROW",
    columns: &[("id", "INTEGER"), ("v", "INTEGER")],
};
const EMPTY: Table = Table {
    name: "EMPTY",
    columns: &[("a", "INTEGER")],
};

/// A small deterministic generator (SplitMix64), so that a failure is reproducible.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Integers around every serial-type boundary, and 0 and 1 (stored without bytes).
    fn int(&mut self) -> i64 {
        let bits =
            [0u32, 1, 7, 8, 15, 16, 23, 24, 31, 32, 47, 48, 62, 63][self.next() as usize % 14];
        let base = if bits == 0 { 0 } else { 1i64 << (bits - 1) };
        let v = base.wrapping_add((self.next() % 5) as i64 - 2);
        if self.next().is_multiple_of(2) {
            v
        } else {
            v.wrapping_neg()
        }
    }

    fn real(&mut self) -> f64 {
        match self.next() % 4 {
            0 => (self.next() % 1000) as f64,
            1 => (self.next() % 1_000_000) as f64 / 1000.0,
            2 => -1.5e300,
            _ => 9.3e18,
        }
    }

    /// Text of 0 bytes to 3 pages (overflow chains), with multi-byte characters.
    fn text(&mut self) -> String {
        let len = match self.next() % 10 {
            0 => 4000 + (self.next() % 9000) as usize,
            1 => 0,
            _ => (self.next() % 80) as usize,
        };
        (0..len)
            .map(|i| ['a', 'é', '€', 'z'][(i + self.next() as usize) % 4])
            .collect()
    }
}

/// One row of `MIXED`: every affinity given the kinds of values rlprof writes into it.
fn mixed_row(g: &mut Gen) -> MixedRow {
    (
        g.int(),
        g.real(),
        g.text(),
        g.real(),
        g.text(),
        g.next() % 5,
    )
}

type MixedRow = (i64, f64, String, f64, String, u64);

fn values(row: &MixedRow) -> [Value<'_>; 5] {
    let (i, n, t, r, b, nulls) = row;
    fn null_or<'v>(nulls: u64, k: u64, v: Value<'v>) -> Value<'v> {
        if nulls == k { Value::Null } else { v }
    }
    let null_or = |k, v| null_or(*nulls, k, v);
    [
        null_or(0, Value::Int(*i)),
        null_or(1, Value::Real(*n)),
        null_or(
            2,
            if t.len() % 3 == 0 {
                Value::Int(*i)
            } else {
                Value::Text(t)
            },
        ),
        null_or(
            3,
            if *nulls == 4 {
                Value::Int(*i)
            } else {
                Value::Real(*r)
            },
        ),
        Value::Text(b),
    ]
}

fn to_sql(v: &Value<'_>) -> rusqlite::types::Value {
    use rusqlite::types::Value as S;
    match *v {
        Value::Null => S::Null,
        Value::Int(i) => S::Integer(i),
        Value::Real(r) => S::Real(r),
        Value::Text(t) => S::Text(t.to_string()),
    }
}

/// Every row of `table` as (storage class, quoted value) pairs.
fn dump(conn: &Connection, table: &Table) -> Vec<Vec<(String, String)>> {
    let cols: Vec<String> = table
        .columns
        .iter()
        .map(|(c, _)| format!("typeof({c}), quote({c})"))
        .collect();
    let sql = format!(
        "SELECT {} FROM {} ORDER BY rowid",
        cols.join(", "),
        table.name
    );
    let mut st = conn.prepare(&sql).unwrap();
    let n = table.columns.len();
    st.query_map([], |r| {
        (0..n)
            .map(|i| Ok((r.get(2 * i)?, r.get(2 * i + 1)?)))
            .collect()
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

fn integrity(path: &Path) -> String {
    let conn = Connection::open(path).unwrap();
    conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap()
}

/// Writes `rows` mixed rows and `narrow` narrow rows both ways and compares them.
fn check(rows: usize, narrow: usize) {
    let dir = tempfile::tempdir().unwrap();
    let ours = dir.path().join("ours.db");
    let tables = [MIXED, NARROW, EMPTY];
    let mut g = Gen(rows as u64 * 31 + narrow as u64);
    let mixed: Vec<_> = (0..rows).map(|_| mixed_row(&mut g)).collect();
    let narrow_rows: Vec<[Value<'static>; 2]> = (0..narrow as i64)
        .map(|k| [Value::Int(k), Value::Int(k * 7919 % 100_003)])
        .collect();

    let mut db = Database::create(&ours, &tables).unwrap();
    // Interleaved, as the exporter fills its tables.
    for (k, row) in mixed.iter().enumerate() {
        db.insert(0, &values(row)).unwrap();
        if let Some(n) = narrow_rows.get(k) {
            db.insert(1, n).unwrap();
        }
    }
    for n in narrow_rows.iter().skip(mixed.len()) {
        db.insert(1, n).unwrap();
    }
    db.finish().unwrap();
    assert_eq!(integrity(&ours), "ok");

    let sqlite = Connection::open_in_memory().unwrap();
    for t in &tables {
        sqlite.execute_batch(&t.create_sql()).unwrap();
    }
    for row in &mixed {
        let v: Vec<_> = values(row).iter().map(to_sql).collect();
        sqlite
            .execute(
                "INSERT INTO MIXED VALUES (?,?,?,?,?)",
                rusqlite::params_from_iter(v),
            )
            .unwrap();
    }
    for n in &narrow_rows {
        let v: Vec<_> = n.iter().map(to_sql).collect();
        sqlite
            .execute(
                "INSERT INTO NARROW VALUES (?,?)",
                rusqlite::params_from_iter(v),
            )
            .unwrap();
    }
    let conn = Connection::open(&ours).unwrap();
    for t in &tables {
        let (a, b) = (dump(&conn, t), dump(&sqlite, t));
        assert_eq!(a.len(), b.len(), "{}", t.name);
        for (k, (x, y)) in a.iter().zip(&b).enumerate() {
            assert_eq!(x, y, "{} row {}", t.name, k + 1);
        }
    }
    // Rowids are 1..n with no gap, so lookups by rowid work (they walk the interior pages).
    let last: i64 = conn
        .query_row(
            "SELECT v FROM NARROW WHERE rowid = ?",
            [narrow as i64],
            |r| r.get(0),
        )
        .unwrap_or(-1);
    if narrow > 0 {
        assert_eq!(last, (narrow as i64 - 1) * 7919 % 100_003);
    }
}

#[test]
fn a_few_rows_on_one_leaf_each() {
    check(3, 5);
}

#[test]
fn an_empty_database_is_valid() {
    check(0, 0);
}

#[test]
fn two_levels_and_overflow_chains() {
    check(2_000, 20_000);
}

#[test]
fn three_levels() {
    // About 300 narrow rows fit a 4 KiB leaf and about 270 children an interior page, so
    // 300 000 rows take three levels.
    check(500, 300_000);
}

#[test]
fn the_schema_names_every_table_with_its_sql() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    Database::create(&path, &[MIXED, EMPTY])
        .unwrap()
        .finish()
        .unwrap();
    let conn = Connection::open(&path).unwrap();
    let mut st = conn
        .prepare("SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY rowid")
        .unwrap();
    let rows: Vec<(String, String, String, String)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].0, "table");
    assert_eq!((rows[0].1.as_str(), rows[0].2.as_str()), ("MIXED", "MIXED"));
    assert_eq!(rows[0].3, MIXED.create_sql());
    assert_eq!(rows[1].1, "EMPTY");
    // SQLite can add to what it did not write.
    conn.execute("INSERT INTO EMPTY VALUES (5)", []).unwrap();
    drop(st);
    drop(conn);
    assert_eq!(integrity(&path), "ok");
}
