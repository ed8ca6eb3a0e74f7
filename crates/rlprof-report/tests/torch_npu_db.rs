//! A profiler DB laid out as torch_npu 2.6 and CANN write it, not as rlprof does, with what
//! real torch_npu DBs hold (MindStudio Insight's test data, `test/data/pytorch/db/level*`):
//! the column types torch_npu declares (`PYTORCH_API` times as TEXT), its API type names
//! (`trace` for the Python tracer), a collective's own `AI_CORE` record on the HCCL stream
//! (launched by the op's connection id), a compute stream's `EVENT_WAIT` for the collective,
//! `Notify_Wait` tasks on several planes, `MEMORY_RECORD` with its interleaved `PTA` / `GE` /
//! `PTA+GE` / `WORKSPACE` series and `OP_MEMORY` rows whose totals match it, and an older
//! schema that lacks columns. Each figure is checked against the rows the test wrote.

use rlprof_report::model::{Loaded, Track};
use rlprof_report::summary::StepId;
use rlprof_report::{Report, load, summarise};
use rusqlite::{Connection, params};
use std::path::Path;

/// The session's start; every time below is this plus an offset.
const T0: i64 = 1_700_000_000_000_000_000;

/// String ids, as torch_npu's `Str2IdManager` and CANN intern them.
const STRINGS: &[(i64, &str)] = &[
    (1, "ProfilerStep#3"),
    (2, "aten::matmul"),
    (3, "train.py(10): step"),
    (4, "Enqueue"),
    (5, "MatMul_0"),
    (6, "hcom_allReduce__123_0_1"),
    (7, "Notify_Wait"),
    (8, "Memcpy"),
    (9, "PTA"),
    (10, "GE"),
    (11, "PTA+GE"),
    (12, "WORKSPACE"),
    (13, "group_a"),
    (14, "KERNEL_AICORE"),
    (15, "AI_CORE"),
    (16, "EVENT_WAIT"),
    (17, "aten::empty_strided"),
    (18, "MEMCPY_ASYNC"),
];

/// `MEMORY_RECORD` rows: (component, time offset, total allocated). Each component is a total
/// of its own; only the `PTA` series is the torch allocator's.
const MEMORY: &[(i64, i64, i64)] = &[
    (9, 1_000, 100),
    (10, 1_500, 5_000),
    (11, 1_500, 5_100),
    (9, 2_000, 300),
    (12, 2_500, 9_999),
    (9, 3_000, 50),
];

/// (op, size, allocation time, total after it, release time and total after).
type OpMemoryRow = (i64, i64, i64, i64, Option<(i64, i64)>);

/// `OP_MEMORY` rows: (op, size, allocation time, total after it, release time, total after).
/// The first two are the PTA series' allocation at +1 us and +2 us; the GE op's totals are
/// GE's.
const OP_MEMORY: &[OpMemoryRow] = &[
    (17, 100, 1_000, 100, Some((3_000, 50))),
    (2, 200, 2_000, 300, None),
    (5, 5_000, 1_500, 5_000, None),
];

