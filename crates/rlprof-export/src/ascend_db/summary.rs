//! Per-step and per-collective figures of one rank, summed while the events stream by, and
//! written into `analysis.db`. The formulas are the text layout's (`step_trace_time.csv`,
//! `communication*.json` in [`crate::npu`]), so both layouts give msprof-analyze the same
//! numbers.

use super::schema as s;
use crate::decode::{CommEv, Index, KernelEv};
use crate::npu::{overlap, step_trace_row};
use rusqlite::{Connection, params};
use std::collections::{BTreeMap, HashMap};

/// Per-step sums (the same sums as the text layout's `step_trace_time.csv`).
pub struct StepSums {
    steps: BTreeMap<u64, crate::npu::StepAgg>,
}

impl StepSums {
    /// One empty sum per step of `idx`.
    pub fn new(idx: &Index) -> StepSums {
        StepSums {
            steps: idx
                .steps
                .iter()
                .map(|s| (s.step, Default::default()))
                .collect(),
        }
    }

    /// Adds a kernel.
    #[inline]
    pub fn kernel(&mut self, idx: &Index, k: &KernelEv) {
        let Some(a) = idx.step_at(k.start).and_then(|s| self.steps.get_mut(&s)) else {
            return;
        };
        a.computing += k.end - k.start;
        a.overlapped += overlap(&idx.comm_spans, k.start, k.end);
        a.first_kernel = Some(a.first_kernel.map_or(k.start, |f| f.min(k.start)));
    }

    /// Adds a communication op.
    pub fn comm(&mut self, idx: &Index, c: &CommEv) {
        let step = idx.step_at(c.start).unwrap_or(0);
        let Some(a) = self.steps.get_mut(&step) else {
            return;
        };
        let dur = c.end - c.start;
        a.comm += dur;
        if is_recv(idx.name(c.name)) {
            a.recv += dur;
        }
    }

    /// Writes `StepTraceTime` (us, as the text layout's CSV).
    pub fn write(&self, conn: &Connection, idx: &Index) -> rusqlite::Result<()> {
        let mut st = conn.prepare(&s::STEP_TRACE_TIME.insert_sql())?;
        for span in &idx.steps {
            let a = self.steps.get(&span.step).copied().unwrap_or_default();
            let (v, preparing) = step_trace_row(span, &a);
            let us = |ns: u64| ns as f64 / 1000.0;
            st.execute(params![
                span.step.to_string(),
                us(v[0]),
                us(v[1]),
                us(v[2]),
                us(v[3]),
                us(v[4]),
                us(v[5]),
                us(v[6]),
                us(v[7]),
                preparing.map(us),
            ])?;
        }
        Ok(())
    }
}

fn is_recv(name: &str) -> bool {
    name.contains("recv") || name.contains("receive")
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
    pub fn write(&self, conn: &Connection, rank: u32) -> rusqlite::Result<()> {
        let mut time = conn.prepare(&s::COMM_ANALYZER_TIME.insert_sql())?;
        let mut band = conn.prepare(&s::COMM_ANALYZER_BANDWIDTH.insert_sql())?;
        let mut matrix = conn.prepare(&s::COMM_ANALYZER_MATRIX.insert_sql())?;
        let ms = |ns: u64| ns as f64 / 1e6;
        for (step, ops) in &self.ops {
            let step = format!("step{step}");
            for op in ops {
                let kind = if op.p2p { "p2p" } else { "collective" };
                let transit = op.dur - op.wait;
                let size_mb = op.bytes as f64 / 1e6;
                let bw = if transit > 0 {
                    size_mb / ms(transit)
                } else {
                    0.0
                };
                time.execute(params![
                    op.key,
                    op.group,
                    op.start as f64 / 1000.0,
                    ms(op.dur),
                    ms(transit),
                    ms(op.wait),
                    ms(op.wait),
                    0.0,
                    step,
                    kind,
                ])?;
                let large = if op.bytes >= 10 << 20 { 1.0 } else { 0.0 };
                band.execute(params![
                    op.key,
                    op.group,
                    "HCCS",
                    size_mb,
                    ms(transit),
                    bw,
                    large,
                    size_mb,
                    1,
                    ms(transit),
                    step,
                    kind,
                ])?;
                let dst = op.peer.map_or(rank, |p| p as u32);
                matrix.execute(params![
                    op.key,
                    op.group,
                    rank.to_string(),
                    dst.to_string(),
                    "LOCAL",
                    size_mb,
                    ms(transit),
                    bw,
                    step,
                    kind,
                    op.name,
                ])?;
            }
        }
        Ok(())
    }
}
