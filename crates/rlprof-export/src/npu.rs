//! The `npu` tool output: an Ascend profiler directory (formats.md section 1).
//!
//! The collection directory is already named `{host}_{pid}_{ts17}_ascend_pt` and holds our raw
//! data (`rlprof_raw/`). Next to it this writes `profiler_info_{rank}.json`,
//! `profiler_metadata.json` and `ASCEND_PROFILER_OUTPUT/` (built under a `.tmp` name, renamed
//! when complete). Which files and columns appear follows the level/content matrix of
//! profiling.md section 3, see [`files_for`] and [`kernel_header`].
//!
//! `trace_view.json` (almost nine tenths of the bytes) is formatted and written on its own
//! thread (`TraceFeed`), fed batches of the attributed events, while this thread decodes,
//! attributes and writes the CSV files; the two outputs depend on nothing of each other.

use crate::ExportError;
use crate::attrib::{Attributor, Out, RangeInfo};
use crate::chrome::{ChromeWriter, Flavor, Tracks};
use crate::decode::{CommEv, Event, Index, KernelEv, MemEv};
use crate::dense::{DenseMap, FastMap};
use crate::memory::MemTracker;
use crate::rows::CsvOut;
use crate::staging::{staging_name, write_atomic};
use rlprof_profiler::plan::{Content, Level};
use rlprof_profiler::raw::CollectionMeta;
use rlprof_profiler::record::RangeCat;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender, SyncSender, channel, sync_channel};

/// Output directory name.
pub const OUTPUT_DIR: &str = "ASCEND_PROFILER_OUTPUT";

/// Base header of `kernel_details.csv` (without Step Id and the shape columns).
const KERNEL_BASE: [&str; 9] = [
    "Device_id",
    "Name",
    "Type",
    "Accelerator Core",
    "Start Time(us)",
    "Duration(us)",
    "Wait Time(us)",
    "Block Num",
    "",
];
const KERNEL_SHAPES: [&str; 6] = [
    "Input Shapes",
    "Input Data Types",
    "Input Formats",
    "Output Shapes",
    "Output Data Types",
    "Output Formats",
];
/// Level1+ per-kernel metrics appended to `kernel_details.csv`.
pub const KERNEL_METRICS: [&str; 4] = [
    "FLOPs",
    "Memory Bytes",
    "Achieved GFLOP/s",
    "Achieved Bandwidth(GB/s)",
];
/// `operator_details.csv` header.
pub const OPERATOR_DETAILS: [&str; 9] = [
    "Name",
    "Input Shapes",
    "Call Stack",
    "Host Self Duration(us)",
    "Host Total Duration(us)",
    "Device Self Duration(us)",
    "Device Total Duration(us)",
    "Device Self Duration With AICore(us)",
    "Device Total Duration With AICore(us)",
];
/// `step_trace_time.csv` header.
pub const STEP_TRACE: [&str; 11] = [
    "Device_id",
    "Step",
    "Computing",
    "Communication(Not Overlapped)",
    "Overlapped",
    "Communication",
    "Free",
    "Stage",
    "Bubble",
    "Communication(Not Overlapped and Exclude Receive)",
    "Preparing",
];
/// `memory_record.csv` header.
pub const MEMORY_RECORD: [&str; 7] = [
    "Component",
    "Timestamp(us)",
    "Total Allocated(MB)",
    "Total Reserved(MB)",
    "Total Active(MB)",
    "Stream Ptr",
    "Device Type",
];
/// `operator_memory.csv` header.
pub const OPERATOR_MEMORY: [&str; 15] = [
    "Name",
    "Size(KB)",
    "Allocation Time(us)",
    "Release Time(us)",
    "Active Release Time(us)",
    "Duration(us)",
    "Active Duration(us)",
    "Allocation Total Allocated(MB)",
    "Allocation Total Reserved(MB)",
    "Allocation Total Active(MB)",
    "Release Total Allocated(MB)",
    "Release Total Reserved(MB)",
    "Release Total Active(MB)",
    "Stream Ptr",
    "Device Type",
];
/// `op_statistic.csv` header.
pub const OP_STATISTIC: [&str; 8] = [
    "OP Type",
    "Core Type",
    "Count",
    "Total Time(us)",
    "Min Time(us)",
    "Avg Time(us)",
    "Max Time(us)",
    "Ratio(%)",
];
/// `api_statistic.csv` header.
pub const API_STATISTIC: [&str; 8] = [
    "Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)", "Variance",
];

/// The npu level as a number: -1 = level_none, 0..=2.
pub fn level_rank(level: Level) -> i32 {
    match level {
        Level::LevelNone => -1,
        Level::Level0 => 0,
        Level::Level1 => 1,
        Level::Level2 => 2,
    }
}

