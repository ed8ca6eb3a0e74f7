//! The numbers of the report, computed from the loaded [`Profile`](crate::model::Profile)s:
//! per-step breakdown by role call and phase per rank, top ops and kernels, memory peak,
//! communication, and the diff of two reports. The JSON form is this structure serialised; the
//! text and HTML forms show the same.
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

mod assemble;
pub mod cann;
pub mod comm;
mod compare;
pub mod digest;
mod inputs;
mod jobs;
mod memory;
mod ops;
mod steps;

pub use assemble::{Keep, Summarised, SummarisedInput, summarise, summarise_path};
pub use compare::compare;
pub use ops::self_times;

use crate::device::{Device, KernelType, Overlap, Temporal};
use crate::model::{Skipped, SourceFormat, Table, Track};
use serde::Serialize;
use std::collections::BTreeMap;
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
    /// CANN's step figures per (profile, step) ([`cann`]).
    pub cann_steps: Vec<CannStepRow>,
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
    /// GRPO/DAPO split, by [`crate::roles::RoleClass`] in both of verl's namings: rollout
    /// (`generate_sequences`, or verl 0.9.1's `rollout` / `async_rollout`), log-prob
    /// (`compute_log_prob` + `compute_ref_log_prob`, or `actor_compute_log_prob` +
    /// `ref_compute_log_prob`), update (`update_actor` or `actor_update`); each the union of
    /// that class's calls within the step.
    pub rollout_ns: u64,
    /// See `rollout_ns`.
    pub log_prob_ns: u64,
    /// See `rollout_ns`.
    pub update_ns: u64,
    /// Time the step's collectives waited for peers (empty when the producer records no wait).
    pub wait_ns: Option<u64>,
    /// Whether this rank is the slowest of its (run, step) by [`StepRow::busy_ns`].
    pub slowest: bool,
}

impl StepRow {
    /// The row's time: the step duration, or the role calls' sum.
    pub fn time_ns(&self) -> u64 {
        self.step_ns.unwrap_or_else(|| self.roles.values().sum())
    }

    /// The row's time less the collectives' wait for peers: the slowest-rank figure (a rank
    /// that computes longer makes the others wait, so their busy time drops while their step
    /// times stay equal).
    pub fn busy_ns(&self) -> u64 {
        self.time_ns().saturating_sub(self.wait_ns.unwrap_or(0))
    }
}

/// CANN's figures of one step on one rank ([`cann`]): what `step_trace_time.csv` holds, in ns.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CannStepRow {
    /// Job id.
    pub job: String,
    /// Profile index.
    pub profile: usize,
    /// Rank.
    pub rank: u32,
    /// Step (`ProfilerStep#N`'s N; empty for CANN's step `None`, a profile without steps).
    pub step: String,
    /// `Computing`.
    pub computing_ns: u64,
    /// `Communication(Not Overlapped)`.
    pub communication_not_overlapped_ns: u64,
    /// `Overlapped`.
    pub overlapped_ns: u64,
    /// `Communication`.
    pub communication_ns: u64,
    /// `Free`.
    pub free_ns: u64,
    /// `Stage`.
    pub stage_ns: u64,
    /// `Bubble`.
    pub bubble_ns: u64,
    /// `Communication(Not Overlapped and Exclude Receive)`.
    pub communication_not_overlapped_exclude_receive_ns: u64,
    /// `Preparing` (empty without a host step to count from).
    pub preparing_ns: Option<u64>,
    /// `step_trace_time.csv` or `StepTraceTime` (the producer's own figures, read exactly),
    /// or [`cann::COMPUTED`].
    pub source: &'static str,
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
    /// nccl-tests' message size `S`, summed over the calls: the gathered output of an
    /// all-gather, the input of other collectives (empty when any call's size is unknown).
    pub bytes: Option<u64>,
    /// Total duration.
    pub total_ns: u64,
    /// Total wait for peers (empty when unknown).
    pub wait_ns: Option<u64>,
    /// nccl-tests' algorithm bandwidth: bytes / (total − wait), GB/s; bytes / total when the
    /// wait is unknown (see `bandwidth_includes_wait`); empty when the bytes are unknown.
    pub bandwidth_gbps: Option<f64>,
    /// nccl-tests' bus bandwidth: `bandwidth_gbps` times the op's factor for `group_size`
    /// ranks (`summary::comm`); empty when the op or the group size is unknown.
    pub bus_bandwidth_gbps: Option<f64>,
    /// Ranks in the collective's group, when known.
    pub group_size: Option<u32>,
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
