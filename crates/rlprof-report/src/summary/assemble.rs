//! [`summarise`]: the report assembled from its parts, computed in parallel (op tables on one
//! side; step breakdown, memory, communication and the job reports on the other).

use super::comm::comm;
use super::inputs::input_of;
use super::jobs::job_reports;
use super::memory::memory;
use super::ops::{op_tables, self_times};
use super::steps::breakdown;
use super::{CommRow, MemSummary, Report, StepRow};
use crate::model::Loaded;

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
    let ((ops, top, mut notes), ((breakdown, memory, comm), (jobs, cann))) = rayon::join(
        || {
            let selfs: Vec<Vec<i64>> = loaded.profiles.iter().map(self_times).collect();
            let mut notes = loaded.notes.clone();
            let (ops, top) = op_tables(&loaded.profiles, &ids, &selfs, &mut notes);
            (ops, top, notes)
        },
        || {
            rayon::join(
                || parts(loaded, &ids, &unions),
                || {
                    let cann: Vec<Vec<super::CannStepRow>> = loaded
                        .profiles
                        .iter()
                        .enumerate()
                        .map(|(i, p)| super::cann::cann_steps(p, ids[i], i, &unions[i]))
                        .collect();
                    let jobs = job_reports(&loaded.profiles, &groups, &unions, &cann);
                    (jobs, cann)
                },
            )
        },
    );
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
        inputs: loaded
            .profiles
            .iter()
            .enumerate()
            .map(|(i, p)| input_of(i, p))
            .collect(),
        skipped: loaded.skipped.clone(),
        breakdown,
        cann_steps: cann.into_iter().flatten().collect(),
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