fn make_db(path: &Path, legacy: bool) {
    let c = Connection::open(path).unwrap();
    let api_extra = if legacy {
        ""
    } else {
        ", callchainId INTEGER, type INTEGER"
    };
    let mem_extra = if legacy { "" } else { ", deviceId INTEGER" };
    c.execute_batch(&format!(
        "CREATE TABLE STRING_IDS (id INTEGER, value TEXT);
         CREATE TABLE ENUM_API_TYPE (id INTEGER, name TEXT);
         CREATE TABLE SESSION_TIME_INFO (startTimeNs INTEGER, endTimeNs INTEGER);
         CREATE TABLE RANK_DEVICE_MAP (rankId INTEGER, deviceId INTEGER);
         CREATE TABLE PYTORCH_API (startNs TEXT, endNs TEXT, globalTid INTEGER,
             connectionId INTEGER, name INTEGER, sequenceNumber INTEGER, fwdThreadId INTEGER,
             inputDtypes INTEGER, inputShapes INTEGER{api_extra});
         CREATE TABLE TASK (startNs INTEGER, endNs INTEGER, deviceId INTEGER,
             connectionId INTEGER, globalTaskId INTEGER, globalPid INTEGER, taskType INTEGER,
             contextId INTEGER, streamId INTEGER, taskId INTEGER, modelId INTEGER);
         CREATE TABLE COMPUTE_TASK_INFO (name INTEGER, globalTaskId INTEGER, blockDim INTEGER,
             mixBlockDim INTEGER, taskType INTEGER, opType INTEGER);
         CREATE TABLE COMMUNICATION_OP (opName INTEGER, startNs INTEGER, endNs INTEGER,
             connectionId INTEGER, groupName INTEGER, opId INTEGER, relay INTEGER,
             retry INTEGER, dataType INTEGER, algType INTEGER, count NUMERIC, opType INTEGER);
         CREATE TABLE COMMUNICATION_TASK_INFO (name INTEGER, globalTaskId INTEGER,
             taskType INTEGER, planeId INTEGER, groupName INTEGER, notifyId INTEGER,
             rdmaType INTEGER, srcRank INTEGER, dstRank INTEGER, transportType INTEGER,
             size INTEGER, dataType INTEGER, linkType INTEGER, opId INTEGER);
         CREATE TABLE MEMORY_RECORD (component INTEGER, timestamp INTEGER,
             totalAllocated INTEGER, totalReserved INTEGER, totalActive INTEGER,
             streamPtr INTEGER{mem_extra});
         CREATE TABLE STEP_TIME (id INTEGER, startNs INTEGER, endNs INTEGER);
         CREATE TABLE OP_MEMORY (name INTEGER, size INTEGER, allocationTime INTEGER,
             releaseTime INTEGER, activeReleaseTime INTEGER, duration INTEGER,
             activeDuration INTEGER, allocationTotalAllocated INTEGER,
             allocationTotalReserved INTEGER, allocationTotalActive INTEGER,
             releaseTotalAllocated INTEGER, releaseTotalReserved INTEGER,
             releaseTotalActive INTEGER, streamPtr INTEGER, deviceId INTEGER);"
    ))
    .unwrap();
    for (id, v) in STRINGS {
        c.execute("INSERT INTO STRING_IDS VALUES (?1, ?2)", params![id, v])
            .unwrap();
    }
    for (id, v) in [
        (50001, "op"),
        (50002, "queue"),
        (50003, "trace"),
        (50004, "mstx"),
    ] {
        c.execute("INSERT INTO ENUM_API_TYPE VALUES (?1, ?2)", params![id, v])
            .unwrap();
    }
    c.execute(
        "INSERT INTO SESSION_TIME_INFO VALUES (?1, ?2)",
        params![T0, T0 + 1_000_000],
    )
    .unwrap();
    c.execute("INSERT INTO RANK_DEVICE_MAP VALUES (0, 0)", [])
        .unwrap();
    c.execute(
        "INSERT INTO STEP_TIME VALUES (3, ?1, ?2)",
        params![T0, T0 + 100_000],
    )
    .unwrap();
    // (start, end, name, type): the step, an op, a Python function, a task-queue entry.
    let api: [(i64, i64, i64, i64); 4] = [
        (0, 100_000, 1, 50001),
        (10_000, 20_000, 2, 50001),
        (500, 90_000, 3, 50003),
        (11_000, 11_500, 4, 50002),
    ];
    for (s, e, name, ty) in api {
        // torch_npu inserts the times as text into TEXT columns.
        let (s, e) = ((T0 + s).to_string(), (T0 + e).to_string());
        if legacy {
            c.execute(
                "INSERT INTO PYTORCH_API VALUES (?1, ?2, 7, NULL, ?3, NULL, NULL, NULL, NULL)",
                params![s, e, name],
            )
        } else {
            c.execute(
                "INSERT INTO PYTORCH_API VALUES (?1, ?2, 7, NULL, ?3, NULL, NULL, NULL, NULL, \
                 NULL, ?4)",
                params![s, e, name, ty],
            )
        }
        .unwrap();
    }
    // (start, end, globalTaskId, task type, stream, connection id): a compute kernel (10 us) on
    // stream 2; the all-reduce's tasks on stream 4 (plane 0: an 8 us copy; planes 1 and 2: a
    // 2 us and a 5 us wait); the all-reduce's own AI_CORE record on stream 4, launched by its
    // connection id 77; stream 2 waiting for it (EVENT_WAIT); on stream 2, a kernel without a
    // compute info (msprof does not count it as computing) and a 1 us copy.
    let tasks: [(i64, i64, i64, i64, i64, Option<i64>); 8] = [
        (30_000, 40_000, 100, 14, 2, Some(5)),
        (52_000, 60_000, 201, 14, 4, None),
        (50_000, 52_000, 200, 14, 4, None),
        (50_000, 55_000, 202, 14, 4, None),
        (50_000, 60_000, 300, 15, 4, Some(77)),
        (45_000, 60_000, 301, 16, 2, Some(78)),
        (61_000, 62_000, 400, 14, 2, Some(79)),
        (62_000, 63_000, 401, 18, 2, Some(80)),
    ];
    for (s, e, gid, ty, stream, conn) in tasks {
        c.execute(
            "INSERT INTO TASK VALUES (?1, ?2, 0, ?3, ?4, 1, ?5, 0, ?6, ?4, 0)",
            params![T0 + s, T0 + e, conn, gid, ty, stream],
        )
        .unwrap();
    }
    c.execute(
        "INSERT INTO COMPUTE_TASK_INFO VALUES (5, 100, 8, 0, 14, 14)",
        [],
    )
    .unwrap();
    c.execute(
        "INSERT INTO COMMUNICATION_OP VALUES (6, ?1, ?2, 77, 13, 1, 0, 0, 0, 0, 262144, 0)",
        params![T0 + 50_000, T0 + 60_000],
    )
    .unwrap();
    // As torch_npu writes them: `name` is the op's name, `taskType` the task's.
    for (ty, gid, plane, size) in [(7, 200, 1, 0), (8, 201, 0, 1_048_576), (7, 202, 2, 0)] {
        c.execute(
            "INSERT INTO COMMUNICATION_TASK_INFO VALUES \
             (6, ?1, ?2, ?3, 13, 0, 0, 0, 1, 0, ?4, 0, 0, 1)",
            params![gid, ty, plane, size],
        )
        .unwrap();
    }
    for (comp, t, total) in MEMORY {
        if legacy {
            c.execute(
                "INSERT INTO MEMORY_RECORD VALUES (?1, ?2, ?3, 0, 0, NULL)",
                params![comp, T0 + t, total],
            )
        } else {
            c.execute(
                "INSERT INTO MEMORY_RECORD VALUES (?1, ?2, ?3, 0, 0, NULL, 0)",
                params![comp, T0 + t, total],
            )
        }
        .unwrap();
    }
    for &(name, size, at, total, release) in OP_MEMORY {
        let (rt, rtotal) = release.map_or((None, None), |(t, x)| (Some(T0 + t), Some(x)));
        c.execute(
            "INSERT INTO OP_MEMORY VALUES (?1, ?2, ?3, ?4, ?4, NULL, NULL, ?5, 0, 0, ?6, 0, 0, \
             NULL, 0)",
            params![name, size, T0 + at, rt, total, rtotal],
        )
        .unwrap();
    }
}

