//! The tables of the Ascend profiler DB layout and their columns.
//!
//! Two files per rank, as torch_npu writes them with `export_type=Db`:
//! `ascend_pytorch_profiler_{rank}.db` ([`PROFILER_TABLES`]) and `analysis.db`
//! ([`ANALYSIS_TABLES`], the per-rank communication and step-trace figures that msprof-analyze's
//! cluster mode reads in DB mode).
//!
//! Where the names come from:
//! - torch_npu's own table definitions (`TableColumnsManager` in its profiler constants):
//!   `STRING_IDS`, `ENUM_API_TYPE`, `PYTORCH_API`, `CONNECTION_IDS`, `PYTORCH_CALLCHAINS`,
//!   `CANN_API`, `MEMORY_RECORD`, `OP_MEMORY`, `META_DATA`, `RANK_DEVICE_MAP`, `HOST_INFO`,
//!   `STEP_TIME` and the `analysis.db` tables `StepTraceTime`, `CommAnalyzerTime`,
//!   `CommAnalyzerBandwidth`, `CommAnalyzerMatrix`;
//! - the msprof (CANN) DB layout that torch_npu merges in, as msprof-analyze 26.2 queries it
//!   (`prof_exports/*.py`, `compare_tools/.../npu_profiling_db_parser.py`): `TASK`,
//!   `COMPUTE_TASK_INFO`, `COMMUNICATION_OP`, `COMMUNICATION_TASK_INFO`, `MSTX_EVENTS`,
//!   `SESSION_TIME_INFO`. Columns no query names (`contextId`, `modelId`, `mixBlockDim`, ...)
//!   follow the msprof DB documentation.

/// SQLite column types as torch_npu declares them.
const INT: &str = "INTEGER";
const TEXT: &str = "TEXT";
const NUM: &str = "NUMERIC";

pub use crate::sqlite_file::Table;

