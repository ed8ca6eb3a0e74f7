//! Ascend profiler DB input: `ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_{rank}.db`, as
//! torch_npu writes it with `export_type=Db` (verl 0.9.1's setting) and as rlprof's `npu` tool
//! writes it by default. Read into the same [`Profile`] model as the text layout:
//! - `PYTORCH_API` -> ops (`ProfilerStep#N` -> steps), with shapes, dtypes and call stacks;
//! - `CANN_API` -> API / runtime calls (a communication op's own launch is not repeated);
//! - `MSTX_EVENTS` -> marker ranges: those in the `rlprof` domain keep their category (phase,
//!   role call, iteration, span, user); in the default domain, where verl and rlprof put their
//!   stage ranges, a stage label is a role call and any other name a user range;
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

mod device;
mod host;
mod memory;

use crate::Limits;
use crate::error::ReportError;
use crate::model::{Event, NONE, Profile, SourceFormat, Track};
use crate::sqlite_values::{self as sql, int, opt, text};
use rusqlite::Connection;
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

fn malformed(
    path: &Path,
    limit: std::time::Duration,
) -> impl Fn(rusqlite::Error) -> ReportError + '_ {
    move |e| ReportError::Malformed {
        path: path.to_path_buf(),
        message: if is_interrupt(&e) {
            format!(
                "SQLite: reading took longer than its limit of {} s and was stopped",
                limit.as_secs()
            )
        } else {
            format!("SQLite: {e}")
        },
    }
}

/// Whether SQLite stopped a statement at the deadline ([`sql::open_untrusted`]).
fn is_interrupt(e: &rusqlite::Error) -> bool {
    e.sqlite_error_code() == Some(rusqlite::ErrorCode::OperationInterrupted)
}

/// Loads a profiler DB: an untrusted file ([`sql::open_untrusted`]), so one that is not a
/// regular file, or holds views, virtual tables or generated columns where tables are read, or
/// takes longer than its limit ([`sql::db_time_limit`]), is an error naming it, not a hang.
pub fn load_db(path: &Path, group: &str, limits: &Limits) -> Result<Profile, ReportError> {
    let limit = sql::db_time_limit(path);
    let err = malformed(path, limit);
    let conn = sql::open_untrusted(path, limit)?;
    let mut p = Profile::new(
        path.to_path_buf(),
        SourceFormat::Ascend,
        rank_of(path).unwrap_or(0),
        group.to_string(),
    );
    let mut r = Reader::new(&conn, &mut p, limits);
    r.read_all().map_err(|e| match e {
        Stop::Sql(e) => err(e),
        Stop::Limit => ReportError::Limit {
            path: path.to_path_buf(),
            what: "events",
            limit: limits.max_events,
        },
    })?;
    read_step_trace_time(path, &mut p);
    p.sort();
    Ok(p)
}

