//! Cluster analysis (`rlprof analyse PATH --cluster`): one step across ranks, computed from the
//! raw collections (not from the per-rank exports, so it also checks them):
//! - per rank and step: step time and its split into Computing (union of kernel intervals),
//!   Communication (union of collective intervals), Overlapped (their intersection),
//!   Communication(Not Overlapped) and Free (the rest of the step), plus the time spent waiting
//!   for the slowest peer (each collective's recorded wait) and "busy" = step - wait;
//! - per rank and step: time in each role call (`generate_sequences`, `update_actor`, ...);
//! - the slowest rank: the highest mean busy time; the gap is its mean busy time minus the mean
//!   of the other ranks' (a rank that computes longer makes the others wait, so their busy time
//!   drops while step times stay equal);
//! - bandwidth per op and rank: bytes / transfer time (duration - wait), the algorithm bandwidth,
//!   and per rank pair the ring estimate: in a ring collective of `n` ranks each rank sends to
//!   `rank + 1` the bus-bandwidth share of the bytes (`2(n-1)/n` for all-reduce, `(n-1)/n` for
//!   all-gather and reduce-scatter, all of it for broadcast) in the same transfer time. Measured
//!   point-to-point ops (with a peer) are reported as they are.
//!
//! Collections without raw data of ours but with an Ascend profiler DB (torch_npu's
//! `export_type=Db` output) are read from the DB ([`crate::cluster_db_reader`]).
//!
//! Outputs, in `{PATH}/cluster_analysis/`: `cluster_step.csv`, `cluster_roles.csv`,
//! `cluster_bandwidth.csv`, `cluster_pairs.csv` and `cluster_analysis.json` (everything, with
//! the slowest rank); [`render_table`] prints the summary.

use crate::analyse::{find_collections, raw_files};
use crate::decode::{Event, Index};
use crate::error::ExportError;
use rlprof_profiler::collection::staging::write_atomic;
use rlprof_profiler::metrics::bandwidth_gbps;
use rlprof_profiler::record::RangeCat;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One rank's step.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct RankStep {
    /// Rank.
    pub rank: u32,
    /// Step number.
    pub step: u64,
    /// Step time, ms.
    pub step_ms: f64,
    /// Union of kernel time, ms.
    pub computing_ms: f64,
    /// Communication not overlapped by computing, ms.
    pub communication_not_overlapped_ms: f64,
    /// Computing and communication at once, ms.
    pub overlapped_ms: f64,
    /// Union of communication time, ms.
    pub communication_ms: f64,
    /// Neither, ms.
    pub free_ms: f64,
    /// Waiting for the slowest peer inside collectives, ms.
    pub wait_ms: f64,
    /// Step time minus wait, ms.
    pub busy_ms: f64,
}

/// Time of one role call kind on one rank in one step.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RoleTime {
    /// Rank.
    pub rank: u32,
    /// Step.
    pub step: u64,
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
    /// Group.
    pub group: String,
    /// Rank.
    pub rank: u32,
    /// Calls.
    pub count: u64,
    /// Bytes (the op's buffer size, summed).
    pub bytes: u64,
    /// Total duration, ms.
    pub time_ms: f64,
    /// Waiting part, ms.
    pub wait_ms: f64,
    /// Transfer part (duration - wait), ms.
    pub transit_ms: f64,
    /// bytes / transfer time, GB/s (empty when there was no transfer time).
    pub bandwidth_gbps: Option<f64>,
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
    /// Bytes sent (ring estimate for collectives).
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
    /// Mean busy time of the other ranks, ms.
    pub others_busy_ms: f64,
    /// Difference, ms.
    pub gap_ms: f64,
    /// Difference relative to the others, percent.
    pub gap_pct: f64,
}

/// The whole analysis.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ClusterReport {
    /// Collections read.
    pub collections: Vec<PathBuf>,
    /// Ranks seen.
    pub ranks: Vec<u32>,
    /// Per rank and step.
    pub steps: Vec<RankStep>,
    /// Per rank, step and role call.
    pub roles: Vec<RoleTime>,
    /// Per op and rank.
    pub bandwidth: Vec<OpBandwidth>,
    /// Per op and rank pair.
    pub pairs: Vec<PairBandwidth>,
    /// Slowest rank (empty with fewer than two ranks).
    pub slowest: Option<Slowest>,
    /// Ranks skipped (a profiler DB that could not be read, with the reason) and rows left
    /// out of the ranks read; absent when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// What one raw file contributes.
