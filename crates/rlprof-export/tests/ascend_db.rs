//! The DB layout of the `npu` tool: the default layout, the files, the tables and columns that
//! msprof-analyze's DB mode queries (golden list below), rows that match the raw data, and the
//! same step-trace figures as the text layout.

mod support;

use rlprof_export::analyse_collection;
use rlprof_export::ascend_db_writer::{self, Layout};
use rlprof_export::decode::Index;
use rlprof_export::npu;
use rlprof_profiler::plan::{Content, ExportType, Level};
use rlprof_profiler::raw::RawSummary;
use rlprof_profiler::record::{Kind, RangeCat};
use rusqlite::Connection;
use std::path::Path;
use support::*;

/// `(table, column, where msprof-analyze 26.2 reads it)`: every `TABLE.column` its DB-mode
/// queries name (found with `grep -rhoE "\bTABLE\.[a-zA-Z_]+"` over the installed package and
/// the bare column lists of its `SELECT`s), for `ascend_pytorch_profiler_{rank}.db`.
const PROFILER_DB_READS: &[(&str, &str, &str)] = &[
    ("STRING_IDS", "id", "prof_exports/*.py (every name join)"),
    ("STRING_IDS", "value", "prof_exports/*.py (every name join)"),
    (
        "PYTORCH_API",
        "startNs",
        "compare_tools/.../npu_profiling_db_parser.py",
    ),
    (
        "PYTORCH_API",
        "endNs",
        "compare_tools/.../npu_profiling_db_parser.py",
    ),
    (
        "PYTORCH_API",
        "connectionId",
        "compare_tools/.../npu_profiling_db_parser.py",
    ),
    (
        "PYTORCH_API",
        "name",
        "compare_tools/.../npu_profiling_db_parser.py",
    ),
    (
        "PYTORCH_API",
        "inputShapes",
        "compare_tools/.../npu_profiling_db_parser.py",
    ),
    (
        "PYTORCH_API",
        "type",
        "compare_tools/.../npu_profiling_db_parser.py",
    ),
    (
        "ENUM_API_TYPE",
        "id",
        "compare_tools/.../npu_profiling_db_parser.py",
    ),
    (
        "ENUM_API_TYPE",
        "name",
        "compare_tools/.../npu_profiling_db_parser.py",
    ),
    (
        "CONNECTION_IDS",
        "id",
        "compare_tools/.../npu_profiling_db_parser.py",
    ),
    (
        "CONNECTION_IDS",
        "connectionId",
        "prof_exports/mstx_event_export.py",
    ),
    (
        "CANN_API",
        "startNs",
        "prof_exports/cluster_time_summary_export.py",
    ),
    (
        "CANN_API",
        "endNs",
        "prof_exports/communication_bottleneck_export.py",
    ),
    (
        "CANN_API",
        "connectionId",
        "prof_exports/cluster_time_summary_export.py",
    ),
    (
        "CANN_API",
        "name",
        "prof_exports/communication_bottleneck_export.py",
    ),
    (
        "CANN_API",
        "type",
        "prof_exports/communication_bottleneck_export.py",
    ),
    ("TASK", "startNs", "prof_exports/compute_op_sum_export.py"),
    ("TASK", "endNs", "prof_exports/compute_op_sum_export.py"),
    (
        "TASK",
        "globalTaskId",
        "prof_exports/compute_op_sum_export.py",
    ),
    (
        "TASK",
        "connectionId",
        "prof_exports/cluster_time_summary_export.py",
    ),
    (
        "TASK",
        "streamId",
        "compare_tools/.../npu_profiling_db_parser.py",
    ),
    ("TASK", "taskId", "prof_exports (TASK.taskId)"),
    (
        "TASK",
        "taskType",
        "prof_exports/cluster_time_summary_export.py",
    ),
    (
        "COMPUTE_TASK_INFO",
        "globalTaskId",
        "prof_exports/compute_op_sum_export.py",
    ),
    (
        "COMPUTE_TASK_INFO",
        "name",
        "prof_exports/compute_op_sum_export.py",
    ),
    (
        "COMPUTE_TASK_INFO",
        "opType",
        "prof_exports/compute_op_sum_export.py",
    ),
    (
        "COMPUTE_TASK_INFO",
        "taskType",
        "prof_exports/compute_op_sum_export.py",
    ),
    (
        "COMPUTE_TASK_INFO",
        "inputShapes",
        "prof_exports/compute_op_sum_export.py",
    ),
    (
        "COMMUNICATION_OP",
        "opName",
        "prof_exports/hccl_sum_export.py",
    ),
    (
        "COMMUNICATION_OP",
        "opType",
        "prof_exports/hccl_sum_export.py",
    ),
    (
        "COMMUNICATION_OP",
        "groupName",
        "prof_exports/hccl_sum_export.py",
    ),
    (
        "COMMUNICATION_OP",
        "startNs",
        "prof_exports/hccl_sum_export.py",
    ),
    (
        "COMMUNICATION_OP",
        "endNs",
        "prof_exports/hccl_sum_export.py",
    ),
    (
        "COMMUNICATION_OP",
        "connectionId",
        "prof_exports/cluster_time_summary_export.py",
    ),
    (
        "COMMUNICATION_OP",
        "opId",
        "compare_tools/.../npu_profiling_db_parser.py",
    ),
    (
        "COMMUNICATION_OP",
        "count",
        "prof_exports (COMMUNICATION_OP.count)",
    ),
    (
        "COMMUNICATION_OP",
        "dataType",
        "prof_exports (COMMUNICATION_OP.dataType)",
    ),
    (
        "COMMUNICATION_TASK_INFO",
        "globalTaskId",
        "compare_tools/.../npu_profiling_db_parser.py",
    ),
    (
        "COMMUNICATION_TASK_INFO",
        "name",
        "compare_tools/.../npu_profiling_db_parser.py",
    ),
    (
        "COMMUNICATION_TASK_INFO",
        "opId",
        "compare_tools/.../npu_profiling_db_parser.py",
    ),
    (
        "COMMUNICATION_TASK_INFO",
        "planeId",
        "compare_tools/.../npu_profiling_db_parser.py",
    ),
    (
        "COMMUNICATION_TASK_INFO",
        "groupName",
        "compare_tools/.../npu_profiling_db_parser.py",
    ),
    (
        "COMMUNICATION_TASK_INFO",
        "taskType",
        "prof_exports (COMMUNICATION_TASK_INFO.taskType)",
    ),
    (
        "MSTX_EVENTS",
        "startNs",
        "prof_exports/mstx_event_export.py",
    ),
    ("MSTX_EVENTS", "endNs", "prof_exports/mfu_export.py"),
    (
        "MSTX_EVENTS",
        "eventType",
        "prof_exports/mstx_event_export.py",
    ),
    (
        "MSTX_EVENTS",
        "message",
        "prof_exports/mstx_event_export.py",
    ),
    (
        "MSTX_EVENTS",
        "globalTid",
        "prof_exports/mstx_event_export.py",
    ),
    (
        "MSTX_EVENTS",
        "connectionId",
        "prof_exports/mstx_event_export.py",
    ),
    (
        "STEP_TIME",
        "id",
        "cluster_analyse/recipes/base_recipe_analysis.py",
    ),
    (
        "STEP_TIME",
        "startNs",
        "cluster_analyse/recipes/base_recipe_analysis.py",
    ),
    (
        "STEP_TIME",
        "endNs",
        "cluster_analyse/recipes/base_recipe_analysis.py",
    ),
    (
        "META_DATA",
        "name",
        "cluster_analyse/recipes/communication_group_map",
    ),
    (
        "META_DATA",
        "value",
        "cluster_analyse/recipes/communication_group_map",
    ),
    (
        "RANK_DEVICE_MAP",
        "rankId",
        "prof_exports/cluster_time_summary_export.py",
    ),
    (
        "OP_MEMORY",
        "name",
        "compare_tools/.../npu_profiling_db_parser.py",
    ),
    (
        "OP_MEMORY",
        "size",
        "compare_tools/.../npu_profiling_db_parser.py",
    ),
    (
        "OP_MEMORY",
        "allocationTime",
        "compare_tools/.../npu_profiling_db_parser.py",
    ),
    (
        "OP_MEMORY",
        "releaseTime",
        "compare_tools/.../npu_profiling_db_parser.py",
    ),
    (
        "OP_MEMORY",
        "duration",
        "compare_tools/.../npu_profiling_db_parser.py",
    ),
    (
        "MEMORY_RECORD",
        "totalReserved",
        "compare_tools/.../overall_metrics_parser.py",
    ),
];

