//! The per-job, per-rank part of the report: each rank's files, device figures (summed over
//! its profiles) and step durations.

use super::{CannStepRow, JobReport, RankReport, StepDur, StepId};
use crate::device::{Device, Figures, Overlap, Temporal};
use crate::jobs::JobGroup;
use crate::model::{Profile, Track};
use std::collections::BTreeMap;

/// Per job and rank: files, device figures (summed over the rank's profiles), steps.
pub(super) fn job_reports(
    groups: &[JobGroup],
    digests: &[super::digest::Digest],
) -> Vec<JobReport> {
    groups
        .iter()
        .map(|g| {
            let mut ranks: BTreeMap<u32, RankReport> = BTreeMap::new();
            let mut sums: BTreeMap<u32, Figures> = BTreeMap::new();
            for &i in &g.profiles {
                let d = &digests[i];
                let p = &d.light;
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
                r.steps.extend(d.steps.iter().cloned());
                sums.entry(p.rank).or_default().add(&d.figures);
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

/// A profile's steps: its step ranges; else the steps it names without ranges (a step number
/// of `kernel_details.csv`, a row of CANN's step table), each lasting its CANN `Stage` where the
/// producer wrote one.
pub(super) fn steps_of(p: &Profile, cann: &[CannStepRow]) -> Vec<StepDur> {
    let ranged: Vec<StepDur> = p
        .events
        .iter()
        .filter(|e| e.track == Track::Step)
        .map(|e| {
            let n = p.str(e.name);
            let label = n.strip_prefix("ProfilerStep#").unwrap_or(n);
            StepDur {
                step: step_id(label),
                dur_ns: Some(e.dur.max(0) as u64),
            }
        })
        .collect();
    if !ranged.is_empty() {
        return ranged;
    }
    let stage = |label: &str| {
        cann.iter()
            .find(|r| r.step == label && r.source != super::cann::COMPUTED)
            .map(|r| r.stage_ns)
    };
    let mut out: Vec<StepDur> = p
        .steps
        .iter()
        .map(|&s| StepDur {
            step: StepId::Number(s),
            dur_ns: stage(&s.to_string()),
        })
        .collect();
    for r in cann {
        let id = step_id(&r.step);
        if r.source != super::cann::COMPUTED
            && !r.step.is_empty()
            && !out.iter().any(|d| d.step == id)
        {
            out.push(StepDur {
                step: id,
                dur_ns: Some(r.stage_ns),
            });
        }
    }
    out
}

/// `3` as a number, anything else as a label.
fn step_id(label: &str) -> StepId {
    label
        .parse()
        .map(StepId::Number)
        .unwrap_or_else(|_| StepId::Label(label.to_string()))
}
