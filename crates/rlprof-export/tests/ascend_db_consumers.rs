//! msprof-analyze reads our DB layout (`#[ignore = "needs ..."]`: CI installs msprof-analyze into
//! RLPROF_VENV, default /opt/rlprof-venv, and runs these by name, `.ci/parts/15-ascend-db.sh`):
//! - its cluster mode on 2 ranks of our DB output gives per-rank step times and communication
//!   equal to `rlprof analyse --cluster`'s, to 1 µs;
//! - the same raw data exported as text and as DB gives it equal results.

mod support;

use rlprof_export::analyse_tree;
use rlprof_export::ascend_db_writer::Layout;
use rlprof_export::decode::Index;
use rlprof_profiler::plan::{Content, ExportType, Level};
use rusqlite::Connection;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::*;

/// 1 µs in the units compared.
const US_IN_MS: f64 = 1e-3;

fn two_ranks(root: &Path) -> PathBuf {
    let mut s = Script::npu(Level::Level1, &[Content::Npu, Content::Cpu]);
    s.export_type = ExportType::Db;
    s.steps = vec![1];
    s.comms = 2;
    collect(root, &s);
    let r = analyse_tree(root, 2, &|_| {}).unwrap();
    assert_eq!(r.parsed(), 2);
    root.join("train")
}

/// Runs `msprof-analyze cluster -d dir -o out`; returns the log.
fn msprof_cluster(dir: &Path, out: &Path) -> String {
    let exe = consumer_python().parent().unwrap().join("msprof-analyze");
    let o = Command::new(exe)
        .args(["cluster", "-d"])
        .arg(dir)
        .arg("-o")
        .arg(out)
        .output()
        .expect("spawn msprof-analyze");
    let log = format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "msprof-analyze failed:\n{log}");
    log
}

fn find(dir: &Path, name: &str) -> Option<PathBuf> {
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        if p.file_name().is_some_and(|n| n == name) {
            return Some(p);
        }
        if p.is_dir()
            && let Some(f) = find(&p, name)
        {
            return Some(f);
        }
    }
    None
}

/// Per rank: (computing, communication, step = computing + not-overlapped communication + free),
/// in ms.
type Steps = BTreeMap<u32, [f64; 3]>;
/// Per rank: summed elapse time of its communication ops, ms.
type Comm = BTreeMap<u32, f64>;

/// msprof-analyze's DB-mode results (`cluster_analysis.db`).
fn db_results(out: &Path, log: &str) -> (Steps, Comm) {
    let db = find(out, "cluster_analysis.db")
        .unwrap_or_else(|| panic!("no cluster_analysis.db under {}:\n{log}", out.display()));
    let c = Connection::open(db).unwrap();
    let mut steps = Steps::new();
    let mut st = c
        .prepare(
            "SELECT \"index\", computing, communication, communication_not_overlapped, free \
             FROM ClusterStepTraceTime WHERE type = 'rank'",
        )
        .unwrap_or_else(|e| panic!("ClusterStepTraceTime: {e}\n{log}"));
    let rows = st
        .query_map([], |r| {
            let idx: String = r.get::<_, rusqlite::types::Value>(0).map(|v| match v {
                rusqlite::types::Value::Integer(i) => i.to_string(),
                rusqlite::types::Value::Text(t) => t,
                other => format!("{other:?}"),
            })?;
            let f = |i| r.get::<_, f64>(i);
            Ok((idx, [f(1)?, f(2)?, f(3)?, f(4)?]))
        })
        .unwrap();
    for row in rows {
        let (idx, [comp, comm, comm_no, free]) = row.unwrap();
        steps.insert(
            idx.parse().unwrap(),
            [comp / 1e3, comm / 1e3, (comp + comm_no + free) / 1e3],
        );
    }
    let mut comm = Comm::new();
    let mut st = c
        .prepare(
            "SELECT rank_id, elapsed_time FROM ClusterCommunicationTime \
             WHERE hccl_op_name != 'Total Op Info'",
        )
        .unwrap_or_else(|e| panic!("ClusterCommunicationTime: {e}\n{log}"));
    for row in st
        .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, f64>(1)?)))
        .unwrap()
    {
        let (rank, ms) = row.unwrap();
        *comm.entry(rank as u32).or_default() += ms;
    }
    (steps, comm)
}

