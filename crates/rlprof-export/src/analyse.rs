//! The analysis driver: parse one collection, or every unparsed collection below a path.
//!
//! A collection is a directory holding `rlprof_raw/rank_{rank}.rlraw` whose name does not end
//! in `.tmp` (the profiler renames it when the collection stops). Parsing is idempotent: when it
//! succeeds, a marker file [`MARKER`] (JSON: outputs, counts, warnings) is written last, and a
//! collection with the marker is skipped. Outputs are written under temporary names and renamed
//! into place, so an interrupted run leaves no half-written output that looks complete; the
//! next run redoes the collection.
//!
//! Damaged raw data: the valid chunks are parsed, and a warning naming the file and the byte
//! offset where valid data ends goes into [`WARNINGS`] in the collection directory (and the
//! marker). Only when no raw file of the collection has anything recoverable is it an error.

use crate::decode::{Counts, Index};
use crate::ExportError;
use rayon::prelude::*;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Marker written into a collection directory once it is parsed.
pub const MARKER: &str = "rlprof_analysis.json";
/// Warnings about damaged or truncated raw data.
pub const WARNINGS: &str = "rlprof_warnings.txt";

/// What parsing one raw file produced.
#[derive(Debug, Clone, Serialize)]
pub struct RankReport {
    /// Rank.
    pub rank: u32,
    /// The raw file.
    pub raw_file: PathBuf,
    /// Records read by kind.
    pub counts: Counts,
    /// Bytes of valid raw data.
    pub valid_bytes: u64,
    /// Output files written.
    pub outputs: Vec<PathBuf>,
}

/// What parsing a collection produced.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The collection directory.
    pub dir: PathBuf,
    /// The tool the data was collected for.
    pub tool: String,
    /// Per raw file.
    pub ranks: Vec<RankReport>,
    /// Warnings (damaged data with file and byte offset, truncation by caps).
    pub warnings: Vec<String>,
    /// True when the collection had been parsed before and nothing was done.
    pub already_done: bool,
}

/// The result for one collection of a tree.
#[derive(Debug)]
pub enum Outcome {
    /// Parsed now.
    Parsed(Report),
    /// Parsed by an earlier run; skipped.
    AlreadyDone(PathBuf),
    /// Failed (nothing recoverable, unwritable output, ...).
    Failed(PathBuf, ExportError),
}

/// Progress of [`analyse_tree`].
#[derive(Debug)]
pub enum TreeEvent<'a> {
    /// Collections found (`total`) and how many of them still need parsing.
    Found {
        /// All collections below the path.
        total: usize,
        /// Not yet parsed.
        todo: usize,
    },
    /// One collection finished.
    Finished(&'a Outcome),
}

/// The result of [`analyse_tree`].
#[derive(Debug, Default)]
pub struct TreeReport {
    /// Collections found below the path.
    pub found: usize,
    /// Outcomes of the collections that were not already parsed, and the skipped ones.
    pub outcomes: Vec<Outcome>,
}

impl TreeReport {
    /// Collections parsed now.
    pub fn parsed(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Parsed(_)))
    }
    /// Collections skipped because an earlier run parsed them.
    pub fn skipped(&self) -> usize {
        self.count(|o| matches!(o, Outcome::AlreadyDone(_)))
    }
    /// Collections that failed.
    pub fn failed(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Failed(..)))
    }
    fn count(&self, f: impl Fn(&Outcome) -> bool) -> usize {
        self.outcomes.iter().filter(|o| f(o)).count()
    }
}

/// The raw files of a collection directory, sorted by rank.
pub fn raw_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir.join("rlprof_raw")) else {
        return Vec::new();
    };
    let mut v: Vec<(u64, PathBuf)> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let rank = name
                .strip_prefix("rank_")?
                .strip_suffix(".rlraw")?
                .parse()
                .ok()?;
            Some((rank, e.path()))
        })
        .collect();
    v.sort();
    v.into_iter().map(|(_, p)| p).collect()
}

/// Whether `dir` is a complete collection directory.
pub fn is_collection(dir: &Path) -> bool {
    let tmp = dir
        .file_name()
        .is_some_and(|n| n.to_string_lossy().ends_with(".tmp"));
    !tmp && !raw_files(dir).is_empty()
}

/// Whether a collection was parsed already.
pub fn is_parsed(dir: &Path) -> bool {
    dir.join(MARKER).is_file()
}

