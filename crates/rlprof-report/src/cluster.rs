//! The cluster view (`rlprof analyse PATH --cluster`): the report's own figures, per rank,
//! written as the cross-rank tables. Nothing here reads an input or computes a figure of its
//! own: every number comes from a [`Report`] (one analysis for `report`, `analyse --cluster`
//! and the Python API), so the two commands cannot disagree on any input layout `report` reads
//! (our collections, PyTorch traces, torch_npu text and DB trees, and trees mixing them).
//!
//! - per rank and step: CANN's figures ([`crate::summary::cann`]: Computing,
//!   Communication(Not Overlapped), Overlapped, Communication, Free, Stage, Bubble, Preparing),
//!   the collectives' wait for peers and the busy time of the report's step breakdown
//!   ([`StepRow::busy_ns`]);
//! - per rank and step: time in each role call;
//! - the slowest rank: [`rlprof_profiler::metrics::slowest`] of the ranks' mean busy time per
//!   step, the figure the report marks each step's slowest rank by; the gap is its mean busy
//!   time minus the other ranks' mean (a rank that computes longer makes the others wait, so
//!   their busy time drops while step times stay equal);
//! - bandwidth per op and rank in nccl-tests' conventions ([`crate::summary::comm`]), and per
//!   rank pair the ring estimate: in a ring of `n` ranks each rank sends to `rank + 1` the bus
//!   share of the message (the bus factor times `S`) in the same time, so the pair's bandwidth
//!   is the bus bandwidth.
//!
//! Outputs, in `{PATH}/cluster_analysis/`: `cluster_step.csv`, `cluster_roles.csv`,
//! `cluster_bandwidth.csv`, `cluster_pairs.csv` and `cluster_analysis.json` (everything, with
//! the slowest rank); [`render_table`] prints the summary.

use crate::error::ReportError;
use crate::summary::{Report, StepRow};
use rlprof_profiler::collection::staging::write_atomic;
use rlprof_profiler::metrics::{bus_factor, collective_kind};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The directory the cluster view is written to, below the analysed path.
pub const OUT_DIR: &str = "cluster_analysis";

/// One rank's step.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct RankStep {
    /// Job id.
    pub job: String,
    /// Rank.
    pub rank: u32,
    /// Step (empty for a profile without steps).
    pub step: String,
    /// CANN's `Stage`, ms.
    pub step_ms: f64,
    /// `Computing`, ms.
    pub computing_ms: f64,
    /// `Communication(Not Overlapped)`, ms.
    pub communication_not_overlapped_ms: f64,
    /// `Overlapped`, ms.
    pub overlapped_ms: f64,
    /// `Communication`, ms.
    pub communication_ms: f64,
    /// `Free`, ms.
    pub free_ms: f64,
    /// `Bubble`, ms.
    pub bubble_ms: f64,
    /// `Preparing`, ms (empty without a host step).
    pub preparing_ms: Option<f64>,
    /// Waiting for peers inside collectives, ms (0 when the producer records no wait).
    pub wait_ms: f64,
    /// `step_ms` − `wait_ms`.
    pub busy_ms: f64,
    /// Where CANN's figures come from (`step_trace_time.csv`, `StepTraceTime`, or computed).
    pub source: String,
}

/// Time of one role call kind on one rank in one step.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RoleTime {
    /// Rank.
    pub rank: u32,
    /// Step.
    pub step: String,
    /// Role call name.
    pub role: String,
    /// Total time, ms.
    pub ms: f64,
}

/// One op's communication on one rank.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct OpBandwidth {
    /// Op name (`all_reduce`, ...).
    pub op: String,
    /// Rank.
    pub rank: u32,
    /// Calls.
    pub count: u64,
    /// nccl-tests' message size `S`, summed (empty when a call's size is unknown).
    pub bytes: Option<u64>,
    /// Total duration, ms.
    pub time_ms: f64,
    /// Waiting part, ms (0 when unknown).
    pub wait_ms: f64,
    /// Transfer part (duration − wait), ms.
    pub transit_ms: f64,
    /// Algorithm bandwidth, GB/s (empty when unknown).
    pub bandwidth_gbps: Option<f64>,
    /// Bus bandwidth, GB/s (empty when unknown).
    pub bus_bandwidth_gbps: Option<f64>,
    /// Ranks in the op's group, when known.
    pub group_size: Option<u32>,
}