fn report_of(legacy: bool) -> (Loaded, Report) {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("ascend_pytorch_profiler_0.db");
    make_db(&db, legacy);
    let loaded = load(&db, &Default::default()).unwrap();
    let report = summarise(&loaded);
    (loaded, report)
}

/// (count, total ns) of the op table's rows of `kind` named `name`.
fn op(r: &Report, kind: Track, name: &str) -> Option<(u64, u64)> {
    r.ops
        .iter()
        .find(|o| o.kind == kind && o.name == name)
        .map(|o| (o.count, o.total_ns))
}

#[test]
fn a_torch_npu_db_gives_the_figures_of_its_rows() {
    let (loaded, r) = report_of(false);
    assert_eq!(loaded.profiles.len(), 1);
    let p = &loaded.profiles[0];
    assert_eq!(p.rank, 0);

    // Text times parsed; the Python tracer's `trace` rows are spans, not ops.
    assert_eq!(op(&r, Track::Op, "aten::matmul"), Some((1, 10_000)));
    assert_eq!(op(&r, Track::Op, "train.py(10): step"), None);
    assert!(
        p.events
            .iter()
            .any(|e| e.track == Track::Span && p.str(e.name) == "train.py(10): step")
    );
    assert_eq!(op(&r, Track::Kernel, "MatMul_0"), Some((1, 10_000)));

    // The step, from `ProfilerStep#3`.
    let rank = &r.jobs[0].ranks[0];
    let steps: Vec<(StepId, Option<u64>)> = rank
        .steps
        .iter()
        .map(|s| (s.step.clone(), s.dur_ns))
        .collect();
    assert_eq!(steps, [(StepId::Number(3), Some(100_000))]);

    // Device figures: the kernel, the copy, and the all-reduce as one communication op of 10 us
    // with its tasks' bytes and the least Notify_Wait time of its planes (2 us, not 2 + 5).
    // Neither the collective's own AI_CORE record, nor the compute stream's EVENT_WAIT, nor the
    // kernel without a compute info is a kernel.
    assert_eq!(rank.device.kernel_ns, 10_000);
    assert_eq!(rank.device.comm_ns, 10_000);
    assert_eq!(rank.device.memcpy_ns, 1_000);
    assert_eq!(rank.device.busy_ns, 21_000);
    assert_eq!(op(&r, Track::Kernel, "KERNEL_AICORE"), None);
    assert_eq!(op(&r, Track::Kernel, "AI_CORE"), None);
    assert_eq!(op(&r, Track::Kernel, "EVENT_WAIT"), None);
    assert!(
        p.events
            .iter()
            .any(|e| e.track == Track::User && p.str(e.name) == "EVENT_WAIT"),
        "the wait stays on the timeline"
    );
    let c = r
        .comm
        .iter()
        .find(|c| c.name == "hcom_allReduce__123_0_1")
        .expect("the all-reduce");
    assert_eq!(c.count, 1);
    assert_eq!(c.bytes, Some(1_048_576));
    assert_eq!(c.wait_ns, Some(2_000));

    // Memory: the PTA series alone (peak 300 at +2 us, final 50), never the GE, PTA+GE or
    // WORKSPACE totals mixed into it.
    let pta: Vec<(i64, i64)> = MEMORY
        .iter()
        .filter(|m| m.0 == 9)
        .map(|m| (m.1, m.2))
        .collect();
    let &(peak_t, peak) = pta.iter().max_by_key(|m| m.1).unwrap();
    let m = &r.memory[0];
    assert_eq!(m.peak_bytes, peak);
    assert_eq!(m.peak_since_start_ns, peak_t);
    assert_eq!(m.final_bytes, pta.last().unwrap().1);
    // What was live at the peak, from OP_MEMORY rows matching the series: the empty_strided
    // block (allocated at +1 us, released at +3 us) and the matmul's.
    let live: Vec<(&str, i64)> = m.at_peak.iter().map(|o| (o.op.as_str(), o.bytes)).collect();
    assert_eq!(live, [("aten::matmul", 200), ("aten::empty_strided", 100)]);
}

