//! Reading a profiler DB (ours or torch_npu's) back for the cluster analysis
//! (`rlprof analyse --cluster`): steps, kernel intervals, communication ops with their bytes and
//! waiting time, and role calls. Each table is read once with a plain `SELECT` (the tables have
//! no indexes); ids are resolved in memory.

use super::schema::RLPROF_DOMAIN;
use crate::ExportError;
use crate::decode::StepSpan;
use rlprof_profiler::metrics;
use rlprof_profiler::record::RangeCat;
use rusqlite::{Connection, OpenFlags};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

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
}

/// A communication op's task totals.
#[derive(Debug, Default, Clone)]
struct OpTasks {
    bytes: u64,
    waits: metrics::PlaneWaits,
    peer: Option<i64>,
}

fn has(conn: &Connection, t: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type='table' AND name=?1",
        [t],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
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

/// Reads one profiler DB.
pub fn read_rank(path: &Path) -> Result<DbRank, ExportError> {
    read_inner(path).map_err(|source| ExportError::Sqlite {
        path: path.to_path_buf(),
        source,
    })
}

fn read_inner(path: &Path) -> rusqlite::Result<DbRank> {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
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
    let mut strings: HashMap<i64, String> = HashMap::new();
    let mut st = conn.prepare("SELECT id, value FROM STRING_IDS")?;
    let mut rows = st.raw_query();
    while let Some(r) = rows.next()? {
        strings.insert(
            r.get(0)?,
            r.get::<_, Option<String>>(1)?.unwrap_or_default(),
        );
    }
    let s = |id: Option<i64>| {
        id.and_then(|i| strings.get(&i))
            .cloned()
            .unwrap_or_default()
    };
    if has(&conn, "RANK_DEVICE_MAP")?
        && let Ok(r) = conn.query_row("SELECT rankId FROM RANK_DEVICE_MAP", [], |r| {
            r.get::<_, i64>(0)
        })
        && r >= 0
    {
        d.rank = r as u32;
    }
    if has(&conn, "META_DATA")?
        && let Ok(v) = conn.query_row(
            "SELECT value FROM META_DATA WHERE name = 'distributed_args'",
            [],
            |r| r.get::<_, String>(0),
        )
    {
        let ws = serde_json::from_str::<serde_json::Value>(&v)
            .ok()
            .and_then(|j| j.get("world_size").and_then(|w| w.as_u64()));
        d.world_size = ws.unwrap_or(1).max(1) as u32;
    }
    if has(&conn, "STEP_TIME")? {
        let mut st = conn.prepare("SELECT id, startNs, endNs FROM STEP_TIME")?;
        let mut rows = st.raw_query();
        while let Some(r) = rows.next()? {
            d.steps.push(StepSpan {
                step: r.get::<_, i64>(0)?.max(0) as u64,
                start: r.get::<_, i64>(1)?.max(0) as u64,
                end: r.get::<_, i64>(2)?.max(0) as u64,
            });
        }
        d.steps.sort_by_key(|s| s.start);
    }
    // Communication tasks: globalTaskId -> (opId, bytes, a wait, peer, plane). torch_npu names
    // a task's kind in `taskType` (`name` is its op's); ours in both.
    let mut tasks: HashMap<i64, (i64, u64, bool, Option<i64>, i64)> = HashMap::new();
    if has(&conn, "COMMUNICATION_TASK_INFO")? {
        let mut st = conn.prepare(
            "SELECT globalTaskId, opId, size, name, dstRank, taskType, planeId \
             FROM COMMUNICATION_TASK_INFO",
        )?;
        let mut rows = st.raw_query();
        while let Some(r) = rows.next()? {
            let (Some(g), Some(op)) = (r.get::<_, Option<i64>>(0)?, r.get::<_, Option<i64>>(1)?)
            else {
                continue;
            };
            let wait = s(r.get(3)?) == "Notify_Wait" || s(r.get(5)?) == "Notify_Wait";
            let size = r.get::<_, Option<i64>>(2)?.unwrap_or(0).max(0) as u64;
            let plane = r.get::<_, Option<i64>>(6)?.unwrap_or(0);
            tasks.insert(g, (op, size, wait, r.get(4)?, plane));
        }
    }
    // The collectives' connection ids: a task they launched that is not a communication task is
    // the collective's own record on its stream, not a kernel.
    let mut launches: Vec<i64> = Vec::new();
    if has(&conn, "COMMUNICATION_OP")? {
        let mut st = conn.prepare("SELECT connectionId FROM COMMUNICATION_OP")?;
        let mut rows = st.raw_query();
        while let Some(r) = rows.next()? {
            launches.extend(r.get::<_, Option<i64>>(0)?);
        }
        launches.sort_unstable();
    }
    let compute: std::collections::HashSet<i64> = if has(&conn, "COMPUTE_TASK_INFO")? {
        let mut st = conn.prepare("SELECT globalTaskId FROM COMPUTE_TASK_INFO")?;
        st.query_map([], |r| r.get::<_, Option<i64>>(0))?
            .filter_map(|g| g.ok().flatten())
            .collect()
    } else {
        Default::default()
    };
    let mut per_op: HashMap<i64, OpTasks> = HashMap::new();
    if has(&conn, "TASK")? {
        let mut st =
            conn.prepare("SELECT startNs, endNs, globalTaskId, taskType, connectionId FROM TASK")?;
        let mut rows = st.raw_query();
        while let Some(r) = rows.next()? {
            let (a, b) = (
                r.get::<_, i64>(0)?.max(0) as u64,
                r.get::<_, i64>(1)?.max(0) as u64,
            );
            let g = r.get::<_, Option<i64>>(2)?;
            match g.and_then(|g| tasks.get(&g)) {
                Some(&(op, size, wait, peer, plane)) => {
                    let e = per_op.entry(op).or_default();
                    e.bytes += size;
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
                    let launched_by_comm = r
                        .get::<_, Option<i64>>(4)?
                        .is_some_and(|c| launches.binary_search(&c).is_ok());
                    if !(launched_by_comm || metrics::is_sync_task(&s(r.get(3)?))) {
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
    if has(&conn, "COMMUNICATION_OP")? {
        let mut st =
            conn.prepare("SELECT opName, startNs, endNs, groupName, opId FROM COMMUNICATION_OP")?;
        let mut rows = st.raw_query();
        while let Some(r) = rows.next()? {
            let OpTasks { bytes, waits, peer } = r
                .get::<_, Option<i64>>(4)?
                .and_then(|op| per_op.get(&op))
                .cloned()
                .unwrap_or_default();
            let wait = waits.wait();
            let group = s(r.get(3)?);
            let (start, end) = (
                r.get::<_, i64>(1)?.max(0) as u64,
                r.get::<_, i64>(2)?.max(0) as u64,
            );
            d.comms.push(DbComm {
                name: s(r.get(0)?),
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
    if let (Some(dom), true) = (ours, has(&conn, "MSTX_EVENTS")?) {
        let mut st = conn.prepare(
            "SELECT startNs, endNs, message FROM MSTX_EVENTS WHERE domainId = ?1 AND category = ?2",
        )?;
        let mut rows = st.query([dom, RangeCat::RoleCall as i64])?;
        while let Some(r) = rows.next()? {
            let (a, b) = (
                r.get::<_, i64>(0)?.max(0) as u64,
                r.get::<_, i64>(1)?.max(0) as u64,
            );
            d.role_calls.push((s(r.get(2)?), a, b.max(a)));
        }
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
