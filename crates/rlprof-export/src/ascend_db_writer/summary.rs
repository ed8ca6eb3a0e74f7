//! Per-step and per-collective figures of one rank, summed while the events stream by, and
//! written into `analysis.db`. The formulas are the text layout's (`step_trace_time.csv`,
//! `communication*.json` in [`crate::npu`]), so both layouts give msprof-analyze the same
//! numbers.

use super::schema as s;
use crate::decode::{CommEv, Index, KernelEv};
use crate::npu::{StepTimeline, step_trace_row};
use crate::sqlite_file::{Database, Value};
use std::collections::{BTreeMap, HashMap};
use std::io;

/// The device timeline behind `StepTraceTime` (the text layout's `step_trace_time.csv`).
#[derive(Default)]
pub struct StepSums {
    timeline: StepTimeline,
}

impl StepSums {
    /// An empty timeline.
    pub fn new() -> StepSums {
        StepSums::default()
    }

    /// Adds a kernel.
    #[inline]
    pub fn kernel(&mut self, k: &KernelEv) {
        self.timeline.kernel(k.start, k.end);
    }

    /// Adds a communication op.
    pub fn comm(&mut self, idx: &Index, c: &CommEv) {
        self.timeline.comm(idx.name(c.name), c.start, c.end);
    }

    /// Writes `StepTraceTime` (us, as the text layout's CSV).
    pub fn write(self, db: &mut Database, idx: &Index) -> io::Result<()> {
        let table = db.table_index(s::STEP_TRACE_TIME.name);
        let figures = self.timeline.rows(&idx.steps);
        for (span, f) in idx.steps.iter().zip(&figures) {
            let (v, preparing) = step_trace_row(f);
            let us = |ns: u64| ns as f64 / 1000.0;
            let step = span.step.to_string();
            let mut row = vec![Value::Text(&step)];
            row.extend(v.iter().map(|ns| Value::Real(us(*ns))));
            row.push(preparing.map(us).into());
            db.insert(table, &row)?;
        }
        Ok(())
    }
}

/// One collective instance.
struct Op {
    key: String,
    group: String,
    name: String,
    p2p: bool,
    start: u64,
    dur: u64,
    wait: u64,
    bytes: u64,
    peer: Option<u16>,
}

/// The collectives of one rank by step (kept only at level1 and up, as the text layout's
/// `communication.json`).
pub struct CommFigures {
    on: bool,
    ops: BTreeMap<u64, Vec<Op>>,
    seq: HashMap<(u64, u32, u32), u64>,
}

impl CommFigures {
    /// Figures are kept when `on`.
    pub fn new(on: bool) -> CommFigures {
        CommFigures {
            on,
            ops: BTreeMap::new(),
            seq: HashMap::new(),
        }
    }

    /// Adds a communication op.
    pub fn comm(&mut self, idx: &Index, c: &CommEv) {
        if !self.on {
            return;
        }
        let step = idx.step_at(c.start).unwrap_or(0);
        let seq = self.seq.entry((step, c.name, c.group)).or_default();
        let name = idx.name(c.name).to_string();
        let group = match idx.name(c.group) {
            "" => "default_group",
            g => g,
        };
        let dur = c.end - c.start;
        self.ops.entry(step).or_default().push(Op {
            key: format!("{name}_{seq}"),
            group: group.to_string(),
            name,
            p2p: c.peer.is_some(),
            start: c.start,
            dur,
            wait: c.wait_ns.min(dur),
            bytes: c.bytes,
            peer: c.peer,
        });
        *seq += 1;
    }

    /// Writes `CommAnalyzerTime`, `CommAnalyzerBandwidth` and `CommAnalyzerMatrix`.
    pub fn write(&self, db: &mut Database, rank: u32) -> io::Result<()> {
        let time = db.table_index(s::COMM_ANALYZER_TIME.name);
        let band = db.table_index(s::COMM_ANALYZER_BANDWIDTH.name);
        let matrix = db.table_index(s::COMM_ANALYZER_MATRIX.name);
        let ms = |ns: u64| ns as f64 / 1e6;
        for (step, ops) in &self.ops {
            let step = format!("step{step}");
            for op in ops {
                let kind = if op.p2p { "p2p" } else { "collective" };
                let transit = op.dur - op.wait;
                let size_mb = op.bytes as f64 / 1e6;
                // GB/s = MB/ms, as msprof-analyze reads it.
                let bw = rlprof_profiler::metrics::bandwidth_gbps(op.bytes, transit).unwrap_or(0.0);
                let time_row = [
                    Value::Text(&op.key),
                    Value::Text(&op.group),
                    Value::Real(op.start as f64 / 1000.0),
                    Value::Real(ms(op.dur)),
                    Value::Real(ms(transit)),
                    Value::Real(ms(op.wait)),
                    Value::Real(ms(op.wait)),
                    Value::Real(0.0),
                    Value::Text(&step),
                    Value::Text(kind),
                ];
                db.insert(time, &time_row)?;
                let large = if op.bytes >= 10 << 20 { 1.0 } else { 0.0 };
                let band_row = [
                    Value::Text(&op.key),
                    Value::Text(&op.group),
                    Value::Text("HCCS"),
                    Value::Real(size_mb),
                    Value::Real(ms(transit)),
                    Value::Real(bw),
                    Value::Real(large),
                    Value::Real(size_mb),
                    Value::Int(1),
                    Value::Real(ms(transit)),
                    Value::Text(&step),
                    Value::Text(kind),
                ];
                db.insert(band, &band_row)?;
                let dst = op.peer.map_or(rank, |p| p as u32);
                let (src, dst) = (rank.to_string(), dst.to_string());
                let matrix_row = [
                    Value::Text(&op.key),
                    Value::Text(&op.group),
                    Value::Text(&src),
                    Value::Text(&dst),
                    Value::Text("LOCAL"),
                    Value::Real(size_mb),
                    Value::Real(ms(transit)),
                    Value::Real(bw),
                    Value::Text(&step),
                    Value::Text(kind),
                    Value::Text(&op.name),
                ];
                db.insert(matrix, &matrix_row)?;
            }
        }
        Ok(())
    }
}
