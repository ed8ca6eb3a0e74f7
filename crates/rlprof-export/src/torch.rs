//! The `torch` tool output (a PyTorch-profiler Chrome trace) and the `torch_memory` snapshots.
//!
//! The trace of a collection goes next to the collection directory, into its parent
//! (`step{N}/{role}/`), so that one directory holds every rank's trace as HolisticTraceAnalysis
//! expects (it loads every `*.json`/`*.gz` of a directory, not recursively). The file name is
//! `{host}_{pid}_rank{rank}.{time_ns}.pt.trace.json.gz`: PyTorch's worker name `{host}_{pid}`
//! with the rank appended (every file rlprof writes carries the rank in its name, so ranks sharing a directory never overwrite each other), and the
//! collection's start time, so a re-run after an interruption rewrites the same file. The host
//! comes from the raw metadata, so it is sanitised ([`safe_host`]): the name never holds a path
//! separator and the file always lands beside the collection.
//!
//! Memory snapshots go into the collection directory, one per profiled step:
//! `snapshot_step{S}_rank{R}.pickle`.
//!
//! A collection placed in verl's layout records the name verl gives its output
//! (`CollectionMeta::export_name`, decided by `rlprof_profiler::collection::names::place`): the
//! trace is then `{basename}.json.gz` and the memory collection (one window of
//! `memory_snapshot_num_steps` steps) is one snapshot, `torch_memory_rank{R}_pid{P}.pickle`, both
//! written into the collection's parent, as verl writes them.
//!
//! As verl's torch profiler, an end-to-end trace without a schedule has a `ProfilerStep#k` row
//! per update mini-batch (`MiniBatchSteps`); the RL step is the `rlprof_step#N` row
//! ([`RL_STEP`]). One window of a scheduled discrete update is named `{basename}_mb{a}-{b}`
//! from the mini-batches it recorded ([`trace_file_name`]).

use crate::ExportError;
use crate::attrib::{Attributor, Out};
use crate::chrome_writer::{ChromeWriter, Flavor, Tracks, json_str};
use crate::decode::{Event, Index};
use crate::memory::{MemTracker, SnapshotBuilder};
use crate::pipe::Pipe;
use flate2::write::GzEncoder;
use rlprof_profiler::collection::names;
use rlprof_profiler::collection::staging::{remove_leftovers_of, staging_name, write_atomic};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Longest host part of an output file name (Linux host names have at most 64 bytes).
pub const MAX_HOST_LEN: usize = 64;

/// A host name fit for a file name: `[A-Za-z0-9._-]` only (anything else becomes `_`), no
/// leading dot (so never `.` or `..`), at most [`MAX_HOST_LEN`] bytes, never empty.
pub fn safe_host(host: &str) -> String {
    let mut s: String = host
        .chars()
        .map(|c| match c {
            'A'..='Z' | 'a'..='z' | '0'..='9' | '.' | '_' | '-' => c,
            _ => '_',
        })
        .take(MAX_HOST_LEN)
        .collect();
    if s.starts_with('.') {
        s.replace_range(..1, "_");
    }
    if s.is_empty() {
        s.push_str("unknown");
    }
    s
}

/// The trace file name of a collection. One window of a scheduled torch update (verl's
/// discrete `actor_update` under a schedule writes one trace per window) takes verl's
/// `_mb{a}-{b}` suffix (`_mb{a}` for one mini-batch) from the first and last mini-batch it
/// recorded, as verl's `get_torch_profiler` names a window from the mini-batches it holds.
pub fn trace_file_name(idx: &Index) -> String {
    let m = &idx.meta;
    if let Some(n) = names::checked_export_name(m.export_name.as_deref()) {
        if m.mini_batch_window
            && let Some(base) = n.strip_suffix(".json.gz")
            && let Some((a, b)) = recorded_iterations(idx)
        {
            return if a == b {
                format!("{base}_mb{a}.json.gz")
            } else {
                format!("{base}_mb{a}-{b}.json.gz")
            };
        }
        return n.to_string();
    }
    format!(
        "{}_{}_rank{}.{}.pt.trace.json.gz",
        safe_host(&m.host),
        m.pid,
        m.rank,
        m.start_wall_ns
    )
}

/// The first and last scheduled iteration a collection recorded (its iteration marker ranges).
fn recorded_iterations(idx: &Index) -> Option<(u64, u64)> {
    let mut span: Option<(u64, u64)> = None;
    let iteration = rlprof_profiler::record::RangeCat::Iteration as u8;
    idx.replay(|ev| {
        if let Event::Range(r) = ev
            && r.cat == iteration
            && let Some(id) = r.iter_id
        {
            span = Some(span.map_or((id, id), |(a, b)| (a.min(id), b.max(id))));
        }
    })
    .ok()?;
    span
}