/// The same for `analysis.db` (cluster mode's DB input).
const ANALYSIS_DB_READS: &[(&str, &str, &str)] = &[
    (
        "StepTraceTime",
        "step",
        "cluster_analyse/analysis/step_trace_time_analysis.py",
    ),
    ("StepTraceTime", "computing", "step_trace_time_analysis.py"),
    (
        "StepTraceTime",
        "communication_not_overlapped",
        "step_trace_time_analysis.py",
    ),
    ("StepTraceTime", "overlapped", "step_trace_time_analysis.py"),
    (
        "StepTraceTime",
        "communication",
        "step_trace_time_analysis.py",
    ),
    ("StepTraceTime", "free", "step_trace_time_analysis.py"),
    ("StepTraceTime", "stage", "step_trace_time_analysis.py"),
    ("StepTraceTime", "bubble", "step_trace_time_analysis.py"),
    (
        "StepTraceTime",
        "communication_not_overlapped_and_exclude_receive",
        "step_trace_time_analysis.py",
    ),
    ("StepTraceTime", "preparing", "step_trace_time_analysis.py"),
    (
        "CommAnalyzerTime",
        "hccl_op_name",
        "prof_exports/communicaion_info_export.py",
    ),
    (
        "CommAnalyzerTime",
        "group_name",
        "prof_exports/communicaion_info_export.py",
    ),
    (
        "CommAnalyzerTime",
        "start_timestamp",
        "prof_exports/communicaion_info_export.py",
    ),
    (
        "CommAnalyzerTime",
        "elapse_time",
        "prof_exports/communicaion_info_export.py",
    ),
    (
        "CommAnalyzerTime",
        "transit_time",
        "recipes/communication_time_sum",
    ),
    (
        "CommAnalyzerTime",
        "wait_time",
        "recipes/communication_time_sum",
    ),
    (
        "CommAnalyzerTime",
        "synchronization_time",
        "recipes/communication_time_sum",
    ),
    (
        "CommAnalyzerTime",
        "idle_time",
        "recipes/communication_time_sum",
    ),
    (
        "CommAnalyzerTime",
        "step",
        "prof_exports/communicaion_info_export.py",
    ),
    (
        "CommAnalyzerTime",
        "type",
        "prof_exports/communicaion_info_export.py",
    ),
    (
        "CommAnalyzerBandwidth",
        "hccl_op_name",
        "prof_exports/communicaion_info_export.py",
    ),
    (
        "CommAnalyzerBandwidth",
        "group_name",
        "recipes/communication_time_sum",
    ),
    (
        "CommAnalyzerBandwidth",
        "transport_type",
        "prof_exports/communicaion_info_export.py",
    ),
    (
        "CommAnalyzerBandwidth",
        "transit_time",
        "prof_exports/communicaion_info_export.py",
    ),
    (
        "CommAnalyzerBandwidth",
        "transit_size",
        "prof_exports/communicaion_info_export.py",
    ),
    (
        "CommAnalyzerBandwidth",
        "bandwidth",
        "prof_exports/communicaion_info_export.py",
    ),
    (
        "CommAnalyzerBandwidth",
        "large_packet_ratio",
        "prof_exports/communicaion_info_export.py",
    ),
    (
        "CommAnalyzerBandwidth",
        "package_size",
        "recipes/communication_time_sum",
    ),
    (
        "CommAnalyzerBandwidth",
        "count",
        "recipes/communication_time_sum",
    ),
    (
        "CommAnalyzerBandwidth",
        "total_duration",
        "recipes/communication_time_sum",
    ),
    (
        "CommAnalyzerMatrix",
        "hccl_op_name",
        "recipes/communication_matrix_sum",
    ),
    (
        "CommAnalyzerMatrix",
        "group_name",
        "recipes/communication_matrix_sum",
    ),
    (
        "CommAnalyzerMatrix",
        "src_rank",
        "recipes/communication_matrix_sum",
    ),
    (
        "CommAnalyzerMatrix",
        "dst_rank",
        "recipes/communication_matrix_sum",
    ),
    (
        "CommAnalyzerMatrix",
        "transit_size",
        "recipes/communication_matrix_sum",
    ),
    (
        "CommAnalyzerMatrix",
        "transit_time",
        "recipes/communication_matrix_sum",
    ),
    (
        "CommAnalyzerMatrix",
        "step",
        "recipes/communication_matrix_sum",
    ),
    (
        "CommAnalyzerMatrix",
        "type",
        "recipes/communication_matrix_sum",
    ),
    (
        "CommAnalyzerMatrix",
        "op_name",
        "recipes/communication_matrix_sum",
    ),
];

