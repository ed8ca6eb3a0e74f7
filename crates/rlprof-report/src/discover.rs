//! Finding inputs under a path: a `save_path`, a step directory, one collection, one raw file,
//! a Chrome trace file or a directory of them, or an Ascend `*_ascend_pt` directory.
//!
//! A collection directory (one holding `rlprof_raw/`) is read from its raw files only; files the
//! exporters wrote into it or beside it (a torch trace next to its collection, as its marker
//! lists it) are not read again. A directory that one of [`DIR_SOURCES`]
//! recognises is loaded whole by it. Every `*.json` / `*.json.gz` holding trace events is a
//! Chrome trace whatever its name (`trace.json`, `rank-0.json.gz`, `*.pt.trace.json`); other
//! JSON is ignored with a note. Files that look like inputs but cannot be read are listed in
//! [`Loaded::skipped`] with the reason; the rest is loaded. The same trace found twice (e.g. as
//! `.json` and `.json.gz`) is counted once, with a note.

use crate::Limits;
use crate::error::ReportError;
use crate::model::{Loaded, Skipped};
use rlprof_profiler::collection::marker::listed_files;
use rlprof_profiler::collection::names::{RAW_DIR, RankFile, rank_file};
use std::path::{Path, PathBuf};

/// Deepest directory level searched below the given path.
pub const MAX_WALK_DEPTH: usize = 12;

/// One thing the walk found, in walk order: an input to read, or what was skipped or remarked
/// on while looking.
#[derive(Debug, Clone)]
pub enum Item {
    /// An input, read by [`Task::load`].
    Task(Task),
    /// Something that looked like an input and cannot be read.
    Skipped(Skipped),
    /// A remark on what was found.
    Note(String),
}

/// One input: read whole by one loader, independently of the others (so that inputs can be
/// read one at a time, or in parallel, and each dropped once summarised).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Task {
    /// A raw rank file of a collection.
    Raw {
        /// The `rank_N.rlraw` file.
        path: PathBuf,
        /// Its collection's group.
        group: String,
    },
    /// A directory one of [`DIR_SOURCES`] loads whole.
    Dir {
        /// Index into [`DIR_SOURCES`].
        source: usize,
        /// The directory.
        dir: PathBuf,
        /// Its group.
        group: String,
    },
    /// A file: a raw file, a DB or a Chrome trace, by its name and content.
    File {
        /// The file.
        path: PathBuf,
        /// Its group.
        group: String,
        /// Named by the user (read whatever its name), or found by the walk.
        explicit: bool,
    },
}

/// What reading one [`Task`] gave.
#[derive(Debug)]
pub enum Outcome {
    /// A profile.
    Profile(Box<crate::model::Profile>),
    /// The input cannot be read.
    Skipped(Skipped),
    /// Not an input, with a remark.
    Note(String),
    /// Not an input.
    Nothing,
}

impl Task {
    /// The file or directory read.
    pub fn path(&self) -> &Path {
        match self {
            Task::Raw { path, .. } | Task::File { path, .. } => path,
            Task::Dir { dir, .. } => dir,
        }
    }

    /// Reads the input.
    pub fn load(&self, limits: &Limits) -> Outcome {
        let res = match self {
            Task::Raw { path, group } => crate::raw_input::load_raw(path, group),
            Task::Dir { source, dir, group } => (DIR_SOURCES[*source].load)(dir, group, limits),
            Task::File {
                path,
                group,
                explicit,
            } => return load_file(path, group, limits, *explicit),
        };
        match res {
            Ok(p) => Outcome::Profile(Box::new(p)),
            Err(e) => Outcome::Skipped(skipped(self.path(), e.to_string())),
        }
    }
}

/// What is under `path`, in walk order, without reading any input.
pub fn find(path: &Path) -> Result<Vec<Item>, ReportError> {
    let mut out = Vec::new();
    let meta = std::fs::metadata(path).map_err(crate::error::io(path))?;
    if meta.is_file() {
        out.push(Item::Task(Task::File {
            path: path.to_path_buf(),
            group: group_of_file(path),
            explicit: true,
        }));
    } else {
        walk(path, path, 0, &mut out)?;
    }
    Ok(out)
}