/// Estimated traffic from one rank to another for one op.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PairBandwidth {
    /// Op name.
    pub op: String,
    /// Sender.
    pub src: u32,
    /// Receiver.
    pub dst: u32,
    /// Bytes sent (the bus share of the message).
    pub bytes: u64,
    /// Transfer time, ms.
    pub transit_ms: f64,
    /// GB/s (empty when unknown).
    pub bandwidth_gbps: Option<f64>,
    /// `measured` (point-to-point) or `ring estimate`.
    pub method: String,
}

/// The slowest rank and by how much.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Slowest {
    /// Rank.
    pub rank: u32,
    /// Its mean busy time per step, ms.
    pub busy_ms: f64,
    /// The other ranks' mean busy time per step, ms.
    pub others_busy_ms: f64,
    /// `busy_ms` − `others_busy_ms`.
    pub gap_ms: f64,
    /// The gap in percent of `others_busy_ms`.
    pub gap_pct: f64,
}

/// The whole cluster view.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ClusterReport {
    /// The inputs read (files or directories), one per profile.
    pub collections: Vec<PathBuf>,
    /// Ranks found.
    pub ranks: Vec<u32>,
    /// The jobs' declared (or found) world sizes.
    pub world_size: Vec<u32>,
    /// Per rank and step.
    pub steps: Vec<RankStep>,
    /// Per rank, step and role call.
    pub roles: Vec<RoleTime>,
    /// Per op and rank.
    pub bandwidth: Vec<OpBandwidth>,
    /// Per op and rank pair.
    pub pairs: Vec<PairBandwidth>,
    /// The slowest rank.
    pub slowest: Option<Slowest>,
    /// The bandwidth convention.
    pub bandwidth_convention: String,
    /// Inputs skipped (a rank that could not be read), and other warnings.
    pub warnings: Vec<String>,
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Reads `path` as `report` does (an unreadable rank is skipped with a warning, never stops
/// the others; each rank dropped once summarised) and gives its cluster view.
pub fn analyse(path: &Path, limits: &crate::Limits) -> Result<ClusterReport, ReportError> {
    let s = crate::summary::summarise_path(path, limits, crate::summary::Keep::FiguresOnly)?;
    for s in &s.report.skipped {
        tracing::warn!("rank skipped: {}: {}", s.path.display(), s.reason);
    }
    Ok(from_report(&s.report))
}

/// The cluster view of a report.
pub fn from_report(r: &Report) -> ClusterReport {
    let mut rep = ClusterReport {
        collections: r.inputs.iter().map(|i| i.path.clone()).collect(),
        world_size: r.jobs.iter().map(|j| j.world_size).collect(),
        bandwidth_convention: crate::summary::comm::BANDWIDTH_CONVENTION.to_string(),
        ..ClusterReport::default()
    };
    for j in &r.jobs {
        rep.ranks.extend(j.ranks.iter().map(|k| k.rank));
    }
    rep.ranks.sort_unstable();
    rep.ranks.dedup();
    rep.warnings.extend(
        r.skipped
            .iter()
            .map(|s| format!("rank skipped: {}: {}", s.path.display(), s.reason)),
    );
    for i in &r.inputs {
        rep.warnings
            .extend(i.notes.iter().map(|n| format!("{}: {n}", i.path.display())));
    }
    // The breakdown's rows by (job, rank, step): wait and busy time.
    let mut rows: BTreeMap<(&str, u32, &str), &StepRow> = BTreeMap::new();
    for s in &r.breakdown {
        rows.entry((&s.job, s.rank, &s.step)).or_insert(s);
        for (role, &ns) in &s.roles {
            rep.roles.push(RoleTime {
                rank: s.rank,
                step: s.step.clone(),
                role: role.clone(),
                ms: ms(ns),
            });
        }
    }
    for c in &r.cann_steps {
        let wait = rows
            .get(&(c.job.as_str(), c.rank, c.step.as_str()))
            .and_then(|s| s.wait_ns)
            .unwrap_or(0);
        rep.steps.push(RankStep {
            job: c.job.clone(),
            rank: c.rank,
            step: c.step.clone(),
            step_ms: ms(c.stage_ns),
            computing_ms: ms(c.computing_ns),
            communication_not_overlapped_ms: ms(c.communication_not_overlapped_ns),
            overlapped_ms: ms(c.overlapped_ns),
            communication_ms: ms(c.communication_ns),
            free_ms: ms(c.free_ns),
            bubble_ms: ms(c.bubble_ns),
            preparing_ms: c.preparing_ns.map(ms),
            wait_ms: ms(wait),
            busy_ms: ms(c.stage_ns.saturating_sub(wait)),
            source: c.source.to_string(),
        });
    }
    bandwidth(r, &mut rep);
    rep.slowest = slowest(&r.breakdown);
    rep.steps.sort_by(|a, b| {
        (&a.job, step_key(&a.step), a.rank).cmp(&(&b.job, step_key(&b.step), b.rank))
    });
    rep.roles.sort_by(|a, b| {
        (step_key(&a.step), a.rank, &a.role).cmp(&(step_key(&b.step), b.rank, &b.role))
    });
    rep
}

/// Steps in numeric order where they are numbers.
fn step_key(s: &str) -> (u64, &str) {
    (s.parse().unwrap_or(u64::MAX), s)
}

/// Per op and rank (the report's communication rows summed over a rank's profiles), and the
/// ring estimate per rank pair.
fn bandwidth(r: &Report, rep: &mut ClusterReport) {
    // (op, rank) -> (the row, total ns, wait ns): time summed as integers, shown in ms.
    let mut by: BTreeMap<(&str, u32), (OpBandwidth, u64, u64)> = BTreeMap::new();
    for c in &r.comm {
        let (b, total, wait) = by.entry((&c.name, c.rank)).or_insert_with(|| {
            let row = OpBandwidth {
                op: c.name.clone(),
                rank: c.rank,
                bytes: Some(0),
                group_size: c.group_size,
                ..OpBandwidth::default()
            };
            (row, 0, 0)
        });
        b.count += c.count;
        b.bytes = b.bytes.zip(c.bytes).and_then(|(a, x)| a.checked_add(x));
        *total += c.total_ns;
        *wait += c.wait_ns.unwrap_or(0);
        if b.group_size != c.group_size {
            b.group_size = None;
        }
    }
    for (mut b, total, wait) in by.into_values() {
        let busy = total.saturating_sub(wait);
        (b.time_ms, b.wait_ms, b.transit_ms) = (ms(total), ms(wait), ms(busy));
        b.bandwidth_gbps = b
            .bytes
            .and_then(|x| rlprof_profiler::metrics::bandwidth_gbps(x, busy));
        let kind = collective_kind(&b.op);
        let factor = bus_factor(kind, b.group_size);
        b.bus_bandwidth_gbps = b.bandwidth_gbps.zip(factor).map(|(x, f)| x * f);
        if let (Some(bytes), Some(f), Some(n)) = (b.bytes, factor, b.group_size)
            && n > 1
        {
            let p2p = kind == rlprof_profiler::metrics::CollectiveKind::PointToPoint;
            rep.pairs.push(PairBandwidth {
                op: b.op.clone(),
                src: b.rank,
                dst: (b.rank + 1) % n,
                bytes: (bytes as f64 * f).round() as u64,
                transit_ms: b.transit_ms,
                bandwidth_gbps: b.bus_bandwidth_gbps,
                method: if p2p { "measured" } else { "ring estimate" }.to_string(),
            });
        }
        rep.bandwidth.push(b);
    }
}

/// The slowest rank by mean busy time per step over the report's step rows.
pub fn slowest(rows: &[StepRow]) -> Option<Slowest> {
    let mut per: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    for s in rows {
        let e = per.entry(s.rank).or_default();
        e.0 += s.busy_ns();
        e.1 += 1;
    }
    let mean: Vec<(u32, f64)> = per
        .into_iter()
        .map(|(r, (t, n))| (r, ms(t) / n as f64))
        .collect();
    let (rank, busy) = rlprof_profiler::metrics::slowest(mean.iter().copied())?;
    let others: Vec<f64> = mean.iter().filter(|m| m.0 != rank).map(|m| m.1).collect();
    let others_busy = others.iter().sum::<f64>() / others.len() as f64;
    let gap = busy - others_busy;
    Some(Slowest {
        rank,
        busy_ms: busy,
        others_busy_ms: others_busy,
        gap_ms: gap,
        gap_pct: if others_busy > 0.0 {
            100.0 * gap / others_busy
        } else {
            0.0
        },
    })
}

fn f3(v: f64) -> String {
    format!("{v:.3}")
}

fn opt(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.4}")).unwrap_or_default()
}