#[derive(Default)]
struct RankData {
    steps: BTreeMap<u64, StepAcc>,
    roles: BTreeMap<(u64, String), u64>,
    ops: BTreeMap<(String, String), OpAcc>,
    p2p: BTreeMap<(String, u32), OpAcc>,
}

#[derive(Default)]
struct StepAcc {
    span: (u64, u64),
    kernels: Vec<(u64, u64)>,
    comms: Vec<(u64, u64)>,
    wait: u64,
}

#[derive(Default, Clone, Copy)]
struct OpAcc {
    count: u64,
    bytes: u64,
    time: u64,
    wait: u64,
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Merges intervals into a sorted disjoint union.
fn union(mut v: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    v.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(v.len());
    for (a, b) in v {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

fn total(v: &[(u64, u64)]) -> u64 {
    v.iter().map(|(a, b)| b - a).sum()
}

/// Length of the intersection of two sorted disjoint unions.
fn intersection(a: &[(u64, u64)], b: &[(u64, u64)]) -> u64 {
    let (mut i, mut j, mut sum) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        let lo = a[i].0.max(b[j].0);
        let hi = a[i].1.min(b[j].1);
        sum += hi.saturating_sub(lo);
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    sum
}

/// Clips `(a, b)` to `span`.
fn clip((a, b): (u64, u64), span: (u64, u64)) -> Option<(u64, u64)> {
    let (lo, hi) = (a.max(span.0), b.min(span.1));
    (hi > lo).then_some((lo, hi))
}

fn read_rank(idx: &Index) -> Result<RankData, ExportError> {
    let mut d = RankData::default();
    for s in &idx.steps {
        d.steps.insert(
            s.step,
            StepAcc {
                span: (s.start, s.end),
                ..Default::default()
            },
        );
    }
    idx.replay(|e| take_event(idx, &mut d, e))?;
    Ok(d)
}

fn take_event(idx: &Index, d: &mut RankData, e: &Event) {
    let step_of = |ts: u64| idx.step_at(ts);
    match e {
        Event::Kernel(k) => {
            if let Some(acc) = step_of(k.start).and_then(|s| d.steps.get_mut(&s))
                && let Some(iv) = clip((k.start, k.end), acc.span)
            {
                acc.kernels.push(iv);
            }
        }
        Event::Comm(c) => {
            if let Some(acc) = step_of(c.start).and_then(|s| d.steps.get_mut(&s)) {
                if let Some(iv) = clip((c.start, c.end), acc.span) {
                    acc.comms.push(iv);
                }
                acc.wait += c.wait_ns.min(c.end - c.start);
            }
            let (op, group) = (idx.name(c.name).to_string(), idx.name(c.group).to_string());
            let acc = match c.peer {
                Some(p) => d.p2p.entry((op, p as u32)).or_default(),
                None => d.ops.entry((op, group)).or_default(),
            };
            acc.count += 1;
            acc.bytes += c.bytes;
            acc.time += c.end - c.start;
            acc.wait += c.wait_ns.min(c.end - c.start);
        }
        Event::Range(r) if r.cat == RangeCat::RoleCall as u8 => {
            if let Some(s) = step_of(r.start).filter(|s| d.steps.contains_key(s)) {
                *d.roles
                    .entry((s, idx.name(r.name).to_string()))
                    .or_default() += r.end - r.start;
            }
        }
        _ => {}
    }
}

fn rank_step(rank: u32, step: u64, acc: StepAcc) -> RankStep {
    let dur = acc.span.1 - acc.span.0;
    let k = union(acc.kernels);
    let c = union(acc.comms);
    let (computing, comm) = (total(&k), total(&c));
    let overlapped = intersection(&k, &c);
    let comm_no = comm - overlapped;
    let free = dur.saturating_sub(computing + comm_no);
    let wait = acc.wait.min(dur);
    RankStep {
        rank,
        step,
        step_ms: ms(dur),
        computing_ms: ms(computing),
        communication_not_overlapped_ms: ms(comm_no),
        overlapped_ms: ms(overlapped),
        communication_ms: ms(comm),
        free_ms: ms(free),
        wait_ms: ms(wait),
        busy_ms: ms(dur - wait),
    }
}

/// Share of an op's bytes each rank sends to its ring neighbour.
fn ring_share(op: &str, n: u32) -> f64 {
    let n = n.max(1) as f64;
    if op.contains("all_reduce") || op.contains("allreduce") {
        2.0 * (n - 1.0) / n
    } else if op.contains("broadcast") {
        1.0
    } else {
        (n - 1.0) / n
    }
}

/// Communication totals of every rank over all its collections.
#[derive(Default)]
struct CommTotals {
    /// (op, group, rank) -> totals and world size.
    ops: BTreeMap<(String, String, u32), (OpAcc, u32)>,
    /// (op, src, dst) -> totals.
    p2p: BTreeMap<(String, u32, u32), OpAcc>,
}

impl OpAcc {
    fn merge(&mut self, o: &OpAcc) {
        self.count += o.count;
        self.bytes += o.bytes;
        self.time += o.time;
        self.wait += o.wait;
    }
}

impl CommTotals {
    fn add(&mut self, rank: u32, world: u32, d: &RankData) {
        for ((op, group), a) in &d.ops {
            let e = self
                .ops
                .entry((op.clone(), group.clone(), rank))
                .or_default();
            e.0.merge(a);
            e.1 = world;
        }
        for ((op, peer), a) in &d.p2p {
            self.p2p
                .entry((op.clone(), rank, *peer))
                .or_default()
                .merge(a);
        }
    }

    fn rows(&self, rep: &mut ClusterReport) {
        for ((op, group, rank), (a, world)) in &self.ops {
            let (rank, world) = (*rank, *world);
            let transit = a.time - a.wait;
            rep.bandwidth.push(OpBandwidth {
                op: op.clone(),
                group: group.clone(),
                rank,
                count: a.count,
                bytes: a.bytes,
                time_ms: ms(a.time),
                wait_ms: ms(a.wait),
                transit_ms: ms(transit),
                bandwidth_gbps: bandwidth_gbps(a.bytes, transit),
            });
            if world > 1 && op != "barrier" {
                let bytes = (a.bytes as f64 * ring_share(op, world)).round() as u64;
                rep.pairs.push(PairBandwidth {
                    op: op.clone(),
                    src: rank,
                    dst: (rank + 1) % world,
                    bytes,
                    transit_ms: ms(transit),
                    bandwidth_gbps: bandwidth_gbps(bytes, transit),
                    method: "ring estimate".into(),
                });
            }
        }
        for ((op, src, dst), a) in &self.p2p {
            let transit = a.time - a.wait;
            rep.pairs.push(PairBandwidth {
                op: op.clone(),
                src: *src,
                dst: *dst,
                bytes: a.bytes,
                transit_ms: ms(transit),
                bandwidth_gbps: bandwidth_gbps(a.bytes, transit),
                method: "measured".into(),
            });
        }
    }
}

/// The slowest rank by mean busy time over the steps it ran.
pub fn slowest(steps: &[RankStep]) -> Option<Slowest> {
    let mut per: BTreeMap<u32, (f64, u32)> = BTreeMap::new();
    for s in steps {
        let e = per.entry(s.rank).or_default();
        e.0 += s.busy_ms;
        e.1 += 1;
    }
    if per.len() < 2 {
        return None;
    }
    let mean: Vec<(u32, f64)> = per.iter().map(|(r, (b, n))| (*r, b / *n as f64)).collect();
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

/// Analyses every collection at or below `path`: raw files (parsed or not), and the Ascend
/// profiler DBs of directories without raw data (torch_npu's or a copy of our DB layout).
pub fn analyse_cluster(path: &Path) -> Result<ClusterReport, ExportError> {
    let dbs = crate::cluster_db_reader::find_dbs(path);
    let mut rep = ClusterReport {
        collections: find_collections(path)?,
        ..Default::default()
    };
    if rep.collections.is_empty() && dbs.is_empty() {
        return Err(ExportError::NotACollection(path.to_path_buf()));
    }
    let mut comm = CommTotals::default();
    for dir in rep.collections.clone() {
        for raw in raw_files(&dir) {
            let idx = Index::build(&raw)?;
            let d = read_rank(&idx)?;
            add_rank(&mut rep, &mut comm, idx.meta.rank, idx.meta.world_size, d);
        }
    }
    // One bad DB (not a file, hostile schema, too slow) skips its rank, not the analysis.
    let mut read_any = false;
    for db in dbs {
        match crate::cluster_db_reader::read_rank(&db) {
            Ok(r) => {
                for n in &r.notes {
                    tracing::warn!("{}: {n}", db.display());
                    rep.warnings.push(format!("{}: {n}", db.display()));
                }
                add_rank(&mut rep, &mut comm, r.rank, r.world_size, db_rank_data(&r));
                rep.collections.push(db);
                read_any = true;
            }
            Err(e) => {
                tracing::warn!("rank skipped: {e}");
                rep.warnings.push(format!("rank skipped: {e}"));
            }
        }
    }
    if rep.collections.is_empty() && !read_any {
        return Err(ExportError::Unrecoverable {
            path: path.to_path_buf(),
            reason: format!("no profiler DB could be read: {}", rep.warnings.join("; ")),
        });
    }
    comm.rows(&mut rep);
    rep.ranks.sort_unstable();
    rep.ranks.dedup();
    rep.steps.sort_by_key(|s| (s.step, s.rank));
    rep.roles
        .sort_by(|a, b| (a.step, a.rank, &a.role).cmp(&(b.step, b.rank, &b.role)));
    rep.bandwidth
        .sort_by(|a, b| (&a.op, a.rank).cmp(&(&b.op, b.rank)));
    rep.pairs
        .sort_by(|a, b| (&a.op, a.src, a.dst).cmp(&(&b.op, b.src, b.dst)));
    rep.slowest = slowest(&rep.steps);
    Ok(rep)
}

/// Adds one rank's data to the report.
fn add_rank(rep: &mut ClusterReport, comm: &mut CommTotals, rank: u32, world: u32, d: RankData) {
    comm.add(rank, world, &d);
    for (role_key, ns) in &d.roles {
        rep.roles.push(RoleTime {
            rank,
            step: role_key.0,
            role: role_key.1.clone(),
            ms: ms(*ns),
        });
    }
    for (step, acc) in d.steps {
        rep.steps.push(rank_step(rank, step, acc));
    }
    rep.ranks.push(rank);
}

/// A DB's rank data, taken as [`take_event`] takes the raw events.
fn db_rank_data(r: &crate::cluster_db_reader::DbRank) -> RankData {
    let mut d = RankData::default();
    for s in &r.steps {
        d.steps.insert(
            s.step,
            StepAcc {
                span: (s.start, s.end),
                ..Default::default()
            },
        );
    }
    for &(a, b) in &r.kernels {
        if let Some(acc) = r.step_at(a).and_then(|s| d.steps.get_mut(&s))
            && let Some(iv) = clip((a, b), acc.span)
        {
            acc.kernels.push(iv);
        }
    }
    for c in &r.comms {
        let dur = c.end - c.start;
        if let Some(acc) = r.step_at(c.start).and_then(|s| d.steps.get_mut(&s)) {
            if let Some(iv) = clip((c.start, c.end), acc.span) {
                acc.comms.push(iv);
            }
            acc.wait += c.wait.min(dur);
        }
        let acc = match c.peer {
            Some(p) => d.p2p.entry((c.name.clone(), p)).or_default(),
            None => d.ops.entry((c.name.clone(), c.group.clone())).or_default(),
        };
        acc.count += 1;
        acc.bytes += c.bytes;
        acc.time += dur;
        acc.wait += c.wait.min(dur);
    }
    for (name, a, b) in &r.role_calls {
        if let Some(s) = r.step_at(*a).filter(|s| d.steps.contains_key(s)) {
            *d.roles.entry((s, name.clone())).or_default() += b - a;
        }
    }
    d
}

fn f3(v: f64) -> String {
    format!("{v:.3}")
}

fn opt(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.4}")).unwrap_or_default()
}

/// A CSV file in memory: fields quoted where they need it (an op or group name may hold a comma
/// or a quote), `\n` line ends.
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
pub fn write_outputs(rep: &ClusterReport, out_dir: &Path) -> Result<Vec<PathBuf>, ExportError> {
    std::fs::create_dir_all(out_dir).map_err(ExportError::io(out_dir))?;
    let csv_err = |name: &str| {
        let path = out_dir.join(name);
        move |source| ExportError::Csv { path, source }
    };
    let steps = csv_bytes(
        &[
            "Rank",
            "Step",
            "Step(ms)",
            "Computing(ms)",
            "Communication(Not Overlapped)(ms)",
            "Overlapped(ms)",
            "Communication(ms)",
            "Free(ms)",
            "Wait(ms)",
            "Busy(ms)",
        ],
        rep.steps.iter().map(|s| {
            vec![
                s.rank.to_string(),
                s.step.to_string(),
                f3(s.step_ms),
                f3(s.computing_ms),
                f3(s.communication_not_overlapped_ms),
                f3(s.overlapped_ms),
                f3(s.communication_ms),
                f3(s.free_ms),
                f3(s.wait_ms),
                f3(s.busy_ms),
            ]
        }),
    )
    .map_err(csv_err("cluster_step.csv"))?;
    let roles = csv_bytes(
        &["Rank", "Step", "Role", "Time(ms)"],
        rep.roles.iter().map(|r| {
            vec![
                r.rank.to_string(),
                r.step.to_string(),
                r.role.clone(),
                f3(r.ms),
            ]
        }),
    )
    .map_err(csv_err("cluster_roles.csv"))?;
    let bw = csv_bytes(
        &[
            "Op",
            "Group",
            "Rank",
            "Count",
            "Bytes",
            "Time(ms)",
            "Wait(ms)",
            "Transit(ms)",
            "Bandwidth(GB/s)",
        ],
        rep.bandwidth.iter().map(|b| {
            vec![
                b.op.clone(),
                b.group.clone(),
                b.rank.to_string(),
                b.count.to_string(),
                b.bytes.to_string(),
                f3(b.time_ms),
                f3(b.wait_ms),
                f3(b.transit_ms),
                opt(b.bandwidth_gbps),
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
    let json = serde_json::to_vec_pretty(rep).map_err(|source| ExportError::Json {
        path: out_dir.join("cluster_analysis.json"),
        source,
    })?;
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
        write_atomic(&p, &bytes)?;
        written.push(p);
    }
    Ok(written)
}

/// The printed summary: per-rank step table, role times, slowest rank, bandwidth per op.
pub fn render_table(rep: &ClusterReport) -> String {
    let mut s = format!(
        "cluster: {} rank(s), {} collection(s)\n{:>5} {:>5} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}\n",
        rep.ranks.len(),
        rep.collections.len(),
        "step",
        "rank",
        "step ms",
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
        None => s.push_str("slowest rank: - (one rank)\n"),
    }
    if !rep.bandwidth.is_empty() {
        s.push_str("bandwidth per op and rank:\n");
        for b in &rep.bandwidth {
            s.push_str(&format!(
                "  {:<16} rank {:>3} {:>6} calls {:>12} B {:>10.3} ms transit {:>10} GB/s\n",
                b.op,
                b.rank,
                b.count,
                b.bytes,
                b.transit_ms,
                opt(b.bandwidth_gbps)
            ));
        }
    }
    for w in &rep.warnings {
        s.push_str(&format!("warning: {w}\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn csv_fields_with_commas_and_quotes_stay_one_field() {
        let bytes = super::csv_bytes(
            &["Op", "Group"],
            [vec![
                "all_reduce".to_string(),
                "tp,dp \"outer\"".to_string(),
            ]]
            .into_iter(),
        )
        .unwrap();
        let mut r = csv::Reader::from_reader(&bytes[..]);
        let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
        assert_eq!(rows.len(), 1);
        assert_eq!(&rows[0][1], "tp,dp \"outer\"");
        assert!(bytes.starts_with(b"Op,Group\nall_reduce,"), "{bytes:?}");
    }

    use super::*;

    #[test]
    fn union_and_intersection() {
        let k = union(vec![(5, 8), (0, 2), (1, 3)]);
        assert_eq!(k, vec![(0, 3), (5, 8)]);
        let c = union(vec![(2, 6)]);
        assert_eq!(intersection(&k, &c), 2);
        assert_eq!(total(&k), 6);
    }

    #[test]
    fn split_adds_up_and_wait_gives_busy() {
        let acc = StepAcc {
            span: (0, 100),
            kernels: vec![(0, 40), (50, 60)],
            comms: vec![(35, 55)],
            wait: 12,
        };
        let r = rank_step(0, 1, acc);
        assert_eq!(r.computing_ms, ms(50));
        assert_eq!(r.overlapped_ms, ms(10));
        assert_eq!(r.communication_not_overlapped_ms, ms(10));
        assert_eq!(r.free_ms, ms(40));
        assert_eq!(r.busy_ms, ms(88));
    }

    #[test]
    fn slowest_is_the_highest_busy_rank() {
        let row = |rank, busy_ms| RankStep {
            rank,
            busy_ms,
            ..Default::default()
        };
        let w = slowest(&[row(0, 10.0), row(1, 30.0), row(2, 14.0)]).unwrap();
        assert_eq!(w.rank, 1);
        assert!((w.gap_ms - 18.0).abs() < 1e-9);
        assert!(slowest(&[row(0, 1.0)]).is_none());
    }
}
