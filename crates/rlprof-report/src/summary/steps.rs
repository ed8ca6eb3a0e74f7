//! The step breakdown: per (job, run, step, rank), the step time split by role call and phase,
//! the device figures within the step, and the slowest rank of each step.

use super::StepRow;
use crate::model::{Event, Profile, Track};
use std::collections::{BTreeMap, HashMap};

/// `step1` from `step1/e2e`: (run, step label). rlprof's collections in verl's layout
/// (`train/`, `<stage>/`, flat torch) carry their steps: one run, told apart by step.
fn run_and_step(p: &Profile) -> (String, String) {
    let first = p.group.split('/').next().unwrap_or("");
    let label = rlprof_profiler::collection::names::step_label(&p.steps);
    match first.strip_prefix("step") {
        Some(s) if !s.is_empty() => (String::new(), s.to_string()),
        _ if p.format == crate::model::SourceFormat::RlprofRaw && !p.steps.is_empty() => {
            (String::new(), label)
        }
        _ => (p.group.clone(), label),
    }
}

fn overlap(a: &Event, s: i64, e: i64) -> u64 {
    (a.end().min(e) - a.start.max(s)).max(0) as u64
}

pub(super) fn breakdown(
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
        // verl's stage labels, and the function names of collections from older builds.
        r.rollout_ns = role("rollout_generate") + role("generate_sequences");
        r.log_prob_ns = role("actor_compute_log_prob")
            + role("ref_compute_log_prob")
            + role("compute_log_prob")
            + role("compute_ref_log_prob");
        r.update_ns = role("actor_update") + role("update_actor");
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