/// A CSV file in memory: fields quoted where they need it, `\n` line ends.
fn csv_bytes(
    header: &[&str],
    rows: impl Iterator<Item = Vec<String>>,
) -> Result<Vec<u8>, csv::Error> {
    let mut w = csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    w.write_record(header)?;
    for r in rows {
        w.write_record(&r)?;
    }
    w.into_inner().map_err(|e| e.into_error().into())
}

/// Writes the CSVs and the JSON into `out_dir`; returns the files written.
pub fn write_outputs(rep: &ClusterReport, out_dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
    std::fs::create_dir_all(out_dir).map_err(crate::error::io(out_dir))?;
    let csv_err = |name: &str| {
        let path = out_dir.join(name);
        move |e: csv::Error| ReportError::Malformed {
            path,
            message: format!("CSV: {e}"),
        }
    };
    let steps = csv_bytes(
        &[
            "Job",
            "Rank",
            "Step",
            "Stage(ms)",
            "Computing(ms)",
            "Communication(Not Overlapped)(ms)",
            "Overlapped(ms)",
            "Communication(ms)",
            "Free(ms)",
            "Bubble(ms)",
            "Preparing(ms)",
            "Wait(ms)",
            "Busy(ms)",
            "Source",
        ],
        rep.steps.iter().map(|s| {
            vec![
                s.job.clone(),
                s.rank.to_string(),
                s.step.clone(),
                f3(s.step_ms),
                f3(s.computing_ms),
                f3(s.communication_not_overlapped_ms),
                f3(s.overlapped_ms),
                f3(s.communication_ms),
                f3(s.free_ms),
                f3(s.bubble_ms),
                s.preparing_ms.map(f3).unwrap_or_default(),
                f3(s.wait_ms),
                f3(s.busy_ms),
                s.source.clone(),
            ]
        }),
    )
    .map_err(csv_err("cluster_step.csv"))?;
    let roles = csv_bytes(
        &["Rank", "Step", "Role", "Time(ms)"],
        rep.roles
            .iter()
            .map(|r| vec![r.rank.to_string(), r.step.clone(), r.role.clone(), f3(r.ms)]),
    )
    .map_err(csv_err("cluster_roles.csv"))?;
    let bw = csv_bytes(
        &[
            "Op",
            "Rank",
            "Count",
            "Bytes",
            "Time(ms)",
            "Wait(ms)",
            "Transit(ms)",
            "AlgBandwidth(GB/s)",
            "BusBandwidth(GB/s)",
            "GroupSize",
        ],
        rep.bandwidth.iter().map(|b| {
            vec![
                b.op.clone(),
                b.rank.to_string(),
                b.count.to_string(),
                b.bytes.map(|x| x.to_string()).unwrap_or_default(),
                f3(b.time_ms),
                f3(b.wait_ms),
                f3(b.transit_ms),
                opt(b.bandwidth_gbps),
                opt(b.bus_bandwidth_gbps),
                b.group_size.map(|x| x.to_string()).unwrap_or_default(),
            ]
        }),
    )
    .map_err(csv_err("cluster_bandwidth.csv"))?;
    let pairs = csv_bytes(
        &[
            "Op",
            "Src",
            "Dst",
            "Bytes",
            "Transit(ms)",
            "Bandwidth(GB/s)",
            "Method",
        ],
        rep.pairs.iter().map(|p| {
            vec![
                p.op.clone(),
                p.src.to_string(),
                p.dst.to_string(),
                p.bytes.to_string(),
                f3(p.transit_ms),
                opt(p.bandwidth_gbps),
                p.method.clone(),
            ]
        }),
    )
    .map_err(csv_err("cluster_pairs.csv"))?;
    let json = serde_json::to_vec_pretty(rep)?;
    let files = [
        ("cluster_step.csv", steps),
        ("cluster_roles.csv", roles),
        ("cluster_bandwidth.csv", bw),
        ("cluster_pairs.csv", pairs),
        ("cluster_analysis.json", json),
    ];
    let mut written = Vec::new();
    for (name, bytes) in files {
        let p = out_dir.join(name);
        write_atomic(&p, &bytes).map_err(|e| ReportError::Malformed {
            path: p.clone(),
            message: format!("not written: {e}"),
        })?;
        written.push(p);
    }
    Ok(written)
}