/// msprof-analyze's text-mode results (`cluster_step_trace_time.csv`,
/// `cluster_communication.json`).
fn text_results(out: &Path, log: &str) -> (Steps, Comm) {
    let csv = find(out, "cluster_step_trace_time.csv")
        .unwrap_or_else(|| panic!("no cluster_step_trace_time.csv:\n{log}"));
    let (h, rows) = read_csv(&csv);
    let col = |n: &str| {
        h.iter()
            .position(|c| c == n)
            .unwrap_or_else(|| panic!("{n} in {h:?}"))
    };
    let (ty, idx) = (col("Type"), col("Index"));
    let (comp, comm, comm_no, free) = (
        col("Computing"),
        col("Communication"),
        col("Communication(Not Overlapped)"),
        col("Free"),
    );
    let mut steps = Steps::new();
    for r in rows.iter().filter(|r| r[ty] == "rank") {
        let v = |i: usize| r[i].trim().parse::<f64>().unwrap();
        steps.insert(
            r[idx].parse().unwrap(),
            [
                v(comp) / 1e3,
                v(comm) / 1e3,
                (v(comp) + v(comm_no) + v(free)) / 1e3,
            ],
        );
    }
    let json = find(out, "cluster_communication.json")
        .unwrap_or_else(|| panic!("no cluster_communication.json:\n{log}"));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap();
    let mut comm = Comm::new();
    for (_, kinds) in v.as_object().unwrap() {
        for (_, ops) in kinds.as_object().unwrap() {
            for (op, ranks) in ops.as_object().unwrap() {
                if op.starts_with("Total Op Info") {
                    continue;
                }
                for (rank, info) in ranks.as_object().unwrap() {
                    let ms = info["Communication Time Info"]["Elapse Time(ms)"]
                        .as_f64()
                        .unwrap();
                    *comm.entry(rank.parse().unwrap()).or_default() += ms;
                }
            }
        }
    }
    (steps, comm)
}

fn assert_close(what: &str, a: f64, b: f64) {
    assert!(
        (a - b).abs() <= US_IN_MS,
        "{what}: {a} ms vs {b} ms (more than 1 µs apart)"
    );
}

#[test]
#[ignore = "needs msprof-analyze in RLPROF_VENV (/opt/rlprof-venv)"]
fn msprof_analyze_db_mode_gives_our_step_times_and_communication() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = two_ranks(tmp.path());
    let out = tmp.path().join("msprof_out");
    let log = msprof_cluster(&dir, &out);
    let (steps, comm) = db_results(&out, &log);
    let ours = rlprof_report::cluster::analyse(&dir, &Default::default()).unwrap();
    assert_eq!(steps.keys().copied().collect::<Vec<_>>(), [0, 1], "{log}");
    for s in &ours.steps {
        let [comp, c, step] = steps[&s.rank];
        assert_close(&format!("rank {} step time", s.rank), step, s.step_ms);
        assert_close(&format!("rank {} computing", s.rank), comp, s.computing_ms);
        assert_close(
            &format!("rank {} communication", s.rank),
            c,
            s.communication_ms,
        );
    }
    let mut our_comm = Comm::new();
    for b in &ours.bandwidth {
        *our_comm.entry(b.rank).or_default() += b.time_ms;
    }
    assert_eq!(comm.len(), 2, "{comm:?}\n{log}");
    for (rank, ms) in &our_comm {
        assert!(*ms > 0.0);
        assert_close(&format!("rank {rank} communication ops"), comm[rank], *ms);
    }
}

/// Copies a directory tree.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if src.is_dir() {
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// Re-exports every collection below `root` in `layout`.
fn export_all(root: &Path, layout: Layout) {
    for dir in rlprof_export::analyse::find_collections(root).unwrap() {
        for raw in rlprof_export::analyse::raw_files(&dir) {
            let idx = Index::build(&raw).unwrap();
            rlprof_export::ascend_writer::export_as(&dir, &idx, layout).unwrap();
        }
    }
}

#[test]
#[ignore = "needs msprof-analyze in RLPROF_VENV (/opt/rlprof-venv)"]
fn text_and_db_layouts_give_msprof_analyze_equal_results() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = two_ranks(&tmp.path().join("run"));
    let (text_dir, db_dir) = (tmp.path().join("text"), tmp.path().join("db"));
    copy_tree(&dir, &text_dir);
    copy_tree(&dir, &db_dir);
    export_all(&text_dir, Layout::Text);
    export_all(&db_dir, Layout::Db);
    let (t_out, d_out) = (tmp.path().join("t_out"), tmp.path().join("d_out"));
    let t_log = msprof_cluster(&text_dir, &t_out);
    let d_log = msprof_cluster(&db_dir, &d_out);
    let (t_steps, t_comm) = text_results(&t_out, &t_log);
    let (d_steps, d_comm) = db_results(&d_out, &d_log);
    assert_eq!(t_steps.len(), 2, "{t_log}");
    assert_eq!(
        t_steps.keys().collect::<Vec<_>>(),
        d_steps.keys().collect::<Vec<_>>()
    );
    for (rank, t) in &t_steps {
        for (i, what) in ["computing", "communication", "step time"]
            .iter()
            .enumerate()
        {
            assert_close(&format!("rank {rank} {what}"), t[i], d_steps[rank][i]);
        }
    }
    assert_eq!(t_comm.len(), 2, "{t_comm:?}\n{t_log}");
    for (rank, t) in &t_comm {
        assert_close(&format!("rank {rank} communication ops"), *t, d_comm[rank]);
    }
}
