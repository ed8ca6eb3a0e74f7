//! CANN's step figures, per step and rank, with CANN's names meaning what CANN means by them
//! (torch_npu's `TraceStepTimeParser`, which writes `step_trace_time.csv`; msprof-analyze reads
//! the same figures from the DB layout's `StepTraceTime`):
//!
//! - the device timeline is cut into CANN's overlap-analysis segments: `Computing` (the union of
//!   compute tasks), `Communication` (the union of collectives), `Communication(Not
//!   Overlapped)` (collectives while no compute task runs) and `Free` (the gaps between device
//!   activity, from the first task to the last);
//! - a segment belongs to the step whose device window holds its start. A step's device window
//!   starts at the first device task at or after its host `ProfilerStep#N` start and runs to the
//!   next step's window (the last step's to the end); CANN takes the first and last task that
//!   the step's own launches produced, which needs the launch-to-task links a trace may lack;
//!   tasks run in launch order, so the two agree unless a step's first task starts before an
//!   earlier step's last one ends;
//! - per step: each figure is the sum of its segments' durations; `Bubble` the sum of
//!   `hcom_receive*` collectives; `Overlapped` = `Communication` − `Communication(Not
//!   Overlapped)`; `Communication(Not Overlapped and Exclude Receive)` = `Communication(Not
//!   Overlapped)` − `Bubble`; `Stage` = the step's segments' last end − first start − `Bubble`;
//!   `Preparing` = the first compute or communication segment's start − the host step's start
//!   (empty without a host step);
//! - without host steps, one row covers the whole profile (CANN's step `None`).
//!
//! Where the producer wrote the figures itself (`step_trace_time.csv`, `StepTraceTime`), those
//! are the figures, read exactly (decimal microseconds to integer nanoseconds), and the row
//! says so in `source`. How these differ from HTA's idle time and temporal breakdown is in
//! `docs/metrics.md`.

use super::CannStepRow;
use crate::device::{intersection, union};
use crate::model::{Profile, Table, Track};

/// `source` of a row computed here.
pub const COMPUTED: &str = "computed by CANN's rules";

/// The step figures of one profile, whose device unions ([`crate::device::class_unions`])
/// are `unions`.
pub(super) fn cann_steps(
    p: &Profile,
    job: &str,
    profile: usize,
    unions: &crate::device::Unions,
) -> Vec<CannStepRow> {
    if let Some(rows) = from_tables(p, job, profile)
        && !rows.is_empty()
    {
        return rows;
    }
    by_rules(p, job, profile, &unions[0], &unions[1])
}

/// The CSV's (or the DB table's) header names, in CANN's text spelling.
const COLUMNS: [&str; 10] = [
    "Computing",
    "Communication(Not Overlapped)",
    "Overlapped",
    "Communication",
    "Free",
    "Stage",
    "Bubble",
    "Communication(Not Overlapped and Exclude Receive)",
    "Preparing",
    "Step",
];

/// `analysis.db`'s `StepTraceTime` column names, in [`COLUMNS`] order.
pub(crate) const DB_COLUMNS: [&str; 10] = [
    "computing",
    "communication_not_overlapped",
    "overlapped",
    "communication",
    "free",
    "stage",
    "bubble",
    "communication_not_overlapped_and_exclude_receive",
    "preparing",
    "step",
];

/// Rows of the producer's own table, if the profile carries one.
fn from_tables(p: &Profile, job: &str, profile: usize) -> Option<Vec<CannStepRow>> {
    let t: &Table = p
        .tables
        .iter()
        .find(|t| t.title == "step_trace_time.csv" || t.title == "StepTraceTime")?;
    let names: &[&str; 10] = if t.title == "StepTraceTime" {
        &DB_COLUMNS
    } else {
        &COLUMNS
    };
    let col = |n: &str| t.columns.iter().position(|c| c.trim() == n);
    let cols: Vec<Option<usize>> = names.iter().map(|n| col(n)).collect();
    let step_col = cols[9].or_else(|| col("Step ID"));
    let mut out = Vec::new();
    for row in &t.rows {
        let cell = |c: Option<usize>| c.and_then(|c| row.get(c)).map(|s| s.trim());
        let us = |i: usize| cell(cols[i]).and_then(crate::exact_time::decimal_us_to_ns);
        let Some(computing) = us(0) else { continue };
        let step = cell(step_col).unwrap_or("").to_string();
        let ns = |i: usize| us(i).map(|v| v.max(0) as u64);
        out.push(CannStepRow {
            job: job.to_string(),
            profile,
            rank: p.rank,
            step: if step.eq_ignore_ascii_case("none") {
                String::new()
            } else {
                step
            },
            computing_ns: computing.max(0) as u64,
            communication_not_overlapped_ns: ns(1).unwrap_or(0),
            overlapped_ns: ns(2).unwrap_or(0),
            communication_ns: ns(3).unwrap_or(0),
            free_ns: ns(4).unwrap_or(0),
            stage_ns: ns(5).unwrap_or(0),
            bubble_ns: ns(6).unwrap_or(0),
            communication_not_overlapped_exclude_receive_ns: ns(7).unwrap_or(0),
            preparing_ns: ns(8),
            source: if t.title == "StepTraceTime" {
                "StepTraceTime"
            } else {
                "step_trace_time.csv"
            },
        });
    }
    Some(out)
}