fn db_script(level: Level, contents: &[Content]) -> Script {
    let mut s = Script::npu(level, contents);
    s.export_type = ExportType::Db;
    s
}

fn columns(conn: &Connection, table: &str) -> Vec<String> {
    let mut st = conn
        .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))
        .unwrap();
    st.query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn count(conn: &Connection, sql: &str) -> i64 {
    conn.query_row(sql, [], |r| r.get(0))
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

fn open_dbs(dir: &Path, rank: u32) -> (Connection, Connection) {
    let out = dir.join(npu::OUTPUT_DIR);
    let p = Connection::open(out.join(ascend_db_writer::profiler_db_name(rank))).unwrap();
    let a = Connection::open(out.join(ascend_db_writer::ANALYSIS_DB)).unwrap();
    (p, a)
}

#[test]
fn db_is_the_layout_asked_for_and_holds_only_the_dbs() {
    let tmp = tempfile::tempdir().unwrap();
    let done = collect(
        tmp.path(),
        &db_script(Level::Level1, &[Content::Npu, Content::Cpu]),
    );
    let dir = &done[0].dir;
    let rank = rlprof_export::analyse::raw_files(dir)
        .iter()
        .map(|f| Index::build(f).unwrap().meta.rank)
        .next()
        .unwrap();
    let rep = analyse_collection(dir).unwrap();
    let out = dir.join(npu::OUTPUT_DIR);
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let db = ascend_db_writer::profiler_db_name(rank);
    let mut want = vec!["analyse.done".to_string(), "analysis.db".into(), db];
    want.sort();
    assert_eq!(names, want, "data simplification: only the DBs");
    let info: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.join(format!("profiler_info_{rank}.json"))).unwrap(),
    )
    .unwrap();
    let exp = &info["config"]["experimental_config"];
    assert_eq!(exp["export_type"], serde_json::json!(["db"]));
    assert_eq!(exp["_data_simplification"], serde_json::json!(true));
    assert!(
        rep.ranks[0]
            .outputs
            .iter()
            .any(|p| p.ends_with("analysis.db"))
    );
    // Parsed once: a second run leaves it alone (never re-exported into another layout).
    assert!(analyse_collection(dir).unwrap().already_done);
}