fn prefix(idx: &Index, base_ns: u64, file_name: &str) -> String {
    let m = &idx.meta;
    let backend = if m.world_size > 1 { "mpi" } else { "none" };
    let mut name = Vec::new();
    json_str(&mut name, file_name);
    let name = String::from_utf8_lossy(&name);
    // `"rank": N` with a space: HolisticTraceAnalysis reads the rank with `"rank":\s+(\d+)`.
    // A collection stopped by a cap says so in the file itself (null when complete).
    let truncated = crate::truncation_json(idx);
    // A collection whose data stops early (killed or stopped run) says so too.
    let partial = crate::decode::incomplete(idx).is_some();
    format!(
        "{{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [],\n  \"distributedInfo\": {{\"backend\": \"{backend}\", \"rank\": {}, \"world_size\": {}}},\n  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": {base_ns},\n  \"traceName\": {name},\n  \"rlprof_truncated\": {truncated},\n  \"rlprof_partial\": {partial},\n  \"traceEvents\": [\n",
        m.rank, m.world_size
    )
}

/// Writes the Chrome trace of one rank into the parent of the collection directory `dir`.
pub fn export(dir: &Path, idx: &Index) -> Result<Vec<PathBuf>, ExportError> {
    let parent = dir.parent().unwrap_or(dir);
    let file_name = trace_file_name(idx);
    let path = parent.join(&file_name);
    remove_leftovers_of(&path);
    let tmp = staging_name(&path);
    let io = |p: &Path| {
        let p = p.to_path_buf();
        move |source| ExportError::Io { path: p, source }
    };
    let f = rlprof_profiler::collection::safe_fs::create(&tmp).map_err(io(&tmp))?;
    let gz = GzEncoder::new(
        BufWriter::with_capacity(1 << 20, f),
        flate2::Compression::fast(),
    );
    // Compression runs on its own thread, beside formatting.
    let gz = Pipe::new(gz).map_err(io(&tmp))?;
    // Times relative to the collection's first microsecond (doubles keep ns precision).
    let base_ns = idx.start_wall() / 1000 * 1000;
    let tracks = Tracks {
        host_pid: idx.meta.pid as u64,
        device_pid: 0,
        comm_pid: idx.meta.pid as u64,
    };
    let mut w = ChromeWriter::new(
        gz,
        &prefix(idx, base_ns, &file_name),
        base_ns,
        Flavor::Torch,
        tracks,
    )
    .map_err(io(&tmp))?;
    w.track_metadata(idx);
    let mut mem = MemTracker::default();
    let mut attr = Attributor::default();
    let mut err = None;
    let mut push = |o: &Out, mem: &mut MemTracker| {
        if let Out::Other(Event::Memory(m)) = o {
            mem.apply(m);
        }
        if err.is_none() {
            err = w.push(idx, o, mem).err();
        }
    };
    // verl's per-mini-batch `ProfilerStep#k` rows: the ends of the `mini_batch{i}` ranges.
    let mut mini_batches = MiniBatchSteps::new(idx);
    idx.replay(|ev| {
        mini_batches.see(idx, ev);
        attr.push(ev, &mut |o| push(&o, &mut mem))
    })?;
    attr.finish(&mut |o| push(&o, &mut mem));
    if err.is_none() {
        err = mini_batches.write(idx, &mut w).err();
    }
    if let Some(e) = err {
        return Err(ExportError::Io {
            path: tmp,
            source: e,
        });
    }
    w.stream_metadata();
    let pipe = w.finish("\n]\n}\n").map_err(io(&tmp))?;
    let gz = pipe.finish().map_err(io(&tmp))?;
    let mut bw = gz.finish().map_err(io(&tmp))?;
    bw.flush().map_err(io(&tmp))?;
    drop(bw);
    std::fs::rename(&tmp, &path).map_err(io(&path))?;
    Ok(vec![path])
}

/// verl 0.9.1's torch profiler steps (`torch_profile.py`): end-to-end without a schedule, the
/// update loop calls `prof.step()` after each mini-batch (`engine_workers.py`), so torch's
/// `ProfilerStep#0` runs from `start()` to the end of mini-batch 0, `ProfilerStep#k` over
/// mini-batch k, the last from the last mini-batch to `stop()`, whose own `step()` opens one
/// more, closed at once. Under a schedule (`record_steps = False`) and in discrete mode (the
/// stage's profiler is not the one `step()` reaches) there are none. The RL step is
/// `rlprof_step#N` in these traces ([`RL_STEP`]).
struct MiniBatchSteps {
    on: bool,
    thread: Option<u32>,
    ends: Vec<u64>,
}

/// The RL step's range name prefix in a torch trace (see [`crate::chrome_writer::RL_STEP`]).
pub const RL_STEP: &str = crate::chrome_writer::RL_STEP;

impl MiniBatchSteps {
    fn new(idx: &Index) -> MiniBatchSteps {
        let m = &idx.meta;
        MiniBatchSteps {
            on: !m.discrete && m.schedules.is_empty() && !idx.steps.is_empty(),
            thread: None,
            ends: Vec::new(),
        }
    }

