//! The numbers of the report, computed from the loaded [`Profile`]s: per-step breakdown by role
//! call and phase per rank, top ops and kernels, memory peak, communication, and the diff of two
//! reports. The JSON form is this structure serialised; the text and HTML forms show the same.
//!
//! Definitions (the tests recompute them independently):
//! - an event's *self time* is its duration minus the durations of the events of the same track
//!   nested directly inside it on the same thread (clipped to the parent);
//! - an op's *role* is the role call whose range contains the op's start (`-` when none);
//! - a step row's role/phase times are the overlap of the role-call/phase ranges with the step
//!   range; `other_ns` is the step time not covered by any role call;
//! - memory without a producer-reported total is counted from 0 at the collection start;
//! - a collective's bandwidth is bytes / (duration − wait), empty when bytes or wait are unknown;
//! - profiles are grouped into jobs ([`crate::jobs`]); step rows, op rows and the top table are
//!   per job, so nothing is summed or compared across jobs; the device figures per job and rank
//!   are defined in [`crate::device`].

use crate::device::{Device, Figures, KernelType, Overlap, Temporal};
use crate::jobs::JobGroup;
use crate::model::{
    Event, Loaded, MemEvent, NONE, Profile, Skipped, SourceFormat, Table, Track, display_name,
};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

/// Most rows kept in [`Report::ops`] (the longest by total time).
pub const MAX_OP_ROWS: usize = 5000;
/// Most points in a memory curve.
pub const MAX_CURVE_POINTS: usize = 1000;

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Jobs, each with its ranks' files, device figures and steps.
    pub jobs: Vec<JobReport>,
    /// What was loaded.
    pub inputs: Vec<Input>,
    /// What was skipped and why.
    pub skipped: Vec<Skipped>,
    /// Per (run, step, rank) time breakdown.
    pub breakdown: Vec<StepRow>,
    /// Per (track, name, rank, role) op statistics.
    pub ops: Vec<OpRow>,
    /// Per (track, name) statistics over all ranks and roles, longest total first.
    pub top: Vec<TopRow>,
    /// Memory per profile.
    pub memory: Vec<MemSummary>,
    /// Communication per (profile, op name).
    pub comm: Vec<CommRow>,
    /// Op coverage per (profile, role call) ([`crate::coverage`]).
    pub coverage: Vec<crate::coverage::CoverageRow>,
    /// Remarks on the report itself (rows cut, ...).
    pub notes: Vec<String>,
    /// The diff against a second report, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compare: Option<Comparison>,
}

/// One job ([`crate::jobs`]).
#[derive(Debug, Clone, Serialize)]
pub struct JobReport {
    /// `job1`, `job2`, ...
    pub id: String,
    /// Declared world size, or the number of ranks found.
    pub world_size: u32,
    /// Whether the producer declared the world size.
    pub world_size_declared: bool,
    /// The producers' format.
    pub format: SourceFormat,
    /// What identifies the job.
    pub key: String,
    /// Its ranks, by rank.
    pub ranks: Vec<RankReport>,
}

/// One rank of a job.
#[derive(Debug, Clone, Serialize)]
pub struct RankReport {
    /// Rank.
    pub rank: u32,
    /// Its input files (or directories).
    pub files: Vec<PathBuf>,
    /// Input indices.
    pub profiles: Vec<usize>,
    /// Device time ([`crate::device`]).
    pub device: Device,
    /// Steps, in order.
    pub steps: Vec<StepDur>,
    /// HTA's temporal breakdown.
    pub temporal: Temporal,
    /// HTA's communication/computation overlap.
    pub overlap: Overlap,
    /// HTA's kernel breakdown by type.
    pub kernel_types: Vec<KernelType>,
}

/// A step's duration (empty when the step is known only by number, e.g. Ascend's `Step Id`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StepDur {
    /// The step number (`ProfilerStep#N`'s N), or its label when it is not a number.
    pub step: StepId,
    /// Duration of the step's range.
    pub dur_ns: Option<u64>,
}

/// A step number, or a label.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(untagged)]
pub enum StepId {
    /// `ProfilerStep#N`.
    Number(u64),
    /// Anything else.
    Label(String),
}

