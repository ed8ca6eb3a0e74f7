//! CANN's step figures, per step and rank, with CANN's names meaning what CANN means by them
//! (torch_npu's `TraceStepTimeParser`, which writes `step_trace_time.csv`; msprof-analyze reads
//! the same figures from the DB layout's `StepTraceTime`). The rules are
//! [`rlprof_profiler::metrics::cann`]'s, which the Ascend writer uses for the tables it writes;
//! here they run over the profile's device runs ([`crate::device::DeviceRuns`]).
//!
//! Where the producer wrote the figures itself (`step_trace_time.csv`, `StepTraceTime`), those
//! are the figures, read exactly (decimal microseconds to integer nanoseconds), and the row
//! says so in `source`. How these differ from HTA's idle time and temporal breakdown is in
//! `docs/metrics.md`.

use super::CannStepRow;
use crate::device::DeviceRuns;
use crate::model::{Profile, Table, Track};
use rlprof_profiler::metrics::cann;

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

/// [`computed`] with the device runs made: [`rlprof_profiler::metrics::cann`]'s rules over
/// the unions of the compute and communication runs, streamed from the events.
fn by_rules(p: &Profile, job: &str, profile: usize, runs: &DeviceRuns<'_>) -> Vec<CannStepRow> {
    let [compute, comm, _] = &runs.runs;
    if compute.events().is_empty() && comm.events().is_empty() {
        return Vec::new();
    }
    let receive: Vec<(i64, i64)> = comm
        .events()
        .iter()
        .filter(|e| cann::is_receive(p.str(e.name)))
        .map(|e| (e.start, e.end()))
        .collect();
    let mut steps: Vec<(i64, String)> = p
        .events
        .iter()
        .filter(|e| e.track == Track::Step)
        .map(|e| (e.start, p.str(e.name).to_string()))
        .collect();
    steps.sort();
    let host_starts: Vec<i64> = steps.iter().map(|s| s.0).collect();
    let figures = cann::step_figures(|| compute.union(), || comm.union(), &receive, &host_starts);
    let labels = steps
        .iter()
        .map(|(_, n)| n.strip_prefix("ProfilerStep#").unwrap_or(n).to_string())
        .chain(std::iter::repeat_with(String::new));
    figures
        .into_iter()
        .zip(labels)
        .filter_map(|(f, step)| {
            let f = f?;
            Some(CannStepRow {
                job: job.to_string(),
                profile,
                rank: p.rank,
                step,
                computing_ns: f.computing,
                communication_not_overlapped_ns: f.communication_not_overlapped,
                overlapped_ns: f.overlapped,
                communication_ns: f.communication,
                free_ns: f.free,
                stage_ns: f.stage,
                bubble_ns: f.bubble,
                communication_not_overlapped_exclude_receive_ns: f
                    .communication_not_overlapped_exclude_receive,
                preparing_ns: f.preparing,
                source: COMPUTED,
            })
        })
        .collect()
}
