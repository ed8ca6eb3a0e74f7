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

use crate::chrome::{self, Limits};
pub use crate::device_names::device_track;
use crate::device_names::is_comm_name;
use crate::error::ReportError;
use crate::model::{Event, MemEvent, NONE, Profile, SourceFormat, Table, Track};
use std::path::Path;

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

/// One allocation by an op (`OP_MEMORY` / `operator_memory.csv` row) and its release, if any:
/// times (ns, relative to the profile's origin) and the allocator's totals just after each.
#[derive(Debug, Clone, Copy)]
pub struct OpAllocation {
    /// The op (interned name, or [`NONE`]).
    pub op: u32,
    /// Bytes.
    pub size: i64,
    /// Allocation time.
    pub at: i64,
    /// Total allocated just after the allocation.
    pub total_at: Option<i64>,
    /// Release time and total allocated just after it.
    pub release: Option<(i64, Option<i64>)>,
}

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
        chrome::read_into(&trace, &mut p, limits)?;
    } else if kernels.is_file() {
        load_kernel_details(&kernels, &mut p, limits)?;
    } else {
        return Err(ReportError::Malformed {
            path: out_dir.to_path_buf(),
            message: "neither trace_view.json nor kernel_details.csv is present".into(),
        });
    }
    let record = out_dir.join("memory_record.csv");
    if record.is_file() {
        load_memory_record(&record, &mut p, limits)?;
    }
    for name in [
        "step_trace_time.csv",
        "op_statistic.csv",
        "operator_memory.csv",
    ] {
        let f = out_dir.join(name);
        if f.is_file() {
            let t = read_table(&f, limits)?;
            p.tables.push(t);
        }
    }
    for f in communication_files(out_dir) {
        p.tables.push(communication_table(&f, limits)?);
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
    let allocations: Vec<OpAllocation> = t
        .rows
        .iter()
        .filter(|r| !is_host(field(r, dev)))
        .filter_map(|r| {
            Some(OpAllocation {
                at: us_to_ns(field(r, at))?,
                op: p.intern(field(r, name)),
                size: 0,
                total_at: mb_to_bytes(field(r, at_total)),
                release: us_to_ns(field(r, release))
                    .map(|t| (t, mb_to_bytes(field(r, release_total)))),
            })
        })
        .collect();
    p.tables[i] = t;
    attribute_allocations(&mut p.memory, &allocations);
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
    let Some(v) = info
        .and_then(|f| std::fs::read(f).ok())
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
    else {
        return;
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
    p.meta.world_size = num("world_size").or_else(|| num("rank_size"));
}

/// Number of a cell (`1.5`, `1.5\t`); `None` when empty or not a number.
fn number(s: &str) -> Option<f64> {
    s.trim().parse::<f64>().ok().filter(|v| v.is_finite())
}

/// Device memory from `memory_record.csv`: the `PTA` (torch allocator) rows of NPU devices,
/// or all NPU rows when there is no `PTA` component.
fn load_memory_record(path: &Path, p: &mut Profile, limits: &Limits) -> Result<(), ReportError> {
    let t = read_table(path, limits)?;
    let col = |n: &str| t.columns.iter().position(|c| c == n);
    let (Some(ts), Some(total)) = (col("Timestamp(us)"), col("Total Allocated(MB)")) else {
        p.notes.push(format!(
            "{}: no Timestamp(us) / Total Allocated(MB) column; memory not read",
            path.display()
        ));
        return Ok(());
    };
    let comp = col("Component");
    let dev = col("Device Type");
    let has_pta = t.rows.iter().any(|r| field(r, comp) == "PTA");
    let mut rows: Vec<(i64, i64)> = t
        .rows
        .iter()
        .filter(|r| !has_pta || field(r, comp) == "PTA")
        .filter(|r| !is_host(field(r, dev)))
        .filter_map(|r| {
            Some((
                us_to_ns(field(r, Some(ts)))?,
                mb_to_bytes(field(r, Some(total)))?,
            ))
        })
        .collect();
    rows.sort_by_key(|r| r.0);
    p.memory.extend(memory_from_totals(rows));
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

/// Integer nanoseconds of a microsecond cell.
fn us_to_ns(s: &str) -> Option<i64> {
    number(s).map(|us| (us * 1000.0).round() as i64)
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
    let len = std::fs::metadata(path)
        .map_err(crate::error::io(path))?
        .len();
    if len > limits.max_bytes {
        return Err(ReportError::Limit {
            path: path.to_path_buf(),
            what: "uncompressed size in bytes",
            limit: limits.max_bytes,
        });
    }
    let bytes = std::fs::read(path).map_err(crate::error::io(path))?;
    let v: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| malformed(path, e))?;
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

fn csv_reader(path: &Path, limits: &Limits) -> Result<csv::Reader<std::fs::File>, ReportError> {
    let f = std::fs::File::open(path).map_err(crate::error::io(path))?;
    let len = f.metadata().map_err(crate::error::io(path))?.len();
    if len > limits.max_bytes {
        return Err(ReportError::Limit {
            path: path.to_path_buf(),
            what: "uncompressed size in bytes",
            limit: limits.max_bytes,
        });
    }
    Ok(csv::ReaderBuilder::new().flexible(true).from_reader(f))
}

fn malformed(path: &Path, e: impl std::fmt::Display) -> ReportError {
    ReportError::Malformed {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// Reads a CSV file as a table (cells trimmed of the reference's trailing tabs).
pub fn read_table(path: &Path, limits: &Limits) -> Result<Table, ReportError> {
    let mut r = csv_reader(path, limits)?;
    let columns = r
        .byte_headers()
        .map_err(|e| malformed(path, e))?
        .iter()
        .map(cell)
        .collect();
    let mut rows = Vec::new();
    for rec in r.byte_records() {
        let rec = rec.map_err(|e| malformed(path, e))?;
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
/// when there is no stream column), the `Step Id` values as the steps.
fn load_kernel_details(path: &Path, p: &mut Profile, limits: &Limits) -> Result<(), ReportError> {
    let t = read_table(path, limits)?;
    let col = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| t.columns.iter().position(|c| c.eq_ignore_ascii_case(n)))
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
    let us = |s: &str| us_to_ns(s).unwrap_or(0);
    let mut lanes: Vec<String> = Vec::new();
    for (i, row) in t.rows.iter().enumerate() {
        if i as u64 >= limits.max_events {
            return Err(ReportError::Limit {
                path: path.to_path_buf(),
                what: "events",
                limit: limits.max_events,
            });
        }
        let get = |c: Option<usize>| field(row, c);
        let task = get(ty);
        let mut track = device_track(get(Some(name)), Some(task));
        if track == Track::Kernel && is_comm_name(get(op_type)) {
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
        if let Some(s) = number(get(step)).filter(|s| *s >= 0.0) {
            p.steps.push(s as u64);
        }
        let n = p.intern(get(Some(name)));
        p.events.push(Event {
            start: us(get(Some(start))),
            dur: us(get(Some(dur))).max(0),
            name: n,
            detail: NONE,
            thread,
            depth: 0,
            track,
        });
    }
    p.steps.sort_unstable();
    p.steps.dedup();
    p.threads = lanes;
    Ok(())
}