    fn see(&mut self, idx: &Index, ev: &Event) {
        if !self.on {
            return;
        }
        if let Event::Range(r) = ev {
            let user = r.cat == rlprof_profiler::record::RangeCat::User as u8;
            let step = r.cat == rlprof_profiler::record::RangeCat::Step as u8;
            if user && idx.name(r.name).starts_with("mini_batch") {
                self.ends.push(r.end);
                self.thread.get_or_insert(r.thread);
            } else if step {
                self.thread = Some(r.thread);
            }
        }
    }

    fn write<W: Write>(mut self, idx: &Index, w: &mut ChromeWriter<W>) -> std::io::Result<()> {
        let (Some(thread), true) = (self.thread, self.on) else {
            return Ok(());
        };
        let start = idx.steps.iter().map(|s| s.start).min().unwrap_or(0);
        let end = idx.steps.iter().map(|s| s.end).max().unwrap_or(start);
        self.ends.sort_unstable();
        let mut from = start;
        let mut k = 0;
        for &b in self.ends.iter().filter(|&&b| b >= start && b <= end) {
            w.host_annotation(thread, from, b, &format!("ProfilerStep#{k}"))?;
            from = b;
            k += 1;
        }
        w.host_annotation(thread, from, end, &format!("ProfilerStep#{k}"))?;
        w.host_annotation(thread, end, end, &format!("ProfilerStep#{}", k + 1))
    }
}

/// Writes the memory snapshots of one rank into `dir` (one per profiled step), or, for a
/// collection in verl's layout, its window's one snapshot into `dir`'s parent.
pub fn export_memory(dir: &Path, idx: &Index) -> Result<Vec<PathBuf>, ExportError> {
    if let Some(name) = names::checked_export_name(idx.meta.export_name.as_deref()) {
        return export_memory_window(dir, idx, name);
    }
    let mut tracker = MemTracker::default();
    let mut builder = SnapshotBuilder::new(idx);
    let default_step = idx.meta.steps.first().copied().unwrap_or(0);
    let mut snaps = Vec::new();
    idx.replay(|ev| {
        if let Event::Memory(m) = ev {
            tracker.apply(m);
            let step = idx.step_at(m.ts).unwrap_or(default_step);
            if let Some(s) = builder.push(idx, step, m, &tracker) {
                snaps.push(write_snapshot(dir, idx, &s));
            }
        }
    })?;
    if let Some(s) = builder.finish(idx, &tracker) {
        snaps.push(write_snapshot(dir, idx, &s));
    }
    // A snapshot that failed to write (a full disk) fails the export: the collection stays
    // unparsed (no marker) and a later `analyse` writes it again. It is never replaced by the
    // empty snapshot below, which only steps with no memory event at all get.
    if let Some(Err(_)) = snaps.iter().find(|r| r.is_err()) {
        return snaps.into_iter().map(|r| r.map(|(_, p)| p)).collect();
    }
    let have: Vec<u64> = snaps
        .iter()
        .filter_map(|r| r.as_ref().ok().map(|(s, _)| *s))
        .collect();
    for &step in &idx.meta.steps {
        if !have.contains(&step) {
            let mut b = SnapshotBuilder::new(idx);
            let empty = MemTracker::default();
            let mut s = b
                .finish(idx, &empty)
                .unwrap_or_else(|| crate::memory::Snapshot {
                    step,
                    value: crate::memory::empty_snapshot(),
                    allocated: 0,
                    entries: 0,
                });
            s.step = step;
            snaps.push(write_snapshot(dir, idx, &s));
        }
    }
    snaps.into_iter().map(|r| r.map(|(_, p)| p)).collect()
}

/// One snapshot of the whole collection (a verl window), written beside it as `name`.
fn export_memory_window(dir: &Path, idx: &Index, name: &str) -> Result<Vec<PathBuf>, ExportError> {
    let mut tracker = MemTracker::default();
    let mut builder = SnapshotBuilder::new(idx);
    let window = idx.meta.steps.first().copied().unwrap_or(0);
    idx.replay(|ev| {
        if let Event::Memory(m) = ev {
            tracker.apply(m);
            // One window: every event belongs to it, so the builder never splits.
            let _ = builder.push(idx, window, m, &tracker);
        }
    })?;
    let value = builder
        .finish(idx, &tracker)
        .map_or_else(crate::memory::empty_snapshot, |s| s.value);
    let path = dir.parent().unwrap_or(dir).join(name);
    let mut bytes = Vec::new();
    crate::pickle::write(&mut bytes, &value).map_err(ExportError::io(&path))?;
    write_atomic(&path, &bytes)?;
    Ok(vec![path])
}

/// The snapshot file of a step.
pub fn snapshot_name(step: u64, rank: u32) -> String {
    format!("snapshot_step{step}_rank{rank}.pickle")
}

fn write_snapshot(
    dir: &Path,
    idx: &Index,
    s: &crate::memory::Snapshot,
) -> Result<(u64, PathBuf), ExportError> {
    let path = dir.join(snapshot_name(s.step, idx.meta.rank));
    let mut bytes = Vec::new();
    crate::pickle::write(&mut bytes, &s.value).map_err(ExportError::io(&path))?;
    write_atomic(&path, &bytes)?;
    Ok((s.step, path))
}