/// The printed summary: per-rank step table, role times, slowest rank, bandwidth per op.
pub fn render_table(rep: &ClusterReport) -> String {
    let mut s = format!(
        "cluster: {} rank(s), {} input(s)\n{:>5} {:>5} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}\n",
        rep.ranks.len(),
        rep.collections.len(),
        "step",
        "rank",
        "stage ms",
        "compute",
        "comm(n.o.)",
        "overlap",
        "free",
        "wait",
        "busy"
    );
    for r in &rep.steps {
        s.push_str(&format!(
            "{:>5} {:>5} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>10.3}\n",
            r.step,
            r.rank,
            r.step_ms,
            r.computing_ms,
            r.communication_not_overlapped_ms,
            r.overlapped_ms,
            r.free_ms,
            r.wait_ms,
            r.busy_ms
        ));
    }
    let mut roles: BTreeMap<(&str, u32), f64> = BTreeMap::new();
    for r in &rep.roles {
        *roles.entry((&r.role, r.rank)).or_default() += r.ms;
    }
    if !roles.is_empty() {
        s.push_str("role time per rank (ms, all steps):\n");
        for ((role, rank), v) in roles {
            s.push_str(&format!("  {role:<24} rank {rank:>3} {v:>10.3}\n"));
        }
    }
    match &rep.slowest {
        Some(w) => s.push_str(&format!(
            "slowest rank: {} (busy {:.3} ms/step, others {:.3} ms: +{:.3} ms, +{:.1}%)\n",
            w.rank, w.busy_ms, w.others_busy_ms, w.gap_ms, w.gap_pct
        )),
        None => s.push_str("slowest rank: - (fewer than two ranks)\n"),
    }
    if !rep.bandwidth.is_empty() {
        s.push_str("bandwidth per op and rank (nccl-tests: algbw, busbw):\n");
        for b in &rep.bandwidth {
            s.push_str(&format!(
                "  {:<24} rank {:>3} {:>6} calls {:>10.3} ms  algbw {:>10} busbw {:>10} GB/s\n",
                crate::model::display_name(&b.op),
                b.rank,
                b.count,
                b.time_ms,
                opt(b.bandwidth_gbps),
                opt(b.bus_bandwidth_gbps)
            ));
        }
    }
    for w in &rep.warnings {
        s.push_str(&format!("warning: {w}\n"));
    }
    s
}