/// One loaded input.
#[derive(Debug, Clone, Serialize)]
pub struct Input {
    /// Index (referenced by other rows as `profile`).
    pub index: usize,
    /// File or directory.
    pub path: PathBuf,
    /// Format.
    pub format: SourceFormat,
    /// Rank.
    pub rank: u32,
    /// Group (`step1/e2e`, or the directory of a foreign file).
    pub group: String,
    /// Steps covered.
    pub steps: Vec<u64>,
    /// Timeline events loaded.
    pub events: usize,
    /// Memory events loaded.
    pub memory_events: usize,
    /// Completeness remarks.
    pub notes: Vec<String>,
    /// Foreign tables.
    pub tables: Vec<Table>,
    /// How to open the data in other viewers.
    pub open_with: Vec<String>,
}

/// Time split of one step on one rank.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StepRow {
    /// Job id.
    pub job: String,
    /// Run: the part of the group before the step (`step1/e2e` -> `step1`'s parent run is "").
    pub run: String,
    /// Step label (`1`, or `1-2` for a collection of several steps without step markers).
    pub step: String,
    /// Rank.
    pub rank: u32,
    /// Profiles that contributed.
    pub profiles: Vec<usize>,
    /// Step duration (empty when the step itself was not marked, as in discrete mode).
    pub step_ns: Option<u64>,
    /// Time per role call.
    pub roles: BTreeMap<String, u64>,
    /// Time per phase.
    pub phases: BTreeMap<String, u64>,
    /// Device time inside the step (empty without a step range): `kernel`, `comm`, `memcpy`
    /// (each the union of that type's activity within the step) and `idle` (no device activity).
    pub device: BTreeMap<String, u64>,
    /// Step time outside every role call (empty without a step duration).
    pub other_ns: Option<u64>,
    /// GRPO/DAPO split: rollout (`generate_sequences`), log-prob (`compute_log_prob` +
    /// `compute_ref_log_prob`), update (`update_actor`).
    pub rollout_ns: u64,
    /// See `rollout_ns`.
    pub log_prob_ns: u64,
    /// See `rollout_ns`.
    pub update_ns: u64,
    /// Whether this rank is the slowest of its (run, step).
    pub slowest: bool,
}

impl StepRow {
    /// The row's time: the step duration, or the role calls' sum.
    pub fn time_ns(&self) -> u64 {
        self.step_ns.unwrap_or_else(|| self.roles.values().sum())
    }
}

/// Op statistics for one (job, track, name, rank, role).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct OpRow {
    /// Job id.
    pub job: String,
    /// Track.
    pub kind: Track,
    /// Name.
    pub name: String,
    /// Rank.
    pub rank: u32,
    /// Role call (`-` when outside every role call).
    pub role: String,
    /// Calls.
    pub count: u64,
    /// Total duration.
    pub total_ns: u64,
    /// Total self time.
    pub self_ns: u64,
    /// Longest call.
    pub max_ns: u64,
}

/// Op statistics for one (job, track, name) over the job's ranks and roles.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TopRow {
    /// Job id.
    pub job: String,
    /// Track.
    pub kind: Track,
    /// Name.
    pub name: String,
    /// Calls.
    pub count: u64,
    /// Total duration.
    pub total_ns: u64,
    /// Total self time.
    pub self_ns: u64,
    /// Mean duration.
    pub mean_ns: u64,
    /// Longest call.
    pub max_ns: u64,
    /// Share of the self time of all events of the same track in the job (0..1).
    pub share: f64,
}

/// Memory of one profile on one side (device or host; never added together).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MemSummary {
    /// Profile index.
    pub profile: usize,
    /// `device` (or the only memory the producer records) or `host`.
    pub kind: &'static str,
    /// Rank.
    pub rank: u32,
    /// Memory events.
    pub events: usize,
    /// `producer_total` (the trace reports total allocated) or `from_collection_start`.
    pub baseline: &'static str,
    /// Highest allocated bytes.
    pub peak_bytes: i64,
    /// When (ns from the profile origin; foreign traces' origin may be the epoch).
    pub peak_t_ns: i64,
    /// When, counted from the profile's first event (what is shown).
    pub peak_since_start_ns: i64,
    /// Allocated bytes after the last event.
    pub final_bytes: i64,
    /// Live allocations at the peak, by the op that made them (largest first, at most 20).
    pub at_peak: Vec<PeakOp>,
    /// `[t_ns, bytes]` samples (the maximum of each time bucket, so the peak is kept).
    pub curve: Vec<[i64; 2]>,
}