/// Loads everything under `path`. Fails only when nothing at all could be loaded.
pub fn load(path: &Path, limits: &Limits) -> Result<Loaded, ReportError> {
    let mut out = Loaded::default();
    for item in find(path)? {
        match item {
            Item::Task(t) => match t.load(limits) {
                Outcome::Profile(p) => out.profiles.push(*p),
                Outcome::Skipped(s) => out.skipped.push(s),
                Outcome::Note(n) => out.notes.push(n),
                Outcome::Nothing => {}
            },
            Item::Skipped(s) => out.skipped.push(s),
            Item::Note(n) => out.notes.push(n),
        }
    }
    out.profiles.sort_by(load_order);
    drop_duplicates(&mut out);
    if out.profiles.is_empty() {
        return Err(nothing_found(path, &out.skipped));
    }
    Ok(out)
}

/// The order of loaded profiles: by group (numbers as numbers), rank, then source.
pub fn load_order(a: &crate::model::Profile, b: &crate::model::Profile) -> std::cmp::Ordering {
    natural_cmp(&a.group, &b.group)
        .then(a.rank.cmp(&b.rank))
        .then_with(|| a.source.cmp(&b.source))
}

/// The error when nothing under `path` could be loaded.
pub fn nothing_found(path: &Path, skipped: &[Skipped]) -> ReportError {
    let detail = skipped
        .iter()
        .map(|s| format!("\n  skipped {}: {}", s.path.display(), s.reason))
        .collect::<String>();
    ReportError::NothingFound {
        path: path.to_path_buf(),
        detail,
    }
}

/// `a` and `b` with their runs of digits compared as numbers (`rank9` before `rank10`,
/// `step2` before `step10`), so that a tree of many ranks or steps is listed in numeric order.
/// Written here: eight lines, where a crate would add a dependency for one comparison.
fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn chunks(s: &str) -> impl Iterator<Item = (bool, &str)> {
        s.as_bytes()
            .chunk_by(|x, y| x.is_ascii_digit() == y.is_ascii_digit())
            .map(|c| (c[0].is_ascii_digit(), std::str::from_utf8(c).unwrap_or("")))
    }
    fn key((digits, c): (bool, &str)) -> (bool, usize, &str) {
        let t = c.trim_start_matches('0');
        (
            digits,
            if digits { t.len() } else { 0 },
            if digits { t } else { c },
        )
    }
    chunks(a).map(key).cmp(chunks(b).map(key))
}

fn walk(root: &Path, dir: &Path, depth: usize, out: &mut Vec<Item>) -> Result<(), ReportError> {
    let raw = dir.join(RAW_DIR);
    if raw.is_dir() {
        find_collection(root, dir, &raw, out);
        return Ok(());
    }
    if let Some(source) = DIR_SOURCES.iter().position(|s| (s.matches)(dir)) {
        out.push(Item::Task(Task::Dir {
            source,
            dir: dir.to_path_buf(),
            group: group_of_dir(root, dir.parent().unwrap_or(dir)),
        }));
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd.flatten().map(|e| e.path()).collect(),
        Err(e) if depth == 0 => return Err(crate::error::io(dir)(e)),
        Err(e) => {
            out.push(Item::Skipped(skipped(dir, e.to_string())));
            return Ok(());
        }
    };
    entries.sort();
    let exported = written_beside_collections(&entries);
    for p in entries {
        let is_link = std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink());
        if p.is_dir() && !is_link {
            // `analyse --cluster`'s own output is not an input.
            if p.file_name().is_some_and(|n| n == crate::cluster::OUT_DIR)
                && p.join("cluster_analysis.json").is_file()
            {
                continue;
            }
            if depth < MAX_WALK_DEPTH {
                walk(root, &p, depth + 1, out)?;
            }
        } else if let Some(collection) = exported.get(&p) {
            out.push(Item::Note(format!(
                "{}: written by the analysis of {}, which is read from its raw data: not read twice",
                p.display(),
                collection.display()
            )));
        } else if p.is_file() {
            out.push(Item::Task(Task::File {
                group: group_of_dir(root, dir),
                path: p,
                explicit: false,
            }));
        }
    }
    Ok(())
}