#[test]
fn tables_and_columns_msprof_analyze_reads_are_there() {
    let tmp = tempfile::tempdir().unwrap();
    let done = collect(
        tmp.path(),
        &db_script(
            Level::Level1,
            &[Content::Npu, Content::Cpu, Content::Memory],
        ),
    );
    let dir = &done[0].dir;
    analyse_collection(dir).unwrap();
    let rank = Index::build(&rlprof_export::analyse::raw_files(dir)[0])
        .unwrap()
        .meta
        .rank;
    let (p, a) = open_dbs(dir, rank);
    for (conn, reads) in [(&p, PROFILER_DB_READS), (&a, ANALYSIS_DB_READS)] {
        for (table, col, from) in reads {
            let cols = columns(conn, table);
            assert!(
                cols.iter().any(|c| c == col),
                "{table}.{col} (read by msprof-analyze in {from}) missing; {table} has {cols:?}"
            );
        }
    }
    // Every table of our schema is written with exactly its declared columns.
    for t in ascend_db_writer::schema::PROFILER_TABLES {
        let want: Vec<&str> = t.columns.iter().map(|c| c.0).collect();
        assert_eq!(columns(&p, t.name), want, "{}", t.name);
    }
}

#[test]
fn rows_match_the_raw_data_and_link_ops_to_their_tasks() {
    let tmp = tempfile::tempdir().unwrap();
    let s = db_script(
        Level::Level1,
        &[Content::Npu, Content::Cpu, Content::Memory],
    );
    let done = collect(tmp.path(), &s);
    for c in &done {
        let raw = &c.raw_file;
        let sum = RawSummary::read(raw, true).unwrap();
        let n = |f: &dyn Fn(&rlprof_profiler::record::Record) -> bool| {
            sum.kept.iter().filter(|(_, r)| f(r)).count() as i64
        };
        let kernels = n(&|r| r.kind == Kind::Kernel as u8);
        let comms = n(&|r| r.kind == Kind::Comm as u8);
        let ops = n(&|r| r.kind == Kind::Range as u8 && r.cat == RangeCat::Op as u8);
        let allocs = n(&|r| r.kind == Kind::Memory as u8 && r.cat == 0);
        let steps = n(&|r| r.kind == Kind::Range as u8 && r.cat == RangeCat::Step as u8);
        assert_eq!(steps, 1, "one step per collection");
        analyse_collection(&c.dir).unwrap();
        let rank = Index::build(raw).unwrap().meta.rank;
        let (p, a) = open_dbs(&c.dir, rank);
        assert_eq!(count(&p, "SELECT count(*) FROM COMPUTE_TASK_INFO"), kernels);
        assert_eq!(count(&p, "SELECT count(*) FROM COMMUNICATION_OP"), comms);
        assert_eq!(
            count(&p, "SELECT count(*) FROM PYTORCH_API WHERE type = 50001"),
            ops + steps
        );
        // Each comm op has its transfer task (plus a wait task when it waited).
        assert!(count(&p, "SELECT count(*) FROM COMMUNICATION_TASK_INFO") >= comms);
        // Every op's kernel is reachable from it: PYTORCH_API -> CONNECTION_IDS -> TASK.
        let linked = count(
            &p,
            "SELECT count(*) FROM PYTORCH_API a JOIN CONNECTION_IDS c ON a.connectionId = c.id \
             JOIN TASK t ON t.connectionId = c.connectionId \
             JOIN COMPUTE_TASK_INFO i ON i.globalTaskId = t.globalTaskId",
        );
        assert_eq!(
            linked, kernels,
            "every kernel of the script runs inside an op"
        );
        // Names resolve through STRING_IDS.
        let gemm = count(
            &p,
            "SELECT count(*) FROM COMPUTE_TASK_INFO i JOIN STRING_IDS s ON s.id = i.name \
             WHERE s.value = 'gemm_f32'",
        );
        assert_eq!(gemm, kernels);
        assert_eq!(count(&p, "SELECT count(*) FROM STEP_TIME"), steps);
        // Memory: one allocation row per allocation, each released.
        assert_eq!(count(&p, "SELECT count(*) FROM OP_MEMORY"), allocs);
        assert_eq!(
            count(
                &p,
                "SELECT count(*) FROM OP_MEMORY WHERE releaseTime IS NULL"
            ),
            0
        );
        assert_eq!(count(&p, "SELECT rankId FROM RANK_DEVICE_MAP"), rank as i64);
        assert_eq!(count(&a, "SELECT count(*) FROM CommAnalyzerTime"), comms);
    }
}