/// Bytes live at the peak that one op allocated.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PeakOp {
    /// Op name (`-` when unattributed).
    pub op: String,
    /// Bytes.
    pub bytes: i64,
    /// Allocations.
    pub count: u64,
}

/// Communication per (profile, op name).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CommRow {
    /// Profile index.
    pub profile: usize,
    /// Rank.
    pub rank: u32,
    /// Op name.
    pub name: String,
    /// Calls.
    pub count: u64,
    /// Bytes (empty when any call's size is unknown).
    pub bytes: Option<u64>,
    /// Total duration.
    pub total_ns: u64,
    /// Total wait for peers (empty when unknown).
    pub wait_ns: Option<u64>,
    /// bytes / (total − wait), GB/s; bytes / total when the wait is unknown (see
    /// `bandwidth_includes_wait`); empty when the bytes are unknown.
    pub bandwidth_gbps: Option<f64>,
    /// Whether `bandwidth_gbps` counts time spent waiting for peers (the wait is unknown).
    pub bandwidth_includes_wait: bool,
}

/// The diff of two reports.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Comparison {
    /// Label of A.
    pub a: String,
    /// Label of B.
    pub b: String,
    /// Mean time per step row: `step` (the row time) and each role call.
    pub breakdown: Vec<DiffRow>,
    /// Total time per (track, name), the 50 largest.
    pub top: Vec<DiffRow>,
}

/// One compared value.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DiffRow {
    /// What (`step`, a role name, or `kind:name`).
    pub name: String,
    /// Value in A (ns).
    pub a_ns: u64,
    /// Value in B (ns).
    pub b_ns: u64,
    /// B − A.
    pub delta_ns: i64,
    /// B / A (empty when A is 0).
    pub ratio: Option<f64>,
}

/// Builds the report.
pub fn summarise(loaded: &Loaded) -> Report {
    let (groups, job_of) = crate::jobs::group(&loaded.profiles);
    let unions: Vec<crate::device::Unions> = {
        use rayon::prelude::*;
        loaded
            .profiles
            .par_iter()
            .map(crate::device::class_unions)
            .collect()
    };
    let ids: Vec<&str> = job_of.iter().map(|&j| groups[j].id.as_str()).collect();
    // The parts are independent: the op tables on one thread, the rest on another.
    let ((ops, top, mut notes), ((breakdown, memory, comm), jobs)) = rayon::join(
        || {
            let selfs: Vec<Vec<i64>> = loaded.profiles.iter().map(self_times).collect();
            let mut notes = loaded.notes.clone();
            let (ops, top) = op_tables(&loaded.profiles, &ids, &selfs, &mut notes);
            (ops, top, notes)
        },
        || {
            rayon::join(
                || parts(loaded, &ids, &unions),
                || job_reports(&loaded.profiles, &groups, &unions),
            )
        },
    );
    if groups.len() > 1 {
        notes.push(format!(
            "{} jobs found: their figures are kept apart (use --compare to put two side by side)",
            groups.len()
        ));
    }
    Report {
        jobs,
        inputs: loaded
            .profiles
            .iter()
            .enumerate()
            .map(|(i, p)| input_of(i, p))
            .collect(),
        skipped: loaded.skipped.clone(),
        breakdown,
        ops,
        top,
        memory,
        comm,
        coverage: crate::coverage::op_coverage(&loaded.profiles),
        notes,
        compare: None,
    }
}

/// The step breakdown, memory and communication tables.
fn parts(
    loaded: &Loaded,
    ids: &[&str],
    unions: &[crate::device::Unions],
) -> (Vec<StepRow>, Vec<MemSummary>, Vec<CommRow>) {
    let memory = loaded
        .profiles
        .iter()
        .enumerate()
        .flat_map(|(i, p)| {
            [(&p.memory, "device"), (&p.host_memory, "host")]
                .into_iter()
                .filter(|(m, _)| !m.is_empty())
                .map(move |(m, kind)| memory(i, p, m, kind))
        })
        .collect();
    (
        breakdown(&loaded.profiles, ids, unions),
        memory,
        comm(&loaded.profiles),
    )
}

