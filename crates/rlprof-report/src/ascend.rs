//! Foreign Ascend profiler output: `*_ascend_pt/ASCEND_PROFILER_OUTPUT/`.
//!
//! `trace_view.json` (a bare array of Chrome events; device kernels live in the process named
//! `Ascend Hardware`, collectives in `Communication`) gives the timeline. Without it, kernels come
//! from `kernel_details.csv` (`Name`, `Type`, `Start Time(us)`, `Duration(us)`). The per-step
//! `step_trace_time.csv` and per-type `op_statistic.csv` are shown as tables as found. The rank is
//! taken from `profiler_info_{rank}.json` in the `*_ascend_pt` directory.

use crate::chrome::{self, Limits};
use crate::error::ReportError;
use crate::model::{Event, Profile, SourceFormat, Table, Track, NONE};
use std::path::Path;

/// Loads an `ASCEND_PROFILER_OUTPUT` directory.
pub fn load_ascend(out_dir: &Path, group: &str, limits: &Limits) -> Result<Profile, ReportError> {
    let mut p = Profile::new(
        out_dir.to_path_buf(),
        SourceFormat::Ascend,
        out_dir.parent().and_then(rank_of).unwrap_or(0),
        group.to_string(),
    );
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
    for name in ["step_trace_time.csv", "op_statistic.csv"] {
        let f = out_dir.join(name);
        if f.is_file() {
            let t = read_table(&f, limits)?;
            p.tables.push(t);
        }
    }
    p.sort();
    Ok(p)
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

/// Kernels from `kernel_details.csv`.
fn load_kernel_details(path: &Path, p: &mut Profile, limits: &Limits) -> Result<(), ReportError> {
    let t = read_table(path, limits)?;
    let col = |n: &str| t.columns.iter().position(|c| c == n);
    let (Some(name), Some(start), Some(dur)) =
        (col("Name"), col("Start Time(us)"), col("Duration(us)"))
    else {
        return Err(malformed(
            path,
            "missing one of the columns Name, Start Time(us), Duration(us)",
        ));
    };
    let us = |s: &str| (s.trim().parse::<f64>().unwrap_or(0.0) * 1000.0).round() as i64;
    for (i, row) in t.rows.iter().enumerate() {
        if i as u64 >= limits.max_events {
            return Err(ReportError::Limit {
                path: path.to_path_buf(),
                what: "events",
                limit: limits.max_events,
            });
        }
        let get = |c: usize| row.get(c).map(String::as_str).unwrap_or("");
        let n = p.intern(get(name));
        p.events.push(Event {
            start: us(get(start)),
            dur: us(get(dur)).max(0),
            name: n,
            detail: NONE,
            thread: 0,
            depth: 0,
            track: Track::Kernel,
        });
    }
    p.threads = vec!["Ascend Hardware".into()];
    Ok(())
}
