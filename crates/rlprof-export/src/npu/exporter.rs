//! The per-event half of the text export: each attributed event becomes its CSV rows
//! (`kernel_details.csv`, the memory files) and its share of the statistics, steps and
//! collectives that [`super::summary_files`] writes at the end.

use super::columns::{MEMORY_RECORD, OPERATOR_MEMORY, csv_name};
use super::matrix::{kernel_header, level_rank};
use super::trace_feed::TraceFeed;
use crate::ExportError;
use crate::attrib::{Out, RangeInfo};
use crate::decode::{CommEv, Event, Index, KernelEv, MemEv};
use crate::dense::{DenseMap, FastMap};
use crate::memory::MemTracker;
use crate::rows::CsvOut;
use rlprof_profiler::metrics::cann;
use rlprof_profiler::metrics::intervals::Union;
use rlprof_profiler::plan::Content;
use rlprof_profiler::record::RangeCat;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// Bytes per MiB.
pub(super) const MIB: f64 = 1024.0 * 1024.0;

#[derive(Default, Clone, Copy)]
pub(super) struct Stat {
    pub(super) count: u64,
    pub(super) total: u64,
    pub(super) min: u64,
    pub(super) max: u64,
    pub(super) sumsq: f64,
}

impl Stat {
    pub(super) fn add(&mut self, d: u64) {
        if self.count == 0 || d < self.min {
            self.min = d;
        }
        self.max = self.max.max(d);
        self.count += 1;
        self.total += d;
        let x = d as f64 / 1000.0;
        self.sumsq += x * x;
    }
    pub(super) fn avg(&self) -> u64 {
        self.total / self.count.max(1)
    }
    pub(super) fn variance_us2(&self) -> f64 {
        let n = self.count.max(1) as f64;
        let m = self.total as f64 / 1000.0 / n;
        (self.sumsq / n - m * m).max(0.0)
    }
}

#[derive(Default, Clone, Copy)]
pub(super) struct OpAgg {
    pub(super) host_self: u64,
    pub(super) host_total: u64,
    pub(super) dev_self: u64,
    pub(super) dev_total: u64,
}

/// The device timeline behind `step_trace_time.csv` (and the DB layout's `StepTraceTime`):
/// the kernels' and collectives' intervals as the events stream by, turned into CANN's step
/// figures by [`rlprof_profiler::metrics::cann`], the rules the report applies to any profile
/// without those tables.
#[derive(Default)]
pub(crate) struct StepTimeline {
    compute: Vec<(i64, i64)>,
    comm: Vec<(i64, i64)>,
    receive: Vec<(i64, i64)>,
}

impl StepTimeline {
    /// A kernel `[start, end)` (wall ns).
    pub(crate) fn kernel(&mut self, start: u64, end: u64) {
        self.compute.push((start as i64, end as i64));
    }

    /// A collective named `name`, `[start, end)` (wall ns).
    pub(crate) fn comm(&mut self, name: &str, start: u64, end: u64) {
        let iv = (start as i64, end as i64);
        self.comm.push(iv);
        if cann::is_receive(name) {
            self.receive.push(iv);
        }
    }

    /// Each step of `steps` (host windows, in start order) with its figures (zero where the
    /// step has no device activity).
    pub(crate) fn rows(mut self, steps: &[crate::decode::StepSpan]) -> Vec<cann::StepFigures> {
        for v in [&mut self.compute, &mut self.comm, &mut self.receive] {
            // Per thread the events come in completion order, nearly in start order: the
            // stable sort finds those runs and merges them.
            if !v.is_sorted() {
                v.sort();
            }
        }
        let starts: Vec<i64> = steps.iter().map(|s| s.start as i64).collect();
        let (compute, comm) = (&self.compute, &self.comm);
        cann::step_figures(
            || Union::new(compute.iter().copied()),
            || Union::new(comm.iter().copied()),
            &self.receive,
            &starts,
        )
        .into_iter()
        .map(Option::unwrap_or_default)
        .collect()
    }
}

/// A step's figures as `step_trace_time`'s eight figure columns, and `Preparing`.
pub(crate) fn step_trace_row(f: &cann::StepFigures) -> ([u64; 8], Option<u64>) {
    (
        [
            f.computing,
            f.communication_not_overlapped,
            f.overlapped,
            f.communication,
            f.free,
            f.stage,
            f.bubble,
            f.communication_not_overlapped_exclude_receive,
        ],
        f.preparing,
    )
}

/// One collective instance for communication*.json.
pub(super) struct CommOp {
    pub(super) key: String,
    pub(super) p2p: bool,
    pub(super) start: u64,
    pub(super) dur: u64,
    pub(super) wait: u64,
    pub(super) bytes: u64,
    pub(super) name: String,
    pub(super) peer: Option<u16>,
}

pub(super) struct Writers {
    pub(super) out_dir: PathBuf,
    pub(super) trace: TraceFeed,
    pub(super) kernels: Option<CsvOut>,
    pub(super) mem_record: Option<CsvOut>,
    pub(super) op_memory: Option<CsvOut>,
    /// CSV text of names by id (escaped once).
    pub(super) csv_names: DenseMap<Box<[u8]>>,
}

pub(super) struct Exporter<'a> {
    pub(super) idx: &'a Index,
    pub(super) w: Writers,
    pub(super) level: i32,
    pub(super) shapes: bool,
    pub(super) steps_marked: bool,
    pub(super) mem: MemTracker,
    pub(super) op_stat: FastMap<u32, Stat>,
    pub(super) api_stat: FastMap<(u8, u32), Stat>,
    pub(super) ops: FastMap<(u32, u32, u32), OpAgg>,
    pub(super) steps: StepTimeline,
    pub(super) last_end: FastMap<(u32, u16), u64>,
    pub(super) comm_ops: BTreeMap<u64, Vec<CommOp>>,
    pub(super) comm_seq: HashMap<(u64, u32, u32), u64>,
    pub(super) kernel_total: u64,
    pub(super) err: Option<ExportError>,
}

impl<'a> Exporter<'a> {
    pub(super) fn new(
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
            steps: StepTimeline::default(),
            last_end: FastMap::default(),
            comm_ops: BTreeMap::new(),
            comm_seq: HashMap::new(),
            kernel_total: 0,
            err: None,
        })
    }

    pub(super) fn push(&mut self, o: &Out) {
        if self.err.is_some() {
            return;
        }
        if let Err(e) = self.push_inner(o) {
            self.err = Some(e);
        }
    }

    pub(super) fn push_inner(&mut self, o: &Out) -> Result<(), ExportError> {
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

    pub(super) fn range(&mut self, ri: &RangeInfo) {
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

    pub(super) fn kernel(
        &mut self,
        k: &KernelEv,
        op: Option<&crate::decode::RangeEv>,
    ) -> Result<(), ExportError> {
        let idx = self.idx;
        let dur = k.end - k.start;
        self.kernel_total += dur;
        self.op_stat.entry(k.name).or_default().add(dur);
        let step = idx.step_at(k.start);
        self.steps.kernel(k.start, k.end);
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

    pub(super) fn comm(&mut self, c: &CommEv) {
        let idx = self.idx;
        self.steps.comm(idx.name(c.name), c.start, c.end);
        if self.level < 1 {
            return;
        }
        let step = idx.step_at(c.start).unwrap_or(0);
        let dur = c.end - c.start;
        let name = idx.name(c.name).to_string();
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

    pub(super) fn memory_rows(
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

    pub(super) fn op_memory_row(
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
}
