//! Op coverage of each role call: the fraction of a role call's time inside the union of the op
//! and collective intervals on its thread, so that a profile's blind spots (time no recorded op
//! explains) show. Summed over the calls of the same name in a profile.

use crate::intervals::{Run, Union, covered, merge};
use crate::model::{Profile, Track};
use serde::Serialize;
use std::collections::BTreeMap;

/// Coverage of one role call name in one profile.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CoverageRow {
    /// Profile index (as in the report's inputs).
    pub profile: usize,
    /// Rank.
    pub rank: u32,
    /// Role call name (`update_actor`, ...).
    pub call: String,
    /// Calls of that name.
    pub calls: usize,
    /// Summed role-call time, ns.
    pub total_ns: i64,
    /// Fraction of it covered by ops and collectives (0..=1).
    pub covered: f64,
}

/// Coverage rows of every profile with role calls.
pub fn op_coverage(profiles: &[Profile]) -> Vec<CoverageRow> {
    let mut out = Vec::new();
    for (i, p) in profiles.iter().enumerate() {
        // Ops and collectives stream from their runs, a role call's window at a time.
        let (ops, comm) = (Run::of(p, Track::Op), Run::of(p, Track::Comm));
        let mut by_call: BTreeMap<&str, (usize, i64, i64)> = BTreeMap::new();
        for e in p.events.iter().filter(|e| e.track == Track::RoleCall) {
            let (s, t) = (e.start, e.end());
            let th = Some(e.thread);
            // Merged as unions: nested ops collapse before the merge sees them.
            let both = merge(
                Union::new(ops.reaching(s, t, th)),
                Union::new(comm.reaching(s, t, th)),
            );
            let c = covered(Union::new(both), s, t) as i64;
            let x = by_call.entry(p.str(e.name)).or_default();
            *x = (x.0 + 1, x.1 + e.dur, x.2 + c);
        }
        out.extend(by_call.into_iter().map(|(call, (n, t, c))| CoverageRow {
            profile: i,
            rank: p.rank,
            call: call.to_string(),
            calls: n,
            total_ns: t,
            covered: c as f64 / t.max(1) as f64,
        }));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Event, NONE, SourceFormat};

    #[test]
    fn coverage_is_the_union_of_op_intervals_inside_the_call() {
        let mut p = Profile::new("x".into(), SourceFormat::RlprofRaw, 0, "g".into());
        let call = p.intern("update_actor");
        let op = p.intern("linear");
        let ev = |start, dur, name, thread, track| Event {
            start,
            dur,
            name,
            detail: NONE,
            thread,
            depth: 0,
            track,
        };
        p.events = vec![
            ev(0, 100, call, 0, Track::RoleCall),
            // nested and overlapping ops count once; one sticks out of the call
            ev(10, 30, op, 0, Track::Op),
            ev(20, 10, op, 0, Track::Op),
            ev(35, 15, op, 0, Track::Comm),
            ev(90, 50, op, 0, Track::Op),
            // another thread's op does not count
            ev(60, 20, op, 1, Track::Op),
        ];
        p.sort();
        let rows = op_coverage(&[p]);
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].calls, rows[0].total_ns), (1, 100));
        assert!((rows[0].covered - 0.5).abs() < 1e-9, "{rows:?}");
        let mut o = String::new();
        crate::text_render::render_coverage(&rows, &mut o);
        assert!(o.contains("covered by ops: 50%"), "{o}");
    }
}