/// `StepTraceTime` of the DB equals `step_trace_time.csv` of the text layout, value by value.
#[test]
fn step_trace_equals_the_text_layout() {
    let tmp = tempfile::tempdir().unwrap();
    let done = collect(
        tmp.path(),
        &db_script(Level::Level1, &[Content::Npu, Content::Cpu]),
    );
    let dir = &done[0].dir;
    let raw = &rlprof_export::analyse::raw_files(dir)[0];
    let idx = Index::build(raw).unwrap();
    rlprof_export::ascend_writer::export_as(dir, &idx, Layout::Text).unwrap();
    let (h, rows) = read_csv(&dir.join(npu::OUTPUT_DIR).join("step_trace_time.csv"));
    assert_eq!(rows.len(), 1, "one step per collection");
    rlprof_export::ascend_writer::export_as(dir, &idx, Layout::Db).unwrap();
    let (_, a) = open_dbs(dir, idx.meta.rank);
    let cols: Vec<String> = columns(&a, "StepTraceTime");
    for row in rows {
        let step = &row[1];
        for (i, col) in cols.iter().enumerate().skip(1) {
            let db: Option<f64> = a
                .query_row(
                    &format!("SELECT {col} FROM StepTraceTime WHERE step = ?1"),
                    [step],
                    |r| r.get(0),
                )
                .unwrap();
            let text: Option<f64> = row[i + 1].parse().ok();
            match (db, text) {
                (Some(d), Some(t)) => {
                    assert!((d - t).abs() < 1e-6, "{col} {}: {d} vs {t}", h[i + 1])
                }
                (d, t) => assert_eq!(d, t, "{col}"),
            }
        }
    }
}