/// `STRING_IDS`: every string column of the other tables is an id into it.
pub const STRING_IDS: Table = Table {
    name: "STRING_IDS",
    columns: &[("id", INT), ("value", TEXT)],
};
/// `ENUM_API_TYPE`: names of `PYTORCH_API.type` / `CANN_API.type`.
pub const ENUM_API_TYPE: Table = Table {
    name: "ENUM_API_TYPE",
    columns: &[("id", INT), ("name", TEXT)],
};
/// `PYTORCH_API`: host framework ops (and `ProfilerStep#N`).
pub const PYTORCH_API: Table = Table {
    name: "PYTORCH_API",
    columns: &[
        ("startNs", INT),
        ("endNs", INT),
        ("globalTid", INT),
        ("connectionId", INT),
        ("name", INT),
        ("sequenceNumber", INT),
        ("fwdThreadId", INT),
        ("inputDtypes", INT),
        ("inputShapes", INT),
        ("callchainId", INT),
        ("type", INT),
    ],
};
/// `CONNECTION_IDS`: `PYTORCH_API.connectionId` -> the connection ids of its device tasks.
pub const CONNECTION_IDS: Table = Table {
    name: "CONNECTION_IDS",
    columns: &[("id", INT), ("connectionId", INT)],
};
/// `PYTORCH_CALLCHAINS`: call stacks of ops.
pub const PYTORCH_CALLCHAINS: Table = Table {
    name: "PYTORCH_CALLCHAINS",
    columns: &[("id", INT), ("stack", INT), ("stackDepth", INT)],
};
/// `CANN_API`: engine API / runtime calls, and the launch of each communication op.
pub const CANN_API: Table = Table {
    name: "CANN_API",
    columns: &[
        ("startNs", INT),
        ("endNs", INT),
        ("type", INT),
        ("globalTid", INT),
        ("connectionId", INT),
        ("name", INT),
    ],
};
/// `TASK`: every device task (compute kernels and communication tasks).
pub const TASK: Table = Table {
    name: "TASK",
    columns: &[
        ("startNs", INT),
        ("endNs", INT),
        ("deviceId", INT),
        ("connectionId", INT),
        ("globalTaskId", INT),
        ("globalPid", INT),
        ("taskType", INT),
        ("contextId", INT),
        ("streamId", INT),
        ("taskId", INT),
        ("modelId", INT),
    ],
};
/// `COMPUTE_TASK_INFO`: the op of each compute task.
pub const COMPUTE_TASK_INFO: Table = Table {
    name: "COMPUTE_TASK_INFO",
    columns: &[
        ("name", INT),
        ("globalTaskId", INT),
        ("blockDim", INT),
        ("mixBlockDim", INT),
        ("taskType", INT),
        ("opType", INT),
        ("inputFormats", INT),
        ("inputDataTypes", INT),
        ("inputShapes", INT),
        ("outputFormats", INT),
        ("outputDataTypes", INT),
        ("outputShapes", INT),
        ("attrInfo", INT),
        ("opState", INT),
        ("hf32Eligible", INT),
    ],
};
/// `COMMUNICATION_OP`: one row per collective / point-to-point op.
pub const COMMUNICATION_OP: Table = Table {
    name: "COMMUNICATION_OP",
    columns: &[
        ("opName", INT),
        ("startNs", INT),
        ("endNs", INT),
        ("connectionId", INT),
        ("groupName", INT),
        ("opId", INT),
        ("relay", INT),
        ("retry", INT),
        ("dataType", INT),
        ("algType", INT),
        ("count", NUM),
        ("opType", INT),
    ],
};
/// `COMMUNICATION_TASK_INFO`: the tasks of each communication op (joined to `TASK`).
pub const COMMUNICATION_TASK_INFO: Table = Table {
    name: "COMMUNICATION_TASK_INFO",
    columns: &[
        ("name", INT),
        ("globalTaskId", INT),
        ("taskType", INT),
        ("planeId", INT),
        ("groupName", INT),
        ("notifyId", INT),
        ("rdmaType", INT),
        ("srcRank", INT),
        ("dstRank", INT),
        ("transportType", INT),
        ("size", INT),
        ("dataType", INT),
        ("linkType", INT),
        ("opId", INT),
    ],
};
/// `MSTX_EVENTS`: marker ranges (phases, role calls, iterations, user ranges and spans here).
pub const MSTX_EVENTS: Table = Table {
    name: "MSTX_EVENTS",
    columns: &[
        ("startNs", INT),
        ("endNs", INT),
        ("eventType", INT),
        ("rangeId", INT),
        ("category", INT),
        ("message", INT),
        ("globalTid", INT),
        ("endGlobalTid", INT),
        ("domainId", INT),
        ("connectionId", INT),
    ],
};
/// `STEP_TIME`: the steps.
pub const STEP_TIME: Table = Table {
    name: "STEP_TIME",
    columns: &[("id", INT), ("startNs", INT), ("endNs", INT)],
};
/// `MEMORY_RECORD`: allocator totals after each memory event (bytes).
pub const MEMORY_RECORD: Table = Table {
    name: "MEMORY_RECORD",
    columns: &[
        ("component", INT),
        ("timestamp", INT),
        ("totalAllocated", INT),
        ("totalReserved", INT),
        ("totalActive", INT),
        ("streamPtr", INT),
        ("deviceId", INT),
    ],
};
/// `OP_MEMORY`: one row per allocation (bytes, ns).
pub const OP_MEMORY: Table = Table {
    name: "OP_MEMORY",
    columns: &[
        ("name", INT),
        ("size", INT),
        ("allocationTime", INT),
        ("releaseTime", INT),
        ("activeReleaseTime", INT),
        ("duration", INT),
        ("activeDuration", INT),
        ("allocationTotalAllocated", INT),
        ("allocationTotalReserved", INT),
        ("allocationTotalActive", INT),
        ("releaseTotalAllocated", INT),
        ("releaseTotalReserved", INT),
        ("releaseTotalActive", INT),
        ("streamPtr", INT),
        ("deviceId", INT),
    ],
};
/// `META_DATA`: name/value pairs (`distributed_args`, `parallel_group_info`, ...).
pub const META_DATA: Table = Table {
    name: "META_DATA",
    columns: &[("name", TEXT), ("value", TEXT)],
};
/// `RANK_DEVICE_MAP`.
pub const RANK_DEVICE_MAP: Table = Table {
    name: "RANK_DEVICE_MAP",
    columns: &[("rankId", INT), ("deviceId", INT)],
};
/// `HOST_INFO`.
pub const HOST_INFO: Table = Table {
    name: "HOST_INFO",
    columns: &[("hostUid", TEXT), ("hostName", TEXT)],
};
/// `SESSION_TIME_INFO`: the collection's start and end.
pub const SESSION_TIME_INFO: Table = Table {
    name: "SESSION_TIME_INFO",
    columns: &[("startTimeNs", INT), ("endTimeNs", INT)],
};

/// Every table of `ascend_pytorch_profiler_{rank}.db`.
pub const PROFILER_TABLES: &[Table] = &[
    STRING_IDS,
    ENUM_API_TYPE,
    PYTORCH_API,
    CONNECTION_IDS,
    PYTORCH_CALLCHAINS,
    CANN_API,
    TASK,
    COMPUTE_TASK_INFO,
    COMMUNICATION_OP,
    COMMUNICATION_TASK_INFO,
    MSTX_EVENTS,
    STEP_TIME,
    MEMORY_RECORD,
    OP_MEMORY,
    META_DATA,
    RANK_DEVICE_MAP,
    HOST_INFO,
    SESSION_TIME_INFO,
];