/// Whether the collection holds the content named `name` (see [`CollectionMeta::has`]).
fn has_content(m: &CollectionMeta, name: &str) -> bool {
    Content::parse(name).is_some_and(|c| m.has(c))
}

/// The files of `ASCEND_PROFILER_OUTPUT/` for a level (-1 = level_none) and contents.
pub fn files_for(level: i32, has: impl Fn(&str) -> bool) -> Vec<&'static str> {
    let mut v = vec!["trace_view.json"];
    if level >= 0 {
        v.push("step_trace_time.csv");
        if has("npu") {
            v.push("kernel_details.csv");
        }
    }
    if has("cpu") {
        v.push("operator_details.csv");
    }
    if has("memory") {
        v.push("memory_record.csv");
        v.push("operator_memory.csv");
    }
    if level >= 1 {
        if has("npu") {
            v.push("op_statistic.csv");
        }
        v.push("api_statistic.csv");
        v.push("communication.json");
        v.push("communication_matrix.json");
    }
    v
}

/// The `kernel_details.csv` header for the given flags.
pub fn kernel_header(steps: bool, shapes: bool, level: i32) -> Vec<&'static str> {
    let mut h = Vec::new();
    if steps {
        h.push("Step Id");
    }
    h.extend(KERNEL_BASE.iter().copied().filter(|c| !c.is_empty()));
    if shapes {
        h.extend(KERNEL_SHAPES);
    }
    if level >= 1 {
        h.extend(KERNEL_METRICS);
    }
    h
}

/// Microseconds with 3 decimals from ns.
pub fn us(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

/// The CSV field of a name id, escaped once.
fn csv_name<'a>(names: &'a mut DenseMap<Box<[u8]>>, idx: &Index, id: u32) -> &'a [u8] {
    names.get_or_insert_with(id, || {
        let mut v = Vec::new();
        crate::text::csv_field(&mut v, idx.name(id));
        v.into_boxed_slice()
    })
}

/// Bytes per MiB.
const MIB: f64 = 1024.0 * 1024.0;

#[derive(Default, Clone, Copy)]
struct Stat {
    count: u64,
    total: u64,
    min: u64,
    max: u64,
    sumsq: f64,
}

impl Stat {
    fn add(&mut self, d: u64) {
        if self.count == 0 || d < self.min {
            self.min = d;
        }
        self.max = self.max.max(d);
        self.count += 1;
        self.total += d;
        let x = d as f64 / 1000.0;
        self.sumsq += x * x;
    }
    fn avg(&self) -> u64 {
        self.total / self.count.max(1)
    }
    fn variance_us2(&self) -> f64 {
        let n = self.count.max(1) as f64;
        let m = self.total as f64 / 1000.0 / n;
        (self.sumsq / n - m * m).max(0.0)
    }
}

#[derive(Default, Clone, Copy)]
struct OpAgg {
    host_self: u64,
    host_total: u64,
    dev_self: u64,
    dev_total: u64,
}

/// Per-step sums behind `step_trace_time.csv` (and the DB layout's `StepTraceTime`).
#[derive(Default, Clone, Copy)]
pub(crate) struct StepAgg {
    pub(crate) computing: u64,
    pub(crate) comm: u64,
    pub(crate) overlapped: u64,
    pub(crate) recv: u64,
    pub(crate) first_kernel: Option<u64>,
}

/// One step's `step_trace_time` figures in ns: Computing, Communication(Not Overlapped),
/// Overlapped, Communication, Free, Stage, Bubble, Communication(Not Overlapped and Exclude
/// Receive), and Preparing (none without a kernel).
pub(crate) fn step_trace_row(s: &crate::decode::StepSpan, a: &StepAgg) -> ([u64; 8], Option<u64>) {
    let dur = s.end - s.start;
    let comm_no = a.comm.saturating_sub(a.overlapped);
    let free = dur.saturating_sub(a.computing + comm_no);
    (
        [
            a.computing,
            comm_no,
            a.overlapped,
            a.comm,
            free,
            dur.saturating_sub(a.recv),
            a.recv,
            comm_no.saturating_sub(a.recv),
        ],
        a.first_kernel.map(|f| f.saturating_sub(s.start)),
    )
}

/// One collective instance for communication*.json.
struct CommOp {
    key: String,
    p2p: bool,
    start: u64,
    dur: u64,
    wait: u64,
    bytes: u64,
    name: String,
    peer: Option<u16>,
}

/// One attributed event, owned, for the trace thread; a memory event carries the running
/// allocation total after it (the trace shows it).
#[derive(Clone, Copy)]
enum Item {
    Range(RangeInfo),
    /// A kernel with the external id of its op (all the trace shows of the op).
    Kernel(KernelEv, Option<u64>),
    Other(Event, u64),
}

