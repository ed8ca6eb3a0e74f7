//! The analysis driver: parse one collection, or every unparsed collection below a path.
//!
//! A collection is a directory holding `rlprof_raw/rank_{rank}.rlraw`. The profiler writes it
//! under a `.tmp` name and renames it when the collection stops; a `.tmp` directory nobody
//! writes any more (the process was killed, or the disk filled up) is an interrupted collection,
//! given its final name here and parsed like the others ([`recover`]).
//!
//! Parsing is idempotent and safe to run from several processes at once: each collection is
//! parsed under its lock ([`lock`]), every output is written under a staging name unique
//! to the process and renamed into place ([`staging`]), and the marker
//! [`MARKER`](marker::MARKER)
//! (JSON: outputs, counts, warnings, `partial`) is written last, listing every output. A
//! collection whose marker lists a missing file is parsed again.
//!
//! Damaged raw data: the valid chunks are parsed, and a warning naming the file and the byte
//! offset where valid data ends goes into [`WARNINGS`] in the collection directory (and the
//! marker). A collection whose data stops early is marked `partial: true` (marker and the
//! tool's metadata) with a note in [`WARNINGS`]. Only when no raw file of the collection has
//! anything recoverable is it an error.
//!
//! The on-disk side of all this (names, lock, staging, marker, recovery) is the collection
//! contract, `rlprof_profiler::collection`, shared with the profiler and `rlprof report`.

use crate::ExportError;
use crate::decode::{Counts, Index, incomplete};
use rayon::prelude::*;
use rlprof_profiler::collection::marker::{self, WARNINGS};
use rlprof_profiler::collection::names::{self, RAW_DIR, RankFile, rank_file};
use rlprof_profiler::collection::{lock, recover, staging};
use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};

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
    /// True when the data stops before the collection's planned end (killed or stopped run,
    /// damaged file); the outputs hold what was recorded until then.
    pub partial: bool,
    /// The unfinished (`*.tmp`) directory name this collection was recovered from.
    pub recovered_from: Option<String>,
}

impl Report {
    /// The report of a collection left as it is.
    fn done(dir: &Path) -> Report {
        Report {
            dir: dir.to_path_buf(),
            tool: String::new(),
            ranks: Vec::new(),
            warnings: Vec::new(),
            already_done: true,
            partial: false,
            recovered_from: None,
        }
    }
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
    /// Still being written (a collection in flight) or recovered by another process; skipped.
    Busy(PathBuf),
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
    /// Collections skipped because another process writes or recovers them.
    pub fn busy(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Busy(_)))
    }
    fn count(&self, f: impl Fn(&Outcome) -> bool) -> usize {
        self.outcomes.iter().filter(|o| f(o)).count()
    }
}

/// The raw files of a collection directory, sorted by rank: the files
/// [`rlprof_profiler::collection::names::rank_file`] reads as `rank_N.rlraw` (the reading
/// `rlprof report` shares). Files named `rank_*.rlraw` whose `*` is not a rank are [`refused_raw_files`].
pub fn raw_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<(u32, PathBuf)> = rank_named(dir)
        .into_iter()
        .filter_map(|(p, r)| match r {
            RankFile::Rank(n) => Some((n, p)),
            _ => None,
        })
        .collect();
    v.sort();
    v.into_iter().map(|(_, p)| p).collect()
}

/// The files of a collection directory named `rank_*.rlraw` whose `*` is not a rank (negative,
/// too large, not a number), sorted, each with why it is refused.
pub fn refused_raw_files(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut v: Vec<(PathBuf, String)> = rank_named(dir)
        .into_iter()
        .filter_map(|(p, r)| match r {
            RankFile::Invalid(why) => Some((p, why)),
            _ => None,
        })
        .collect();
    v.sort();
    v
}

/// Every file of `dir/rlprof_raw` with what its name says.
fn rank_named(dir: &Path) -> Vec<(PathBuf, RankFile)> {
    let Ok(rd) = std::fs::read_dir(dir.join(RAW_DIR)) else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok())
        .map(|e| {
            let p = e.path();
            let r = rank_file(&p);
            (p, r)
        })
        .collect()
}

/// Whether `dir` is a collection directory: finished, or unfinished (`*.tmp`, in flight or
/// interrupted; [`analyse_collection`] tells them apart by the collection lock).
pub fn is_collection(dir: &Path) -> bool {
    !raw_files(dir).is_empty()
}

