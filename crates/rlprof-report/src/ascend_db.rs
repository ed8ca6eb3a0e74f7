//! Ascend profiler DB input: `ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_{rank}.db`, as
//! torch_npu writes it with `export_type=Db` (verl 0.9.1's setting) and as rlprof's `npu` tool
//! writes it by default. Read into the same [`Profile`] model as the text layout:
//! - `PYTORCH_API` -> ops (`ProfilerStep#N` -> steps), with shapes, dtypes and call stacks;
//! - `CANN_API` -> API / runtime calls (a communication op's own launch is not repeated);
//! - `MSTX_EVENTS` -> marker ranges: rlprof's own (domain `rlprof`) keep their category
//!   (phase, role call, iteration, span, user); others are user ranges;
//! - `TASK` + `COMPUTE_TASK_INFO` -> kernels; tasks of communication ops are folded into them;
//! - `COMMUNICATION_OP` -> communication ops, with the bytes of their tasks
//!   (`COMMUNICATION_TASK_INFO.size`) and the time of their `Notify_Wait` tasks as the wait;
//! - `OP_MEMORY` -> allocations and frees with their op (`MEMORY_RECORD` totals when absent);
//! - `STEP_TIME` -> the steps (and step events when `PYTORCH_API` has none).
//!
//! Every table is read once in storage order with plain `SELECT`s (no joins: the tables have
//! no indexes); ids are resolved in memory. Times are made relative to the session start.
//! Columns are selected by name and values read whatever their storage class
//! ([`crate::sqlite_values`]): torch_npu declares `PYTORCH_API`'s times TEXT, names the Python
//! tracer's API type `trace`, and adds columns between releases.

use crate::Limits;
use crate::ascend::OpAllocation;
use crate::device_names::{device_track, is_sync_task};
use crate::error::ReportError;
use crate::model::{Detail, Event, MemEvent, NONE, Profile, SourceFormat, Track};
use crate::sqlite_values::{self as sql, int, opt, text};
use rlprof_profiler::record::RangeCat;
use rusqlite::{Connection, OpenFlags};
use rustc_hash::FxHashMap;
use std::path::{Path, PathBuf};

/// The profiler DB in an `ASCEND_PROFILER_OUTPUT` directory, if there is one.
pub fn find_db(out_dir: &Path) -> Option<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(out_dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(is_db_name)
        })
        .collect();
    v.sort();
    v.into_iter().next()
}

/// `ascend_pytorch_profiler.db` or `ascend_pytorch_profiler_{rank}.db`.
pub fn is_db_name(name: &str) -> bool {
    name.strip_prefix("ascend_pytorch_profiler")
        .and_then(|r| r.strip_suffix(".db"))
        .is_some_and(|r| {
            r.is_empty()
                || r.strip_prefix('_')
                    .is_some_and(|n| n.parse::<u32>().is_ok())
        })
}

fn rank_of(path: &Path) -> Option<u32> {
    path.file_stem()?
        .to_str()?
        .strip_prefix("ascend_pytorch_profiler_")?
        .parse()
        .ok()
}

fn malformed(path: &Path) -> impl Fn(rusqlite::Error) -> ReportError + '_ {
    move |e| ReportError::Malformed {
        path: path.to_path_buf(),
        message: format!("SQLite: {e}"),
    }
}

/// Loads a profiler DB.
pub fn load_db(path: &Path, group: &str, limits: &Limits) -> Result<Profile, ReportError> {
    let err = malformed(path);
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(&err)?;
    let mut p = Profile::new(
        path.to_path_buf(),
        SourceFormat::Ascend,
        rank_of(path).unwrap_or(0),
        group.to_string(),
    );
    let mut r = Reader::new(&conn, &mut p, path, limits).map_err(&err)?;
    r.read_all().map_err(|e| match e {
        Stop::Sql(e) => err(e),
        Stop::Limit => ReportError::Limit {
            path: path.to_path_buf(),
            what: "events",
            limit: limits.max_events,
        },
    })?;
    p.sort();
    Ok(p)
}

