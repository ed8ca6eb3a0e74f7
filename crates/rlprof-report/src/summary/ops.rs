//! The op tables: self times, each op's role call, and the per-(job, track, name, rank, role)
//! rows and the per-job top table.

use super::{MAX_OP_ROWS, OpRow, TopRow};
use crate::model::{NONE, Profile, Track, display_name};
use rustc_hash::FxHashMap;
use std::collections::HashMap;

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

pub(super) fn op_tables(
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