/// The writer's `step_trace_time.csv` holds, to the nanosecond, the figures the report
/// computes by CANN's rules from the same raw collection: both call
/// `rlprof_profiler::metrics::cann` (the writer had sums of its own before).
#[test]
fn step_trace_time_is_the_reports_cann_rows_to_the_nanosecond() {
    let tmp = tempfile::tempdir().unwrap();
    let mut script = Script::npu(Level::Level1, &[Content::Npu, Content::Cpu]);
    script.comms = 3;
    let done = collect(tmp.path(), &script);
    let mut compared = 0;
    for c in &done {
        let raw = &rlprof_export::analyse::raw_files(&c.dir)[0];
        let idx = Index::build(raw).unwrap();
        rlprof_export::ascend_writer::export_as(&c.dir, &idx, Layout::Text).unwrap();
        let (h, rows) = read_csv(&c.dir.join(npu::OUTPUT_DIR).join("step_trace_time.csv"));
        let p = rlprof_report::raw_input::load_raw(raw, "g").unwrap();
        let cann = rlprof_report::summary::cann::computed(&p, "", 0);
        assert_eq!(rows.len(), cann.len(), "{rows:?} vs {cann:?}");
        // `12.345` us as ns, exactly.
        let ns = |t: &str| -> u64 {
            let (a, b) = t.split_once('.').unwrap();
            a.parse::<u64>().unwrap() * 1000 + b.parse::<u64>().unwrap()
        };
        for (row, c) in rows.iter().zip(&cann) {
            let col = |name: &str| ns(&row[h.iter().position(|x| x == name).unwrap()]);
            assert!(c.computing_ns > 0, "{c:?}");
            assert_eq!(col("Computing"), c.computing_ns);
            assert_eq!(
                col("Communication(Not Overlapped)"),
                c.communication_not_overlapped_ns
            );
            assert_eq!(col("Overlapped"), c.overlapped_ns);
            assert_eq!(col("Communication"), c.communication_ns);
            assert_eq!(col("Free"), c.free_ns);
            assert_eq!(col("Stage"), c.stage_ns);
            assert_eq!(col("Bubble"), c.bubble_ns);
            assert_eq!(col("Preparing"), c.preparing_ns.unwrap());
            compared += 1;
        }
    }
    assert!(compared >= 2, "{compared} rows compared");
}

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