/// Events per batch (a few hundred KiB: small enough to be read back from cache).
const BATCH: usize = 2048;
/// Batches in flight to the trace thread.
const BATCHES_IN_FLIGHT: usize = 4;

type TraceWriter = ChromeWriter<BufWriter<File>>;

/// The sending side of the trace thread: batches go out full, and come back empty for reuse.
struct TraceFeed {
    batch: Vec<Item>,
    tx: Option<SyncSender<Vec<Item>>>,
    spare: Receiver<Vec<Item>>,
}

impl TraceFeed {
    /// Starts the thread that writes `trace` (within `scope`, as it borrows `idx`).
    fn start<'s, 'e: 's>(
        scope: &'s std::thread::Scope<'s, 'e>,
        idx: &'e Index,
        trace: TraceWriter,
    ) -> std::io::Result<(
        TraceFeed,
        std::thread::ScopedJoinHandle<'s, std::io::Result<TraceWriter>>,
    )> {
        let (tx, rx) = sync_channel(BATCHES_IN_FLIGHT);
        let (spare_tx, spare) = channel();
        let worker = std::thread::Builder::new()
            .name("rlprof-trace".into())
            .spawn_scoped(scope, move || write_trace(idx, trace, rx, spare_tx))?;
        let feed = TraceFeed {
            batch: Vec::with_capacity(BATCH),
            tx: Some(tx),
            spare,
        };
        Ok((feed, worker))
    }

    /// Queues one event; false once the thread has stopped (it failed: its join says why).
    #[inline]
    fn push(&mut self, o: &Out, allocated: u64) -> bool {
        self.batch.push(match o {
            Out::Range(r) => Item::Range(*r),
            Out::Kernel(k, op) => Item::Kernel(*k, op.map(|o| o.ext_id)),
            Out::Other(e) => Item::Other(**e, allocated),
        });
        self.batch.len() < BATCH || self.send()
    }

    fn send(&mut self) -> bool {
        let next = self
            .spare
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(BATCH));
        let full = std::mem::replace(&mut self.batch, next);
        let sent = self.tx.as_ref().is_some_and(|tx| tx.send(full).is_ok());
        if !sent {
            self.tx = None;
        }
        sent
    }

    /// Sends what is queued and ends the stream.
    fn close(&mut self) {
        if !self.batch.is_empty() {
            self.send();
        }
        self.tx = None;
    }
}

/// The trace thread: formats every batch into `trace`, hands the emptied batch back.
fn write_trace(
    idx: &Index,
    mut trace: TraceWriter,
    batches: Receiver<Vec<Item>>,
    spare: Sender<Vec<Item>>,
) -> std::io::Result<TraceWriter> {
    let mut mem = MemTracker::default();
    for mut batch in batches {
        for it in &batch {
            match it {
                Item::Range(r) => trace.push(idx, &Out::Range(*r), &mem)?,
                Item::Kernel(k, ext) => trace.push_kernel(idx, k, *ext)?,
                Item::Other(e, allocated) => {
                    mem.allocated = *allocated;
                    trace.push(idx, &Out::Other(e), &mem)?
                }
            }
        }
        batch.clear();
        let _ = spare.send(batch);
    }
    Ok(trace)
}

struct Writers {
    out_dir: PathBuf,
    trace: TraceFeed,
    kernels: Option<CsvOut>,
    mem_record: Option<CsvOut>,
    op_memory: Option<CsvOut>,
    /// CSV text of names by id (escaped once).
    csv_names: DenseMap<Box<[u8]>>,
}

struct Exporter<'a> {
    idx: &'a Index,
    w: Writers,
    level: i32,
    shapes: bool,
    steps_marked: bool,
    mem: MemTracker,
    op_stat: FastMap<u32, Stat>,
    api_stat: FastMap<(u8, u32), Stat>,
    ops: FastMap<(u32, u32, u32), OpAgg>,
    steps: BTreeMap<u64, StepAgg>,
    last_end: FastMap<(u32, u16), u64>,
    comm_ops: BTreeMap<u64, Vec<CommOp>>,
    comm_seq: HashMap<(u64, u32, u32), u64>,
    kernel_total: u64,
    err: Option<ExportError>,
}

fn csv_writer(path: &Path, header: &[&str]) -> Result<csv::Writer<BufWriter<File>>, ExportError> {
    let f = File::create(path).map_err(ExportError::io(path))?;
    let mut w = csv::Writer::from_writer(BufWriter::with_capacity(1 << 16, f));
    w.write_record(header).map_err(|source| ExportError::Csv {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(w)
}

/// Which layout the `npu` tool's output takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `ascend_pytorch_profiler_{rank}.db` + `analysis.db`.
    Db,
    /// `trace_view.json`, CSVs and JSON files.
    Text,
}

impl Layout {
    /// `db` or `text` (the `export_type` value).
    pub fn as_str(self) -> &'static str {
        match self {
            Layout::Db => "db",
            Layout::Text => "text",
        }
    }

    /// The layout a collection recorded in its metadata (`export_type`). A collection made
    /// before the key existed only knew the text layout, so it keeps it: an existing
    /// collection is never re-exported into the other layout unless asked
    /// ([`crate::ascend::export_as`]).
    pub fn of(meta: &CollectionMeta) -> Layout {
        match meta.export_type {
            Some(rlprof_profiler::plan::ExportType::Db) => Layout::Db,
            _ => Layout::Text,
        }
    }
}