#[test]
fn an_older_schema_without_some_columns_still_loads() {
    let (loaded, r) = report_of(true);
    let p = &loaded.profiles[0];
    // Without `type`, every PYTORCH_API row is an op; the kernel, the all-reduce and the PTA
    // series are read as before.
    assert_eq!(op(&r, Track::Op, "aten::matmul"), Some((1, 10_000)));
    assert_eq!(op(&r, Track::Kernel, "MatMul_0"), Some((1, 10_000)));
    assert_eq!(r.jobs[0].ranks[0].device.comm_ns, 10_000);
    assert_eq!(r.memory[0].peak_bytes, 300);
    assert!(p.events.iter().any(|e| e.track == Track::Step));
}

/// `analyse --cluster` reads the same DB with the same rules: computing is the compute tasks
/// (the report's kernel time), the collective's wait the least of its planes'.
#[test]
fn the_cluster_analysis_gives_the_same_figures() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp
        .path()
        .join("rank0_ascend_pt")
        .join("ASCEND_PROFILER_OUTPUT");
    std::fs::create_dir_all(&out).unwrap();
    make_db(&out.join("ascend_pytorch_profiler_0.db"), false);
    let c = rlprof_report::cluster::analyse(tmp.path(), &Default::default()).unwrap();
    assert_eq!(c.steps.len(), 1);
    let s = &c.steps[0];
    assert_eq!((s.rank, s.step.as_str()), (0, "3"));
    assert_eq!(s.computing_ms, 0.010);
    assert_eq!(s.communication_ms, 0.010);
    assert_eq!(s.overlapped_ms, 0.0);
    assert_eq!(s.wait_ms, 0.002);
    let report = summarise(&load(tmp.path(), &Default::default()).unwrap());
    let d = &report.jobs[0].ranks[0].device;
    assert_eq!(d.kernel_ns as f64 / 1e6, s.computing_ms);
    assert_eq!(d.comm_ns as f64 / 1e6, s.communication_ms);
}
