//! Hostile profiler DBs (issue 28): each ends with a clean error naming the file, or a partial
//! result with a note, and never stops the other ranks from loading. Every DB is built here.

use rlprof_report::model::Track;
use rlprof_report::sqlite_values as sql;
use rlprof_report::{Limits, load};
use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The session start of the good DBs.
const T0: i64 = 1_700_000_000_000_000_000;

/// `{root}/rank{rank}_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_{rank}.db`
/// (the directories made).
fn db_path(root: &Path, rank: u32) -> PathBuf {
    let out = root
        .join(format!("rank{rank}_ascend_pt"))
        .join("ASCEND_PROFILER_OUTPUT");
    std::fs::create_dir_all(&out).unwrap();
    out.join(format!("ascend_pytorch_profiler_{rank}.db"))
}

/// A small good DB: one step, one compute task `MatMul_0` of 10 us; `schema` replaces the
/// default `STRING_IDS` definition when given.
fn good_db(path: &Path, strings: Option<&str>) {
    let c = Connection::open(path).unwrap();
    c.execute_batch(strings.unwrap_or(
        "CREATE TABLE STRING_IDS (id INTEGER, value TEXT);
         INSERT INTO STRING_IDS VALUES (1, 'MatMul_0'), (2, 'KERNEL_AICORE');",
    ))
    .unwrap();
    c.execute_batch(&format!(
        "CREATE TABLE SESSION_TIME_INFO (startTimeNs INTEGER, endTimeNs INTEGER);
         INSERT INTO SESSION_TIME_INFO VALUES ({T0}, {T0} + 1000000);
         CREATE TABLE TASK (startNs INTEGER, endNs INTEGER, deviceId INTEGER,
             connectionId INTEGER, globalTaskId INTEGER, taskType INTEGER, streamId INTEGER);
         INSERT INTO TASK VALUES ({T0} + 1000, {T0} + 11000, 0, 1, 7, 2, 3);
         CREATE TABLE COMPUTE_TASK_INFO (name INTEGER, globalTaskId INTEGER);
         INSERT INTO COMPUTE_TASK_INFO VALUES (1, 7);
         CREATE TABLE STEP_TIME (id INTEGER, startNs INTEGER, endNs INTEGER);
         INSERT INTO STEP_TIME VALUES (1, {T0}, {T0} + 100000);"
    ))
    .unwrap();
}

/// The reason a path was skipped for, if it was.
fn skipped(loaded: &rlprof_report::model::Loaded, path: &Path) -> Option<String> {
    loaded
        .skipped
        .iter()
        .find(|s| s.path.starts_with(path) || path.starts_with(&s.path))
        .map(|s| s.reason.clone())
}

/// `bad` (rank 1) is skipped with a reason holding `why`; the good rank 0 beside it loads.
fn bad_rank_is_skipped(make_bad: impl FnOnce(&Path), why: &str) {
    let tmp = tempfile::tempdir().unwrap();
    good_db(&db_path(tmp.path(), 0), None);
    let bad = db_path(tmp.path(), 1);
    make_bad(&bad);
    let loaded = load(tmp.path(), &Limits::default()).unwrap();
    assert_eq!(loaded.profiles.len(), 1, "{:?}", loaded.skipped);
    assert_eq!(loaded.profiles[0].rank, 0);
    let reason = skipped(&loaded, bad.parent().unwrap())
        .unwrap_or_else(|| panic!("{} not skipped: {:?}", bad.display(), loaded.skipped));
    assert!(reason.contains(why), "{reason}");
}

#[test]
fn a_view_named_string_ids_is_refused_not_run() {
    // A recursive CTE without end: run, it grows without bound.
    bad_rank_is_skipped(
        |p| {
            good_db(
                p,
                Some(
                    "CREATE VIEW STRING_IDS AS WITH RECURSIVE c(id, value) AS
                       (SELECT 1, 'x' UNION ALL SELECT id + 1, value || value FROM c)
                     SELECT id, value FROM c;",
                ),
            )
        },
        "view",
    );
}