/// Writes the text layout (`trace_view.json`, CSVs, JSON) of one rank.
pub fn export_text(dir: &Path, idx: &Index) -> Result<Vec<PathBuf>, ExportError> {
    let mut outputs = write_info_files(dir, idx, Layout::Text)?;

    let final_dir = dir.join(OUTPUT_DIR);
    let tmp = staging_name(&final_dir);
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(ExportError::io(&tmp))?;
    }
    std::fs::create_dir(&tmp).map_err(ExportError::io(&tmp))?;
    let files = files_for(level_rank(idx.meta.level), |c| has_content(&idx.meta, c));
    let trace_path = tmp.join("trace_view.json");
    let trace = trace_writer(idx, &trace_path)?;
    std::thread::scope(|scope| {
        let (feed, worker) =
            TraceFeed::start(scope, idx, trace).map_err(ExportError::io(&trace_path))?;
        // On error the feed is dropped, which ends the trace thread.
        let mut ex = Exporter::new(idx, &tmp, &files, feed)?;
        let mut attr = Attributor::default();
        let replayed = idx.replay(|ev| attr.push(ev, &mut |o| ex.push(&o)));
        attr.finish(&mut |o| ex.push(&o));
        ex.w.trace.close();
        let trace = worker
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("trace thread panicked")));
        replayed?;
        let trace = trace.map_err(ExportError::io(&trace_path))?;
        ex.finish(&files, trace)
    })?;
    if final_dir.exists() {
        std::fs::remove_dir_all(&final_dir).map_err(ExportError::io(&final_dir))?;
    }
    std::fs::rename(&tmp, &final_dir).map_err(ExportError::io(&final_dir))?;
    std::fs::write(final_dir.join("analyse.done"), b"").map_err(ExportError::io(&final_dir))?;
    outputs.extend(files.iter().map(|f| final_dir.join(f)));
    Ok(outputs)
}

/// `profiler_info_{rank}.json` and `profiler_metadata.json` (both layouts have them).
pub(crate) fn write_info_files(
    dir: &Path,
    idx: &Index,
    layout: Layout,
) -> Result<Vec<PathBuf>, ExportError> {
    let info = dir.join(format!("profiler_info_{}.json", idx.meta.rank));
    let mut v = profiler_info(idx);
    let db = layout == Layout::Db;
    v["config"]["experimental_config"]["export_type"] = json!([layout.as_str()]);
    v["config"]["experimental_config"]["_data_simplification"] = json!(db);
    write_json(&info, &v)?;
    let md = dir.join("profiler_metadata.json");
    write_json(&md, &profiler_metadata(idx))?;
    Ok(vec![info, md])
}

fn write_json(path: &Path, v: &Value) -> Result<(), ExportError> {
    let text = serde_json::to_vec_pretty(v).map_err(|source| ExportError::Json {
        path: path.to_path_buf(),
        source,
    })?;
    write_atomic(path, &text)
}

fn profiler_level_name(level: &str) -> &'static str {
    match level {
        "level_none" => "Level_none",
        "level1" => "Level1",
        "level2" => "Level2",
        _ => "Level0",
    }
}

/// `profiler_info_{rank}.json`.
pub fn profiler_info(idx: &Index) -> Value {
    let m = &idx.meta;
    let mut activities = Vec::new();
    if m.has(Content::Cpu) {
        activities.push("ProfilerActivity.CPU");
    }
    if m.has(Content::Npu) {
        activities.push("ProfilerActivity.NPU");
    }
    let end_wall = idx.steps.last().map_or(m.start_wall_ns, |s| s.end);
    json!({
        "config": {
            "common_config": {
                "activities": activities,
                "schedule": {"wait": 0, "warmup": 0, "active": 1, "repeat": 1, "skip_first": 0},
                "record_shapes": m.has(Content::Shapes),
                "profile_memory": m.has(Content::Memory),
                "with_stack": m.has(Content::Stack),
                "with_flops": m.level >= Level::Level1,
                "with_modules": m.has(Content::Module),
            },
            "experimental_config": {
                "_profiler_level": profiler_level_name(m.level.as_str()),
                "_aic_metrics": "",
                "_l2_cache": false,
                "_data_simplification": false,
                "record_op_args": false,
                "export_type": ["text"],
            }
        },
        "start_info": {
            "syscnt_enable": false,
            "freq": 1_000_000_000u64,
            "start_cnt": m.start_mono_ns,
            "start_monotonic": m.start_mono_ns,
            "collectionTimeBegin": m.start_wall_ns,
            "clockMonotonicRaw": m.start_mono_ns,
        },
        "end_info": {
            "collectionTimeEnd": end_wall,
            "MonotonicTimeEnd": (end_wall as i128 - m.wall_offset()).max(0) as u64,
        },
        "torch_npu_version": "",
        "cann_version": "",
        "rank_id": m.rank,
        "rlprof_version": env!("CARGO_PKG_VERSION"),
    })
}