/// The files that collections among `entries` (directories with `rlprof_raw/`) wrote beside
/// themselves (a torch trace, named as verl names it, lies next to its collection), as their
/// markers list them, each with its collection: read from the collection's raw data, they are
/// not read a second time as a foreign trace.
fn written_beside_collections(entries: &[PathBuf]) -> std::collections::HashMap<PathBuf, PathBuf> {
    let mut out = std::collections::HashMap::new();
    for dir in entries.iter().filter(|d| d.join(RAW_DIR).is_dir()) {
        let (Some(parent), Some(files)) = (dir.parent(), listed_files(dir)) else {
            continue;
        };
        for f in files {
            // `collection/../name`: the file's parent ends in `..`, so has no file name.
            let beside = f.parent().is_some_and(|d| d.file_name().is_none());
            if let (true, Some(name)) = (beside, f.file_name()) {
                out.insert(parent.join(name), dir.clone());
            }
        }
    }
    out
}

/// A directory loaded whole by one loader (found by [`walk`]); add a source here.
pub struct DirSource {
    /// What it reads (for messages).
    pub what: &'static str,
    /// Whether the directory is one.
    pub matches: fn(&Path) -> bool,
    /// Loads it (the directory, its group label, the limits).
    pub load: fn(&Path, &str, &Limits) -> Result<crate::model::Profile, ReportError>,
}

/// The directory sources, tried in order.
pub const DIR_SOURCES: &[DirSource] = &[DirSource {
    what: "Ascend profiler output (DB or text layout)",
    matches: |d| d.file_name().is_some_and(|n| n == "ASCEND_PROFILER_OUTPUT"),
    load: load_ascend_output,
}];

/// An `ASCEND_PROFILER_OUTPUT` directory: torch_npu's DB layout when it holds a
/// `ascend_pytorch_profiler_{rank}.db`, the text layout otherwise.
fn load_ascend_output(
    dir: &Path,
    group: &str,
    limits: &Limits,
) -> Result<crate::model::Profile, ReportError> {
    match crate::ascend_db_reader::find_db(dir) {
        Some(db) => crate::ascend_db_reader::load_db(&db, group, limits),
        None => crate::ascend_text_reader::load_ascend(dir, group, limits),
    }
}

/// Keeps one of each set of profiles that hold the same trace (same content fingerprint),
/// with a note naming the copies.
fn drop_duplicates(out: &mut Loaded) {
    let fps: Vec<(u64, &Path)> = out
        .profiles
        .iter()
        .map(|p| (fingerprint(p), p.source.as_path()))
        .collect();
    let (keep, notes) = duplicates(&fps);
    let mut keep = keep.into_iter();
    out.profiles.retain(|_| keep.next().unwrap_or(true));
    out.notes.extend(notes);
}

/// Of profiles in load order, given as (fingerprint, source): which to keep (the first of
/// each fingerprint) and a note per copy dropped.
pub(crate) fn duplicates(fps: &[(u64, &Path)]) -> (Vec<bool>, Vec<String>) {
    let mut seen: std::collections::HashMap<u64, &Path> = std::collections::HashMap::new();
    let mut notes = Vec::new();
    let keep = fps
        .iter()
        .map(|&(f, source)| match seen.get(&f) {
            Some(first) => {
                notes.push(format!(
                    "{} holds the same trace as {}: counted once",
                    source.display(),
                    first.display()
                ));
                false
            }
            None => {
                seen.insert(f, source);
                true
            }
        })
        .collect();
    (keep, notes)
}

/// A hash of what a profile holds (format, rank, trace id, time base, every event's track,
/// name, start and duration, every memory event): equal for two copies of one trace.
pub(crate) fn fingerprint(p: &crate::model::Profile) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    (p.format as u8, p.rank, &p.meta.trace_id, p.origin_ns).hash(&mut h);
    (p.events.len(), p.memory.len(), p.host_memory.len()).hash(&mut h);
    p.strings.hash(&mut h);
    for e in &p.events {
        // Names by number: interning numbers them in file order, so copies number alike.
        (e.track as u8, e.name, e.start, e.dur).hash(&mut h);
    }
    for m in p.memory.iter().chain(&p.host_memory) {
        (m.t, m.delta, m.addr).hash(&mut h);
    }
    h.finish()
}