#[test]
fn a_fifo_named_like_a_db_is_refused_without_opening_it() {
    bad_rank_is_skipped(
        |p| {
            let ok = std::process::Command::new("mkfifo")
                .arg(p)
                .status()
                .unwrap()
                .success();
            assert!(ok);
        },
        "FIFO",
    );
}

#[test]
fn a_generated_column_that_would_allocate_gigabytes_is_refused() {
    bad_rank_is_skipped(
        |p| {
            // Added after the rows (an insert would evaluate it: 40 x 400 MB).
            let mut sql = String::from("CREATE TABLE STRING_IDS (id INTEGER);");
            for i in 1..=40 {
                sql.push_str(&format!("INSERT INTO STRING_IDS (id) VALUES ({i});"));
            }
            sql.push_str(
                "ALTER TABLE STRING_IDS ADD COLUMN
                     value TEXT GENERATED ALWAYS AS (hex(zeroblob(200000000))) VIRTUAL;",
            );
            good_db(p, Some(&sql));
        },
        "generated column",
    );
}

#[test]
fn a_directory_named_like_a_db_is_refused() {
    bad_rank_is_skipped(|p| std::fs::create_dir(p).unwrap(), "directory");
}

#[test]
fn a_generated_column_that_is_not_read_is_never_evaluated() {
    let tmp = tempfile::tempdir().unwrap();
    let p = db_path(tmp.path(), 0);
    good_db(&p, None);
    Connection::open(&p)
        .unwrap()
        .execute_batch(
            "ALTER TABLE TASK ADD COLUMN junk TEXT
                 GENERATED ALWAYS AS (hex(zeroblob(200000000))) VIRTUAL;",
        )
        .unwrap();
    let loaded = load(tmp.path(), &Limits::default()).unwrap();
    let p = &loaded.profiles[0];
    let k: Vec<_> = p
        .events
        .iter()
        .filter(|e| e.track == Track::Kernel)
        .collect();
    assert_eq!(k.len(), 1);
    assert_eq!((k[0].start, k[0].dur), (1000, 10_000));
}

#[test]
fn values_past_the_length_limit_and_statements_past_the_deadline_are_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("x.db");
    good_db(&p, None);
    let c = sql::open_untrusted(&p, Duration::from_millis(200)).unwrap();
    let big = c.query_row("SELECT length(hex(zeroblob(200000000)))", [], |r| {
        r.get::<_, i64>(0)
    });
    let msg = big.unwrap_err().to_string();
    assert!(msg.contains("too big"), "{msg}");
    // An endless recursive query stops at the deadline.
    let endless = c.query_row(
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
        [],
        |r| r.get::<_, i64>(0),
    );
    assert_eq!(
        endless.unwrap_err().sqlite_error_code(),
        Some(rusqlite::ErrorCode::OperationInterrupted)
    );
    // Read-only: nothing can be written through it.
    assert!(c.execute("DELETE FROM TASK", []).is_err());
    // Views and generated columns are refused by `select`, missing columns read as NULL.
    c.execute_batch("SELECT 1").unwrap();
    let t = tmp.path().join("v.db");
    Connection::open(&t)
        .unwrap()
        .execute_batch(
            "CREATE TABLE T (a INTEGER, g GENERATED ALWAYS AS (a * 2));
             CREATE VIEW V AS SELECT a FROM T;",
        )
        .unwrap();
    let c = sql::open_untrusted(&t, Duration::from_secs(10)).unwrap();
    assert!(sql::select(&c, "V", &["a"]).is_err());
    assert!(!sql::has_table(&c, "V").unwrap());
    assert!(sql::has_table(&c, "T").unwrap());
    assert!(sql::select(&c, "T", &["a", "g"]).is_err());
    assert!(sql::select(&c, "T", &["a", "missing"]).is_ok());
}