/// `analysis.db`'s `StepTraceTime` beside the profiler DB (torch_npu writes it there), kept as
/// a table whose cells are the stored values' text (a REAL's shortest decimal form), so that
/// CANN's step figures are read as the producer wrote them. A missing or unreadable
/// `analysis.db` is a note, never an error: the figures are then computed.
fn read_step_trace_time(db: &Path, p: &mut Profile) {
    let Some(path) = db.parent().map(|d| d.join("analysis.db")) else {
        return;
    };
    if !path.is_file() {
        return;
    }
    let columns: Vec<&str> = std::iter::once("deviceId")
        .chain(crate::summary::cann::DB_COLUMNS)
        .collect();
    let read = || -> Result<Option<crate::model::Table>, ReportError> {
        let limit = sql::db_time_limit(&path);
        let conn = sql::open_untrusted(&path, limit)?;
        let err = malformed(&path, limit);
        if !sql::has_table(&conn, "StepTraceTime").map_err(&err)? {
            return Ok(None);
        }
        let mut st = sql::select(&conn, "StepTraceTime", &columns).map_err(&err)?;
        let mut rows = st.raw_query();
        let mut out = Vec::new();
        while let Some(r) = rows.next().map_err(&err)? {
            if out.len() >= MAX_STEP_ROWS {
                break;
            }
            let row = (0..columns.len())
                .map(|i| sql::text(r, i))
                .collect::<rusqlite::Result<Vec<String>>>()
                .map_err(&err)?;
            out.push(row);
        }
        Ok(Some(crate::model::Table {
            title: "StepTraceTime".to_string(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
            rows: out,
        }))
    };
    match read() {
        Ok(Some(t)) => p.tables.push(t),
        Ok(None) => {}
        Err(e) => p.notes.push(format!("CANN's step table not read: {e}")),
    }
}

/// Longest `META_DATA` value parsed (bytes).
const MAX_META_VALUE: usize = 1 << 20;

/// Most `StepTraceTime` rows read.
const MAX_STEP_ROWS: usize = 1 << 20;

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
    /// Rows skipped for a start or end time that is NULL or not a number.
    unreadable: u64,
}
impl<'c, 'p> Reader<'c, 'p> {
    fn new(conn: &'c Connection, p: &'p mut Profile, limits: &Limits) -> Self {
        Reader {
            conn,
            p,
            max_events: limits.max_events,
            strings: FxHashMap::default(),
            text: FxHashMap::default(),
            threads: FxHashMap::default(),
            op_details: FxHashMap::default(),
            kernel_tracks: Vec::new(),
            origin: 0,
            unreadable: 0,
        }
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
            && let Some(r) = self.first_int("RANK_DEVICE_MAP", "rankId")?
        {
            match u32::try_from(r) {
                Ok(r) => self.p.rank = r,
                // A rank id past u32 (2^40, say) is never truncated into another rank's.
                Err(_) => self.p.notes.push(format!(
                    "RANK_DEVICE_MAP.rankId {r} is not a rank (0..2^32); the file name's rank {} is used",
                    self.p.rank
                )),
            }
        }
        if self.has("META_DATA")? {
            self.read_meta_data()?;
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
        if self.unreadable > 0 {
            self.p.notes.push(format!(
                "{} rows without a readable start or end time (NULL or not a number) were skipped",
                self.unreadable
            ));
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

    /// The first row's `col` of `table` as an integer of any storage class (`None` when the
    /// table is empty or the value is NULL or not a number).
    /// The world size (and, without `RANK_DEVICE_MAP`, the rank) from `META_DATA`'s
    /// `distributed_args` / `parallel_group_info` JSON values, as `profiler_metadata.json` is
    /// read in the text layout. A value that is not JSON is left aside.
    fn read_meta_data(&mut self) -> rusqlite::Result<()> {
        let mut st = self.select("META_DATA", &["name", "value"])?;
        let mut rows = st.raw_query();
        let (mut args, mut groups) = (None, None);
        while let Some(r) = rows.next()? {
            let name = sql::text(r, 0)?;
            let slot = match name.as_str() {
                "distributed_args" => &mut args,
                "parallel_group_info" => &mut groups,
                _ => continue,
            };
            let text = sql::text(r, 1)?;
            if text.len() <= MAX_META_VALUE {
                *slot = serde_json::from_str::<serde_json::Value>(&text).ok();
            }
        }
        let (rank, world) =
            crate::ascend_text_reader::metadata_rank_world(args.as_ref(), groups.as_ref());
        if world.is_some() {
            self.p.meta.world_size = world;
        }
        if let (Some(r), false) = (rank, self.has("RANK_DEVICE_MAP")?) {
            self.p.rank = r;
        }
        Ok(())
    }

    fn first_int(&self, table: &str, col: &str) -> rusqlite::Result<Option<i64>> {
        let mut st = self.select(table, &[col])?;
        let mut rows = st.raw_query();
        Ok(match rows.next()? {
            Some(r) => opt(r, 0)?,
            None => None,
        })
    }

    /// The session start: `SESSION_TIME_INFO.startTimeNs`, or without one (no table, no row,
    /// NULL) the earliest host or device time. Times may be stored as text (torch_npu declares
    /// `PYTORCH_API`'s TEXT), so the minimum is taken of their numeric values.
    fn session_start(&self) -> rusqlite::Result<i64> {
        if self.has("SESSION_TIME_INFO")?
            && let Some(t) = self.first_int("SESSION_TIME_INFO", "startTimeNs")?
        {
            return Ok(t);
        }
        let mut lo = i64::MAX;
        for t in ["PYTORCH_API", "TASK"] {
            if self.has(t)? {
                let mut st = self.select(t, &["startNs"])?;
                let mut rows = st.raw_query();
                while let Some(r) = rows.next()? {
                    if let Some(v) = opt(r, 0)? {
                        lo = lo.min(v);
                    }
                }
            }
        }
        Ok(if lo == i64::MAX { 0 } else { lo })
    }

    /// A row's `(start, end)` times (columns `a` and `b`), of any storage class; `None`, with
    /// the row counted in [`Reader::unreadable`], when either is NULL or not a number.
    fn span(
        &mut self,
        r: &rusqlite::Row,
        a: usize,
        b: usize,
    ) -> rusqlite::Result<Option<(i64, i64)>> {
        match (opt(r, a)?, opt(r, b)?) {
            (Some(s), Some(e)) => Ok(Some((s, e))),
            _ => {
                self.unreadable += 1;
                Ok(None)
            }
        }
    }

    fn name(&mut self, id: Option<i64>) -> u32 {
        match id.and_then(|i| self.strings.get(&i)) {
            Some(&i) => i,
            None => self.p.intern(""),
        }
    }

    /// The id of a `STRING_IDS` value (`rlprof`, `PTA`, `Notify_Wait`, ...), if the DB has it.
    fn string_id(&self, value: &str) -> Option<i64> {
        self.text
            .iter()
            .find(|(_, v)| v.as_str() == value)
            .map(|(k, _)| *k)
    }

    /// The thread of a host thread id (`globalTid`).
    fn host_thread(&mut self, tid: i64) -> u32 {
        self.thread(tid, || format!("thread {}", tid & 0xffff_ffff))
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
            start: start.saturating_sub(self.origin),
            dur: end.saturating_sub(start).max(0),
            name,
            detail: NONE,
            thread,
            depth: 0,
            track,
        }
    }

    fn read_steps(&mut self) -> Result<(), Stop> {
        let mut steps: Vec<(i64, i64, i64)> = Vec::new();
        let mut st = self.select("STEP_TIME", &["id", "startNs", "endNs"])?;
        let mut rows = st.raw_query();
        while let Some(r) = rows.next()? {
            let Some((start, end)) = self.span(r, 1, 2)? else {
                continue;
            };
            steps.push((int(r, 0)?, start, end));
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