/// Why reading stopped.
enum Stop {
    Sql(rusqlite::Error),
    Limit,
}

impl From<rusqlite::Error> for Stop {
    fn from(e: rusqlite::Error) -> Stop {
        Stop::Sql(e)
    }
}

/// One row of `COMMUNICATION_TASK_INFO`, keyed by its globalTaskId.
#[derive(Clone, Copy)]
struct CommTaskInfo {
    /// The collective (`COMMUNICATION_OP.opId`) the task belongs to.
    op: i64,
    bytes: u64,
    /// A `Notify_Wait` task: time spent waiting, not moving data.
    wait: bool,
    peer: Option<i64>,
    /// The plane (`planeId`): a collective runs its tasks on several planes at once.
    plane: i64,
}

/// A communication op's task totals.
#[derive(Default, Clone)]
struct CommTasks {
    bytes: u64,
    /// `Notify_Wait` time per plane that has any.
    plane_waits: Vec<(i64, u64)>,
    peer: Option<i64>,
}

impl CommTasks {
    /// The op's waiting time ([`rlprof_profiler::metrics::collective_wait`]).
    fn wait(&self) -> u64 {
        rlprof_profiler::metrics::collective_wait(&self.plane_waits)
    }
}

/// An op's `(inputDtypes, inputShapes, callchainId)` ids.
type OpDetailIds = (Option<i64>, Option<i64>, Option<i64>);

struct Reader<'c, 'p> {
    conn: &'c Connection,
    p: &'p mut Profile,
    max_events: u64,
    /// `STRING_IDS` id -> profile string.
    strings: FxHashMap<i64, u32>,
    /// Raw `STRING_IDS` text (for details and type names).
    text: FxHashMap<i64, String>,
    /// Thread key -> thread number.
    threads: FxHashMap<i64, u32>,
    /// A compute task's track by its interned name ([`Reader::kernel_track`]).
    kernel_tracks: Vec<Option<Track>>,
    /// An op's `(inputDtypes, inputShapes, callchainId)` ids -> its detail, kept once: ops
    /// with the same inputs share one (most ops of a step repeat the shapes of another).
    op_details: FxHashMap<OpDetailIds, u32>,
    origin: i64,
}

impl<'c, 'p> Reader<'c, 'p> {
    fn new(
        conn: &'c Connection,
        p: &'p mut Profile,
        _path: &Path,
        limits: &Limits,
    ) -> rusqlite::Result<Self> {
        Ok(Reader {
            conn,
            p,
            max_events: limits.max_events,
            strings: FxHashMap::default(),
            text: FxHashMap::default(),
            threads: FxHashMap::default(),
            op_details: FxHashMap::default(),
            kernel_tracks: Vec::new(),
            origin: 0,
        })
    }

    fn has(&self, table: &str) -> rusqlite::Result<bool> {
        sql::has_table(self.conn, table)
    }

