//! Foreign Ascend profiler output (torch_npu's text layout): `*_ascend_pt/ASCEND_PROFILER_OUTPUT/`,
//! read the way MindStudio Insight and msprof-analyze read it.
//!
//! - `trace_view.json` (a bare array of Chrome events) gives the timeline; what its processes
//!   mean (`Ascend Hardware`, `Communication`, `CANN`, `Overlap Analysis`) is in
//!   [`crate::processes`]; `ProfilerStep#N` there is a `cpu_op` and still a step.
//! - Without it, device tasks come from `kernel_details.csv` (`Name`, `Type`, `Accelerator Core`
//!   or `Task Type`, `Start Time(us)`, `Duration(us)`, `Step Id`, a stream column when present):
//!   HCCL tasks are communication, not kernels ([`device_track`]).
//! - `memory_record.csv` (`Component`, `Timestamp(us)`, `Total Allocated(MB)`, `Device Type`)
//!   gives the device memory curve of torch's allocator (`PTA` rows; MB read as MiB, as
//!   torch_npu writes them).
//! - `step_trace_time.csv`, `op_statistic.csv`, `operator_memory.csv` and the per-step
//!   `communication.json` (flattened to one row per collective) are shown as tables.
//! - The rank is `profiler_info_{rank}.json`'s (`rank_id`); host and pid come from the
//!   `{host}_{pid}_{timestamp}_ascend_pt` directory name.
//!
//! Another Ascend source (the SQLite layout) feeds the same model through [`device_track`]
//! and [`memory_from_totals`].
//!
//! Every file is untrusted input ([`open_capped`]): one that is not a regular file (a FIFO, a
//! device) is refused before it is opened, and what is read is capped by counting the bytes
//! actually read, never by the size the file claims (`/proc` files claim 0), with CSV lines
//! capped at [`MAX_CSV_LINE`] (a sparse file of zeros is one endless line). CSV files are
//! streamed: `kernel_details.csv` and `memory_record.csv` keep only what becomes events.
//! An optional file that cannot be read (memory, tables, `communication.json`) is left out with
//! a note; the rest of the directory still loads.

use crate::chrome_reader::{self, Limits};
pub use crate::device_names::device_track;
use crate::device_names::is_comm_name;
use crate::error::ReportError;
use crate::model::{Event, MemEvent, NONE, Profile, SourceFormat, Table, Track};
use std::borrow::Cow;
use std::io::Read;
use std::path::Path;

/// Longest line of a CSV file read (longer is not a table of torch_npu's: a sparse file of
/// zeros, `/proc/self/pagemap`).
pub const MAX_CSV_LINE: u64 = 4 << 20;
/// Largest `profiler_info_*.json` read (a few hundred bytes in practice).
pub const MAX_INFO_BYTES: u64 = 16 << 20;

/// Which cap of [`Capped`] a read went past.
#[derive(Debug, Clone, Copy)]
enum Exceeded {
    Bytes,
    Line,
}

impl std::fmt::Display for Exceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Exceeded::Bytes => "size limit exceeded",
            Exceeded::Line => "line length limit exceeded",
        })
    }
}

impl std::error::Error for Exceeded {}

/// A reader that fails once more than `max` bytes, or a line longer than `max_line`, have
/// been read: the bytes counted are those read, whatever size the file claims.
pub struct Capped<R> {
    inner: R,
    read: u64,
    max: u64,
    line: u64,
    max_line: u64,
}

impl<R: Read> Capped<R> {
    /// `inner` capped at `max` bytes in all and `max_line` bytes per line.
    pub fn new(inner: R, max: u64, max_line: u64) -> Capped<std::io::Take<R>> {
        Capped {
            inner: inner.take(max.saturating_add(1)),
            read: 0,
            max,
            line: 0,
            max_line,
        }
    }
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        if self.read > self.max {
            return Err(std::io::Error::other(Exceeded::Bytes));
        }
        if self.max_line < u64::MAX {
            self.line = match memchr::memrchr(b'\n', &buf[..n]) {
                Some(i) => (n - 1 - i) as u64,
                None => self.line + n as u64,
            };
            if self.line > self.max_line {
                return Err(std::io::Error::other(Exceeded::Line));
            }
        }
        Ok(n)
    }
}