/// Whether a collection was parsed already: its marker exists and every output it lists is
/// there (a marker listing a missing file means the collection is parsed again).
pub fn is_parsed(dir: &Path) -> bool {
    marker::complete(dir)
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
///
/// The collection's lock is held throughout: a parser running at the same time waits, then
/// finds the work done. An unfinished (`*.tmp`) collection whose writer is gone is first given
/// its final name ([`recover::finish`]); one still being written is [`ExportError::Busy`].
pub fn analyse_collection(dir: &Path) -> Result<Report, ExportError> {
    let unfinished = names::is_unfinished(dir);
    // An unfinished collection may be renamed by another process's recovery at any moment
    // before we hold its lock: every check that sees it vanish means "finished elsewhere".
    let renamed_meanwhile = || unfinished && !dir.exists();
    if !dir.is_dir() {
        if renamed_meanwhile() {
            return Ok(Report::done(dir));
        }
        return Err(ExportError::Missing(dir.to_path_buf()));
    }
    if raw_files(dir).is_empty() {
        if renamed_meanwhile() {
            return Ok(Report::done(dir));
        }
        return Err(ExportError::NotACollection(dir.to_path_buf()));
    }
    let _lock = match lock::lock_collection(dir, !unfinished)? {
        lock::Acquired::Locked(l) => l,
        lock::Acquired::Busy => return Err(ExportError::Busy(dir.to_path_buf())),
        // Renamed by another process's recovery (or by its writer) meanwhile.
        lock::Acquired::Gone => return Ok(Report::done(dir)),
    };
    let dir = if unfinished {
        let to = recover::finish(dir)?;
        tracing::info!(
            "{}: interrupted collection finished as {}",
            dir.display(),
            to.display()
        );
        to
    } else {
        dir.to_path_buf()
    };
    if is_parsed(&dir) {
        return Ok(Report::done(&dir));
    }
    staging::remove_leftovers(&dir);
    parse_locked(&dir)
}

/// Parses a locked collection that has its final name.
fn parse_locked(dir: &Path) -> Result<Report, ExportError> {
    let mut report = Report::done(dir);
    report.already_done = false;
    report.recovered_from = recover::recovered_from(dir);
    let mut partial = Vec::new();
    let mut last_err = None;
    for (raw, why) in refused_raw_files(dir) {
        let e = ExportError::Unrecoverable {
            path: raw,
            reason: format!("{why}: the file is refused, not read as some rank"),
        };
        tracing::warn!("skipped: {e}");
        report.warnings.push(format!("skipped: {e}"));
    }
    for raw in &raw_files(dir) {
        match Index::build(raw) {
            Ok(idx) => {
                report.warnings.extend(data_warnings(&idx));
                report.tool = idx.meta.tool.as_str().to_string();
                let outputs = export(dir, &idx, &mut report.warnings)?;
                // After the export's replay, which finds what `incomplete` may point to.
                if let Some(why) = incomplete(&idx) {
                    partial.push(format!("{}: {why}", raw.display()));
                }
                let found = idx.record_warnings().iter();
                report
                    .warnings
                    .extend(found.map(|x| format!("WARNING: {x}")));
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
    report.partial = !partial.is_empty();
    if report.partial || report.recovered_from.is_some() {
        report.warnings.insert(0, partial_note(&report, &partial));
    }
    if report.partial {
        mark_metadata_partial(dir, &partial)?;
    }
    write_warnings(dir, &report.warnings)?;
    let outputs: Vec<&Path> = report
        .ranks
        .iter()
        .flat_map(|r| r.outputs.iter().map(PathBuf::as_path))
        .collect();
    marker::write(dir, &report, &outputs, !report.warnings.is_empty())?;
    Ok(report)
}

/// The first line of the warnings of a partial or recovered collection.
fn partial_note(report: &Report, partial: &[String]) -> String {
    let mut note = String::from("NOTE: ");
    note.push_str(if report.partial {
        "partial collection (partial: true)"
    } else {
        "complete collection"
    });
    if let Some(from) = &report.recovered_from {
        note.push_str(&format!(", recovered from the unfinished directory {from}"));
    }
    for p in partial {
        note.push_str(&format!("; {p}"));
    }
    note
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
    w.extend(idx.warnings.iter().map(|x| format!("WARNING: {x}")));
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
    // One arm per tool, with no catch-all: a new `Tool` is a compile error here until it says
    // what its collections parse into.
    use rlprof_profiler::plan::Tool;
    match idx.meta.tool {
        Tool::Npu => crate::ascend_writer::export(dir, idx),
        Tool::Torch => crate::torch::export(dir, idx),
        Tool::TorchMemory => crate::torch::export_memory(dir, idx),
        Tool::Nsys => {
            warnings.push(format!(
                "{}: tool `{}` has no parsed output (its data is the tool's own report)",
                idx.path.display(),
                idx.meta.tool.as_str()
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
    Ok(staging::write_atomic(&path, text.as_bytes())?)
}

/// Adds `"partial": true` and the reasons to the tool's own metadata file when it has one
/// (`profiler_metadata.json` of the Ascend layout; the torch trace carries `rlprof_partial`).
fn mark_metadata_partial(dir: &Path, reasons: &[String]) -> Result<(), ExportError> {
    let path = dir.join("profiler_metadata.json");
    let Ok(text) = std::fs::read(&path) else {
        return Ok(());
    };
    let Ok(Value::Object(mut m)) = serde_json::from_slice::<Value>(&text) else {
        return Ok(());
    };
    m.insert("partial".into(), true.into());
    m.insert("rlprof_partial_reasons".into(), reasons.to_vec().into());
    let text =
        serde_json::to_vec_pretty(&Value::Object(m)).map_err(|source| ExportError::Json {
            path: path.clone(),
            source,
        })?;
    Ok(staging::write_atomic(&path, &text)?)
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
                    Err(ExportError::Busy(_)) => Outcome::Busy(d.clone()),
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