/// `analyse --cluster` on DBs alone (raw data removed) gives what it gives on the raw data.
#[test]
fn cluster_analysis_of_the_dbs_equals_that_of_the_raw_data() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    let mut s = db_script(Level::Level1, &[Content::Npu, Content::Cpu]);
    s.comms = 2;
    collect(&run, &s);
    rlprof_export::analyse_tree(&run, 1, &|_| {}).unwrap();
    let dbs = tmp.path().join("dbs");
    copy_tree(&run, &dbs);
    for dir in rlprof_export::analyse::find_collections(&dbs).unwrap() {
        std::fs::remove_dir_all(dir.join("rlprof_raw")).unwrap();
    }
    assert!(
        rlprof_export::analyse::find_collections(&dbs)
            .unwrap()
            .is_empty()
    );
    let mut from_raw = rlprof_report::cluster::analyse(&run, &Default::default()).unwrap();
    let mut from_db = rlprof_report::cluster::analyse(&dbs, &Default::default()).unwrap();
    for c in [&mut from_raw, &mut from_db] {
        c.steps
            .sort_by(|a, b| (a.rank, &a.step).cmp(&(b.rank, &b.step)));
    }
    assert_eq!(from_db.collections.len(), 4, "2 ranks x 2 steps");
    assert_eq!(from_db.ranks, [0, 1]);
    // CANN's figures: the DB tree's are read from the `StepTraceTime` the export wrote, the
    // raw tree's computed by the same rules; equal to the microsecond the table holds.
    assert_eq!(from_db.steps.len(), from_raw.steps.len());
    for (d, r) in from_db.steps.iter().zip(&from_raw.steps) {
        assert_eq!((d.rank, &d.step), (r.rank, &r.step));
        for (a, b) in [
            (d.step_ms, r.step_ms),
            (d.computing_ms, r.computing_ms),
            (d.communication_ms, r.communication_ms),
            (d.free_ms, r.free_ms),
            (d.wait_ms, r.wait_ms),
        ] {
            assert!((a - b).abs() <= 1e-3, "{d:?} vs {r:?}");
        }
    }
    assert_eq!(from_db.roles, from_raw.roles);
    assert_eq!(from_db.bandwidth, from_raw.bandwidth);
    assert_eq!(from_db.pairs, from_raw.pairs);
    assert!(
        from_db
            .bandwidth
            .iter()
            .all(|b| b.bytes.is_some_and(|x| x > 0) && b.wait_ms >= 0.0)
    );
}

/// The stage ranges in the DB carry verl's stage labels, in mstx's default domain as verl's do.
#[test]
fn stage_ranges_are_in_the_default_domain_as_verls() {
    // verl 0.9.1 (`mstx_profile.py`): a stage is `mstx.range_start(message=<stage label>)`, no
    // domain given, so its ranges are in mstx's default domain; rlprof's ranges that verl has
    // no counterpart of (the trainer's phases) stay in the `rlprof` domain.
    let tmp = tempfile::tempdir().unwrap();
    let done = collect(
        tmp.path(),
        &db_script(Level::Level0, &[Content::Npu, Content::Cpu]),
    );
    let dir = &done[0].dir;
    analyse_collection(dir).unwrap();
    let rank = done[0].rank;
    let (p, _) = open_dbs(dir, rank);
    let mut st = p
        .prepare(
            "SELECT m.value, d.value FROM MSTX_EVENTS e \
             JOIN STRING_IDS m ON m.id = e.message JOIN STRING_IDS d ON d.id = e.domainId",
        )
        .unwrap();
    let rows: Vec<(String, String)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let domain_of = |name: &str| -> Vec<&str> {
        rows.iter()
            .filter(|(m, _)| m == name)
            .map(|(_, d)| d.as_str())
            .collect()
    };
    for stage in ["rollout_generate", "actor_update"] {
        let d = domain_of(stage);
        assert!(!d.is_empty(), "no {stage} in {rows:?}");
        assert!(d.iter().all(|d| *d == "default"), "{stage}: {d:?}");
    }
    for phase in ["gen", "update_actor"] {
        let d = domain_of(phase);
        assert!(!d.is_empty(), "no {phase} in {rows:?}");
        assert!(d.iter().all(|d| *d == "rlprof"), "{phase}: {d:?}");
    }
    assert!(
        !rows.iter().any(|(m, _)| m == "generate_sequences"),
        "{rows:?}"
    );
}