/// Opens an input file: refused unless it is a regular file (after following links), and
/// capped at `max` bytes read in all and `max_line` per line ([`Capped`]).
pub fn open_capped(
    path: &Path,
    max: u64,
    max_line: u64,
) -> Result<Capped<std::io::Take<std::fs::File>>, ReportError> {
    let meta = std::fs::metadata(path).map_err(crate::error::io(path))?;
    if let Some(kind) = crate::sqlite_values::non_regular_kind(&meta) {
        return Err(malformed(
            path,
            format!("not a regular file ({kind}); not read"),
        ));
    }
    let f = std::fs::File::open(path).map_err(crate::error::io(path))?;
    Ok(Capped::new(f, max, max_line))
}

/// The error of a read that went past a cap of [`Capped`], else [`ReportError::Io`].
fn read_error(path: &Path, e: std::io::Error, limits: &Limits) -> ReportError {
    match e.get_ref().and_then(|i| i.downcast_ref::<Exceeded>()) {
        Some(Exceeded::Bytes) => ReportError::Limit {
            path: path.to_path_buf(),
            what: "size in bytes (as read)",
            limit: limits.max_bytes,
        },
        Some(Exceeded::Line) => ReportError::Limit {
            path: path.to_path_buf(),
            what: "CSV line length in bytes",
            limit: MAX_CSV_LINE,
        },
        None => crate::error::io(path)(e),
    }
}

/// The error of a CSV read: a cap or an I/O failure ([`read_error`]), else malformed CSV.
fn csv_error(path: &Path, e: csv::Error, limits: &Limits) -> ReportError {
    if !e.is_io_error() {
        return malformed(path, e);
    }
    match e.into_kind() {
        csv::ErrorKind::Io(e) => read_error(path, e, limits),
        k => malformed(path, format!("{k:?}")),
    }
}

/// Memory events from a producer's running totals `(t_ns, total_bytes)` in time order: each
/// event's delta is the change since the previous total, and the total is the producer's.
pub fn memory_from_totals(totals: impl IntoIterator<Item = (i64, i64)>) -> Vec<MemEvent> {
    let mut prev = 0;
    totals
        .into_iter()
        .map(|(t, total)| {
            let delta = total - prev;
            prev = total;
            MemEvent {
                t,
                delta,
                addr: 0,
                op: NONE,
                total: Some(total),
            }
        })
        .collect()
}

pub use crate::model::OpAllocation;

/// Gives the points of a producer's memory curve ([`memory_from_totals`]) that are an
/// allocation or a release of `allocations` (same time, same total just after) that
/// allocation's op and an address of their own (its index + 1), so that what was live at the
/// peak can be told. Points that match none stay unattributed. torch_npu's op rows and its
/// `PTA` series come from the same allocator events, so most points match (127 of 184
/// allocations in MindStudio Insight's real test data: the rest are GE's, not torch's).
pub fn attribute_allocations(curve: &mut [MemEvent], allocations: &[OpAllocation]) {
    let mut allocs: rustc_hash::FxHashMap<(i64, i64), (u64, u32)> = Default::default();
    let mut releases: rustc_hash::FxHashMap<(i64, i64), u64> = Default::default();
    for (i, a) in allocations.iter().enumerate() {
        let addr = i as u64 + 1;
        if let Some(total) = a.total_at {
            allocs.insert((a.at, total), (addr, a.op));
        }
        if let Some((t, Some(total))) = a.release {
            releases.insert((t, total), addr);
        }
    }
    for m in curve {
        let key = (m.t, m.total.unwrap_or(0));
        if m.delta >= 0 {
            if let Some(&(addr, op)) = allocs.get(&key) {
                (m.addr, m.op) = (addr, op);
            }
        } else if let Some(&addr) = releases.get(&key) {
            m.addr = addr;
        }
    }
}

