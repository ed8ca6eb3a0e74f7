//! Reading a profiler DB (ours or torch_npu's) back for the cluster analysis
//! (`rlprof analyse --cluster`): steps, kernel intervals, communication ops with their bytes and
//! waiting time, and role calls. Each table is read once with a plain `SELECT` (the tables have
//! no indexes); ids are resolved in memory.

use crate::ExportError;
use crate::ascend_db_writer::schema::RLPROF_DOMAIN;
use crate::decode::StepSpan;
use rlprof_profiler::metrics;
use rlprof_profiler::record::RangeCat;
use rlprof_report::sqlite_values::{self as untrusted, has_table as has, opt, select, text};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One communication op.
#[derive(Debug, Clone, PartialEq)]
pub struct DbComm {
    /// Op name.
    pub name: String,
    /// Group name (empty for the default group).
    pub group: String,
    /// Start, ns.
    pub start: u64,
    /// End, ns.
    pub end: u64,
    /// Bytes of its tasks.
    pub bytes: u64,
    /// Time of its `Notify_Wait` tasks, ns.
    pub wait: u64,
    /// Peer rank of a point-to-point op.
    pub peer: Option<u32>,
}

/// What the cluster analysis needs of one rank's DB.
#[derive(Debug, Default)]
pub struct DbRank {
    /// Rank (`RANK_DEVICE_MAP`, else the file name).
    pub rank: u32,
    /// World size (`META_DATA.distributed_args`, else 1).
    pub world_size: u32,
    /// Steps (`STEP_TIME`), sorted by start.
    pub steps: Vec<StepSpan>,
    /// Compute task intervals.
    pub kernels: Vec<(u64, u64)>,
    /// Communication ops.
    pub comms: Vec<DbComm>,
    /// Role calls `(name, start, end)` (rlprof's own marker ranges).
    pub role_calls: Vec<(String, u64, u64)>,
    /// What was skipped while reading (rows with unreadable times), for the user.
    pub notes: Vec<String>,
}

/// A communication op's task totals.
#[derive(Debug, Default, Clone)]
struct OpTasks {
    bytes: u64,
    waits: metrics::PlaneWaits,
    peer: Option<i64>,
}

/// Every `*/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler*.db` at or below `path` whose
/// collection holds no raw data of ours (raw data, when present, is read instead), sorted.
pub fn find_dbs(path: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![path.to_path_buf()];
    while let Some(d) = stack.pop() {
        if d.join("rlprof_raw").is_dir() {
            continue;
        }
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if !p.is_dir() {
                continue;
            }
            if p.file_name().is_some_and(|n| n == crate::npu::OUTPUT_DIR) {
                out.extend(profiler_dbs(&p));
            } else {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

fn profiler_dbs(out_dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(out_dir) else {
        return Vec::new();
    };
    rd.flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix("ascend_pytorch_profiler"))
                .is_some_and(|r| r.ends_with(".db"))
        })
        .collect()
}

/// Reads one profiler DB, as untrusted input (`rlprof_report::sqlite_values::open_untrusted`,
/// the one place that opens a DB another program wrote): a file that is not a
/// regular file, a view, a virtual table or a generated column where a table is read, a value
/// longer than `MAX_VALUE_BYTES` or a read past
/// the DB time limit is an error naming the file.
pub fn read_rank(path: &Path) -> Result<DbRank, ExportError> {
    read_rank_within(path, untrusted::db_time_limit(path))
}

/// [`read_rank`] with another time limit.
pub fn read_rank_within(path: &Path, time_limit: Duration) -> Result<DbRank, ExportError> {
    let conn = untrusted::open_untrusted(path, time_limit)?;
    read_inner(path, &conn).map_err(|source| ExportError::Sqlite {
        path: path.to_path_buf(),
        source,
    })
}

/// A row's `(start, end)` in columns `a` and `b`, of any storage class, clamped at 0; `None`,
/// counted in `bad`, when either is NULL or not a number.
fn span(
    r: &rusqlite::Row,
    a: usize,
    b: usize,
    bad: &mut u64,
) -> rusqlite::Result<Option<(u64, u64)>> {
    Ok(match (opt(r, a)?, opt(r, b)?) {
        (Some(s), Some(e)) => Some((s.max(0) as u64, e.max(0) as u64)),
        _ => {
            *bad += 1;
            None
        }
    })
}

