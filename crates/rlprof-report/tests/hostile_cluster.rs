//! `rlprof analyse --cluster` on hostile profiler DBs (issue 28): a DB that is a FIFO, holds
//! a view or a generated column where a table is read, is skipped with a warning naming the
//! file and the reason, and the other ranks are analysed; torch_npu's TEXT-typed integers are
//! read. Every DB is built here.

use rlprof_report::cluster::{ClusterReport, render_table};
use rusqlite::Connection;
use std::path::{Path, PathBuf};

fn analyse_cluster(p: &Path) -> Result<ClusterReport, rlprof_report::ReportError> {
    rlprof_report::cluster::analyse(p, &Default::default())
}

const T0: i64 = 1_700_000_000_000_000_000;

fn db_path(root: &Path, rank: u32) -> PathBuf {
    let out = root
        .join(format!("rank{rank}_ascend_pt"))
        .join("ASCEND_PROFILER_OUTPUT");
    std::fs::create_dir_all(&out).unwrap();
    out.join(format!("ascend_pytorch_profiler_{rank}.db"))
}

/// One step of 100 us with one compute task of 10 us; `ty` is the declared type of every
/// integer column and `q` wraps every value (`'` to store them as text).
fn good_db(path: &Path, strings: &str, ty: &str, q: &str) {
    let c = Connection::open(path).unwrap();
    c.execute_batch(strings).unwrap();
    let v = |x: i64| format!("{q}{x}{q}");
    c.execute_batch(&format!(
        "CREATE TABLE TASK (startNs {ty}, endNs {ty}, globalTaskId {ty}, taskType {ty},
             connectionId {ty});
         INSERT INTO TASK VALUES ({}, {}, {}, 2, 1);
         CREATE TABLE COMPUTE_TASK_INFO (name {ty}, globalTaskId {ty});
         INSERT INTO COMPUTE_TASK_INFO VALUES (1, {});
         CREATE TABLE STEP_TIME (id {ty}, startNs {ty}, endNs {ty});
         INSERT INTO STEP_TIME VALUES ({}, {}, {});
         CREATE TABLE RANK_DEVICE_MAP (rankId {ty}, deviceId {ty});",
        v(T0 + 1_000),
        v(T0 + 11_000),
        v(7),
        v(7),
        v(1),
        v(T0),
        v(T0 + 100_000),
    ))
    .unwrap();
}

const STRINGS: &str = "CREATE TABLE STRING_IDS (id INTEGER, value TEXT);
     INSERT INTO STRING_IDS VALUES (1, 'MatMul_0');";

/// Rank 0 good, rank 1 made by `bad`: one rank analysed, a warning naming rank 1's file and
/// holding `why`.
fn bad_rank_is_skipped(bad: impl FnOnce(&Path), why: &str) {
    let tmp = tempfile::tempdir().unwrap();
    good_db(&db_path(tmp.path(), 0), STRINGS, "INTEGER", "");
    let b = db_path(tmp.path(), 1);
    bad(&b);
    let rep = analyse_cluster(tmp.path()).unwrap();
    assert_eq!(rep.ranks, [0]);
    assert_eq!(rep.steps.len(), 1);
    assert_eq!(rep.steps[0].computing_ms, 0.010);
    let w = rep
        .warnings
        .iter()
        .find(|w| w.contains("ascend_pytorch_profiler_1.db"))
        .unwrap_or_else(|| panic!("no warning: {:?}", rep.warnings));
    assert!(w.contains(why), "{w}");
    assert!(render_table(&rep).contains("warning: rank skipped"));
}

#[test]
fn a_view_is_skipped_with_a_warning() {
    bad_rank_is_skipped(
        |p| {
            good_db(
                p,
                "CREATE VIEW STRING_IDS AS WITH RECURSIVE c(id, value) AS
                   (SELECT 1, 'x' UNION ALL SELECT id + 1, value || value FROM c)
                 SELECT id, value FROM c;",
                "INTEGER",
                "",
            )
        },
        "view",
    );
}

#[test]
fn a_fifo_is_skipped_without_blocking() {
    bad_rank_is_skipped(
        |p| {
            assert!(
                std::process::Command::new("mkfifo")
                    .arg(p)
                    .status()
                    .unwrap()
                    .success()
            )
        },
        "FIFO",
    );
}

#[test]
fn a_generated_column_is_skipped_not_evaluated() {
    bad_rank_is_skipped(
        |p| {
            let mut s = String::from("CREATE TABLE STRING_IDS (id INTEGER);");
            for i in 1..=40 {
                s.push_str(&format!("INSERT INTO STRING_IDS VALUES ({i});"));
            }
            // Added after the rows: an insert would evaluate it.
            s.push_str(
                "ALTER TABLE STRING_IDS ADD COLUMN
                     value TEXT GENERATED ALWAYS AS (hex(zeroblob(200000000))) VIRTUAL;",
            );
            good_db(p, &s, "INTEGER", "");
        },
        "generated column",
    );
}

#[test]
fn a_file_that_is_not_a_db_is_skipped() {
    bad_rank_is_skipped(
        |p| std::fs::write(p, vec![0x5a; 8192]).unwrap(),
        "not a database",
    );
}

#[test]
fn text_typed_integers_are_read() {
    let tmp = tempfile::tempdir().unwrap();
    good_db(&db_path(tmp.path(), 0), STRINGS, "TEXT", "'");
    // A row with an unreadable time is skipped, and counted.
    Connection::open(db_path(tmp.path(), 0))
        .unwrap()
        .execute_batch("INSERT INTO TASK VALUES ('soon', 'later', '8', '2', '1');")
        .unwrap();
    let rep = analyse_cluster(tmp.path()).unwrap();
    assert_eq!(rep.ranks, [0]);
    assert_eq!(rep.steps.len(), 1);
    let s = &rep.steps[0];
    // CANN's Stage: the step's device activity, the one 10 us task.
    assert_eq!(
        (s.step.as_str(), s.step_ms, s.computing_ms),
        ("1", 0.010, 0.010)
    );
    assert!(
        rep.warnings.iter().any(|w| w.contains("1 rows without")),
        "{:?}",
        rep.warnings
    );
}

#[test]
fn nothing_readable_is_an_error_naming_the_reasons() {
    let tmp = tempfile::tempdir().unwrap();
    let p = db_path(tmp.path(), 0);
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&p)
            .status()
            .unwrap()
            .success()
    );
    let e = analyse_cluster(tmp.path()).unwrap_err().to_string();
    assert!(e.contains("FIFO"), "{e}");
}
