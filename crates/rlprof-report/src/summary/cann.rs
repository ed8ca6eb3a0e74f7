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
use crate::device::DeviceRuns;
use crate::intervals::{Union, difference, merge};
use crate::model::{Profile, Table, Track};

/// `source` of a row computed here.
pub const COMPUTED: &str = "computed by CANN's rules";

/// The step figures of one profile, whose device tracks are `runs`.
pub(super) fn cann_steps(
    p: &Profile,
    job: &str,
    profile: usize,
    runs: &DeviceRuns<'_>,
) -> Vec<CannStepRow> {
    if let Some(rows) = from_tables(p, job, profile)
        && !rows.is_empty()
    {
        return rows;
    }
    by_rules(p, job, profile, runs)
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
    by_rules(p, job, profile, &DeviceRuns::of(p))
}

/// One step's sums while the segments stream past ([`by_rules`]).
#[derive(Default)]
struct Window {
    computing: u64,
    communication: u64,
    not_overlapped: u64,
    free: u64,
    bubble: u64,
    /// First start and last end of its compute, communication, not-overlapped and free
    /// segments.
    first: Option<i64>,
    last: Option<i64>,
    /// First start of its compute or communication segments.
    first_task: Option<i64>,
}

impl Window {
    fn span(&mut self, (s, e): (i64, i64)) {
        self.first = Some(self.first.map_or(s, |f| f.min(s)));
        self.last = Some(self.last.map_or(e, |l| l.max(e)));
    }
}

/// [`computed`] with the device runs made. Every union streams from the events (compute,
/// communication, their union `busy`, communication not overlapped, the gaps of `busy`): a
/// segment belongs to the step whose device window holds its start.
fn by_rules(p: &Profile, job: &str, profile: usize, runs: &DeviceRuns<'_>) -> Vec<CannStepRow> {
    let [compute, comm, _] = &runs.runs;
    if compute.events().is_empty() && comm.events().is_empty() {
        return Vec::new();
    }
    let receive: Vec<(i64, i64)> = comm
        .events()
        .iter()
        .filter(|e| {
            let n = p.str(e.name).as_bytes();
            n.len() >= 12 && n[..12].eq_ignore_ascii_case(b"hcom_receive")
        })
        .map(|e| (e.start, e.end()))
        .collect();
    let mut steps: Vec<(i64, String)> = p
        .events
        .iter()
        .filter(|e| e.track == Track::Step)
        .map(|e| (e.start, p.str(e.name).to_string()))
        .collect();
    steps.sort();
    let busy = || Union::new(merge(compute.union(), comm.union()));
    // Device windows: from the first busy segment starting at or after the host step's start
    // (steps and busy segments both in start order: one pass).
    let mut windows: Vec<(String, i64, Option<i64>)> = Vec::new();
    if steps.is_empty() {
        windows.push((String::new(), i64::MIN, None));
    } else {
        let mut b = busy().map(|s| s.0).peekable();
        for (host_start, name) in &steps {
            while b.next_if(|&s| s < *host_start).is_some() {}
            let label = name.strip_prefix("ProfilerStep#").unwrap_or(name);
            let start = b.peek().copied().unwrap_or(i64::MAX);
            windows.push((label.to_string(), start, Some(*host_start)));
        }
    }
    let starts: Vec<i64> = windows.iter().map(|w| w.1).collect();
    let mut acc: Vec<Window> = windows.iter().map(|_| Window::default()).collect();
    // The window holding `t`: the last whose start is at or before it (a window that starts
    // where the next starts is empty).
    let at = |t: i64| starts.partition_point(|&w| w <= t).checked_sub(1);
    for seg in compute.union() {
        if let Some(w) = at(seg.0) {
            acc[w].computing += (seg.1 - seg.0) as u64;
            acc[w].span(seg);
            acc[w].first_task = Some(acc[w].first_task.map_or(seg.0, |f| f.min(seg.0)));
        }
    }
    for seg in comm.union() {
        if let Some(w) = at(seg.0) {
            acc[w].communication += (seg.1 - seg.0) as u64;
            acc[w].span(seg);
            acc[w].first_task = Some(acc[w].first_task.map_or(seg.0, |f| f.min(seg.0)));
        }
    }
    for seg in difference(comm.union(), compute.union()) {
        if let Some(w) = at(seg.0) {
            acc[w].not_overlapped += (seg.1 - seg.0) as u64;
            acc[w].span(seg);
        }
    }
    let mut prev: Option<i64> = None;
    for (s, e) in busy() {
        if let Some(gap_start) = prev
            && let Some(w) = at(gap_start)
        {
            acc[w].free += (s - gap_start) as u64;
            acc[w].span((gap_start, s));
        }
        prev = Some(e);
    }
    for &(s, e) in &receive {
        if let Some(w) = at(s) {
            acc[w].bubble += (e - s) as u64;
        }
    }
    let mut out = Vec::new();
    for ((label, _, host_start), w) in windows.into_iter().zip(acc) {
        let (Some(first), Some(last)) = (w.first, w.last) else {
            continue;
        };
        out.push(CannStepRow {
            job: job.to_string(),
            profile,
            rank: p.rank,
            step: label,
            computing_ns: w.computing,
            communication_not_overlapped_ns: w.not_overlapped,
            overlapped_ns: w.communication.saturating_sub(w.not_overlapped),
            communication_ns: w.communication,
            free_ns: w.free,
            stage_ns: ((last - first) as u64).saturating_sub(w.bubble),
            bubble_ns: w.bubble,
            communication_not_overlapped_exclude_receive_ns: w
                .not_overlapped
                .saturating_sub(w.bubble),
            preparing_ns: host_start
                .zip(w.first_task)
                .map(|(h, t)| (t - h).max(0) as u64),
            source: COMPUTED,
        });
    }
    out
}
