//! The diff of two reports ([`compare`]): mean step and role times, and the top ops' totals.

use super::{Comparison, DiffRow, Report};
use std::collections::BTreeMap;

/// Attaches the diff of `a` against `b` to `a`.
pub fn compare(mut a: Report, b: &Report, a_label: &str, b_label: &str) -> Report {
    let means = |r: &Report| {
        let mut m: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for row in &r.breakdown {
            let e = m.entry("step".into()).or_default();
            e.0 += row.time_ns();
            e.1 += 1;
            for (k, v) in &row.roles {
                let e = m.entry(k.clone()).or_default();
                e.0 += v;
                e.1 += 1;
            }
        }
        m.into_iter()
            .map(|(k, (s, n))| (k, s / n.max(1)))
            .collect::<BTreeMap<_, _>>()
    };
    let totals = |r: &Report| {
        r.top
            .iter()
            .map(|t| (format!("{}:{}", t.kind.as_str(), t.name), t.total_ns))
            .collect::<BTreeMap<_, _>>()
    };
    let mut top = diff(&totals(&a), &totals(b));
    top.sort_by(|x, y| (y.a_ns.max(y.b_ns), &x.name).cmp(&(x.a_ns.max(x.b_ns), &y.name)));
    top.truncate(50);
    a.compare = Some(Comparison {
        a: a_label.into(),
        b: b_label.into(),
        breakdown: diff(&means(&a), &means(b)),
        top,
    });
    a
}

fn diff(a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>) -> Vec<DiffRow> {
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .map(|k| {
            let (x, y) = (
                a.get(k).copied().unwrap_or(0),
                b.get(k).copied().unwrap_or(0),
            );
            DiffRow {
                name: k.clone(),
                a_ns: x,
                b_ns: y,
                delta_ns: y as i64 - x as i64,
                ratio: (x > 0).then(|| y as f64 / x as f64),
            }
        })
        .collect()
}
