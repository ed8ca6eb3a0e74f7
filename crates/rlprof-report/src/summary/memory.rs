//! The memory summary of one profile's device or host memory events: peak, what was live at the
//! peak by op, and the downsampled curve.

use super::{MAX_CURVE_POINTS, MemSummary, PeakOp};
use crate::model::{MemEvent, NONE, Profile, display_name};
use rustc_hash::FxHashMap;

pub(super) fn memory(
    index: usize,
    p: &Profile,
    mem: &[MemEvent],
    kind: &'static str,
) -> MemSummary {
    let producer = mem.iter().all(|m| m.total.is_some());
    let mut level = 0i64;
    let values: Vec<i64> = mem
        .iter()
        .map(|m| {
            level += m.delta;
            if producer {
                m.total.unwrap_or(level)
            } else {
                level
            }
        })
        .collect();
    let (peak_i, peak) = values
        .iter()
        .enumerate()
        .fold((0, i64::MIN), |b, (i, &v)| if v > b.1 { (i, v) } else { b });
    // Without addresses or ops (a producer's totals alone) there is nothing to say of what was
    // live: an empty list, not one made-up allocation.
    let attributed = mem.iter().any(|m| m.addr != 0 || m.op != NONE);
    let mut live: FxHashMap<u64, (i64, u32)> = FxHashMap::default();
    if attributed {
        for m in &mem[..=peak_i] {
            if m.delta >= 0 {
                live.insert(m.addr, (m.delta, m.op));
            } else {
                live.remove(&m.addr);
            }
        }
    }
    let mut by_op: FxHashMap<u32, (i64, u64)> = FxHashMap::default();
    for (bytes, op) in live.values() {
        let e = by_op.entry(*op).or_default();
        e.0 += bytes;
        e.1 += 1;
    }
    if producer && !p.op_allocations.is_empty() {
        let at_peak = at_peak_of_allocations(p, mem, peak_i, peak);
        return summary(
            index, p, mem, kind, producer, &values, peak_i, peak, at_peak,
        );
    }
    let mut at_peak: Vec<PeakOp> = by_op
        .into_iter()
        .map(|(op, (bytes, count))| PeakOp {
            op: op_label(p, op),
            bytes,
            count,
        })
        .collect();
    at_peak.sort_by(|a, b| (b.bytes, &a.op).cmp(&(a.bytes, &b.op)));
    at_peak.truncate(20);
    summary(
        index, p, mem, kind, producer, &values, peak_i, peak, at_peak,
    )
}

/// The summary's fields from what [`memory`] found.
#[allow(clippy::too_many_arguments)]
fn summary(
    index: usize,
    p: &Profile,
    mem: &[MemEvent],
    kind: &'static str,
    producer: bool,
    values: &[i64],
    peak_i: usize,
    peak: i64,
    at_peak: Vec<PeakOp>,
) -> MemSummary {
    MemSummary {
        profile: index,
        kind,
        rank: p.rank,
        events: mem.len(),
        baseline: if producer {
            "producer_total"
        } else {
            "from_collection_start"
        },
        peak_bytes: peak,
        peak_t_ns: mem[peak_i].t,
        peak_since_start_ns: mem[peak_i].t - p.extent().0,
        final_bytes: *values.last().unwrap_or(&0),
        at_peak,
        curve: curve(mem, values),
    }
}

/// An op's name as the at-peak table shows it (`-` when unattributed).
fn op_label(p: &Profile, op: u32) -> String {
    if op == NONE {
        "-".into()
    } else {
        display_name(p.str(op)).into_owned()
    }
}

/// Most ops listed as live at the peak.
const MAX_AT_PEAK: usize = 20;

/// What was live at the peak of a producer's running total, from its per-op allocations: the
/// level at the first point, less the allocations made at that very time, is one "before
/// profiling" entry (memory allocated before profiling started is not any profiled op's); an allocation is live from its allocation to its
/// release (released at or before the peak: not live); the rest of the peak that no listed
/// allocation explains is "-" (another allocator's, or unmatched). The entries sum to the peak,
/// never more: should the listed allocations exceed what the total leaves them (a producer's
/// inconsistent rows), the largest are kept up to it and the last is clipped.
fn at_peak_of_allocations(p: &Profile, mem: &[MemEvent], peak_i: usize, peak: i64) -> Vec<PeakOp> {
    let (t0, t_peak) = (mem[0].t, mem[peak_i].t);
    // The allocations of this series: those the reader matched to a point of the curve (same
    // time, same total just after; [`crate::ascend_text_reader::attribute_allocations`] gives
    // allocation `i` the address `i + 1`). Others are another allocator's (GE's, not torch's).
    let matched: rustc_hash::FxHashSet<u64> = mem
        .iter()
        .filter(|m| m.delta >= 0 && m.addr != 0)
        .map(|m| m.addr)
        .collect();
    let ours = || {
        p.op_allocations
            .iter()
            .enumerate()
            .filter(|(i, _)| matched.contains(&(*i as u64 + 1)))
            .map(|(_, a)| a)
    };
    // The first point's level less what the producer says was allocated at that very time.
    let at_start: i64 = ours().filter(|a| a.at == t0).map(|a| a.size.max(0)).sum();
    let before = (mem[0].total.unwrap_or(0) - at_start).clamp(0, peak.max(0));
    let mut by_op: FxHashMap<u32, (i64, u64)> = FxHashMap::default();
    for a in ours() {
        let live = a.at >= t0 && a.at <= t_peak && a.release.is_none_or(|(r, _)| r > t_peak);
        if live && a.size > 0 {
            let e = by_op.entry(a.op).or_default();
            e.0 += a.size;
            e.1 += 1;
        }
    }
    let mut ops: Vec<(u32, i64, u64)> = by_op.into_iter().map(|(o, (b, n))| (o, b, n)).collect();
    ops.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut left = peak.max(0) - before;
    let mut out = Vec::new();
    if before > 0 {
        out.push(PeakOp {
            op: "before profiling".into(),
            bytes: before,
            count: 1,
        });
    }
    for (op, bytes, count) in ops {
        if left <= 0 {
            break;
        }
        let bytes = bytes.min(left);
        left -= bytes;
        out.push(PeakOp {
            op: op_label(p, op),
            bytes,
            count,
        });
    }
    if left > 0 {
        out.push(PeakOp {
            op: "-".into(),
            bytes: left,
            count: 0,
        });
    }
    out.sort_by(|a, b| (b.bytes, &a.op).cmp(&(a.bytes, &b.op)));
    out.truncate(MAX_AT_PEAK);
    out
}

fn curve(mem: &[MemEvent], values: &[i64]) -> Vec<[i64; 2]> {
    let (t0, t1) = (mem[0].t, mem[mem.len() - 1].t);
    let width = ((t1 - t0) / MAX_CURVE_POINTS as i64).max(1);
    let mut out: Vec<[i64; 2]> = Vec::new();
    let mut bucket = i64::MIN;
    for (m, &v) in mem.iter().zip(values) {
        let b = (m.t - t0) / width;
        match out.last_mut() {
            Some(last) if b == bucket => {
                if v > last[1] {
                    *last = [m.t, v];
                }
            }
            _ => {
                out.push([m.t, v]);
                bucket = b;
            }
        }
    }
    out
}