/// `StepTraceTime` (us).
pub const STEP_TRACE_TIME: Table = Table {
    name: "StepTraceTime",
    columns: &[
        ("step", TEXT),
        ("computing", NUM),
        ("communication_not_overlapped", NUM),
        ("overlapped", NUM),
        ("communication", NUM),
        ("free", NUM),
        ("stage", NUM),
        ("bubble", NUM),
        ("communication_not_overlapped_and_exclude_receive", NUM),
        ("preparing", NUM),
    ],
};
/// `CommAnalyzerTime` (start in us, times in ms).
pub const COMM_ANALYZER_TIME: Table = Table {
    name: "CommAnalyzerTime",
    columns: &[
        ("hccl_op_name", TEXT),
        ("group_name", TEXT),
        ("start_timestamp", NUM),
        ("elapse_time", NUM),
        ("transit_time", NUM),
        ("wait_time", NUM),
        ("synchronization_time", NUM),
        ("idle_time", NUM),
        ("step", TEXT),
        ("type", TEXT),
    ],
};
/// `CommAnalyzerBandwidth` (MB, ms, GB/s).
pub const COMM_ANALYZER_BANDWIDTH: Table = Table {
    name: "CommAnalyzerBandwidth",
    columns: &[
        ("hccl_op_name", TEXT),
        ("group_name", TEXT),
        ("transport_type", TEXT),
        ("transit_size", NUM),
        ("transit_time", NUM),
        ("bandwidth", NUM),
        ("large_packet_ratio", NUM),
        ("package_size", NUM),
        ("count", NUM),
        ("total_duration", NUM),
        ("step", TEXT),
        ("type", TEXT),
    ],
};
/// `CommAnalyzerMatrix` (MB, ms, GB/s).
pub const COMM_ANALYZER_MATRIX: Table = Table {
    name: "CommAnalyzerMatrix",
    columns: &[
        ("hccl_op_name", TEXT),
        ("group_name", TEXT),
        ("src_rank", TEXT),
        ("dst_rank", TEXT),
        ("transport_type", TEXT),
        ("transit_size", NUM),
        ("transit_time", NUM),
        ("bandwidth", NUM),
        ("step", TEXT),
        ("type", TEXT),
        ("op_name", TEXT),
    ],
};

/// Every table of `analysis.db`.
pub const ANALYSIS_TABLES: &[Table] = &[
    STEP_TRACE_TIME,
    COMM_ANALYZER_TIME,
    COMM_ANALYZER_BANDWIDTH,
    COMM_ANALYZER_MATRIX,
];

/// `ENUM_API_TYPE` rows (`op` and `node` are names msprof-analyze's queries select; the ids
/// follow the msprof DB documentation).
pub const API_TYPES: &[(i64, &str)] = &[
    (API_ACL, "acl"),
    (API_RUNTIME, "runtime"),
    (API_NODE, "node"),
    (API_OP, "op"),
    (API_QUEUE, "queue"),
    (API_TRACE, "trace"),
    (API_MSTX, "mstx"),
];
/// `CANN_API.type` of an engine API call.
pub const API_ACL: i64 = 20000;
/// `CANN_API.type` of a runtime call.
pub const API_RUNTIME: i64 = 5000;
/// `CANN_API.type` of a graph-node launch (a communication op's launch here).
pub const API_NODE: i64 = 10000;
/// `PYTORCH_API.type` of a framework op.
pub const API_OP: i64 = 50001;
/// `PYTORCH_API.type` of a task-queue entry.
pub const API_QUEUE: i64 = 50002;
/// `PYTORCH_API.type` of a trace record.
pub const API_TRACE: i64 = 50003;
/// `PYTORCH_API.type` of an mstx range.
pub const API_MSTX: i64 = 50004;

/// `MSTX_EVENTS.eventType` of a range (3 is a mark in msprof-analyze's queries).
pub const MSTX_RANGE: i64 = 2;
/// The `MSTX_EVENTS.domainId` string of rlprof's own ranges that verl has no counterpart of
/// (phases, iterations, spans); their `category` is the rlprof range category code (`RangeCat`).
pub const RLPROF_DOMAIN: &str = "rlprof";
/// The `MSTX_EVENTS.domainId` string of mstx's default domain, where verl 0.9.1's
/// `mstx.range_start(message)` puts its stage ranges (`actor_update`, `actor_compute_log_prob`,
/// `ref_compute_log_prob`, `train_batch`, ...): rlprof's role calls and the user's own ranges
/// (`scope`, the `mini_batch{i}`/`train_batch` labels) go there too. A reader tells rlprof's
/// structural ranges from the user's by the stage labels.
pub const DEFAULT_DOMAIN: &str = "default";
/// torch_npu's invalid value (`DbConstant.DB_INVALID_VALUE`), for ids that do not apply.
pub const INVALID: i64 = 4_294_967_295;