/// torch_npu's typing: `PYTORCH_API` times declared (and stored as) TEXT.
fn text_typed_db(path: &Path, session: &str) {
    let c = Connection::open(path).unwrap();
    c.execute_batch(&format!(
        "CREATE TABLE STRING_IDS (id INTEGER, value TEXT);
         INSERT INTO STRING_IDS VALUES (1, 'aten::mm'), (2, 'aten::add');
         {session}
         CREATE TABLE PYTORCH_API (startNs TEXT, endNs TEXT, globalTid INTEGER, name INTEGER);
         INSERT INTO PYTORCH_API VALUES ('1000', '1500', 1, 1), ('999', '1999', 1, 2),
                                        ('abc', '2000', 1, 1), (NULL, '2000', 1, 1);
         CREATE TABLE STEP_TIME (id INTEGER, startNs TEXT, endNs TEXT);
         INSERT INTO STEP_TIME VALUES ('2', '999', '5000');"
    ))
    .unwrap();
}

#[test]
fn text_typed_times_load_without_or_with_a_null_session_record() {
    for session in [
        "",
        "CREATE TABLE SESSION_TIME_INFO (startTimeNs INTEGER, endTimeNs INTEGER);",
        "CREATE TABLE SESSION_TIME_INFO (startTimeNs INTEGER, endTimeNs INTEGER);
         INSERT INTO SESSION_TIME_INFO VALUES (NULL, NULL);",
    ] {
        let tmp = tempfile::tempdir().unwrap();
        text_typed_db(&db_path(tmp.path(), 0), session);
        let loaded = load(tmp.path(), &Limits::default()).unwrap();
        let p = &loaded.profiles[0];
        // The numeric minimum, not the text one ('1000' < '999' as text).
        assert_eq!(p.origin_ns, 999, "{session}");
        let mut ops: Vec<(&str, i64, i64)> = p
            .events
            .iter()
            .filter(|e| e.track == Track::Op)
            .map(|e| (p.str(e.name), e.start, e.dur))
            .collect();
        ops.sort();
        assert_eq!(ops, [("aten::add", 0, 1000), ("aten::mm", 1, 500)]);
        assert_eq!(p.steps, [2]);
        // The two rows with unreadable start times are skipped, and counted.
        assert!(
            p.notes.iter().any(|n| n.starts_with("2 rows")),
            "{:?}",
            p.notes
        );
    }
}

#[test]
fn a_text_session_start_is_read() {
    let tmp = tempfile::tempdir().unwrap();
    text_typed_db(
        &db_path(tmp.path(), 0),
        "CREATE TABLE SESSION_TIME_INFO (startTimeNs TEXT, endTimeNs TEXT);
         INSERT INTO SESSION_TIME_INFO VALUES ('500', '9000');",
    );
    let loaded = load(tmp.path(), &Limits::default()).unwrap();
    assert_eq!(loaded.profiles[0].origin_ns, 500);
}

/// `RANK_DEVICE_MAP.rankId` 2^40 is not truncated into rank 0: the file name's rank (3) is kept
/// and a note says why.
#[test]
fn a_rank_id_past_u32_is_not_truncated_into_another_rank() {
    let tmp = tempfile::tempdir().unwrap();
    let path = db_path(tmp.path(), 3);
    good_db(&path, None);
    let c = Connection::open(&path).unwrap();
    c.execute_batch(
        "CREATE TABLE RANK_DEVICE_MAP (rankId INTEGER, deviceId INTEGER);
         INSERT INTO RANK_DEVICE_MAP VALUES (1099511627776, 0);",
    )
    .unwrap();
    drop(c);
    let loaded = load(tmp.path(), &Limits::default()).unwrap();
    assert_eq!(loaded.profiles.len(), 1, "{:?}", loaded.skipped);
    let p = &loaded.profiles[0];
    assert_eq!(p.rank, 3);
    assert!(
        p.notes.iter().any(|n| n.contains("1099511627776")),
        "{:?}",
        p.notes
    );
    // analyse --cluster reads it through the same reader.
    let c = rlprof_report::cluster::analyse(tmp.path(), &Limits::default()).unwrap();
    assert_eq!(c.ranks, [3]);
    assert!(
        c.warnings.iter().any(|n| n.contains("1099511627776")),
        "{:?}",
        c.warnings
    );
}