    /// A `SELECT` of `cols` from `table`, a column this file lacks read as NULL.
    fn select(&self, table: &str, cols: &[&str]) -> rusqlite::Result<rusqlite::Statement<'c>> {
        sql::select(self.conn, table, cols)
    }

    fn read_all(&mut self) -> Result<(), Stop> {
        self.read_strings()?;
        self.origin = self.session_start()?;
        self.p.origin_ns = self.origin.max(0) as u64;
        if self.has("RANK_DEVICE_MAP")?
            && let Ok(r) = self
                .conn
                .query_row("SELECT rankId FROM RANK_DEVICE_MAP", [], |r| {
                    r.get::<_, i64>(0)
                })
            && r >= 0
        {
            self.p.rank = r as u32;
        }
        if self.has("PYTORCH_API")? {
            self.read_pytorch_api()?;
        }
        if self.has("CANN_API")? {
            self.read_cann_api()?;
        }
        if self.has("MSTX_EVENTS")? {
            self.read_mstx()?;
        }
        let comm = if self.has("COMMUNICATION_TASK_INFO")? {
            self.read_comm_task_info()?
        } else {
            FxHashMap::default()
        };
        let per_op = if self.has("TASK")? {
            self.read_tasks(&comm)?
        } else {
            FxHashMap::default()
        };
        if self.has("COMMUNICATION_OP")? {
            self.read_comm_ops(&per_op)?;
        }
        self.read_memory()?;
        if self.has("STEP_TIME")? {
            self.read_steps()?;
        }
        Ok(())
    }

    fn read_strings(&mut self) -> rusqlite::Result<()> {
        let mut st = self.select("STRING_IDS", &["id", "value"])?;
        let mut rows = st.raw_query();
        while let Some(r) = rows.next()? {
            let Some(id) = opt(r, 0)? else { continue };
            let v = text(r, 1)?;
            let i = self.p.intern(&v);
            self.strings.insert(id, i);
            self.text.insert(id, v);
        }
        Ok(())
    }

    fn session_start(&self) -> rusqlite::Result<i64> {
        if self.has("SESSION_TIME_INFO")?
            && let Ok(Some(t)) =
                self.conn
                    .query_row("SELECT startTimeNs FROM SESSION_TIME_INFO", [], |r| {
                        r.get::<_, Option<i64>>(0)
                    })
        {
            return Ok(t);
        }
        // Without a session record: the earliest host or device time.
        let mut lo = i64::MAX;
        for t in ["PYTORCH_API", "TASK"] {
            if self.has(t)? {
                let v: Option<i64> =
                    self.conn
                        .query_row(&format!("SELECT min(startNs) FROM {t}"), [], |r| r.get(0))?;
                lo = lo.min(v.unwrap_or(i64::MAX));
            }
        }
        Ok(if lo == i64::MAX { 0 } else { lo })
    }

    fn name(&mut self, id: Option<i64>) -> u32 {
        match id.and_then(|i| self.strings.get(&i)) {
            Some(&i) => i,
            None => self.p.intern(""),
        }
    }

    fn text_of(&self, id: Option<i64>) -> Option<String> {
        id.and_then(|i| self.text.get(&i))
            .filter(|s| !s.is_empty())
            .cloned()
    }

    fn thread(&mut self, key: i64, label: impl FnOnce() -> String) -> u32 {
        if let Some(&t) = self.threads.get(&key) {
            return t;
        }
        let t = self.p.threads.len() as u32;
        self.p.threads.push(label());
        self.threads.insert(key, t);
        t
    }

    fn push(&mut self, e: Event) -> Result<(), Stop> {
        if self.p.events.len() as u64 >= self.max_events {
            return Err(Stop::Limit);
        }
        self.p.events.push(e);
        Ok(())
    }

    fn event(&mut self, start: i64, end: i64, name: u32, thread: u32, track: Track) -> Event {
        Event {
            start: start - self.origin,
            dur: (end - start).max(0),
            name,
            detail: NONE,
            thread,
            depth: 0,
            track,
        }
    }

    /// Names of `ENUM_API_TYPE` ids.
    fn api_types(&self) -> rusqlite::Result<FxHashMap<i64, String>> {
        let mut m = FxHashMap::default();
        if self.has("ENUM_API_TYPE")? {
            let mut st = self.select("ENUM_API_TYPE", &["id", "name"])?;
            let mut rows = st.raw_query();
            while let Some(r) = rows.next()? {
                if let Some(id) = opt(r, 0)? {
                    m.insert(id, text(r, 1)?);
                }
            }
        }
        Ok(m)
    }

    /// Call stacks: callchain id -> frames joined by newlines, in depth order.
    fn callchains(&self) -> rusqlite::Result<FxHashMap<i64, String>> {
        let mut m: FxHashMap<i64, Vec<(i64, String)>> = FxHashMap::default();
        if self.has("PYTORCH_CALLCHAINS")? {
            let mut st = self.select("PYTORCH_CALLCHAINS", &["id", "stack", "stackDepth"])?;
            let mut rows = st.raw_query();
            while let Some(r) = rows.next()? {
                let Some(id) = opt(r, 0)? else { continue };
                let frame = self.text_of(opt(r, 1)?).unwrap_or_default();
                m.entry(id)
                    .or_default()
                    .push((opt(r, 2)?.unwrap_or(0), frame));
            }
        }
        Ok(m.into_iter()
            .map(|(id, mut v)| {
                v.sort_by_key(|f| f.0);
                let frames: Vec<String> = v.into_iter().map(|f| f.1).collect();
                (id, frames.join("\n"))
            })
            .collect())
    }

    fn read_pytorch_api(&mut self) -> Result<(), Stop> {
        let types = self.api_types()?;
        let chains = self.callchains()?;
        let mut st = self.select(
            "PYTORCH_API",
            &[
                "startNs",
                "endNs",
                "globalTid",
                "name",
                "inputDtypes",
                "inputShapes",
                "callchainId",
                "type",
            ],
        )?;
        let mut rows = st.raw_query();
        while let Some(r) = rows.next()? {
            let (start, end): (i64, i64) = (int(r, 0)?, int(r, 1)?);
            let tid: i64 = opt(r, 2)?.unwrap_or(0);
            let name_id: Option<i64> = opt(r, 3)?;
            let ty: Option<i64> = opt(r, 7)?;
            let name = self.name(name_id);
            let track = if self.p.str(name).starts_with("ProfilerStep#") {
                Track::Step
            } else {
                match ty.and_then(|t| types.get(&t)).map(String::as_str) {
                    // torch_npu names the Python tracer's type `trace`.
                    Some("trace" | "python_function") => Track::Span,
                    Some("mstx") => Track::User,
                    Some("queue") => Track::Runtime,
                    _ => Track::Op,
                }
            };
            let thread = self.thread(tid, || format!("thread {}", tid & 0xffff_ffff));
            let mut e = self.event(start, end, name, thread, track);
            if track == Track::Op {
                let key = (opt(r, 4)?, opt(r, 5)?, opt(r, 6)?);
                e.detail = match self.op_details.get(&key) {
                    Some(&d) => d,
                    None => {
                        let d = self.op_detail(key, &chains);
                        self.op_details.insert(key, d);
                        d
                    }
                };
            }
            self.push(e)?;
        }
        Ok(())
    }

    /// The detail of an op from its `(inputDtypes, inputShapes, callchainId)` ids ([`NONE`]
    /// when it has none of them).
    fn op_detail(
        &mut self,
        (dtypes, shapes, chain): OpDetailIds,
        chains: &FxHashMap<i64, String>,
    ) -> u32 {
        let d = Detail {
            dtypes: self.text_of(dtypes),
            shapes: self.text_of(shapes),
            stack: chain
                .and_then(|c| chains.get(&c))
                .filter(|s| !s.is_empty())
                .cloned(),
            ..Detail::default()
        };
        if d == Detail::default() {
            NONE
        } else {
            self.p.add_detail(d)
        }
    }

    /// The connection ids of the collectives (`COMMUNICATION_OP.connectionId`), sorted: the
    /// API call that launched one, and its own record among the device tasks, repeat the
    /// collective's time.
    fn comm_connections(&self) -> rusqlite::Result<Vec<i64>> {
        let mut v: Vec<i64> = Vec::new();
        if self.has("COMMUNICATION_OP")? {
            let mut st = self.select("COMMUNICATION_OP", &["connectionId"])?;
            let mut rows = st.raw_query();
            while let Some(r) = rows.next()? {
                v.extend(opt(r, 0)?);
            }
        }
        v.sort_unstable();
        Ok(v)
    }

    fn read_cann_api(&mut self) -> Result<(), Stop> {
        let types = self.api_types()?;
        let launches = self.comm_connections()?;
        let mut st = self.select(
            "CANN_API",
            &[
                "startNs",
                "endNs",
                "type",
                "globalTid",
                "connectionId",
                "name",
            ],
        )?;
        let mut rows = st.raw_query();
        while let Some(r) = rows.next()? {
            let conn: Option<i64> = opt(r, 4)?;
            if conn.is_some_and(|c| launches.binary_search(&c).is_ok()) {
                continue;
            }
            let ty: Option<i64> = opt(r, 2)?;
            let track = match ty.and_then(|t| types.get(&t)).map(String::as_str) {
                Some("runtime") => Track::Runtime,
                _ => Track::Api,
            };
            let tid: i64 = opt(r, 3)?.unwrap_or(0);
            let thread = self.thread(tid, || format!("thread {}", tid & 0xffff_ffff));
            let name = self.name(opt(r, 5)?);
            let e = self.event(int(r, 0)?, int(r, 1)?, name, thread, track);
            self.push(e)?;
        }
        Ok(())
    }

    fn read_mstx(&mut self) -> Result<(), Stop> {
        let rlprof = self
            .text
            .iter()
            .find(|(_, v)| v.as_str() == "rlprof")
            .map(|(k, _)| *k);
        let mut st = self.select(
            "MSTX_EVENTS",
            &[
                "startNs",
                "endNs",
                "category",
                "message",
                "globalTid",
                "domainId",
            ],
        )?;
        let mut rows = st.raw_query();
        while let Some(r) = rows.next()? {
            let domain: Option<i64> = opt(r, 5)?;
            let ours = rlprof.is_some() && domain == rlprof;
            let track = if ours {
                match RangeCat::from_u8(opt(r, 2)?.unwrap_or(0) as u8) {
                    Some(RangeCat::Phase) => Track::Phase,
                    Some(RangeCat::RoleCall) => Track::RoleCall,
                    Some(RangeCat::Iteration) => Track::Iteration,
                    Some(RangeCat::Span) => Track::Span,
                    _ => Track::User,
                }
            } else {
                Track::User
            };
            let tid: i64 = opt(r, 4)?.unwrap_or(0);
            let thread = self.thread(tid, || format!("thread {}", tid & 0xffff_ffff));
            let name = self.name(opt(r, 3)?);
            let e = self.event(int(r, 0)?, int(r, 1)?, name, thread, track);
            self.push(e)?;
        }
        Ok(())
    }

    /// Communication tasks by globalTaskId.
    fn read_comm_task_info(&mut self) -> rusqlite::Result<FxHashMap<i64, CommTaskInfo>> {
        let wait_ids: Vec<i64> = self
            .text
            .iter()
            .filter(|(_, v)| v.as_str() == "Notify_Wait")
            .map(|(k, _)| *k)
            .collect();
        let mut m = FxHashMap::default();
        let mut st = self.select(
            "COMMUNICATION_TASK_INFO",
            &[
                "globalTaskId",
                "opId",
                "size",
                "name",
                "taskType",
                "dstRank",
                "planeId",
            ],
        )?;
        let mut rows = st.raw_query();
        while let Some(r) = rows.next()? {
            let (Some(gid), Some(op)) = (opt(r, 0)?, opt(r, 1)?) else {
                continue;
            };
            let size = opt(r, 2)?.unwrap_or(0).max(0) as u64;
            let name: Option<i64> = opt(r, 3)?;
            let ty: Option<i64> = opt(r, 4)?;
            let wait = [name, ty]
                .iter()
                .any(|x| x.is_some_and(|i| wait_ids.contains(&i)));
            let peer = opt(r, 5)?;
            m.insert(
                gid,
                CommTaskInfo {
                    op,
                    bytes: size,
                    wait,
                    peer,
                    plane: opt(r, 6)?.unwrap_or(0),
                },
            );
        }
        Ok(m)
    }

    /// Device tasks from `TASK`:
    /// - a task of a communication op (`COMMUNICATION_TASK_INFO`) is summed into its op;
    /// - a compute task (`COMPUTE_TASK_INFO`) is a kernel (or a copy) named by its info;
    /// - any other task is named by its task type: the collective's own record on its stream
    ///   (launched by the op's connection id) is left out, as it repeats the op; stream
    ///   synchronisation ([`is_sync_task`]) stays on the timeline as a user range, not device
    ///   work; where the DB has compute infos, the rest are not kernels either (copies stay
    ///   copies: [`Self::task_track`]).
    fn read_tasks(
        &mut self,
        comm: &FxHashMap<i64, CommTaskInfo>,
    ) -> Result<FxHashMap<i64, CommTasks>, Stop> {
        let mut names: Vec<(i64, Option<i64>)> = Vec::new();
        if self.has("COMPUTE_TASK_INFO")? {
            let mut st = self.select("COMPUTE_TASK_INFO", &["globalTaskId", "name"])?;
            let mut rows = st.raw_query();
            while let Some(r) = rows.next()? {
                if let Some(g) = opt(r, 0)? {
                    names.push((g, opt(r, 1)?));
                }
            }
        }
        if !names.is_sorted_by_key(|n| n.0) {
            names.sort_by_key(|n| n.0);
        }
        let launches = self.comm_connections()?;
        // Task type id -> track of a task without a compute info, decided once per type.
        let mut type_tracks: FxHashMap<Option<i64>, Track> = FxHashMap::default();
        let mut per_op: FxHashMap<i64, CommTasks> = FxHashMap::default();
        let mut st = self.select(
            "TASK",
            &[
                "startNs",
                "endNs",
                "globalTaskId",
                "taskType",
                "streamId",
                "connectionId",
            ],
        )?;
        let mut rows = st.raw_query();
        let mut cursor = 0usize;
        while let Some(r) = rows.next()? {
            let (start, end) = (int(r, 0)?, int(r, 1)?);
            let gid: Option<i64> = opt(r, 2)?;
            if let Some(c) = gid.and_then(|g| comm.get(&g)) {
                let t = per_op.entry(c.op).or_default();
                t.bytes += c.bytes;
                if c.wait {
                    let dur = (end - start).max(0) as u64;
                    match t.plane_waits.iter_mut().find(|w| w.0 == c.plane) {
                        Some(w) => w.1 += dur,
                        None => t.plane_waits.push((c.plane, dur)),
                    }
                }
                if c.peer.is_some() {
                    t.peer = c.peer;
                }
                continue;
            }
            // Tasks and their infos are mostly in the same order: try the next one first.
            let name_id = gid.and_then(|g| {
                if names.get(cursor).is_some_and(|n| n.0 == g) {
                    cursor += 1;
                    return Some(names[cursor - 1].1);
                }
                let i = names.binary_search_by_key(&g, |n| n.0).ok()?;
                cursor = i + 1;
                Some(names[i].1)
            });
            let (name, track) = match name_id {
                Some(info_name) => {
                    let name = self.name(info_name);
                    (name, self.kernel_track(name))
                }
                None => {
                    if opt(r, 5)?.is_some_and(|c| launches.binary_search(&c).is_ok()) {
                        continue;
                    }
                    let ty = opt(r, 3)?;
                    let track = match type_tracks.get(&ty) {
                        Some(&t) => t,
                        None => {
                            let t = self.task_track(ty, !names.is_empty());
                            type_tracks.insert(ty, t);
                            t
                        }
                    };
                    (self.name(ty), track)
                }
            };
            let stream: i64 = opt(r, 4)?.unwrap_or(0);
            let thread = self.thread(-1 - stream, || format!("stream {stream}"));
            let e = self.event(start, end, name, thread, track);
            self.push(e)?;
        }
        Ok(per_op)
    }

    /// The track of a compute task (one with a `COMPUTE_TASK_INFO` row) from its name, as the
    /// text layout's device tasks are told ([`device_track`]), decided once per name.
    fn kernel_track(&mut self, name: u32) -> Track {
        let i = name as usize;
        if let Some(Some(t)) = self.kernel_tracks.get(i) {
            return *t;
        }
        let t = device_track(self.p.str(name), None);
        if self.kernel_tracks.len() <= i {
            self.kernel_tracks.resize(i + 1, None);
        }
        self.kernel_tracks[i] = Some(t);
        t
    }

    /// The track of a device task without a compute info, from its task type id, in a DB that
    /// has compute infos (`infos`) or not. Where it has them, such a task is not a kernel
    /// (copies stay copies): msprof's overlap analysis counts only the compute tasks as
    /// computing, and so do `analyse --cluster` and this report, so the three agree.
    fn task_track(&self, ty: Option<i64>, infos: bool) -> Track {
        let ty = ty.and_then(|i| self.text.get(&i)).map(String::as_str);
        if ty.is_some_and(is_sync_task) {
            return Track::User;
        }
        match device_track(ty.unwrap_or(""), ty) {
            Track::Kernel if infos => Track::User,
            t => t,
        }
    }

    fn read_comm_ops(&mut self, per_op: &FxHashMap<i64, CommTasks>) -> Result<(), Stop> {
        let mut st = self.select(
            "COMMUNICATION_OP",
            &["opName", "startNs", "endNs", "groupName", "opId"],
        )?;
        let mut rows = st.raw_query();
        let rank = self.p.rank as i64;
        let thread = self.thread(i64::MIN, || "communication".into());
        while let Some(r) = rows.next()? {
            let name = self.name(opt(r, 0)?);
            let mut e = self.event(int(r, 1)?, int(r, 2)?, name, thread, Track::Comm);
            let t = opt(r, 4)?
                .and_then(|op| per_op.get(&op))
                .cloned()
                .unwrap_or_default();
            let d = Detail {
                bytes: Some(t.bytes),
                wait_ns: Some(t.wait()),
                group: self.text_of(opt(r, 3)?).filter(|g| g != "default_group"),
                peer: t.peer.filter(|&p| p != rank && p >= 0).map(|p| p as u32),
                ..Detail::default()
            };
            e.detail = self.p.add_detail(d);
            self.push(e)?;
        }
        Ok(())
    }

    /// Device memory. With `MEMORY_RECORD`, the curve is its `PTA` series, as the text
    /// layout's `memory_record.csv` is read (the allocator's own totals, so the peak counts
    /// what was allocated before the profile began); each point that is an allocation or a
    /// release of `OP_MEMORY` (same time, same total) takes that row's op, so the report can
    /// say what was live at the peak. Without it, `OP_MEMORY`'s allocations and releases alone.
    fn read_memory(&mut self) -> rusqlite::Result<()> {
        let allocations = if self.has("OP_MEMORY")? {
            self.read_op_memory()?
        } else {
            Vec::new()
        };
        let totals = if self.has("MEMORY_RECORD")? {
            self.read_memory_record()?
        } else {
            Vec::new()
        };
        if totals.is_empty() {
            for (i, a) in allocations.iter().enumerate() {
                let addr = i as u64 + 1;
                let ev = |t, delta| MemEvent {
                    t,
                    delta,
                    addr,
                    op: a.op,
                    total: None,
                };
                self.p.memory.push(ev(a.at, a.size));
                if let Some((t, _)) = a.release {
                    self.p.memory.push(ev(t, -a.size));
                }
            }
            return Ok(());
        }
        let mut events = crate::ascend::memory_from_totals(totals);
        crate::ascend::attribute_allocations(&mut events, &allocations);
        self.p.memory.extend(events);
        Ok(())
    }

    /// `OP_MEMORY` rows of device memory, times relative to the origin.
    fn read_op_memory(&mut self) -> rusqlite::Result<Vec<OpAllocation>> {
        let mut st = self.select(
            "OP_MEMORY",
            &[
                "name",
                "size",
                "allocationTime",
                "releaseTime",
                "deviceId",
                "allocationTotalAllocated",
                "releaseTotalAllocated",
            ],
        )?;
        let mut rows = st.raw_query();
        let mut v = Vec::new();
        while let Some(r) = rows.next()? {
            // Host (CPU) allocations carry no device.
            if opt(r, 4)?.is_some_and(|d| d < 0) {
                continue;
            }
            let Some(at) = opt(r, 2)? else {
                continue;
            };
            let op = match opt(r, 0)? {
                Some(id) if self.text.get(&id).is_some_and(|s| s != "unknown") => {
                    self.name(Some(id))
                }
                _ => NONE,
            };
            let release = match opt(r, 3)? {
                Some(t) => Some((t - self.origin, opt(r, 6)?)),
                None => None,
            };
            v.push(OpAllocation {
                op,
                size: opt(r, 1)?.unwrap_or(0),
                at: at - self.origin,
                total_at: opt(r, 5)?,
                release,
            });
        }
        Ok(v)
    }

    /// Allocator totals `(t, bytes)` from `MEMORY_RECORD`, in time order, as the text layout's
    /// `memory_record.csv` is read: the `PTA` (torch allocator) rows when there are any, else
    /// every row, of devices only. torch_npu interleaves `PTA`, `GE`, `PTA+GE` and `WORKSPACE`
    /// series in the table, each a total of its own, so they are never mixed into one.
    fn read_memory_record(&mut self) -> rusqlite::Result<Vec<(i64, i64)>> {
        let pta = self
            .text
            .iter()
            .find(|(_, v)| v.as_str() == "PTA")
            .map(|(k, _)| *k);
        let mut st = self.select(
            "MEMORY_RECORD",
            &["timestamp", "totalAllocated", "component", "deviceId"],
        )?;
        let mut rows = st.raw_query();
        let mut series: Vec<(Option<i64>, i64, i64)> = Vec::new();
        while let Some(r) = rows.next()? {
            let (Some(t), Some(total)) = (opt(r, 0)?, opt(r, 1)?) else {
                continue;
            };
            if opt(r, 3)?.is_some_and(|d| d < 0) {
                continue;
            }
            series.push((opt(r, 2)?, t - self.origin, total));
        }
        let has_pta = pta.is_some() && series.iter().any(|s| s.0 == pta);
        let mut totals: Vec<(i64, i64)> = series
            .into_iter()
            .filter(|s| !has_pta || s.0 == pta)
            .map(|s| (s.1, s.2))
            .collect();
        totals.sort_by_key(|t| t.0);
        Ok(totals)
    }

    fn read_steps(&mut self) -> Result<(), Stop> {
        let mut steps: Vec<(i64, i64, i64)> = Vec::new();
        let mut st = self.select("STEP_TIME", &["id", "startNs", "endNs"])?;
        let mut rows = st.raw_query();
        while let Some(r) = rows.next()? {
            steps.push((int(r, 0)?, int(r, 1)?, int(r, 2)?));
        }
        self.p.steps = steps.iter().map(|s| s.0.max(0) as u64).collect();
        if self.p.events.iter().any(|e| e.track == Track::Step) {
            return Ok(());
        }
        let thread = self.thread(i64::MIN + 1, || "steps".into());
        for (id, start, end) in steps {
            let name = self.p.intern(&format!("ProfilerStep#{id}"));
            let e = self.event(start, end, name, thread, Track::Step);
            self.push(e)?;
        }
        Ok(())
    }
}
