//! Each profile summarised on its own into a [`Digest`], then the digests merged into the
//! report ([`merge`]).
//!
//! Every figure of the report is either a profile's own (its memory, communication, coverage
//! and CANN step rows) or a sum, maximum or union over profiles of per-profile parts (step rows,
//! op rows, device figures per rank), and the few figures across profiles (jobs, the slowest
//! rank, the top table, a discrete collection's step) need only each profile's metadata. So a
//! profile's events can be dropped as soon as its digest is made: the report of a tree of many
//! ranks holds the digests, not the ranks ([`super::summarise_path`]), and the report of loaded
//! profiles ([`super::summarise`]) is the same merge.

use super::ops::{ProfileOps, op_tables, profile_ops};
use super::{CannStepRow, CommRow, Input, MemSummary, Report, StepDur, StepRow};
use crate::coverage::CoverageRow;
use crate::device::Figures;
use crate::model::{Profile, Skipped};
use crate::roles::RoleClass;

/// What the report needs of one profile, with its events dropped. Rows name no job and
/// profile 0 until [`merge`] numbers them.
#[derive(Debug)]
pub struct Digest {
    /// The profile without its events, memory, tables and notes (source, format, rank,
    /// group, steps, origin, metadata: what grouping reads; the input row holds the rest).
    pub light: Profile,
    /// [`Profile::extent`].
    pub extent: (i64, i64),
    /// Content events ([`crate::model::Track::is_content`]): the timeline's share of a page.
    pub content_events: usize,
    /// [`crate::discover`]'s fingerprint: copies of one trace are counted once.
    pub fingerprint: u64,
    /// The stage of a verl 0.9.1 discrete collection (its step is found by time, over all).
    discrete: Option<RoleClass>,
    pub(super) figures: Figures,
    pub(super) steps: Vec<StepDur>,
    cann: Vec<CannStepRow>,
    rows: Vec<StepRow>,
    ops: ProfileOps,
    memory: Vec<MemSummary>,
    comm: Vec<CommRow>,
    coverage: Vec<CoverageRow>,
    input: Input,
}

impl Digest {
    /// Leaves out the producer's own tables ([`Input::tables`]).
    pub fn drop_tables(&mut self) {
        self.input.tables = Vec::new();
    }
}

/// The profile without what [`Digest::light`] leaves out.
pub(super) fn light(p: &Profile) -> Profile {
    let mut l = Profile::new(p.source.clone(), p.format, p.rank, p.group.clone());
    l.steps = p.steps.clone();
    l.origin_ns = p.origin_ns;
    l.meta = p.meta.clone();
    l
}

/// Summarises one profile: the op tables on one thread, the rest on another (a single large
/// profile is summarised on both cores, as a tree's profiles are in parallel).
pub fn digest(p: &Profile) -> Digest {
    let one = std::slice::from_ref(p);
    let (ops, (memory, comm, coverage, (figures, cann, rows))) = rayon::join(
        || profile_ops(p),
        || {
            let memory = [(&p.memory, "device"), (&p.host_memory, "host")]
                .into_iter()
                .filter(|(m, _)| !m.is_empty())
                .map(|(m, kind)| super::memory::memory(0, p, m, kind))
                .collect::<Vec<_>>();
            // The device figures, CANN's steps and the step rows stream the device runs.
            let runs = crate::device::DeviceRuns::of(p);
            let device = (
                Figures::from_runs(&runs),
                super::cann::cann_steps(p, "", 0, &runs),
                super::steps::profile_rows(p, &runs),
            );
            (
                memory,
                super::comm::comm(one),
                crate::coverage::op_coverage(one),
                device,
            )
        },
    );
    Digest {
        light: light(p),
        extent: p.extent(),
        content_events: p.events.iter().filter(|e| e.track.is_content()).count(),
        fingerprint: crate::discover::fingerprint(p),
        discrete: super::steps::discrete_stage(p),
        figures,
        steps: super::jobs::steps_of(p, &cann),
        rows,
        ops,
        memory,
        comm,
        coverage,
        input: super::inputs::input_of(0, p),
        cann,
    }
}

/// The report of digests in load order (sorted and without copies, as
/// [`crate::discover::load`] leaves profiles), with what was skipped and remarked on.
pub fn merge(digests: Vec<Digest>, skipped: Vec<Skipped>, mut notes: Vec<String>) -> Report {
    let lights: Vec<&Profile> = digests.iter().map(|d| &d.light).collect();
    let extents: Vec<(i64, i64)> = digests.iter().map(|d| d.extent).collect();
    let (groups, job_of) = crate::jobs::group_light(&lights, &extents);
    let ids: Vec<&str> = job_of.iter().map(|&j| groups[j].id.as_str()).collect();
    let discrete = super::steps::discrete_steps(
        &digests
            .iter()
            .zip(&ids)
            .map(|(d, job)| {
                let start = d.light.origin_ns as i128 + d.extent.0 as i128;
                (*job, d.light.rank, start, d.discrete)
            })
            .collect::<Vec<_>>(),
    );
    let (ops, top) = op_tables(
        digests
            .iter()
            .zip(&ids)
            .map(|(d, job)| (*job, d.light.rank, &d.ops)),
        &mut notes,
    );
    let breakdown = super::steps::merge_rows(
        digests
            .iter()
            .zip(&ids)
            .enumerate()
            .map(|(i, (d, job))| (*job, discrete.get(&i), d.rows.as_slice())),
    );
    let jobs = super::jobs::job_reports(&groups, &digests);
    let mut cann_steps = Vec::new();
    let mut memory = Vec::new();
    let mut comm = Vec::new();
    let mut coverage = Vec::new();
    let mut inputs = Vec::new();
    for (i, (d, job)) in digests.into_iter().zip(&ids).enumerate() {
        cann_steps.extend(d.cann.into_iter().map(|mut r| {
            (r.job, r.profile) = (job.to_string(), i);
            r
        }));
        memory.extend(d.memory.into_iter().map(|mut r| {
            r.profile = i;
            r
        }));
        comm.extend(d.comm.into_iter().map(|mut r| {
            r.profile = i;
            r
        }));
        coverage.extend(d.coverage.into_iter().map(|mut r| {
            r.profile = i;
            r
        }));
        inputs.push(Input {
            index: i,
            ..d.input
        });
    }
    if !comm.is_empty() {
        notes.push(super::comm::BANDWIDTH_CONVENTION.to_string());
    }
    if groups.len() > 1 {
        notes.push(format!(
            "{} jobs found: their figures are kept apart (use --compare to put two side by side)",
            groups.len()
        ));
    }
    Report {
        jobs,
        inputs,
        skipped,
        breakdown,
        cann_steps,
        ops,
        top,
        memory,
        comm,
        coverage,
        notes,
        compare: None,
    }
}