/// The summary tables read as they are.
const TABLE_FILES: [&str; 3] = [
    "step_trace_time.csv",
    "op_statistic.csv",
    "operator_memory.csv",
];

/// Loads an `ASCEND_PROFILER_OUTPUT` directory.
pub fn load_ascend(out_dir: &Path, group: &str, limits: &Limits) -> Result<Profile, ReportError> {
    let mut p = Profile::new(
        out_dir.to_path_buf(),
        SourceFormat::Ascend,
        out_dir.parent().and_then(rank_of).unwrap_or(0),
        group.to_string(),
    );
    if let Some(pt) = out_dir.parent() {
        read_profiler_info(pt, &mut p);
    }
    let trace = out_dir.join("trace_view.json");
    let kernels = out_dir.join("kernel_details.csv");
    if trace.is_file() {
        chrome_reader::read_into(&trace, &mut p, limits)?;
    } else if present(&kernels) {
        load_kernel_details(&kernels, &mut p, limits)?;
    } else if TABLE_FILES.iter().any(|f| present(&out_dir.join(f)))
        || !communication_files(out_dir).is_empty()
    {
        // A rank is a rank when any of its files is readable (msprof-analyze counts a rank
        // directory by its text files): its tables are read, its timeline is empty.
        p.notes.push(format!(
            "{}: neither trace_view.json nor kernel_details.csv is present: no device timeline, only the tables",
            out_dir.display()
        ));
    } else {
        return Err(ReportError::Malformed {
            path: out_dir.to_path_buf(),
            message: "no trace_view.json, kernel_details.csv or summary table is present".into(),
        });
    }
    let record = out_dir.join("memory_record.csv");
    if present(&record)
        && let Err(e) = load_memory_record(&record, &mut p, limits)
    {
        p.notes.push(format!("memory not read: {e}"));
    }
    for name in TABLE_FILES {
        let f = out_dir.join(name);
        if present(&f) {
            match read_table(&f, limits) {
                Ok(t) => p.tables.push(t),
                Err(e) => p.notes.push(format!("table not read: {e}")),
            }
        }
    }
    for f in communication_files(out_dir) {
        match communication_table(&f, limits) {
            Ok(t) => p.tables.push(t),
            Err(e) => p.notes.push(format!("table not read: {e}")),
        }
    }
    attribute_operator_memory(&mut p);
    p.sort();
    Ok(p)
}

/// The ops of `operator_memory.csv` on the `memory_record.csv` curve
/// ([`attribute_allocations`]), when that is where the curve came from (memory events of
/// `trace_view.json` carry their own addresses and ops), read with the curve's own unit
/// conversions so that equal cells give equal keys.
fn attribute_operator_memory(p: &mut Profile) {
    if p.memory.iter().any(|m| m.addr != 0 || m.op != NONE) {
        return;
    }
    let Some(i) = p
        .tables
        .iter()
        .position(|t| t.title == "operator_memory.csv")
    else {
        return;
    };
    // Out of the profile while its names are interned, then back.
    let t = std::mem::take(&mut p.tables[i]);
    let col = |n: &str| t.columns.iter().position(|c| c == n);
    let (name, at, at_total) = (
        col("Name"),
        col("Allocation Time(us)"),
        col("Allocation Total Allocated(MB)"),
    );
    let (release, release_total, dev) = (
        col("Release Time(us)"),
        col("Release Total Allocated(MB)"),
        col("Device Type"),
    );
    let size_kb = col("Size(KB)");
    let allocations: Vec<OpAllocation> = t
        .rows
        .iter()
        .filter(|r| !is_host(field(r, dev)))
        .filter_map(|r| {
            Some(OpAllocation {
                at: csv_us_to_ns(field(r, at))?,
                op: p.intern(field(r, name)),
                size: number(field(r, size_kb)).map_or(0, |kb| (kb * 1024.0).round() as i64),
                total_at: mb_to_bytes(field(r, at_total)),
                release: csv_us_to_ns(field(r, release))
                    .map(|t| (t, mb_to_bytes(field(r, release_total)))),
            })
        })
        .collect();
    p.tables[i] = t;
    attribute_allocations(&mut p.memory, &allocations);
    p.op_allocations = allocations;
}