/// A collection: every rank file of its `rlprof_raw/`, as `rlprof analyse` reads them
/// ([`rank_file`]): `rank_N.rlraw` is loaded, a `rank_*.rlraw` whose `*` is not a rank
/// (`rank_-1.rlraw`, `rank_4294967296.rlraw`) is refused, any other file is not a rank file.
fn find_collection(root: &Path, dir: &Path, raw: &Path, out: &mut Vec<Item>) {
    let group = collection_group(root, dir);
    let mut files: Vec<PathBuf> = match std::fs::read_dir(raw) {
        Ok(rd) => rd.flatten().map(|e| e.path()).collect(),
        Err(e) => return out.push(Item::Skipped(skipped(raw, e.to_string()))),
    };
    files.sort();
    for f in files {
        match rank_file(&f) {
            RankFile::Rank(_) => out.push(Item::Task(Task::Raw {
                path: f,
                group: group.clone(),
            })),
            RankFile::Invalid(why) => out.push(Item::Skipped(skipped(
                &f,
                format!("{why}: the file is refused, not read as some rank"),
            ))),
            RankFile::Other => {}
        }
    }
}

/// The collection's group, by the collection module's rule, in either layout (`step1/e2e`;
/// `train`, `actor_update`, `.` in verl's): see
/// [`rlprof_profiler::collection::names::collection_group`].
fn collection_group(_root: &Path, dir: &Path) -> String {
    rlprof_profiler::collection::names::collection_group(dir)
}

fn name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

fn group_of_dir(root: &Path, dir: &Path) -> String {
    match dir.strip_prefix(root) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
        _ => name(dir),
    }
}

fn group_of_file(path: &Path) -> String {
    path.parent().map(name).unwrap_or_default()
}

/// Whether a file name is a PyTorch profiler trace.
pub fn is_torch_trace(name: &str) -> bool {
    name.ends_with(".pt.trace.json") || name.ends_with(".pt.trace.json.gz")
}

fn load_file(path: &Path, group: &str, limits: &Limits, explicit: bool) -> Outcome {
    let fname = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let is_json = fname.ends_with(".json") || fname.ends_with(".json.gz");
    let res = if fname.ends_with(".rlraw") {
        crate::raw_input::load_raw(path, group)
    } else if crate::ascend_db_reader::is_db_name(&fname) {
        crate::ascend_db_reader::load_db(path, group, limits)
    } else if is_json && (explicit || is_torch_trace(&fname)) {
        crate::chrome_reader::load_trace(path, group, limits)
    } else if is_json {
        match crate::chrome_reader::holds_trace_events(path) {
            Ok(true) => crate::chrome_reader::load_trace(path, group, limits),
            Ok(false) => {
                // torch_npu's own metadata beside its output (`profiler_info_{rank}.json`,
                // `profiler_metadata.json`) is part of that profile, not a stray file.
                let beside_ascend = path
                    .parent()
                    .is_some_and(|d| d.join("ASCEND_PROFILER_OUTPUT").is_dir());
                return if beside_ascend {
                    Outcome::Nothing
                } else {
                    Outcome::Note(format!(
                        "ignored {}: JSON without trace events",
                        path.display()
                    ))
                };
            }
            Err(e) => Err(e),
        }
    } else if explicit {
        Err(ReportError::Malformed {
            path: path.to_path_buf(),
            message: "unknown file type (expected *.rlraw or a Chrome trace *.json[.gz])".into(),
        })
    } else {
        return Outcome::Nothing;
    };
    match res {
        Ok(p) => Outcome::Profile(Box::new(p)),
        Err(e) => Outcome::Skipped(skipped(path, e.to_string())),
    }
}

fn skipped(path: &Path, reason: String) -> Skipped {
    Skipped {
        path: path.to_path_buf(),
        reason,
    }
}