/// Rows computed from the device timeline by CANN's rules (module doc), whatever tables the
/// profile carries (the tests hold them against the producer's own).
pub fn computed(p: &Profile, job: &str, profile: usize) -> Vec<CannStepRow> {
    let u = crate::device::class_unions(p);
    by_rules(p, job, profile, &u[0], &u[1])
}

/// [`computed`] with the unions of compute and communication known.
fn by_rules(
    p: &Profile,
    job: &str,
    profile: usize,
    compute: &[(i64, i64)],
    comm: &[(i64, i64)],
) -> Vec<CannStepRow> {
    if compute.is_empty() && comm.is_empty() {
        return Vec::new();
    }
    let mut receive = Vec::new();
    let mut steps = Vec::new();
    for e in &p.events {
        match e.track {
            Track::Comm => {
                let n = p.str(e.name).as_bytes();
                if n.len() >= 12 && n[..12].eq_ignore_ascii_case(b"hcom_receive") {
                    receive.push((e.start, e.end()));
                }
            }
            Track::Step => steps.push((e.start, p.str(e.name).to_string())),
            _ => {}
        }
    }
    let busy = union(merge_sorted(compute, comm));
    let not_overlapped = difference(comm, compute);
    let free: Vec<(i64, i64)> = busy.windows(2).map(|w| (w[0].1, w[1].0)).collect();
    steps.sort();
    // Device windows: from the first segment start at or after the host step's start.
    let first_at = |t: i64| busy.iter().map(|s| s.0).find(|&s| s >= t);
    let mut windows: Vec<(String, i64, Option<i64>)> = Vec::new();
    if steps.is_empty() {
        windows.push((String::new(), i64::MIN, None));
    } else {
        for (host_start, name) in &steps {
            let label = name.strip_prefix("ProfilerStep#").unwrap_or(name);
            let start = first_at(*host_start).unwrap_or(i64::MAX);
            windows.push((label.to_string(), start, Some(*host_start)));
        }
    }
    let mut out = Vec::new();
    for (k, (label, start, host_start)) in windows.iter().enumerate() {
        let end = windows.get(k + 1).map_or(i64::MAX, |w| w.1);
        // Every list is sorted by start: the step's segments are one slice of it.
        let inside = |v| in_window(v, *start, end);
        let sum = |v: &[(i64, i64)]| v.iter().map(|s| (s.1 - s.0) as u64).sum::<u64>();
        let (c, m, n, f) = (
            inside(compute),
            inside(comm),
            inside(&not_overlapped),
            inside(&free),
        );
        let bubble = sum(inside(&receive));
        let segments = || c.iter().chain(m).chain(n).chain(f);
        let (Some(first), Some(last)) =
            (segments().map(|s| s.0).min(), segments().map(|s| s.1).max())
        else {
            continue;
        };
        let first_task = c.iter().chain(m).map(|s| s.0).min();
        let communication = sum(m);
        let not_overlapped = sum(n);
        out.push(CannStepRow {
            job: job.to_string(),
            profile,
            rank: p.rank,
            step: label.clone(),
            computing_ns: sum(c),
            communication_not_overlapped_ns: not_overlapped,
            overlapped_ns: communication.saturating_sub(not_overlapped),
            communication_ns: communication,
            free_ns: sum(f),
            stage_ns: ((last - first) as u64).saturating_sub(bubble),
            bubble_ns: bubble,
            communication_not_overlapped_exclude_receive_ns: not_overlapped.saturating_sub(bubble),
            preparing_ns: host_start
                .zip(first_task)
                .map(|(h, t)| (t - h).max(0) as u64),
            source: COMPUTED,
        });
    }
    out
}

/// The segments of `v` (sorted by start) that start in `[start, end)`.
fn in_window(v: &[(i64, i64)], start: i64, end: i64) -> &[(i64, i64)] {
    let from = v.partition_point(|s| s.0 < start);
    let to = v.partition_point(|s| s.0 < end);
    &v[from..to.max(from)]
}

/// Two sorted lists as one sorted list, in linear time (what [`union`] would otherwise sort).
fn merge_sorted(a: &[(i64, i64)], b: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i] <= b[j] {
            out.push(a[i]);
            i += 1;
        } else {
            out.push(b[j]);
            j += 1;
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

/// `a` minus `b`, both sorted disjoint unions.
fn difference(a: &[(i64, i64)], b: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    let mut j = 0;
    for &(s, e) in a {
        let mut cur = s;
        while j < b.len() && b[j].1 <= cur {
            j += 1;
        }
        let mut k = j;
        while k < b.len() && b[k].0 < e {
            if b[k].0 > cur {
                out.push((cur, b[k].0));
            }
            cur = cur.max(b[k].1);
            k += 1;
        }
        if cur < e {
            out.push((cur, e));
        }
    }
    debug_assert_eq!(
        out.iter().map(|s| s.1 - s.0).sum::<i64>() as u64,
        a.iter().map(|s| (s.1 - s.0) as u64).sum::<u64>() - intersection(a, b)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn difference_of_unions() {
        let a = [(0, 10), (20, 30)];
        let b = [(2, 4), (8, 22), (25, 26)];
        assert_eq!(difference(&a, &b), vec![(0, 2), (4, 8), (22, 25), (26, 30)]);
        assert_eq!(difference(&a, &[]), a.to_vec());
        assert_eq!(difference(&[], &b), vec![]);
    }
}
