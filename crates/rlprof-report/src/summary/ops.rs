//! The op tables: self times, each op's role call, and the per-(job, track, name, rank, role)
//! rows and the per-job top table.

use super::{MAX_OP_ROWS, OpRow, TopRow};
use crate::model::{NONE, Profile, Track, display_name};
use rustc_hash::FxHashMap;
use std::collections::HashMap;

/// Self time of every event (same order as `p.events`).
pub fn self_times(p: &Profile) -> Vec<i64> {
    let mut selfs = vec![0; p.events.len()];
    for_each_self_time(p, |i, st| selfs[i] = st);
    selfs
}

/// Calls `f(i, self time)` once for every event `i` of `p`: its duration less the parts of
/// it that its children (the events of its track and thread nested directly in it) cover.
///
/// One pass in event order with a stack per (track, thread): an event's self time is final
/// when the stack pops it, so nothing is held per event (a collection of 10 M events would
/// otherwise hold 80 MB of self times beside its events).
pub(crate) fn for_each_self_time(p: &Profile, mut f: impl FnMut(usize, i64)) {
    // (event index, self time so far) per lane; `p.events` is sorted by (track, start, longer
    // first), so each lane is too.
    let mut lanes: FxHashMap<(Track, u32), Vec<(usize, i64)>> = FxHashMap::default();
    for (i, e) in p.events.iter().enumerate() {
        let stack = lanes.entry((e.track, e.thread)).or_default();
        while let Some(&(t, st)) = stack.last() {
            if p.events[t].end() > e.start {
                break;
            }
            f(t, st.max(0));
            stack.pop();
        }
        if let Some((parent, st)) = stack.last_mut() {
            let overlap = e.end().min(p.events[*parent].end()) - e.start;
            *st -= overlap.max(0);
        }
        stack.push((i, e.dur));
    }
    for stack in lanes.into_values() {
        for (t, st) in stack {
            f(t, st.max(0));
        }
    }
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

/// Calls, total, self and longest time of one op row.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Acc {
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

/// One profile's op statistics per (track, name as shown, role call); its rank and job are the
/// profile's. Names are kept once per profile, rows refer to them by index: a rank's digest
/// holds hundreds of rows over far fewer names, and a cluster's report holds a digest per rank.
#[derive(Debug, Default)]
pub(super) struct ProfileOps {
    names: Vec<String>,
    /// (track, name, role call, statistics); the role `-` when outside every role call.
    rows: Vec<(Track, u32, u32, Acc)>,
}

/// A profile's op statistics ([`ProfileOps`]), from its events and their self times.
pub(super) fn profile_ops(p: &Profile) -> ProfileOps {
    let roles = Roles::new(p);
    let mut local: FxHashMap<(Track, u32, u32), Acc> = FxHashMap::default();
    for_each_self_time(p, |i, st| {
        let e = &p.events[i];
        if e.track.is_content() {
            local
                .entry((e.track, e.name, roles.at(e.start)))
                .or_default()
                .add(e.dur, st);
        }
    });
    let mut ids: HashMap<String, u32> = HashMap::new();
    let mut out = ProfileOps::default();
    let mut id = |s: std::borrow::Cow<'_, str>| -> u32 {
        if let Some(&i) = ids.get(s.as_ref()) {
            return i;
        }
        let i = out.names.len() as u32;
        out.names.push(s.to_string());
        ids.insert(s.into_owned(), i);
        i
    };
    let mut named: FxHashMap<(Track, u32, u32), Acc> = FxHashMap::default();
    for ((track, name, role), acc) in local {
        let role = if role == NONE { "-" } else { p.str(role) };
        let key = (track, id(display_name(p.str(name))), id(role.into()));
        named.entry(key).or_default().merge(&acc);
    }
    out.rows = named
        .into_iter()
        .map(|((t, n, r), a)| (t, n, r, a))
        .collect();
    out.names.shrink_to_fit();
    out
}

/// The op rows per (job, track, name, rank, role) and the per-job top table, from each
/// profile's [`ProfileOps`] with its job and rank.
///
/// Rows of different ranks never add up, so the profiles are merged a rank at a time, and of
/// the rows only the [`MAX_OP_ROWS`] kept are held (a bounded heap): a cluster's merge holds a
/// rank's rows, the kept rows and the per-name totals, not every rank's rows at once.
pub(super) fn op_tables<'a>(
    parts: impl Iterator<Item = (&'a str, u32, &'a ProfileOps)>,
    notes: &mut Vec<String>,
) -> (Vec<OpRow>, Vec<TopRow>) {
    use std::cmp::Reverse;
    use std::collections::{BTreeMap, BinaryHeap};
    let mut by_rank: BTreeMap<(&'a str, u32), Vec<&'a ProfileOps>> = BTreeMap::new();
    for (job, rank, ops) in parts {
        by_rank.entry((job, rank)).or_default().push(ops);
    }
    // A row in the table's order (most self time first, then name, rank, role; job and track
    // only break exact ties), with its other figures.
    type Kept<'a> = (
        Reverse<u64>,
        &'a str,
        u32,
        &'a str,
        &'a str,
        Track,
        [u64; 3],
    );
    let mut kept: BinaryHeap<Kept<'a>> = BinaryHeap::new();
    let mut all_rows = 0usize;
    let mut totals: HashMap<(&str, Track, &str), Acc> = HashMap::new();
    let mut track_self: HashMap<(&str, Track), u64> = HashMap::new();
    for ((job, rank), profiles) in by_rank {
        // Names are borrowed from the digests: nothing is copied until the rows kept.
        let mut rows: HashMap<(Track, &'a str, &'a str), Acc> = HashMap::new();
        for ops in profiles {
            for &(track, name, role, acc) in &ops.rows {
                let (name, role) = (&ops.names[name as usize], &ops.names[role as usize]);
                rows.entry((track, name.as_str(), role.as_str()))
                    .or_default()
                    .merge(&acc);
            }
        }
        all_rows += rows.len();
        for ((track, name, role), acc) in rows {
            totals.entry((job, track, name)).or_default().merge(&acc);
            *track_self.entry((job, track)).or_default() += acc.selft;
            kept.push((
                Reverse(acc.selft),
                name,
                rank,
                role,
                job,
                track,
                [acc.count, acc.total, acc.max],
            ));
            if kept.len() > MAX_OP_ROWS {
                kept.pop();
            }
        }
    }
    let mut top: Vec<TopRow> = totals
        .into_iter()
        .map(|((job, kind, name), a)| TopRow {
            share: match track_self[&(job, kind)] {
                0 => 0.0,
                t => a.selft as f64 / t as f64,
            },
            job: job.to_string(),
            kind,
            name: name.to_string(),
            count: a.count,
            total_ns: a.total,
            self_ns: a.selft,
            mean_ns: a.total / a.count.max(1),
            max_ns: a.max,
        })
        .collect();
    top.sort_by(|a, b| (b.self_ns, &a.name, a.kind).cmp(&(a.self_ns, &b.name, b.kind)));
    if all_rows > MAX_OP_ROWS {
        notes.push(format!(
            "op table: {all_rows} (job, track, name, rank, role) rows; the {MAX_OP_ROWS} with the most self time are listed"
        ));
    }
    let ops = kept
        .into_sorted_vec()
        .into_iter()
        .map(
            |(Reverse(self_ns), name, rank, role, job, kind, [count, total_ns, max_ns])| OpRow {
                job: job.to_string(),
                kind,
                name: name.to_string(),
                rank,
                role: role.to_string(),
                count,
                total_ns,
                self_ns,
                max_ns,
            },
        )
        .collect();
    (ops, top)
}