/// Whether `path` names something (a file, a link, a FIFO, ...): what it is is checked when it
/// is opened ([`open_capped`]), so that a FIFO is reported, not passed over.
fn present(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// `communication.json` and any other `communication*.json` of the directory, sorted.
fn communication_files(out_dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(out_dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|f| {
            f.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("communication") && n.ends_with(".json"))
        })
        .collect();
    v.sort();
    v
}

/// Rank, world size (where written), host and pid of a `*_ascend_pt` directory.
fn read_profiler_info(pt_dir: &Path, p: &mut Profile) {
    let name = pt_dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    // {host}_{pid}_{timestamp}_ascend_pt (the host may hold underscores).
    if let Some((host, pid)) = name
        .strip_suffix("_ascend_pt")
        .and_then(|n| n.rsplit_once('_'))
        .and_then(|(host_pid, _ts)| host_pid.rsplit_once('_'))
    {
        p.meta.host = Some(host.to_string());
        p.meta.pid = Some(pid.to_string());
    }
    let info = std::fs::read_dir(pt_dir).ok().and_then(|rd| {
        rd.flatten().map(|e| e.path()).find(|f| {
            f.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("profiler_info") && n.ends_with(".json"))
        })
    });
    read_profiler_metadata(pt_dir, p);
    let Some(info) = info else { return };
    let v = open_capped(&info, MAX_INFO_BYTES, u64::MAX).and_then(|r| {
        serde_json::from_reader::<_, serde_json::Value>(std::io::BufReader::new(r)).map_err(|e| {
            let limits = Limits {
                max_bytes: MAX_INFO_BYTES,
                ..Limits::default()
            };
            json_error(&info, e, &limits)
        })
    });
    let v = match v {
        Ok(v) => v,
        Err(e) => {
            p.notes.push(format!("rank and world size not read: {e}"));
            return;
        }
    };
    let num = |k: &str| {
        v.get(k)
            .or_else(|| v.get("config").and_then(|c| c.get(k)))
            .and_then(serde_json::Value::as_u64)
            .map(|n| n as u32)
    };
    if let Some(r) = num("rank_id") {
        p.rank = r;
    }
    if let Some(w) = num("world_size").or_else(|| num("rank_size")) {
        p.meta.world_size = Some(w);
    }
}

/// Rank and world size from torch_npu's metadata (`profiler_metadata.json`, the DB's
/// `META_DATA`): `distributed_args` (`rank`, `world_size`) when present, else the default group
/// of `parallel_group_info` (`group_rank`, and its `global_ranks` for the size).
pub(crate) fn metadata_rank_world(
    args: Option<&serde_json::Value>,
    groups: Option<&serde_json::Value>,
) -> (Option<u32>, Option<u32>) {
    let u32_of = |v: Option<&serde_json::Value>| {
        v.and_then(|x| {
            x.as_u64()
                .or_else(|| x.as_str().and_then(|s| s.trim().parse().ok()))
        })
        .and_then(|n| u32::try_from(n).ok())
    };
    let mut rank = u32_of(args.and_then(|a| a.get("rank")));
    let mut world = u32_of(args.and_then(|a| a.get("world_size")));
    if let Some(groups) = groups.and_then(|g| g.as_object()) {
        let default = groups
            .values()
            .find(|g| g.get("group_name").and_then(|n| n.as_str()) == Some("default_group"));
        if let Some(g) = default {
            rank = rank.or_else(|| u32_of(g.get("group_rank")));
            world = world.or_else(|| {
                g.get("global_ranks")
                    .and_then(|r| r.as_array())
                    .and_then(|r| u32::try_from(r.len()).ok())
            });
        }
    }
    (rank, world)
}

