//! The step breakdown: per (job, run, step, rank), the step time split by role call and phase,
//! the device figures within the step, and the slowest rank of each step.

use super::StepRow;
use crate::model::{Event, Profile, Track};
use crate::roles::{RoleClass, role_class};
use std::collections::{BTreeMap, HashMap};

/// Length of the union of intervals.
fn union_len(v: Vec<(i64, i64)>) -> u64 {
    crate::intervals::union(v)
        .iter()
        .map(|&(a, b)| (b - a) as u64)
        .sum()
}

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

/// The stage a discrete collection holds, by its directory: verl 0.9.1 writes each call's
/// collection to `save_path/{stage}/...` (`actor_update`, `rollout_generate`, ...).
pub(super) fn discrete_stage(p: &Profile) -> Option<RoleClass> {
    let class = role_class(p.group.split('/').next()?)?;
    // Our own collections know their steps (the raw file's metadata); foreign ones do not.
    if !p.steps.is_empty() || p.events.iter().any(|e| e.track == Track::Step) {
        return None;
    }
    Some(class)
}

/// verl 0.9.1's discrete collections of one rank, grouped into steps by time: in start order,
/// a step ends where a stage already seen in it comes again (each stage runs once per step).
/// Takes each profile's (job, rank, absolute start, stage when discrete) and gives each
/// discrete profile its (run, step label): run empty, steps counted from 1 in the order
/// collected (the step numbers themselves are not in the files).
pub(super) fn discrete_steps(
    profiles: &[(&str, u32, i128, Option<RoleClass>)],
) -> HashMap<usize, (String, String)> {
    // (job, rank) -> (absolute start, profile, stage).
    type Calls = Vec<(i128, usize, RoleClass)>;
    let mut by_rank: BTreeMap<(&str, u32), Calls> = BTreeMap::new();
    for (i, &(job, rank, start, class)) in profiles.iter().enumerate() {
        if let Some(class) = class {
            by_rank
                .entry((job, rank))
                .or_default()
                .push((start, i, class));
        }
    }
    let mut out = HashMap::new();
    for (_, mut v) in by_rank {
        v.sort();
        let mut step = 1u64;
        let mut seen: Vec<RoleClass> = Vec::new();
        for (_, i, class) in v {
            if seen.contains(&class) {
                step += 1;
                seen.clear();
            }
            seen.push(class);
            out.insert(i, (String::new(), step.to_string()));
        }
    }
    out
}

/// One profile's step rows, each keyed by its (run, step label, rank) with an empty job and
/// profile 0 (set by [`merge_rows`]): the step time split by role call and phase, the device
/// figures within the step and the collectives' wait.
pub(super) fn profile_rows(p: &Profile, runs: &crate::device::DeviceRuns<'_>) -> Vec<StepRow> {
    let mut rows: BTreeMap<(String, String), StepRow> = BTreeMap::new();
    // One pass for the few events the windows need (steps, role calls, phases).
    let mut steps: Vec<&Event> = Vec::new();
    let mut framing: Vec<&Event> = Vec::new();
    // Collectives with a recorded wait for peers: (start, wait).
    let mut waits: Vec<(i64, u64)> = Vec::new();
    for e in &p.events {
        match e.track {
            Track::Step => steps.push(e),
            Track::RoleCall | Track::Phase => framing.push(e),
            Track::Comm => {
                if let Some(w) = p.decoded_detail(e).and_then(|d| d.wait_ns) {
                    waits.push((e.start, w));
                }
            }
            _ => {}
        }
    }
    let (run, label) = run_and_step(p);
    let runs = (!steps.is_empty()).then_some(runs);
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
        // Per class, the role calls' intervals within the window: a stage range nested in
        // another of its class (`async_rollout` in `rollout`) counts once.
        let mut classes: BTreeMap<RoleClass, Vec<(i64, i64)>> = BTreeMap::new();
        for ev in framing.iter().copied() {
            if ev.track == Track::RoleCall
                && let Some(c) = role_class(p.str(ev.name))
            {
                let (a, b) = (ev.start.max(s), ev.end().min(e));
                if b > a {
                    classes.entry(c).or_default().push((a, b));
                }
            }
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
            .entry((run.clone(), lab.clone()))
            .or_insert_with(|| StepRow {
                job: String::new(),
                run: run.clone(),
                step: lab.clone(),
                rank: p.rank,
                profiles: vec![0],
                step_ns: None,
                roles: BTreeMap::new(),
                phases: BTreeMap::new(),
                device: BTreeMap::new(),
                other_ns: None,
                rollout_ns: 0,
                log_prob_ns: 0,
                update_ns: 0,
                wait_ns: None,
                slowest: false,
            });
        if !waits.is_empty() {
            let w: u64 = waits
                .iter()
                .filter(|(t, _)| (s..e).contains(t))
                .map(|(_, w)| w)
                .sum();
            *row.wait_ns.get_or_insert(0) += w;
        }
        if let Some(st) = step {
            *row.step_ns.get_or_insert(0) += st.dur as u64;
            if let Some(u) = &runs {
                for (k, v) in u.within(s, e) {
                    *row.device.entry(k.to_string()).or_insert(0) += v;
                }
            }
        }
        for (k, v) in roles {
            *row.roles.entry(k).or_insert(0) += v;
        }
        for (c, iv) in classes {
            let t = union_len(iv);
            match c {
                RoleClass::Rollout => row.rollout_ns += t,
                RoleClass::LogProb => row.log_prob_ns += t,
                RoleClass::Update => row.update_ns += t,
                _ => {}
            }
        }
        for (k, v) in phases {
            *row.phases.entry(k).or_insert(0) += v;
        }
    }
    rows.into_values().collect()
}

