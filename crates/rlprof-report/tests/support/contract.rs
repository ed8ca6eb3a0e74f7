//! The report's JSON contract checked against an independent computation (intervals swept here,
//! times read here), shared by the tests on real profiles (`real.rs`) and on synthetic ones
//! (`layouts.rs`).

use rlprof_report::{Limits, load, render_json, summarise};
use serde_json::Value;
use std::path::Path;

/// `report --format json` of a path, parsed.
pub(crate) fn report_json(path: &Path) -> Value {
    let loaded = load(path, &Limits::default()).unwrap();
    serde_json::from_str(&render_json(&summarise(&loaded)).unwrap()).unwrap()
}

/// The kind (`op`, `api`, `kernel`, ...) of the top-table row named `name`.
pub(crate) fn top_kind(report: &Value, name: &str) -> Option<String> {
    report["top"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .map(|r| r["kind"].as_str().unwrap().to_string())
}

/// Microseconds to nanoseconds: a decimal text exactly (in i128, half away from zero past the
/// third decimal), anything else through f64.
pub(crate) fn ns(v: &Value) -> i64 {
    let text = match v {
        Value::String(s) => s.trim().to_string(),
        v => return (v.as_f64().unwrap() * 1000.0).round() as i64,
    };
    if text.contains(['e', 'E']) {
        return (text.parse::<f64>().unwrap() * 1000.0).round() as i64;
    }
    let (neg, body) = text
        .strip_prefix('-')
        .map_or((false, text.as_str()), |b| (true, b));
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    let mut digits: Vec<u8> = frac.bytes().collect();
    digits.resize(digits.len().max(4), b'0');
    let whole: i128 = if int.is_empty() {
        0
    } else {
        int.parse().unwrap()
    };
    let milli: i128 = std::str::from_utf8(&digits[..3]).unwrap().parse().unwrap();
    let round = i128::from(digits[3] >= b'5');
    let v = whole * 1000 + milli + round;
    (if neg { -v } else { v }) as i64
}

/// Total length of the union of intervals (sort and sweep, written independently of the crate).
pub(crate) fn union_len(mut v: Vec<(i64, i64)>) -> i64 {
    v.sort();
    let (mut total, mut cur): (i64, Option<(i64, i64)>) = (0, None);
    for (s, e) in v {
        cur = match cur {
            Some((cs, ce)) if s <= ce => Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                Some((s, e))
            }
            None => Some((s, e)),
        };
    }
    total + cur.map_or(0, |(s, e)| e - s)
}

/// Time covered by both interval sets.
pub(crate) fn overlap_len(a: &[(i64, i64)], b: &[(i64, i64)]) -> i64 {
    // |A ∩ B| = |A| + |B| − |A ∪ B| for unions of intervals.
    let both: Vec<_> = a.iter().chain(b).copied().collect();
    union_len(a.to_vec()) + union_len(b.to_vec()) - union_len(both)
}

/// The expected device figures: (kernel, comm, memcpy, busy, idle, overlapped).
pub(crate) struct Expected {
    pub(crate) kernel: i64,
    pub(crate) comm: i64,
    pub(crate) memcpy: i64,
    pub(crate) busy: i64,
    pub(crate) idle: i64,
    pub(crate) overlapped: i64,
}

pub(crate) fn expected(
    kernels: &[(i64, i64)],
    comm: &[(i64, i64)],
    memcpy: &[(i64, i64)],
) -> Expected {
    let all: Vec<_> = kernels.iter().chain(comm).chain(memcpy).copied().collect();
    let span =
        all.iter().map(|x| x.1).max().unwrap_or(0) - all.iter().map(|x| x.0).min().unwrap_or(0);
    let busy = union_len(all.clone());
    Expected {
        kernel: union_len(kernels.to_vec()),
        comm: union_len(comm.to_vec()),
        memcpy: union_len(memcpy.to_vec()),
        busy,
        idle: span - busy,
        overlapped: overlap_len(kernels, comm),
    }
}

pub(crate) fn check_device(rank: &Value, want: &Expected) {
    let d = &rank["device"];
    for (k, v) in [
        ("kernel_ns", want.kernel),
        ("comm_ns", want.comm),
        ("memcpy_ns", want.memcpy),
        ("busy_ns", want.busy),
        ("idle_ns", want.idle),
    ] {
        assert_eq!(d[k].as_i64(), Some(v), "{k}: {d}");
    }
    assert_eq!(
        rank["overlap"]["overlapped_ns"].as_i64(),
        Some(want.overlapped)
    );
    let t = &rank["temporal"];
    assert_eq!(t["compute_ns"].as_i64(), Some(want.kernel));
    assert_eq!(t["non_compute_ns"].as_i64(), Some(want.busy - want.kernel));
    assert_eq!(t["idle_ns"].as_i64(), Some(want.idle));
}

/// Steps of the trace's `ProfilerStep#N` events: (N, dur ns), sorted.
pub(crate) fn steps_of(events: &[Value]) -> Vec<(u64, i64)> {
    let mut v: Vec<(u64, i64)> = events
        .iter()
        .filter(|e| e["ph"] == "X")
        .filter_map(|e| {
            let n = e["name"]
                .as_str()?
                .strip_prefix("ProfilerStep#")?
                .parse()
                .ok()?;
            let cat = e["cat"].as_str().unwrap_or("");
            (cat != "gpu_user_annotation").then(|| (n, ns(&e["dur"])))
        })
        .collect();
    v.sort();
    v
}

pub(crate) fn steps_in(rank: &Value) -> Vec<(u64, i64)> {
    rank["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["step"].as_u64().unwrap(), s["dur_ns"].as_i64().unwrap()))
        .collect()
}