/// Rank and world size from `profiler_metadata.json` (torch_npu writes it beside
/// `profiler_info_{rank}.json`): `distributed_args` (`rank`, `world_size`) when present, else the
/// default group of `parallel_group_info` (`group_rank`, and its `global_ranks` for the size).
/// `profiler_info_{rank}.json`'s name and contents, read after it, win where both speak.
fn read_profiler_metadata(pt_dir: &Path, p: &mut Profile) {
    let path = pt_dir.join("profiler_metadata.json");
    if !path.is_file() {
        return;
    }
    let v = match open_capped(&path, MAX_INFO_BYTES, u64::MAX).and_then(|r| {
        serde_json::from_reader::<_, serde_json::Value>(std::io::BufReader::new(r)).map_err(|e| {
            let limits = Limits {
                max_bytes: MAX_INFO_BYTES,
                ..Limits::default()
            };
            json_error(&path, e, &limits)
        })
    }) {
        Ok(v) => v,
        Err(e) => {
            p.notes
                .push(format!("profiler_metadata.json not read: {e}"));
            return;
        }
    };
    let (rank, world) =
        metadata_rank_world(v.get("distributed_args"), v.get("parallel_group_info"));
    if let (Some(r), None) = (rank, rank_of(pt_dir)) {
        p.rank = r;
    }
    if world.is_some() {
        p.meta.world_size = world;
    }
}

/// Number of a cell (`1.5`, `1.5\t`); `None` when empty or not a number.
fn number(s: &str) -> Option<f64> {
    s.trim().parse::<f64>().ok().filter(|v| v.is_finite())
}

/// Device memory from `memory_record.csv`: the `PTA` (torch allocator) rows of NPU devices,
/// or all NPU rows when there is no `PTA` component. Streamed: only `(PTA?, t, total)` of the
/// device rows is kept.
fn load_memory_record(path: &Path, p: &mut Profile, limits: &Limits) -> Result<(), ReportError> {
    let mut r = csv_reader(path, limits)?;
    let columns = headers(&mut r, path, limits)?;
    let col = |n: &str| columns.iter().position(|c| c == n);
    let (Some(ts), Some(total)) = (col("Timestamp(us)"), col("Total Allocated(MB)")) else {
        p.notes.push(format!(
            "{}: no Timestamp(us) / Total Allocated(MB) column; memory not read",
            path.display()
        ));
        return Ok(());
    };
    let comp = col("Component");
    let dev = col("Device Type");
    let mut bad = BadCells::new(path);
    let mut series: Vec<(bool, i64, i64)> = Vec::new();
    let mut has_pta = false;
    let mut rows = 0u64;
    let mut rec = csv::ByteRecord::new();
    while r
        .read_byte_record(&mut rec)
        .map_err(|e| csv_error(path, e, limits))?
    {
        rows += 1;
        if rows > limits.max_events {
            return Err(too_many(path, limits));
        }
        let pta = bfield(&rec, comp) == "PTA";
        has_pta |= pta;
        if is_host(&bfield(&rec, dev)) {
            continue;
        }
        let (t_cell, v_cell) = (bfield(&rec, Some(ts)), bfield(&rec, Some(total)));
        match (csv_us_to_ns(&t_cell), mb_to_bytes(&v_cell)) {
            (Some(t), Some(v)) => series.push((pta, t, v)),
            (t, _) => {
                let (column, cell) = if t.is_none() {
                    ("Timestamp(us)", t_cell)
                } else {
                    ("Total Allocated(MB)", v_cell)
                };
                bad.push(line_of(&rec), column, &cell);
            }
        }
    }
    bad.finish(p);
    let mut totals: Vec<(i64, i64)> = series
        .into_iter()
        .filter(|r| !has_pta || r.0)
        .map(|r| (r.1, r.2))
        .collect();
    totals.sort_by_key(|r| r.0);
    p.memory.extend(memory_from_totals(totals));
    Ok(())
}

/// A row's field in column `c` (empty when the column or the cell is missing).
fn field(row: &[String], c: Option<usize>) -> &str {
    c.and_then(|c| row.get(c)).map(String::as_str).unwrap_or("")
}

