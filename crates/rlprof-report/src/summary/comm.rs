//! The communication table: per profile and collective, count, bytes, time, wait and
//! bandwidth, in nccl-tests' conventions (`doc/PERFORMANCE.md` of NVIDIA's nccl-tests):
//! - the message size `S` of a call is the gathered output for an all-gather, the input for
//!   every other collective ([`rlprof_profiler::metrics::algorithm_bytes`]);
//! - the algorithm bandwidth is `S / t`, `t` being the time moving data (the calls' duration
//!   less their wait for peers when the producer records it);
//! - the bus bandwidth is the algorithm bandwidth times `2(n-1)/n` (all-reduce), `(n-1)/n`
//!   (all-gather, reduce-scatter, all-to-all) or 1 (broadcast, reduce, point-to-point), `n`
//!   being the group size ([`rlprof_profiler::metrics::bus_factor`]).
//!
//! The group size is the producer's (`Group size` in PyTorch traces); where the producer does
//! not say (rlprof's own collections, whose collectives span the job; torch_npu's DB and text
//! output), the job's world size: a sub-group's bus bandwidth and all-gather size are then
//! estimates, and the row's `group_size` says which size was used. An unknown size leaves the
//! figure it needs empty.

use super::CommRow;
use crate::model::{Profile, Track, display_name};
use rlprof_profiler::metrics::{algorithm_bytes, bandwidth_gbps, bus_factor, collective_kind};
use std::collections::BTreeMap;

/// The convention [`CommRow`]'s bandwidths follow, stated in the report.
pub const BANDWIDTH_CONVENTION: &str = "bandwidth follows nccl-tests: algorithm bandwidth = S / t (S: the gathered output for all-gather, the input otherwise; t: duration less the wait for peers when known); bus bandwidth = algorithm bandwidth x 2(n-1)/n for all-reduce, (n-1)/n for all-gather / reduce-scatter / all-to-all, 1 for broadcast / reduce / point-to-point";

#[derive(Default)]
struct Acc {
    count: u64,
    bytes: Option<u64>,
    total: u64,
    wait: Option<u64>,
    group_size: Option<Option<u32>>,
}

pub(super) fn comm(profiles: &[Profile]) -> Vec<CommRow> {
    let mut out = Vec::new();
    for (i, p) in profiles.iter().enumerate() {
        let world = p.meta.world_size;
        let mut by: BTreeMap<String, Acc> = BTreeMap::new();
        // Each name's kind, found once (the name is read a character at a time).
        let mut kinds: rustc_hash::FxHashMap<u32, rlprof_profiler::metrics::CollectiveKind> =
            Default::default();
        for e in p.events.iter().filter(|e| e.track == Track::Comm) {
            let d = p.detail(e);
            let name = p.str(e.name);
            let kind = *kinds.entry(e.name).or_insert_with(|| collective_kind(name));
            let n = d.as_ref().and_then(|d| d.group_size).or(world);
            let s = d
                .as_ref()
                .and_then(|d| algorithm_bytes(kind, d.bytes, d.out_bytes, n));
            let r = by.entry(display_name(name).into_owned()).or_insert(Acc {
                bytes: Some(0),
                wait: Some(0),
                ..Acc::default()
            });
            r.count += 1;
            r.bytes = r.bytes.zip(s).and_then(|(a, b)| a.checked_add(b));
            r.total += e.dur as u64;
            r.wait = r
                .wait
                .zip(d.as_ref().and_then(|d| d.wait_ns))
                .map(|(a, b)| a + b);
            // One group size for the row, or none when the calls disagree.
            r.group_size = match r.group_size {
                None => Some(n),
                Some(g) if g == n => Some(g),
                Some(_) => Some(None),
            };
        }
        for (name, a) in by {
            let busy = a.wait.map(|w| a.total.saturating_sub(w)).unwrap_or(a.total);
            let group_size = a.group_size.flatten();
            let algbw = a.bytes.and_then(|b| bandwidth_gbps(b, busy));
            let factor = bus_factor(collective_kind(&name), group_size);
            out.push(CommRow {
                profile: i,
                rank: p.rank,
                name,
                count: a.count,
                bytes: a.bytes,
                total_ns: a.total,
                wait_ns: a.wait,
                bandwidth_gbps: algbw,
                bus_bandwidth_gbps: algbw.zip(factor).map(|(b, f)| b * f),
                group_size,
                bandwidth_includes_wait: a.wait.is_none(),
            });
        }
    }
    out
}