/// Every collection directory at or below `path`, sorted.
pub fn find_collections(path: &Path) -> Result<Vec<PathBuf>, ExportError> {
    if !path.exists() {
        return Err(ExportError::Missing(path.to_path_buf()));
    }
    let mut out = Vec::new();
    let mut stack = vec![path.to_path_buf()];
    while let Some(d) = stack.pop() {
        if is_collection(&d) {
            out.push(d);
            continue;
        }
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.filter_map(|e| e.ok()) {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Parses one collection into its tool's outputs. Idempotent: a collection parsed before is
/// left alone and reported with `already_done`.
pub fn analyse_collection(dir: &Path) -> Result<Report, ExportError> {
    if !dir.is_dir() {
        return Err(ExportError::Missing(dir.to_path_buf()));
    }
    let raws = raw_files(dir);
    if raws.is_empty() {
        return Err(ExportError::NotACollection(dir.to_path_buf()));
    }
    if is_parsed(dir) {
        return Ok(Report {
            dir: dir.to_path_buf(),
            tool: String::new(),
            ranks: Vec::new(),
            warnings: Vec::new(),
            already_done: true,
        });
    }
    let mut report = Report {
        dir: dir.to_path_buf(),
        tool: String::new(),
        ranks: Vec::new(),
        warnings: Vec::new(),
        already_done: false,
    };
    let mut last_err = None;
    for raw in &raws {
        match Index::build(raw) {
            Ok(idx) => {
                report.warnings.extend(data_warnings(&idx));
                report.tool = idx.meta.tool.clone();
                let outputs = export(dir, &idx, &mut report.warnings)?;
                report.ranks.push(RankReport {
                    rank: idx.meta.rank,
                    raw_file: raw.clone(),
                    counts: idx.counts,
                    valid_bytes: idx.valid_bytes,
                    outputs,
                });
            }
            Err(e @ ExportError::Unrecoverable { .. }) => {
                report.warnings.push(format!("skipped: {e}"));
                last_err = Some(e);
            }
            Err(e) => return Err(e),
        }
    }
    if report.ranks.is_empty() {
        return Err(last_err.unwrap_or_else(|| ExportError::NotACollection(dir.to_path_buf())));
    }
    write_warnings(dir, &report.warnings)?;
    write_marker(dir, &report)?;
    Ok(report)
}

/// Warnings about the raw data itself: damage (file + byte offset), caps, missing end.
fn data_warnings(idx: &Index) -> Vec<String> {
    let mut w = Vec::new();
    if let Some(c) = &idx.corruption {
        w.push(format!(
            "WARNING: {}: raw data is damaged at byte offset {} ({}); parsed the {} valid bytes before it, the rest is lost",
            c.path.display(),
            c.offset,
            c.reason,
            idx.valid_bytes
        ));
    } else if idx.end.is_none() {
        w.push(format!(
            "WARNING: {}: no end marker (the process stopped before the collection closed); parsed the {} bytes written",
            idx.path.display(),
            idx.valid_bytes
        ));
    }
    if let Some(t) = &idx.truncated {
        w.push(format!(
            "WARNING: {}: collection truncated by a cap ({:?}) after {} events / {} bytes",
            idx.path.display(),
            t.reason,
            t.events_kept,
            t.bytes_kept
        ));
    }
    w
}

fn export(
    dir: &Path,
    idx: &Index,
    warnings: &mut Vec<String>,
) -> Result<Vec<PathBuf>, ExportError> {
    match idx.meta.tool.as_str() {
        "npu" => crate::npu::export(dir, idx),
        "torch" => crate::torch::export(dir, idx),
        "torch_memory" => crate::torch::export_memory(dir, idx),
        other => {
            warnings.push(format!(
                "{}: tool `{other}` has no parsed output (its data is the tool's own report)",
                idx.path.display()
            ));
            Ok(Vec::new())
        }
    }
}

fn write_warnings(dir: &Path, warnings: &[String]) -> Result<(), ExportError> {
    if warnings.is_empty() {
        return Ok(());
    }
    let path = dir.join(WARNINGS);
    let mut text = warnings.join("\n");
    text.push('\n');
    write_atomic(&path, text.as_bytes())
}

fn write_marker(dir: &Path, report: &Report) -> Result<(), ExportError> {
    let path = dir.join(MARKER);
    let text = serde_json::to_vec_pretty(report).map_err(|source| ExportError::Json {
        path: path.clone(),
        source,
    })?;
    write_atomic(&path, &text)
}

/// Writes `bytes` to `path` through a temporary file and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ExportError> {
    let tmp = tmp_name(path);
    std::fs::write(&tmp, bytes).map_err(ExportError::io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(ExportError::io(path))
}

/// `x/name` -> `x/name.tmp`.
pub fn tmp_name(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".tmp");
    PathBuf::from(s)
}

/// Parses every unparsed collection at or below `path` with `jobs` parallel workers
/// (0 = one per core). `progress` is called from worker threads.
pub fn analyse_tree(
    path: &Path,
    jobs: usize,
    progress: &(dyn Fn(TreeEvent) + Sync),
) -> Result<TreeReport, ExportError> {
    let all = find_collections(path)?;
    let (done, todo): (Vec<PathBuf>, Vec<PathBuf>) =
        all.iter().cloned().partition(|d| is_parsed(d));
    progress(TreeEvent::Found {
        total: all.len(),
        todo: todo.len(),
    });
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs)
        .build()
        .map_err(|e| ExportError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::other(e),
        })?;
    let mut outcomes: Vec<Outcome> = pool.install(|| {
        todo.par_iter()
            .map(|d| {
                let o = match analyse_collection(d) {
                    Ok(r) if r.already_done => Outcome::AlreadyDone(d.clone()),
                    Ok(r) => Outcome::Parsed(r),
                    Err(e) => Outcome::Failed(d.clone(), e),
                };
                progress(TreeEvent::Finished(&o));
                o
            })
            .collect()
    });
    outcomes.extend(done.into_iter().map(Outcome::AlreadyDone));
    Ok(TreeReport {
        found: all.len(),
        outcomes,
    })
}