/// Per job and rank: files, device figures, steps.
fn job_reports(
    profiles: &[Profile],
    groups: &[JobGroup],
    unions: &[crate::device::Unions],
) -> Vec<JobReport> {
    let figures: Vec<Figures> = profiles
        .iter()
        .zip(unions)
        .map(|(p, u)| Figures::from_unions(p, u))
        .collect();
    groups
        .iter()
        .map(|g| {
            let mut ranks: BTreeMap<u32, RankReport> = BTreeMap::new();
            let mut sums: BTreeMap<u32, Figures> = BTreeMap::new();
            for &i in &g.profiles {
                let p = &profiles[i];
                let r = ranks.entry(p.rank).or_insert_with(|| RankReport {
                    rank: p.rank,
                    files: Vec::new(),
                    profiles: Vec::new(),
                    device: Device::default(),
                    steps: Vec::new(),
                    temporal: Temporal::default(),
                    overlap: Overlap::default(),
                    kernel_types: Vec::new(),
                });
                r.files.push(p.source.clone());
                r.profiles.push(i);
                r.steps.extend(steps_of(p));
                sums.entry(p.rank).or_default().add(&figures[i]);
            }
            for (rank, r) in ranks.iter_mut() {
                let f = &sums[rank];
                r.device = f.device;
                r.temporal = f.temporal();
                r.overlap = f.overlap();
                r.kernel_types = f.kernel_types();
                r.steps.sort_by(|a, b| a.step.cmp(&b.step));
            }
            JobReport {
                id: g.id.clone(),
                world_size: g.world_size,
                world_size_declared: g.world_size_declared,
                format: g.format,
                key: g.key.clone(),
                ranks: ranks.into_values().collect(),
            }
        })
        .collect()
}

/// A profile's steps: its step ranges, else the step numbers it names without ranges.
fn steps_of(p: &Profile) -> Vec<StepDur> {
    let ranged: Vec<StepDur> = p
        .events
        .iter()
        .filter(|e| e.track == Track::Step)
        .map(|e| {
            let n = p.str(e.name);
            let label = n.strip_prefix("ProfilerStep#").unwrap_or(n);
            StepDur {
                step: label
                    .parse()
                    .map(StepId::Number)
                    .unwrap_or_else(|_| StepId::Label(label.to_string())),
                dur_ns: Some(e.dur.max(0) as u64),
            }
        })
        .collect();
    if !ranged.is_empty() {
        return ranged;
    }
    p.steps
        .iter()
        .map(|&s| StepDur {
            step: StepId::Number(s),
            dur_ns: None,
        })
        .collect()
}

fn input_of(index: usize, p: &Profile) -> Input {
    Input {
        index,
        path: p.source.clone(),
        format: p.format,
        rank: p.rank,
        group: p.group.clone(),
        steps: p.steps.clone(),
        events: p.events.len(),
        memory_events: p.memory.len(),
        notes: p.notes.clone(),
        tables: p.tables.clone(),
        open_with: open_with(p),
    }
}

/// How to look at an input in the ecosystem's viewers.
fn open_with(p: &Profile) -> Vec<String> {
    match p.format {
        SourceFormat::RlprofRaw => {
            let coll = p.source.parent().and_then(|d| d.parent());
            let mut v = vec![format!("raw data: {}", p.source.display())];
            if let Some(c) = coll {
                let out = c.join("ASCEND_PROFILER_OUTPUT");
                if out.is_dir() {
                    v.push(format!(
                        "MindStudio Insight: open {} ; Perfetto UI: open {}",
                        c.display(),
                        out.join("trace_view.json").display()
                    ));
                } else {
                    v.push(format!(
                        "run `rlprof analyse {}` to write the viewers' formats (MindStudio Insight, Perfetto UI)",
                        c.display()
                    ));
                }
                for f in files_below(c, 2) {
                    let n = f.to_string_lossy();
                    if crate::discover::is_torch_trace(&n) {
                        v.push(format!("Perfetto UI / chrome://tracing: open {n}"));
                    } else if n.ends_with(".pickle") {
                        v.push(format!("PyTorch memory_viz: load {n}"));
                    }
                }
            }
            v
        }
        SourceFormat::TorchTrace => vec![format!(
            "Perfetto UI (Open trace file) or chrome://tracing: {}",
            p.source.display()
        )],
        SourceFormat::Ascend => vec![format!(
            "MindStudio Insight: open {}",
            p.source.parent().unwrap_or(&p.source).display()
        )],
    }
}

