//! The communication table: per profile and collective, count, bytes, time, wait and
//! bandwidth.

use super::CommRow;
use crate::model::{Profile, Track, display_name};
use std::collections::BTreeMap;

pub(super) fn comm(profiles: &[Profile]) -> Vec<CommRow> {
    let mut out = Vec::new();
    for (i, p) in profiles.iter().enumerate() {
        let mut by: BTreeMap<String, (u64, Option<u64>, u64, Option<u64>)> = BTreeMap::new();
        for e in p.events.iter().filter(|e| e.track == Track::Comm) {
            let d = p.detail(e);
            let r = by
                .entry(display_name(p.str(e.name)).into_owned())
                .or_insert((0, Some(0), 0, Some(0)));
            r.0 += 1;
            r.1 =
                r.1.zip(d.as_ref().and_then(|d| d.bytes))
                    .map(|(a, b)| a + b);
            r.2 += e.dur as u64;
            r.3 =
                r.3.zip(d.as_ref().and_then(|d| d.wait_ns))
                    .map(|(a, b)| a + b);
        }
        for (name, (count, bytes, total, wait)) in by {
            let busy = wait.map(|w| total.saturating_sub(w)).unwrap_or(total);
            out.push(CommRow {
                profile: i,
                rank: p.rank,
                name,
                count,
                bytes,
                total_ns: total,
                wait_ns: wait,
                bandwidth_gbps: bytes
                    .and_then(|b| rlprof_profiler::metrics::bandwidth_gbps(b, busy)),
                bandwidth_includes_wait: wait.is_none(),
            });
        }
    }
    out
}