/// `profiler_metadata.json`.
pub fn profiler_metadata(idx: &Index) -> Value {
    let m = &idx.meta;
    json!({
        "distributed_args": {"rank": m.rank, "world_size": m.world_size, "backend": "rlprof"},
        "rlprof": {
            "tool": m.tool, "level": m.level, "contents": m.contents,
            "steps": m.steps, "role_dir": m.role_dir, "discrete": m.discrete,
            "host": m.host, "pid": m.pid,
            "truncated": crate::truncation_json(idx),
        },
        "parallel_group_info": {},
    })
}

/// `trace_view.json` opened, with the track metadata written.
fn trace_writer(idx: &Index, path: &Path) -> Result<TraceWriter, ExportError> {
    let f = File::create(path).map_err(ExportError::io(path))?;
    let tracks = Tracks {
        host_pid: idx.meta.pid as u64,
        device_pid: 1_000_000 + idx.meta.rank as u64,
        comm_pid: 2_000_000 + idx.meta.rank as u64,
    };
    let mut trace = ChromeWriter::new(
        BufWriter::with_capacity(1 << 16, f),
        "[\n",
        0,
        Flavor::Ascend,
        tracks,
    )
    .map_err(ExportError::io(path))?;
    trace.track_metadata(idx);
    Ok(trace)
}

impl<'a> Exporter<'a> {
    fn new(
        idx: &'a Index,
        out_dir: &Path,
        files: &[&str],
        trace: TraceFeed,
    ) -> Result<Self, ExportError> {
        let level = level_rank(idx.meta.level);
        let shapes = idx.meta.has(Content::Shapes);
        let steps_marked = !idx.steps.is_empty();
        let has = |f: &str| files.contains(&f);
        let kernels = if has("kernel_details.csv") {
            Some(CsvOut::create(
                &out_dir.join("kernel_details.csv"),
                &kernel_header(steps_marked, shapes, level),
            )?)
        } else {
            None
        };
        let (mem_record, op_memory) = if has("memory_record.csv") {
            (
                Some(CsvOut::create(
                    &out_dir.join("memory_record.csv"),
                    &MEMORY_RECORD,
                )?),
                Some(CsvOut::create(
                    &out_dir.join("operator_memory.csv"),
                    &OPERATOR_MEMORY,
                )?),
            )
        } else {
            (None, None)
        };
        Ok(Exporter {
            idx,
            w: Writers {
                out_dir: out_dir.to_path_buf(),
                trace,
                kernels,
                mem_record,
                op_memory,
                csv_names: DenseMap::default(),
            },
            level,
            shapes,
            steps_marked,
            mem: MemTracker::default(),
            op_stat: FastMap::default(),
            api_stat: FastMap::default(),
            ops: FastMap::default(),
            steps: idx
                .steps
                .iter()
                .map(|s| (s.step, StepAgg::default()))
                .collect(),
            last_end: FastMap::default(),
            comm_ops: BTreeMap::new(),
            comm_seq: HashMap::new(),
            kernel_total: 0,
            err: None,
        })
    }

    fn push(&mut self, o: &Out) {
        if self.err.is_some() {
            return;
        }
        if let Err(e) = self.push_inner(o) {
            self.err = Some(e);
        }
    }

    fn push_inner(&mut self, o: &Out) -> Result<(), ExportError> {
        if let Out::Other(Event::Memory(m)) = o {
            let released = self.mem.apply(m);
            self.memory_rows(m, released)?;
        }
        // false: the trace thread stopped on an error, which its join reports.
        if (self.level >= 0 || !matches!(o, Out::Kernel(..)))
            && !self.w.trace.push(o, self.mem.allocated)
        {
            self.w.trace.batch.clear();
        }
        match o {
            Out::Range(r) => self.range(r),
            Out::Kernel(k, op) => self.kernel(k, op.as_ref().map(|o| &o.op))?,
            Out::Other(Event::Comm(c)) => self.comm(c),
            Out::Other(_) => {}
        }
        Ok(())
    }