fn files_below(dir: &std::path::Path, depth: usize) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() && depth > 0 {
                out.extend(files_below(&p, depth - 1));
            } else if p.is_file() {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Self time of every event (same order as `p.events`).
pub fn self_times(p: &Profile) -> Vec<i64> {
    let mut selfs: Vec<i64> = p.events.iter().map(|e| e.dur).collect();
    let mut by_lane: FxHashMap<(Track, u32), Vec<usize>> = FxHashMap::default();
    for (i, e) in p.events.iter().enumerate() {
        by_lane.entry((e.track, e.thread)).or_default().push(i);
    }
    for idx in by_lane.values() {
        // `p.events` is sorted by (track, start, longer first), so each lane is too.
        let mut stack: Vec<usize> = Vec::new();
        for &i in idx {
            let e = p.events[i];
            while stack.last().is_some_and(|&t| p.events[t].end() <= e.start) {
                stack.pop();
            }
            if let Some(&parent) = stack.last() {
                let overlap = e.end().min(p.events[parent].end()) - e.start;
                selfs[parent] -= overlap.max(0);
            }
            stack.push(i);
        }
    }
    selfs.iter_mut().for_each(|s| *s = (*s).max(0));
    selfs
}

/// Role-call intervals of a profile, sorted, for lookups.
struct Roles {
    spans: Vec<(i64, i64, u32)>,
}

impl Roles {
    fn new(p: &Profile) -> Roles {
        let mut spans: Vec<_> = p
            .events
            .iter()
            .filter(|e| e.track == Track::RoleCall)
            .map(|e| (e.start, e.end(), e.name))
            .collect();
        spans.sort_unstable();
        Roles { spans }
    }
    fn at(&self, t: i64) -> u32 {
        let i = self.spans.partition_point(|s| s.0 <= t);
        self.spans[..i]
            .iter()
            .rev()
            .take(64)
            .find(|s| s.1 >= t)
            .map(|s| s.2)
            .unwrap_or(NONE)
    }
}

#[derive(Default, Clone, Copy)]
struct Acc {
    count: u64,
    total: u64,
    selft: u64,
    max: u64,
}

impl Acc {
    fn add(&mut self, dur: i64, selft: i64) {
        self.count += 1;
        self.total += dur.max(0) as u64;
        self.selft += selft.max(0) as u64;
        self.max = self.max.max(dur.max(0) as u64);
    }
    fn merge(&mut self, o: &Acc) {
        self.count += o.count;
        self.total += o.total;
        self.selft += o.selft;
        self.max = self.max.max(o.max);
    }
}

fn op_tables(
    profiles: &[Profile],
    jobs: &[&str],
    selfs: &[Vec<i64>],
    notes: &mut Vec<String>,
) -> (Vec<OpRow>, Vec<TopRow>) {
    type Key = (String, Track, String, u32, String);
    let mut rows: HashMap<Key, Acc> = HashMap::new();
    for ((p, s), job) in profiles.iter().zip(selfs).zip(jobs) {
        let roles = Roles::new(p);
        let mut local: FxHashMap<(Track, u32, u32), Acc> = FxHashMap::default();
        for (e, &st) in p.events.iter().zip(s) {
            if e.track.is_content() {
                local
                    .entry((e.track, e.name, roles.at(e.start)))
                    .or_default()
                    .add(e.dur, st);
            }
        }
        for ((track, name, role), acc) in local {
            let role = if role == NONE { "-" } else { p.str(role) };
            rows.entry((
                job.to_string(),
                track,
                display_name(p.str(name)).into_owned(),
                p.rank,
                role.to_string(),
            ))
            .or_default()
            .merge(&acc);
        }
    }
    let mut totals: HashMap<(String, Track, String), Acc> = HashMap::new();
    let mut track_self: HashMap<(String, Track), u64> = HashMap::new();
    for ((job, track, name, _, _), acc) in &rows {
        totals
            .entry((job.clone(), *track, name.clone()))
            .or_default()
            .merge(acc);
        *track_self.entry((job.clone(), *track)).or_default() += acc.selft;
    }
    let mut top: Vec<TopRow> = totals
        .into_iter()
        .map(|((job, kind, name), a)| TopRow {
            share: match track_self[&(job.clone(), kind)] {
                0 => 0.0,
                t => a.selft as f64 / t as f64,
            },
            job,
            kind,
            name,
            count: a.count,
            total_ns: a.total,
            self_ns: a.selft,
            mean_ns: a.total / a.count.max(1),
            max_ns: a.max,
        })
        .collect();
    top.sort_by(|a, b| (b.self_ns, &a.name, a.kind).cmp(&(a.self_ns, &b.name, b.kind)));
    let mut ops: Vec<OpRow> = rows
        .into_iter()
        .map(|((job, kind, name, rank, role), a)| OpRow {
            job,
            kind,
            name,
            rank,
            role,
            count: a.count,
            total_ns: a.total,
            self_ns: a.selft,
            max_ns: a.max,
        })
        .collect();
    ops.sort_by(|a, b| {
        (b.self_ns, &a.name, a.rank, &a.role).cmp(&(a.self_ns, &b.name, b.rank, &b.role))
    });
    if ops.len() > MAX_OP_ROWS {
        notes.push(format!(
            "op table: {} (job, track, name, rank, role) rows; the {MAX_OP_ROWS} with the most self time are listed",
            ops.len()
        ));
        ops.truncate(MAX_OP_ROWS);
    }
    (ops, top)
}

/// `step1` from `step1/e2e`: (run, step label).
fn run_and_step(p: &Profile) -> (String, String) {
    let first = p.group.split('/').next().unwrap_or("");
    let label = rlprof_profiler::controller::step_label(&p.steps);
    match first.strip_prefix("step") {
        Some(s) if !s.is_empty() => (String::new(), s.to_string()),
        _ => (p.group.clone(), label),
    }
}

fn overlap(a: &Event, s: i64, e: i64) -> u64 {
    (a.end().min(e) - a.start.max(s)).max(0) as u64
}

fn breakdown(
    profiles: &[Profile],
    jobs: &[&str],
    unions: &[crate::device::Unions],
) -> Vec<StepRow> {
    let mut rows: BTreeMap<(String, String, String, u32), StepRow> = BTreeMap::new();
    for (i, p) in profiles.iter().enumerate() {
        let job = jobs[i];
        // One pass for the few events the windows need (steps, role calls, phases).
        let mut steps: Vec<&Event> = Vec::new();
        let mut framing: Vec<&Event> = Vec::new();
        for e in &p.events {
            match e.track {
                Track::Step => steps.push(e),
                Track::RoleCall | Track::Phase => framing.push(e),
                _ => {}
            }
        }
        let (run, label) = run_and_step(p);
        let unions = (!steps.is_empty()).then(|| &unions[i]);
        let windows: Vec<(String, Option<&Event>)> = if steps.is_empty() {
            vec![(label, None)]
        } else {
            steps
                .iter()
                .map(|e| {
                    let n = p.str(e.name);
                    let lab = n.strip_prefix("ProfilerStep#").unwrap_or(n).to_string();
                    (lab, Some(*e))
                })
                .collect()
        };
        for (lab, step) in windows {
            let (s, e) = step
                .map(|x| (x.start, x.end()))
                .unwrap_or((i64::MIN, i64::MAX));
            let mut roles = BTreeMap::new();
            let mut phases = BTreeMap::new();
            for ev in framing.iter().copied() {
                let map = match ev.track {
                    Track::RoleCall => &mut roles,
                    Track::Phase => &mut phases,
                    _ => continue,
                };
                let o = overlap(ev, s, e);
                if o > 0 || (step.is_none() && ev.track == Track::RoleCall) {
                    *map.entry(p.str(ev.name).to_string()).or_insert(0) += o;
                }
            }
            if step.is_none() && roles.is_empty() {
                continue;
            }
            let row = rows
                .entry((job.to_string(), run.clone(), lab.clone(), p.rank))
                .or_insert_with(|| StepRow {
                    job: job.to_string(),
                    run: run.clone(),
                    step: lab.clone(),
                    rank: p.rank,
                    profiles: vec![],
                    step_ns: None,
                    roles: BTreeMap::new(),
                    phases: BTreeMap::new(),
                    device: BTreeMap::new(),
                    other_ns: None,
                    rollout_ns: 0,
                    log_prob_ns: 0,
                    update_ns: 0,
                    slowest: false,
                });
            row.profiles.push(i);
            if let Some(st) = step {
                *row.step_ns.get_or_insert(0) += st.dur as u64;
                if let Some(u) = &unions {
                    for (k, v) in crate::device::within(u, s, e) {
                        *row.device.entry(k.to_string()).or_insert(0) += v;
                    }
                }
            }
            for (k, v) in roles {
                *row.roles.entry(k).or_insert(0) += v;
            }
            for (k, v) in phases {
                *row.phases.entry(k).or_insert(0) += v;
            }
        }
    }
    let mut rows: Vec<StepRow> = rows.into_values().collect();
    for r in rows.iter_mut() {
        let role = |n: &str| r.roles.get(n).copied().unwrap_or(0);
        r.rollout_ns = role("generate_sequences");
        r.log_prob_ns = role("compute_log_prob") + role("compute_ref_log_prob");
        r.update_ns = role("update_actor");
        let covered: u64 = r.roles.values().sum();
        r.other_ns = r.step_ns.map(|s| s.saturating_sub(covered));
    }
    mark_slowest(&mut rows);
    rows
}

/// Marks, in each (job, run, step), the rank with the longest time
/// ([`rlprof_profiler::metrics::slowest`], the definition `analyse --cluster` uses too).
fn mark_slowest(rows: &mut [StepRow]) {
    let mut groups: HashMap<(&str, &str, &str), Vec<usize>> = HashMap::new();
    for (i, r) in rows.iter().enumerate() {
        groups.entry((&r.job, &r.run, &r.step)).or_default().push(i);
    }
    let marks: Vec<usize> = groups
        .into_values()
        .filter_map(|ix| {
            let figures = ix.iter().map(|&i| (rows[i].rank, rows[i].time_ns() as f64));
            let (rank, _) = rlprof_profiler::metrics::slowest(figures)?;
            ix.into_iter().find(|&i| rows[i].rank == rank)
        })
        .collect();
    for i in marks {
        rows[i].slowest = true;
    }
}

fn memory(index: usize, p: &Profile, mem: &[MemEvent], kind: &'static str) -> MemSummary {
    let producer = mem.iter().all(|m| m.total.is_some());
    let mut level = 0i64;
    let values: Vec<i64> = mem
        .iter()
        .map(|m| {
            level += m.delta;
            if producer {
                m.total.unwrap_or(level)
            } else {
                level
            }
        })
        .collect();
    let (peak_i, peak) = values
        .iter()
        .enumerate()
        .fold((0, i64::MIN), |b, (i, &v)| if v > b.1 { (i, v) } else { b });
    let mut live: FxHashMap<u64, (i64, u32)> = FxHashMap::default();
    for m in &mem[..=peak_i] {
        if m.delta >= 0 {
            live.insert(m.addr, (m.delta, m.op));
        } else {
            live.remove(&m.addr);
        }
    }
    let mut by_op: FxHashMap<u32, (i64, u64)> = FxHashMap::default();
    for (bytes, op) in live.values() {
        let e = by_op.entry(*op).or_default();
        e.0 += bytes;
        e.1 += 1;
    }
    let mut at_peak: Vec<PeakOp> = by_op
        .into_iter()
        .map(|(op, (bytes, count))| PeakOp {
            op: if op == NONE {
                "-".into()
            } else {
                display_name(p.str(op)).into_owned()
            },
            bytes,
            count,
        })
        .collect();
    at_peak.sort_by(|a, b| (b.bytes, &a.op).cmp(&(a.bytes, &b.op)));
    at_peak.truncate(20);
    MemSummary {
        profile: index,
        kind,
        rank: p.rank,
        events: mem.len(),
        baseline: if producer {
            "producer_total"
        } else {
            "from_collection_start"
        },
        peak_bytes: peak,
        peak_t_ns: mem[peak_i].t,
        peak_since_start_ns: mem[peak_i].t - p.extent().0,
        final_bytes: *values.last().unwrap_or(&0),
        at_peak,
        curve: curve(mem, &values),
    }
}

fn curve(mem: &[MemEvent], values: &[i64]) -> Vec<[i64; 2]> {
    let (t0, t1) = (mem[0].t, mem[mem.len() - 1].t);
    let width = ((t1 - t0) / MAX_CURVE_POINTS as i64).max(1);
    let mut out: Vec<[i64; 2]> = Vec::new();
    let mut bucket = i64::MIN;
    for (m, &v) in mem.iter().zip(values) {
        let b = (m.t - t0) / width;
        match out.last_mut() {
            Some(last) if b == bucket => {
                if v > last[1] {
                    *last = [m.t, v];
                }
            }
            _ => {
                out.push([m.t, v]);
                bucket = b;
            }
        }
    }
    out
}

fn comm(profiles: &[Profile]) -> Vec<CommRow> {
    let mut out = Vec::new();
    for (i, p) in profiles.iter().enumerate() {
        let mut by: BTreeMap<String, (u64, Option<u64>, u64, Option<u64>)> = BTreeMap::new();
        for e in p.events.iter().filter(|e| e.track == Track::Comm) {
            let d = p.detail(e);
            let r = by
                .entry(display_name(p.str(e.name)).into_owned())
                .or_insert((0, Some(0), 0, Some(0)));
            r.0 += 1;
            r.1 =
                r.1.zip(d.as_ref().and_then(|d| d.bytes))
                    .map(|(a, b)| a + b);
            r.2 += e.dur as u64;
            r.3 =
                r.3.zip(d.as_ref().and_then(|d| d.wait_ns))
                    .map(|(a, b)| a + b);
        }
        for (name, (count, bytes, total, wait)) in by {
            let busy = wait.map(|w| total.saturating_sub(w)).unwrap_or(total);
            out.push(CommRow {
                profile: i,
                rank: p.rank,
                name,
                count,
                bytes,
                total_ns: total,
                wait_ns: wait,
                bandwidth_gbps: bytes
                    .and_then(|b| rlprof_profiler::metrics::bandwidth_gbps(b, busy)),
                bandwidth_includes_wait: wait.is_none(),
            });
        }
    }
    out
}

/// Attaches the diff of `a` against `b` to `a`.
pub fn compare(mut a: Report, b: &Report, a_label: &str, b_label: &str) -> Report {
    let means = |r: &Report| {
        let mut m: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for row in &r.breakdown {
            let e = m.entry("step".into()).or_default();
            e.0 += row.time_ns();
            e.1 += 1;
            for (k, v) in &row.roles {
                let e = m.entry(k.clone()).or_default();
                e.0 += v;
                e.1 += 1;
            }
        }
        m.into_iter()
            .map(|(k, (s, n))| (k, s / n.max(1)))
            .collect::<BTreeMap<_, _>>()
    };
    let totals = |r: &Report| {
        r.top
            .iter()
            .map(|t| (format!("{}:{}", t.kind.as_str(), t.name), t.total_ns))
            .collect::<BTreeMap<_, _>>()
    };
    let mut top = diff(&totals(&a), &totals(b));
    top.sort_by(|x, y| (y.a_ns.max(y.b_ns), &x.name).cmp(&(x.a_ns.max(x.b_ns), &y.name)));
    top.truncate(50);
    a.compare = Some(Comparison {
        a: a_label.into(),
        b: b_label.into(),
        breakdown: diff(&means(&a), &means(b)),
        top,
    });
    a
}

fn diff(a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>) -> Vec<DiffRow> {
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .map(|k| {
            let (x, y) = (
                a.get(k).copied().unwrap_or(0),
                b.get(k).copied().unwrap_or(0),
            );
            DiffRow {
                name: k.clone(),
                a_ns: x,
                b_ns: y,
                delta_ns: y as i64 - x as i64,
                ratio: (x > 0).then(|| y as f64 / x as f64),
            }
        })
        .collect()
}
