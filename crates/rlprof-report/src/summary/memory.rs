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
    let mut at_peak: Vec<PeakOp> = by_op
        .into_iter()
        .map(|(op, (bytes, count))| PeakOp {
            op: if op == NONE {
                "-".into()
            } else {
                display_name(p.str(op)).into_owned()
            },
            bytes,
            count,
        })
        .collect();
    at_peak.sort_by(|a, b| (b.bytes, &a.op).cmp(&(a.bytes, &b.op)));
    at_peak.truncate(20);
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
        curve: curve(mem, &values),
    }
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