    fn range(&mut self, ri: &RangeInfo) {
        let r = &ri.r;
        let cat = r.cat;
        if cat == RangeCat::Op as u8 {
            let key = (
                r.name,
                r.shapes,
                if r.stack != 0 { r.stack } else { r.module },
            );
            let a = self.ops.entry(key).or_default();
            a.host_self += ri.host_self;
            a.host_total += r.end - r.start;
            a.dev_self += ri.dev_self;
            a.dev_total += ri.dev_total;
        } else if cat == RangeCat::Api as u8 || (cat == RangeCat::Runtime as u8 && self.level >= 2)
        {
            self.api_stat
                .entry((cat, r.name))
                .or_default()
                .add(r.end - r.start);
        }
    }

    fn kernel(
        &mut self,
        k: &KernelEv,
        op: Option<&crate::decode::RangeEv>,
    ) -> Result<(), ExportError> {
        let idx = self.idx;
        let dur = k.end - k.start;
        self.kernel_total += dur;
        self.op_stat.entry(k.name).or_default().add(dur);
        let step = idx.step_at(k.start);
        if let Some(s) = step.and_then(|s| self.steps.get_mut(&s)) {
            s.computing += dur;
            s.overlapped += overlap(&idx.comm_spans, k.start, k.end);
            s.first_kernel = Some(s.first_kernel.map_or(k.start, |f| f.min(k.start)));
        }
        let prev = self.last_end.insert((k.thread, k.stream), k.end);
        let Some(w) = self.w.kernels.as_mut() else {
            return Ok(());
        };
        if self.steps_marked {
            match step {
                Some(s) => w.uint(s),
                None => w.empty(),
            }
        }
        w.raw(b"0");
        let name = csv_name(&mut self.w.csv_names, idx, k.name);
        w.raw(name);
        w.raw(name);
        w.raw(if k.on_host { b"CPU" } else { b"GPU" });
        w.us(k.start);
        w.us(dur);
        w.us(prev.map_or(0, |p| k.start.saturating_sub(p)));
        w.empty();
        if self.shapes {
            match op {
                Some(o) => {
                    w.str(idx.name(o.shapes));
                    w.str(idx.name(o.dtypes));
                }
                None => {
                    w.empty();
                    w.empty();
                }
            }
            for _ in 0..4 {
                w.empty();
            }
        }
        if self.level >= 1 {
            let secs = dur as f64 / 1e9;
            for v in [k.flops, k.bytes] {
                if v > 0 {
                    w.uint(v);
                } else {
                    w.empty();
                }
            }
            for v in [k.flops, k.bytes] {
                if v > 0 && secs > 0.0 {
                    w.fixed(v as f64 / secs / 1e9, 3);
                } else {
                    w.empty();
                }
            }
        }
        w.end_row()
    }

    fn comm(&mut self, c: &CommEv) {
        let idx = self.idx;
        let step = idx.step_at(c.start).unwrap_or(0);
        let dur = c.end - c.start;
        let name = idx.name(c.name).to_string();
        let is_recv = name.contains("recv") || name.contains("receive");
        if let Some(s) = self.steps.get_mut(&step) {
            s.comm += dur;
            if is_recv {
                s.recv += dur;
            }
        }
        if self.level < 1 {
            return;
        }
        let seq = self.comm_seq.entry((step, c.name, c.group)).or_default();
        let group = match idx.name(c.group) {
            "" => "default_group",
            g => g,
        };
        let key = format!("{name}_{seq}@{group}");
        *seq += 1;
        self.comm_ops.entry(step).or_default().push(CommOp {
            key,
            p2p: c.peer.is_some(),
            start: c.start,
            dur,
            wait: c.wait_ns.min(dur),
            bytes: c.bytes,
            name,
            peer: c.peer,
        });
    }

    fn memory_rows(
        &mut self,
        m: &MemEv,
        released: Option<crate::memory::Live>,
    ) -> Result<(), ExportError> {
        if let Some(w) = self.w.mem_record.as_mut() {
            let a = self.mem.allocated as f64 / MIB;
            w.raw(b"PTA");
            w.us(m.ts);
            w.fixed(a, 6);
            w.fixed(self.mem.reserved() as f64 / MIB, 6);
            w.fixed(a, 6);
            w.empty();
            w.raw(b"CPU");
            w.end_row()?;
        }
        if let (Some(l), true) = (released, m.free) {
            let after = self.mem.allocated;
            self.op_memory_row(l, Some((m.ts, after)))?;
        }
        Ok(())
    }

