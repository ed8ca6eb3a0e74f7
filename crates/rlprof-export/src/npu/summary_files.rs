//! The end of the text export: the files written from the sums of the whole pass
//! (`step_trace_time.csv`, `operator_details.csv`, `op_statistic.csv`, `api_statistic.csv`,
//! `communication.json`, `communication_matrix.json`) and the closing of `trace_view.json`.

use super::columns::{API_STATISTIC, OP_STATISTIC, OPERATOR_DETAILS, STEP_TRACE, csv_writer, us};
use super::exporter::{Exporter, step_trace_row};
use super::info::write_json;
use super::trace_feed::TraceWriter;
use crate::ExportError;
use rlprof_profiler::plan::Content;
use rlprof_profiler::record::RangeCat;
use serde_json::{Map, Value, json};
use std::path::Path;

impl<'a> Exporter<'a> {
    pub(super) fn finish(
        mut self,
        files: &[&str],
        mut trace: TraceWriter,
    ) -> Result<(), ExportError> {
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

    fn write_step_trace(&mut self, dir: &Path) -> Result<(), ExportError> {
        let mut rows = Vec::new();
        let figures = std::mem::take(&mut self.steps).rows(&self.idx.steps);
        for (s, f) in self.idx.steps.iter().zip(&figures) {
            let (v, preparing) = step_trace_row(f);
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
                // GB/s = MB/ms, as msprof-analyze reads it.
                let bw = rlprof_profiler::metrics::bandwidth_gbps(op.bytes, transit).unwrap_or(0.0);
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