fn read_inner(path: &Path, conn: &rusqlite::Connection) -> rusqlite::Result<DbRank> {
    let mut d = DbRank {
        rank: path
            .file_stem()
            .and_then(|s| s.to_str())
            .and_then(|s| s.rsplit('_').next())
            .and_then(|r| r.parse().ok())
            .unwrap_or(0),
        world_size: 1,
        ..DbRank::default()
    };
    // Rows skipped for a time that is NULL or not a number.
    let mut bad = 0u64;
    let mut strings: HashMap<i64, String> = HashMap::new();
    let mut st = select(conn, "STRING_IDS", &["id", "value"])?;
    let mut rows = st.raw_query();
    while let Some(r) = rows.next()? {
        if let Some(id) = opt(r, 0)? {
            strings.insert(id, text(r, 1)?);
        }
    }
    drop(rows);
    let s = |id: Option<i64>| {
        id.and_then(|i| strings.get(&i))
            .cloned()
            .unwrap_or_default()
    };
    if has(conn, "RANK_DEVICE_MAP")? {
        let mut st = select(conn, "RANK_DEVICE_MAP", &["rankId"])?;
        let mut rows = st.raw_query();
        if let Some(r) = rows.next()?
            && let Some(rank) = opt(r, 0)?
        {
            match u32::try_from(rank) {
                Ok(rank) => d.rank = rank,
                // A rank id past u32 (2^40, say) is never truncated into another rank's.
                Err(_) => d.notes.push(format!(
                    "RANK_DEVICE_MAP.rankId {rank} is not a rank (0..2^32); the file name's rank {} is used",
                    d.rank
                )),
            }
        }
    }
    if has(conn, "META_DATA")? {
        let mut st = select(conn, "META_DATA", &["name", "value"])?;
        let mut rows = st.raw_query();
        while let Some(r) = rows.next()? {
            if text(r, 0)? != "distributed_args" {
                continue;
            }
            let ws = serde_json::from_str::<serde_json::Value>(&text(r, 1)?)
                .ok()
                .and_then(|j| j.get("world_size").and_then(|w| w.as_u64()));
            d.world_size = ws.unwrap_or(1).clamp(1, u32::MAX as u64) as u32;
            break;
        }
    }
    if has(conn, "STEP_TIME")? {
        let mut st = select(conn, "STEP_TIME", &["id", "startNs", "endNs"])?;
        let mut rows = st.raw_query();
        while let Some(r) = rows.next()? {
            let Some((start, end)) = span(r, 1, 2, &mut bad)? else {
                continue;
            };
            d.steps.push(StepSpan {
                step: opt(r, 0)?.unwrap_or(0).max(0) as u64,
                start,
                end,
            });
        }
        d.steps.sort_by_key(|s| s.start);
    }
    // Communication tasks: globalTaskId -> (opId, bytes, a wait, peer, plane). torch_npu names
    // a task's kind in `taskType` (`name` is its op's); ours in both.
    let mut tasks: HashMap<i64, (i64, u64, bool, Option<i64>, i64)> = HashMap::new();
    if has(conn, "COMMUNICATION_TASK_INFO")? {
        let mut st = select(
            conn,
            "COMMUNICATION_TASK_INFO",
            &[
                "globalTaskId",
                "opId",
                "size",
                "name",
                "dstRank",
                "taskType",
                "planeId",
            ],
        )?;
        let mut rows = st.raw_query();
        while let Some(r) = rows.next()? {
            let (Some(g), Some(op)) = (opt(r, 0)?, opt(r, 1)?) else {
                continue;
            };
            let wait = s(opt(r, 3)?) == "Notify_Wait" || s(opt(r, 5)?) == "Notify_Wait";
            let size = opt(r, 2)?.unwrap_or(0).max(0) as u64;
            let plane = opt(r, 6)?.unwrap_or(0);
            tasks.insert(g, (op, size, wait, opt(r, 4)?, plane));
        }
    }
    // The collectives' connection ids: a task they launched that is not a communication task is
    // the collective's own record on its stream, not a kernel.
    let mut launches: Vec<i64> = Vec::new();
    if has(conn, "COMMUNICATION_OP")? {
        let mut st = select(conn, "COMMUNICATION_OP", &["connectionId"])?;
        let mut rows = st.raw_query();
        while let Some(r) = rows.next()? {
            launches.extend(opt(r, 0)?);
        }
        launches.sort_unstable();
    }
    let mut compute: std::collections::HashSet<i64> = Default::default();
    if has(conn, "COMPUTE_TASK_INFO")? {
        let mut st = select(conn, "COMPUTE_TASK_INFO", &["globalTaskId"])?;
        let mut rows = st.raw_query();
        while let Some(r) = rows.next()? {
            compute.extend(opt(r, 0)?);
        }
    }
    let mut per_op: HashMap<i64, OpTasks> = HashMap::new();
    if has(conn, "TASK")? {
        let mut st = select(
            conn,
            "TASK",
            &[
                "startNs",
                "endNs",
                "globalTaskId",
                "taskType",
                "connectionId",
            ],
        )?;
        let mut rows = st.raw_query();
        while let Some(r) = rows.next()? {
            let Some((a, b)) = span(r, 0, 1, &mut bad)? else {
                continue;
            };
            let g = opt(r, 2)?;
            match g.and_then(|g| tasks.get(&g)) {
                Some(&(op, size, wait, peer, plane)) => {
                    let e = per_op.entry(op).or_default();
                    e.bytes = e.bytes.saturating_add(size);
                    if wait {
                        e.waits.add(plane, b.saturating_sub(a));
                    }
                    if peer.is_some() {
                        e.peer = peer;
                    }
                }
                // Computing is what msprof's overlap analysis counts (`StepTraceTime.computing`):
                // the compute tasks. Without `COMPUTE_TASK_INFO`, every task but the
                // collectives' own records and stream synchronisation.
                None if compute.is_empty() => {
                    let launched_by_comm =
                        opt(r, 4)?.is_some_and(|c| launches.binary_search(&c).is_ok());
                    if !(launched_by_comm || metrics::is_sync_task(&s(opt(r, 3)?))) {
                        d.kernels.push((a, b.max(a)));
                    }
                }
                None => {
                    if g.is_some_and(|g| compute.contains(&g)) {
                        d.kernels.push((a, b.max(a)));
                    }
                }
            }
        }
    }
    if has(conn, "COMMUNICATION_OP")? {
        let mut st = select(
            conn,
            "COMMUNICATION_OP",
            &["opName", "startNs", "endNs", "groupName", "opId"],
        )?;
        let mut rows = st.raw_query();
        while let Some(r) = rows.next()? {
            let Some((start, end)) = span(r, 1, 2, &mut bad)? else {
                continue;
            };
            let OpTasks { bytes, waits, peer } = opt(r, 4)?
                .and_then(|op| per_op.get(&op))
                .cloned()
                .unwrap_or_default();
            let wait = waits.wait();
            let group = s(opt(r, 3)?);
            d.comms.push(DbComm {
                name: s(opt(r, 0)?),
                group: if group == "default_group" {
                    String::new()
                } else {
                    group
                },
                start,
                end: end.max(start),
                bytes,
                wait,
                peer: peer
                    .filter(|&p| p >= 0 && p != d.rank as i64)
                    .map(|p| p as u32),
            });
        }
    }
    let ours = strings
        .iter()
        .find(|(_, v)| v.as_str() == RLPROF_DOMAIN)
        .map(|(k, _)| *k);
    if let (Some(dom), true) = (ours, has(conn, "MSTX_EVENTS")?) {
        let mut st = select(
            conn,
            "MSTX_EVENTS",
            &["startNs", "endNs", "message", "domainId", "category"],
        )?;
        let mut rows = st.raw_query();
        while let Some(r) = rows.next()? {
            if opt(r, 3)? != Some(dom) || opt(r, 4)? != Some(RangeCat::RoleCall as i64) {
                continue;
            }
            let Some((a, b)) = span(r, 0, 1, &mut bad)? else {
                continue;
            };
            d.role_calls.push((s(opt(r, 2)?), a, b.max(a)));
        }
    }
    if bad > 0 {
        d.notes.push(format!(
            "{bad} rows without a readable start or end time (NULL or not a number) were skipped"
        ));
    }
    Ok(d)
}

impl DbRank {
    /// The step whose range contains `ts`, if any.
    pub fn step_at(&self, ts: u64) -> Option<u64> {
        let i = self.steps.partition_point(|s| s.start <= ts);
        let s = self.steps.get(i.checked_sub(1)?)?;
        (ts < s.end).then_some(s.step)
    }
}