/// A `Device Type` cell of host memory (`CPU`).
fn is_host(device_type: &str) -> bool {
    device_type.to_ascii_uppercase().starts_with("CPU")
}

/// Bytes of a torch_npu "MB" cell.
fn mb_to_bytes(s: &str) -> Option<i64> {
    number(s).map(|mb| (mb * MIB).round() as i64)
}

/// Bytes in torch_npu's "MB".
const MIB: f64 = 1024.0 * 1024.0;

/// `communication.json` (`{step: {collective|p2p: {op: {"Communication Time Info": {...},
/// "Communication Bandwidth Info": {transport: {...}}}}}}`) as one row per (step, op).
fn communication_table(path: &Path, limits: &Limits) -> Result<Table, ReportError> {
    let r = open_capped(path, limits.max_bytes, u64::MAX)?;
    let v: serde_json::Value = serde_json::from_reader(std::io::BufReader::new(r))
        .map_err(|e| json_error(path, e, limits))?;
    let mut rows = Vec::new();
    let f = |x: Option<&serde_json::Value>| x.and_then(serde_json::Value::as_f64);
    for (step, kinds) in v.as_object().into_iter().flatten() {
        for (kind, ops) in kinds.as_object().into_iter().flatten() {
            for (op, info) in ops.as_object().into_iter().flatten() {
                let time = info.get("Communication Time Info");
                let tf = |k: &str| f(time.and_then(|t| t.get(k)));
                let (mut size_mb, mut transit_ms) = (0.0, 0.0);
                if let Some(bw) = info
                    .get("Communication Bandwidth Info")
                    .and_then(|b| b.as_object())
                {
                    for link in bw.values() {
                        size_mb += f(link.get("Transit Size(MB)")).unwrap_or(0.0);
                        transit_ms += f(link.get("Transit Time(ms)")).unwrap_or(0.0);
                    }
                }
                let cell = |x: Option<f64>| x.map(|x| format!("{x:.6}")).unwrap_or_default();
                rows.push(vec![
                    step.clone(),
                    kind.clone(),
                    op.clone(),
                    cell(tf("Elapse Time(ms)")),
                    cell(tf("Wait Time(ms)")),
                    cell(tf("Synchronization Time(ms)")),
                    cell(tf("Transit Time(ms)")),
                    cell(Some(size_mb)),
                    cell((transit_ms > 0.0).then(|| size_mb / transit_ms)),
                ]);
            }
        }
    }
    Ok(Table {
        title: path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        columns: [
            "Step",
            "Kind",
            "Op",
            "Elapse Time(ms)",
            "Wait Time(ms)",
            "Synchronization Time(ms)",
            "Transit Time(ms)",
            "Transit Size(MB)",
            "Bandwidth(GB/s)",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    })
}

/// The rank from `profiler_info_{rank}.json` in the `*_ascend_pt` directory.
fn rank_of(pt_dir: &Path) -> Option<u32> {
    std::fs::read_dir(pt_dir).ok()?.flatten().find_map(|e| {
        e.file_name()
            .to_str()?
            .strip_prefix("profiler_info_")?
            .strip_suffix(".json")?
            .parse()
            .ok()
    })
}

/// The error of a JSON read: a cap or an I/O failure ([`read_error`]), else malformed JSON.
fn json_error(path: &Path, e: serde_json::Error, limits: &Limits) -> ReportError {
    if e.is_io() {
        read_error(path, e.into(), limits)
    } else {
        malformed(path, e)
    }
}

/// A CSV reader of `path`, capped ([`open_capped`]) at the size limit and [`MAX_CSV_LINE`].
type CsvReader = csv::Reader<Capped<std::io::Take<std::fs::File>>>;

fn csv_reader(path: &Path, limits: &Limits) -> Result<CsvReader, ReportError> {
    let f = open_capped(path, limits.max_bytes, MAX_CSV_LINE)?;
    Ok(csv::ReaderBuilder::new().flexible(true).from_reader(f))
}

/// The header of a CSV file, cells trimmed.
fn headers(r: &mut CsvReader, path: &Path, limits: &Limits) -> Result<Vec<String>, ReportError> {
    Ok(r.byte_headers()
        .map_err(|e| csv_error(path, e, limits))?
        .iter()
        .map(cell)
        .collect())
}

/// Number of lines of `path` (a bound on its records), read under the same caps as the file
/// itself, so that what is kept of it can be allocated once.
fn count_lines(path: &Path, limits: &Limits) -> Result<u64, ReportError> {
    let mut f = open_capped(path, limits.max_bytes, MAX_CSV_LINE)?;
    let mut buf = vec![0u8; 1 << 16];
    let mut n = 0u64;
    loop {
        match f.read(&mut buf) {
            Ok(0) => return Ok(n + 1),
            Ok(k) => n += memchr::memchr_iter(b'\n', &buf[..k]).count() as u64,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(read_error(path, e, limits)),
        }
    }
}

/// A record's cell in column `c`, trimmed (empty when the column or the cell is missing).
fn bfield(rec: &csv::ByteRecord, c: Option<usize>) -> Cow<'_, str> {
    match String::from_utf8_lossy(c.and_then(|c| rec.get(c)).unwrap_or_default()) {
        Cow::Borrowed(s) => Cow::Borrowed(s.trim()),
        Cow::Owned(s) => Cow::Owned(s.trim().to_string()),
    }
}