    fn op_memory_row(
        &mut self,
        l: crate::memory::Live,
        release: Option<(u64, u64)>,
    ) -> Result<(), ExportError> {
        let Some(w) = self.w.op_memory.as_mut() else {
            return Ok(());
        };
        let name = self.idx.name(l.op);
        w.str(if name.is_empty() { "unknown" } else { name });
        w.fixed(l.bytes as f64 / 1024.0, 3);
        w.us(l.ts);
        match release {
            Some((t, _)) => {
                w.us(t);
                w.us(t);
                w.us(t.saturating_sub(l.ts));
                w.us(t.saturating_sub(l.ts));
            }
            None => (0..4).for_each(|_| w.empty()),
        }
        let at = l.total_at_alloc as f64 / MIB;
        (0..3).for_each(|_| w.fixed(at, 6));
        match release {
            Some((_, total)) => (0..3).for_each(|_| w.fixed(total as f64 / MIB, 6)),
            None => (0..3).for_each(|_| w.empty()),
        }
        w.empty();
        w.raw(b"CPU");
        w.end_row()
    }

    fn finish(mut self, files: &[&str], mut trace: TraceWriter) -> Result<(), ExportError> {
        if let Some(e) = self.err.take() {
            return Err(e);
        }
        let mut live: Vec<crate::memory::Live> = self.mem.live.values().copied().collect();
        live.sort_by_key(|l| l.ts);
        for l in live {
            self.op_memory_row(l, None)?;
        }
        let dir = self.w.out_dir.clone();
        let csv_err = |p: &Path| {
            let path = p.to_path_buf();
            move |source: std::io::Error| ExportError::Io { path, source }
        };
        for w in [
            self.w.kernels.take(),
            self.w.mem_record.take(),
            self.w.op_memory.take(),
        ]
        .into_iter()
        .flatten()
        {
            w.finish()?;
        }
        trace.stream_metadata();
        let trace_path = dir.join("trace_view.json");
        let mut bw = trace.finish("\n]\n").map_err(csv_err(&trace_path))?;
        std::io::Write::flush(&mut bw).map_err(csv_err(&trace_path))?;
        let has = |f: &str| files.contains(&f);
        if has("step_trace_time.csv") {
            self.write_step_trace(&dir)?;
        }
        if has("operator_details.csv") {
            self.write_operator_details(&dir)?;
        }
        if has("op_statistic.csv") {
            self.write_op_statistic(&dir)?;
        }
        if has("api_statistic.csv") {
            self.write_api_statistic(&dir)?;
        }
        if has("communication.json") {
            let (c, m) = self.communication();
            write_json(&dir.join("communication.json"), &c)?;
            write_json(&dir.join("communication_matrix.json"), &m)?;
        }
        Ok(())
    }

    fn write_rows(
        dir: &Path,
        name: &str,
        header: &[&str],
        rows: Vec<Vec<String>>,
    ) -> Result<(), ExportError> {
        let path = dir.join(name);
        let mut w = csv_writer(&path, header)?;
        for r in rows {
            w.write_record(&r).map_err(|source| ExportError::Csv {
                path: path.clone(),
                source,
            })?;
        }
        w.flush().map_err(ExportError::io(&path))
    }

    fn write_step_trace(&self, dir: &Path) -> Result<(), ExportError> {
        let mut rows = Vec::new();
        for s in &self.idx.steps {
            let a = self.steps.get(&s.step).copied().unwrap_or_default();
            let (v, preparing) = step_trace_row(s, &a);
            let mut row = vec!["0".to_string(), s.step.to_string()];
            row.extend(v.iter().map(|&ns| us(ns)));
            row.push(preparing.map(us).unwrap_or_default());
            rows.push(row);
        }
        Self::write_rows(dir, "step_trace_time.csv", &STEP_TRACE, rows)
    }

    fn write_operator_details(&self, dir: &Path) -> Result<(), ExportError> {
        let idx = self.idx;
        let mut keys: Vec<_> = self.ops.iter().collect();
        keys.sort_by(|a, b| b.1.host_total.cmp(&a.1.host_total).then(a.0.cmp(b.0)));
        let dev = self.level >= 0 && idx.meta.has(Content::Npu);
        let rows = keys
            .into_iter()
            .map(|((name, shapes, stack), a)| {
                vec![
                    idx.name(*name).to_string(),
                    idx.name(*shapes).to_string(),
                    idx.name(*stack).to_string(),
                    us(a.host_self),
                    us(a.host_total),
                    if dev { us(a.dev_self) } else { String::new() },
                    if dev { us(a.dev_total) } else { String::new() },
                    String::new(),
                    String::new(),
                ]
            })
            .collect();
        Self::write_rows(dir, "operator_details.csv", &OPERATOR_DETAILS, rows)
    }

