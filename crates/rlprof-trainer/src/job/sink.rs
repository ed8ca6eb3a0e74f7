//! Rank 0's event delivery: the metrics JSONL file, the caller's callbacks and the summary's
//! list of step metrics.

use super::Event;
use crate::error::{Result, TrainerError};
use crate::{RunOptions, StepMetrics};
use std::io::Write;

/// Delivers rank 0's events: metrics file, the caller's callbacks, the summary's list. A write
/// failure is kept and returned by [`EventSink::finish`], after the ranks have been joined.
pub(super) struct EventSink<'a> {
    opts: &'a RunOptions,
    writer: Option<MetricsWriter>,
    metrics: Vec<StepMetrics>,
    error: Option<TrainerError>,
}

impl<'a> EventSink<'a> {
    pub(super) fn new(opts: &'a RunOptions, writer: Option<MetricsWriter>) -> EventSink<'a> {
        EventSink {
            opts,
            writer,
            metrics: Vec::new(),
            error: None,
        }
    }

    pub(super) fn deliver(&mut self, ev: Event) {
        match ev {
            Event::Warmup(s, t, loss) => {
                if let Some(cb) = &self.opts.on_warmup {
                    cb(s, t, loss);
                }
            }
            Event::Step(m) => {
                if let Some(Err(e)) = self.writer.as_mut().map(|w| w.write(&m)) {
                    self.error.get_or_insert(e);
                }
                if let Some(cb) = &self.opts.on_step {
                    cb(&m);
                }
                self.metrics.push(m);
            }
        }
    }

    pub(super) fn finish(self) -> Result<Vec<StepMetrics>> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.metrics),
        }
    }
}

/// Per-step metrics as JSON lines (verl's metric names plus `step`, `timing_s/*`).
pub(super) struct MetricsWriter {
    file: std::fs::File,
    path: std::path::PathBuf,
}

impl MetricsWriter {
    pub(super) fn create(path: &std::path::Path) -> Result<MetricsWriter> {
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d).map_err(|e| TrainerError::io(d, e))?;
        }
        // A new file only: another run's metrics are never truncated.
        let file = std::fs::File::options()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| TrainerError::io(path, e))?;
        Ok(MetricsWriter {
            file,
            path: path.to_path_buf(),
        })
    }

    pub(super) fn write(&mut self, m: &StepMetrics) -> Result<()> {
        let mut obj = serde_json::Map::new();
        obj.insert("step".into(), m.step.into());
        for (k, v) in &m.values {
            obj.insert(k.clone(), (*v).into());
        }
        for (k, v) in &m.timing_s {
            obj.insert(format!("timing_s/{k}"), (*v).into());
        }
        obj.insert("perf/throughput".into(), m.tokens_per_s.into());
        let line = serde_json::Value::Object(obj).to_string();
        writeln!(self.file, "{line}").map_err(|e| TrainerError::io(&self.path, e))
    }
}