/// The error of a file with more rows than the event limit.
fn too_many(path: &Path, limits: &Limits) -> ReportError {
    ReportError::Limit {
        path: path.to_path_buf(),
        what: "events",
        limit: limits.max_events,
    }
}

fn malformed(path: &Path, e: impl std::fmt::Display) -> ReportError {
    ReportError::Malformed {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// Reads a CSV file as a table (cells trimmed of the reference's trailing tabs).
/// At most [`Limits::max_events`] rows.
pub fn read_table(path: &Path, limits: &Limits) -> Result<Table, ReportError> {
    let mut r = csv_reader(path, limits)?;
    let columns = headers(&mut r, path, limits)?;
    let mut rows = Vec::new();
    let mut rec = csv::ByteRecord::new();
    while r
        .read_byte_record(&mut rec)
        .map_err(|e| csv_error(path, e, limits))?
    {
        if rows.len() as u64 >= limits.max_events {
            return Err(too_many(path, limits));
        }
        rows.push(rec.iter().map(cell).collect());
    }
    Ok(Table {
        title: path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        columns,
        rows,
    })
}

fn cell(b: &[u8]) -> String {
    String::from_utf8_lossy(b).trim().to_string()
}

/// Device tasks from `kernel_details.csv`: one thread per stream (or per accelerator core
/// when there is no stream column), the `Step Id` values as the steps. Streamed, with the
/// events allocated once for the file's lines (counted first): what is held is the events, not
/// the file's text.
fn load_kernel_details(path: &Path, p: &mut Profile, limits: &Limits) -> Result<(), ReportError> {
    let lines = count_lines(path, limits)?;
    let mut r = csv_reader(path, limits)?;
    let columns = headers(&mut r, path, limits)?;
    let col = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| columns.iter().position(|c| c.eq_ignore_ascii_case(n)))
    };
    let (Some(name), Some(start), Some(dur)) = (
        col(&["Name"]),
        col(&["Start Time(us)"]),
        col(&["Duration(us)"]),
    ) else {
        return Err(malformed(
            path,
            "missing one of the columns Name, Start Time(us), Duration(us)",
        ));
    };
    let ty = col(&["Accelerator Core", "Task Type"]);
    let op_type = col(&["Type"]);
    let step = col(&["Step Id", "Step ID"]);
    let stream = col(&["Stream ID", "Stream Id"]);
    let mut bad = BadCells::new(path);
    let mut lanes: Vec<String> = Vec::new();
    p.events
        .reserve(lines.saturating_sub(1).min(limits.max_events) as usize);
    let mut rows = 0u64;
    let mut rec = csv::ByteRecord::new();
    while r
        .read_byte_record(&mut rec)
        .map_err(|e| csv_error(path, e, limits))?
    {
        if rows >= limits.max_events {
            return Err(too_many(path, limits));
        }
        rows += 1;
        let get = |c: Option<usize>| bfield(&rec, c);
        let (start_cell, dur_cell) = (get(Some(start)), get(Some(dur)));
        let (t0, d) = match (csv_us_to_ns(&start_cell), csv_us_to_ns(&dur_cell)) {
            (Some(t0), Some(d)) if d >= 0 => (t0, d),
            (None, _) => {
                bad.push(line_of(&rec), "Start Time(us)", &start_cell);
                continue;
            }
            _ => {
                bad.push(line_of(&rec), "Duration(us)", &dur_cell);
                continue;
            }
        };
        let task = get(ty);
        let task_name = get(Some(name));
        let mut track = device_track(&task_name, Some(&task));
        if track == Track::Kernel && is_comm_name(&get(op_type)) {
            track = Track::Comm;
        }
        let lane = match stream {
            Some(_) => format!("Ascend Hardware / Stream {}", get(stream)),
            None if task.is_empty() => "Ascend Hardware".to_string(),
            None => format!("Ascend Hardware / {task}"),
        };
        let thread = match lanes.iter().position(|l| *l == lane) {
            Some(t) => t,
            None => {
                lanes.push(lane);
                lanes.len() - 1
            }
        } as u32;
        if let Some(s) = number(&get(step)).filter(|s| *s >= 0.0)
            && p.steps.last() != Some(&(s as u64))
        {
            p.steps.push(s as u64);
        }
        let n = p.intern(&task_name);
        p.events.push(Event {
            start: t0,
            dur: d,
            name: n,
            detail: NONE,
            thread,
            depth: 0,
            track,
        });
    }
    bad.finish(p);
    p.steps.sort_unstable();
    p.steps.dedup();
    p.threads = lanes;
    Ok(())
}