    fn write_op_statistic(&self, dir: &Path) -> Result<(), ExportError> {
        let idx = self.idx;
        let mut v: Vec<_> = self.op_stat.iter().collect();
        v.sort_by(|a, b| b.1.total.cmp(&a.1.total).then(a.0.cmp(b.0)));
        let total = self.kernel_total.max(1) as f64;
        let rows = v
            .into_iter()
            .map(|(name, s)| {
                vec![
                    idx.name(*name).to_string(),
                    "CPU".into(),
                    s.count.to_string(),
                    us(s.total),
                    us(s.min),
                    us(s.avg()),
                    us(s.max),
                    format!("{:.2}", s.total as f64 * 100.0 / total),
                ]
            })
            .collect();
        Self::write_rows(dir, "op_statistic.csv", &OP_STATISTIC, rows)
    }

    fn write_api_statistic(&self, dir: &Path) -> Result<(), ExportError> {
        let idx = self.idx;
        let mut v: Vec<_> = self.api_stat.iter().collect();
        v.sort_by(|a, b| b.1.total.cmp(&a.1.total).then(a.0.cmp(b.0)));
        let rows = v
            .into_iter()
            .map(|((cat, name), s)| {
                vec![
                    if *cat == RangeCat::Runtime as u8 {
                        "runtime"
                    } else {
                        "api"
                    }
                    .to_string(),
                    idx.name(*name).to_string(),
                    us(s.total),
                    s.count.to_string(),
                    us(s.avg()),
                    us(s.min),
                    us(s.max),
                    format!("{:.6}", s.variance_us2()),
                ]
            })
            .collect();
        Self::write_rows(dir, "api_statistic.csv", &API_STATISTIC, rows)
    }

    fn communication(&self) -> (Value, Value) {
        let rank = self.idx.meta.rank;
        let mut comm = Map::new();
        let mut matrix = Map::new();
        for s in self.idx.steps.iter().map(|s| s.step) {
            comm.insert(format!("step{s}"), json!({"collective": {}, "p2p": {}}));
            matrix.insert(format!("step{s}"), json!({"collective": {}, "p2p": {}}));
        }
        for (step, ops) in &self.comm_ops {
            let sk = format!("step{step}");
            let c = comm
                .entry(sk.clone())
                .or_insert_with(|| json!({"collective": {}, "p2p": {}}));
            for op in ops {
                let kind = if op.p2p { "p2p" } else { "collective" };
                let ms = |ns: u64| ns as f64 / 1e6;
                let transit = op.dur - op.wait;
                let size_mb = op.bytes as f64 / 1e6;
                let bw = if transit > 0 {
                    size_mb / ms(transit)
                } else {
                    0.0
                };
                let link = "HCCS";
                c[kind][&op.key] = json!({
                    "Communication Time Info": {
                        "Start Timestamp(us)": op.start as f64 / 1000.0,
                        "Elapse Time(ms)": ms(op.dur),
                        "Transit Time(ms)": ms(transit),
                        "Wait Time(ms)": ms(op.wait),
                        "Synchronization Time(ms)": ms(op.wait),
                        "Idle Time(ms)": 0.0,
                        "Wait Time Ratio": if op.dur > 0 { op.wait as f64 / op.dur as f64 } else { 0.0 },
                        "Synchronization Time Ratio": if op.dur > 0 { op.wait as f64 / op.dur as f64 } else { 0.0 },
                    },
                    "Communication Bandwidth Info": {
                        link: {
                            "Transit Size(MB)": size_mb,
                            "Transit Time(ms)": ms(transit),
                            "Bandwidth(GB/s)": bw,
                            "Large Packet Ratio": if op.bytes >= 10 << 20 { 1.0 } else { 0.0 },
                            "Size Distribution": { format!("{size_mb}"): [1, ms(transit)] },
                        }
                    }
                });
                let m = matrix
                    .entry(sk.clone())
                    .or_insert_with(|| json!({"collective": {}, "p2p": {}}));
                let dst = op.peer.map_or(rank, |p| p as u32);
                m[kind][&op.key] = json!({
                    format!("{rank}-{dst}"): {
                        "Transport Type": "LOCAL",
                        "Transit Size(MB)": size_mb,
                        "Transit Time(ms)": ms(transit),
                        "Bandwidth(GB/s)": bw,
                        "Op Name": op.name,
                    }
                });
            }
        }
        (Value::Object(comm), Value::Object(matrix))
    }
}

/// Length of `[start, end)` covered by the sorted, possibly overlapping `spans`.
pub(crate) fn overlap(spans: &[(u64, u64)], start: u64, end: u64) -> u64 {
    let mut i = spans.partition_point(|s| s.1 <= start);
    // Spans sorted by start; a span starting earlier but ending later may precede i.
    i = i.saturating_sub(16).min(i);
    let mut covered = 0;
    let mut cursor = start;
    for &(s, e) in &spans[i..] {
        if s >= end {
            break;
        }
        let (a, b) = (s.max(cursor), e.min(end));
        if b > a {
            covered += b - a;
            cursor = b;
        }
    }
    covered
}