/// The step breakdown from each profile's rows ([`profile_rows`]), given per profile in load
/// order with its job and, for a discrete collection, its (run, step label): rows of one
/// (job, run, step, rank) are added up; then each row's time outside the role calls and the
/// slowest rank of each step.
pub(super) fn merge_rows<'a>(
    parts: impl Iterator<Item = (&'a str, Option<&'a (String, String)>, &'a [StepRow])>,
) -> Vec<StepRow> {
    let mut rows: BTreeMap<(String, String, String, u32), StepRow> = BTreeMap::new();
    for (i, (job, relabel, part)) in parts.enumerate() {
        for r in part {
            let (run, step) = match relabel {
                Some((run, step)) => (run.clone(), step.clone()),
                None => (r.run.clone(), r.step.clone()),
            };
            let key = (job.to_string(), run.clone(), step.clone(), r.rank);
            let Some(row) = rows.get_mut(&key) else {
                let mut row = r.clone();
                (row.job, row.run, row.step, row.profiles) = (job.to_string(), run, step, vec![i]);
                rows.insert(key, row);
                continue;
            };
            row.profiles.push(i);
            if let Some(w) = r.wait_ns {
                *row.wait_ns.get_or_insert(0) += w;
            }
            if let Some(st) = r.step_ns {
                *row.step_ns.get_or_insert(0) += st;
            }
            for (k, v) in &r.device {
                *row.device.entry(k.clone()).or_insert(0) += v;
            }
            for (k, v) in &r.roles {
                *row.roles.entry(k.clone()).or_insert(0) += v;
            }
            for (k, v) in &r.phases {
                *row.phases.entry(k.clone()).or_insert(0) += v;
            }
            row.rollout_ns += r.rollout_ns;
            row.log_prob_ns += r.log_prob_ns;
            row.update_ns += r.update_ns;
        }
    }
    let mut rows: Vec<StepRow> = rows.into_values().collect();
    for r in rows.iter_mut() {
        let covered: u64 = r.roles.values().sum();
        r.other_ns = r.step_ns.map(|s| s.saturating_sub(covered));
    }
    mark_slowest(&mut rows);
    rows
}

/// Marks, in each (job, run, step), the rank with the longest busy time ([`StepRow::busy_ns`],
/// [`rlprof_profiler::metrics::slowest`]; `analyse --cluster` ranks by its mean).
fn mark_slowest(rows: &mut [StepRow]) {
    let mut groups: HashMap<(&str, &str, &str), Vec<usize>> = HashMap::new();
    for (i, r) in rows.iter().enumerate() {
        groups.entry((&r.job, &r.run, &r.step)).or_default().push(i);
    }
    let marks: Vec<usize> = groups
        .into_values()
        .filter_map(|ix| {
            let figures = ix.iter().map(|&i| (rows[i].rank, rows[i].busy_ns() as f64));
            let (rank, _) = rlprof_profiler::metrics::slowest(figures)?;
            ix.into_iter().find(|&i| rows[i].rank == rank)
        })
        .collect();
    for i in marks {
        rows[i].slowest = true;
    }
}