/// The 1-based line of a CSV record (0 when unknown).
fn line_of(rec: &csv::ByteRecord) -> u64 {
    rec.position().map_or(0, csv::Position::line)
}

/// A CSV microsecond cell as torch_npu writes it (a plain decimal, maybe with a trailing tab),
/// exactly; `None` for anything else: an exponent form (`1.69512E+15`, what a spreadsheet saves
/// after rounding to six digits), text, an empty cell.
fn csv_us_to_ns(s: &str) -> Option<i64> {
    crate::exact_time::decimal_us_to_ns(s.trim())
}

/// Cells that are not numbers, each warned with `file:line` and its row left out.
struct BadCells<'a> {
    path: &'a Path,
    count: u64,
    shown: Vec<String>,
}

impl<'a> BadCells<'a> {
    /// Most bad cells named one by one; the rest are counted.
    const SHOWN: usize = 5;

    fn new(path: &'a Path) -> Self {
        BadCells {
            path,
            count: 0,
            shown: Vec::new(),
        }
    }

    fn push(&mut self, line: u64, column: &str, cell: &str) {
        self.count += 1;
        if self.shown.len() < Self::SHOWN {
            let cell: String = cell.chars().take(40).collect();
            let why = if cell.contains(['e', 'E']) && cell.trim().parse::<f64>().is_ok() {
                " (an exponent form: digits lost, e.g. by a spreadsheet)"
            } else {
                ""
            };
            self.shown.push(format!(
                "{}:{line}: {column} is {cell:?}, not a decimal number{why}: row left out",
                self.path.display()
            ));
        }
    }

    fn finish(self, p: &mut Profile) {
        if self.count > self.shown.len() as u64 {
            p.notes.push(format!(
                "{}: {} rows left out for cells that are not decimal numbers (the first {} named)",
                self.path.display(),
                self.count,
                self.shown.len()
            ));
        }
        p.notes.extend(self.shown);
    }
}
