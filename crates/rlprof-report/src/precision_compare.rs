//! `rlprof report --compare` on two msprobe dumps (verl's `precision_debugger` tool, as rlprof
//! or msprobe's PyTorch `PrecisionDebugger` writes them): per stage and rank, the first API whose
//! statistics diverge and the largest relative differences; and, from the trainer's metrics files
//! found below either path, the rollout vs actor log-prob mismatch per step
//! (`training/rollout_probs_diff_*`).
//!
//! A dump is any directory holding `dump.json` files: a rank directory (`.../rank0`), a stage
//! (`step_1/actor_update`), or a whole `save_path`. Dumps are paired by the path below the root
//! (`step_1/actor_update/step0/rank0`); two rank directories given directly pair with each other.

use crate::error::ReportError;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// A relative difference above this marks an API as diverging.
pub const DIVERGENCE: f64 = 1e-3;

/// Whether `path` holds msprobe dumps (a `dump.json` at most 5 levels below).
pub fn is_dump(path: &Path) -> bool {
    !find_dumps(path).is_empty()
}

/// `dump.json` files below `root`, by their directory relative to `root`.
fn find_dumps(root: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![(root.to_path_buf(), 0usize)];
    while let Some((dir, depth)) = stack.pop() {
        let f = dir.join("dump.json");
        if f.is_file() {
            let rel = dir
                .strip_prefix(root)
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            out.insert(rel, f);
        }
        if depth >= 5 {
            continue;
        }
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push((e.path(), depth + 1));
            }
        }
    }
    out
}

/// `data` of a dump.json, in file order (call order).
struct Ordered(Vec<(String, Value)>);

impl<'de> serde::Deserialize<'de> for Ordered {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Ordered;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map of API entries")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Ordered, A::Error> {
                let mut v = Vec::new();
                while let Some((k, val)) = m.next_entry::<String, Value>()? {
                    v.push((k, val));
                }
                Ok(Ordered(v))
            }
        }
        d.deserialize_map(V)
    }
}

#[derive(serde::Deserialize)]
struct DumpFile {
    data: Ordered,
}

fn load(path: &Path) -> Result<Vec<(String, Value)>, ReportError> {
    let text = std::fs::read_to_string(path).map_err(|source| ReportError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let d: DumpFile = serde_json::from_str(&text).map_err(|e| ReportError::Malformed {
        path: path.to_path_buf(),
        message: format!("not an msprobe dump.json: {e}"),
    })?;
    Ok(d.data.0)
}

/// One statistic's difference.
#[derive(Debug, Clone, PartialEq)]
pub struct Diff {
    /// Full tensor name, as msprobe's compare names it (`Functional.linear.0.forward.input.0`).
    pub tensor: String,
    /// `Max`, `Min`, `Mean` or `Norm`.
    pub stat: &'static str,
    /// The value in A.
    pub a: f64,
    /// The value in B.
    pub b: f64,
    /// `|a - b| / max(|b|, 1e-12)`.
    pub rel: f64,
}

/// The comparison of one pair of dumps.
#[derive(Debug, Clone, PartialEq)]
pub struct Pair {
    /// The dump's place below the roots (`step_1/actor_update/step0/rank0`).
    pub key: String,
    /// APIs in both.
    pub matched: usize,
    /// APIs of A that B lacks, and of B that A lacks.
    pub only_a: Vec<String>,
    /// APIs of B that A lacks.
    pub only_b: Vec<String>,
    /// The first API (in A's call order) with a relative difference above [`DIVERGENCE`], with
    /// its largest difference.
    pub first_divergence: Option<Diff>,
    /// The largest relative differences, largest first (at most 10).
    pub largest: Vec<Diff>,
}

/// The tensors of one entry with their msprobe compare names.
fn tensors<'a>(name: &str, e: &'a Value) -> Vec<(String, &'a Value)> {
    let mut out = Vec::new();
    for (key, side) in [
        ("input_args", "input"),
        ("input", "input"),
        ("output", "output"),
    ] {
        if let Some(list) = e.get(key).and_then(Value::as_array) {
            for (i, t) in list.iter().enumerate() {
                out.push((format!("{name}.{side}.{i}"), t));
            }
        }
    }
    out
}

const STATS: [&str; 4] = ["Max", "Min", "Mean", "Norm"];

fn compare_pair(key: String, a: &[(String, Value)], b: &[(String, Value)]) -> Pair {
    let bmap: BTreeMap<&str, &Value> = b.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let amap: BTreeMap<&str, &Value> = a.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut all = Vec::new();
    let mut first = None;
    let mut matched = 0;
    for (name, ea) in a {
        let Some(eb) = bmap.get(name.as_str()) else {
            continue;
        };
        matched += 1;
        let tb: BTreeMap<String, &Value> = tensors(name, eb).into_iter().collect();
        let mut worst: Option<Diff> = None;
        for (tname, ta) in tensors(name, ea) {
            let Some(tb) = tb.get(&tname) else { continue };
            for stat in STATS {
                let (Some(x), Some(y)) = (
                    ta.get(stat).and_then(Value::as_f64),
                    tb.get(stat).and_then(Value::as_f64),
                ) else {
                    continue;
                };
                let rel = (x - y).abs() / y.abs().max(1e-12);
                let d = Diff {
                    tensor: tname.clone(),
                    stat,
                    a: x,
                    b: y,
                    rel,
                };
                if worst.as_ref().is_none_or(|w| rel > w.rel) {
                    worst = Some(d.clone());
                }
                all.push(d);
            }
        }
        if first.is_none() {
            first = worst.filter(|w| w.rel > DIVERGENCE);
        }
    }
    all.sort_by(|x, y| y.rel.total_cmp(&x.rel));
    all.truncate(10);
    Pair {
        key,
        matched,
        only_a: a
            .iter()
            .filter(|(k, _)| !bmap.contains_key(k.as_str()))
            .map(|(k, _)| k.clone())
            .collect(),
        only_b: b
            .iter()
            .filter(|(k, _)| !amap.contains_key(k.as_str()))
            .map(|(k, _)| k.clone())
            .collect(),
        first_divergence: first,
        largest: all,
    }
}

/// The rollout vs actor log-prob mismatch of one step (`training/rollout_probs_diff_*`).
#[derive(Debug, Clone, PartialEq)]
pub struct ProbsDiff {
    /// The metrics file.
    pub file: PathBuf,
    /// The step.
    pub step: u64,
    /// `training/rollout_probs_diff_mean`, `_max` (None when not valid for the step).
    pub mean: Option<f64>,
    /// `training/rollout_probs_diff_max`.
    pub max: Option<f64>,
}

fn probs_diffs(root: &Path) -> Vec<ProbsDiff> {
    let mut files = Vec::new();
    let mut stack = vec![(root.to_path_buf(), 0usize)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) && depth < 4 {
                stack.push((p, depth + 1));
            } else if p.extension().is_some_and(|x| x == "jsonl")
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("metrics"))
            {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        for line in text.lines() {
            let Ok(v) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            let Some(step) = v.get("step").and_then(Value::as_u64) else {
                continue;
            };
            let valid = v
                .get("training/rollout_probs_diff_valid")
                .and_then(Value::as_f64);
            let Some(valid) = valid else { continue };
            let get = |k: &str| {
                (valid > 0.0)
                    .then(|| v.get(k).and_then(Value::as_f64))
                    .flatten()
            };
            out.push(ProbsDiff {
                file: f.clone(),
                step,
                mean: get("training/rollout_probs_diff_mean"),
                max: get("training/rollout_probs_diff_max"),
            });
        }
    }
    out
}

/// The comparison of two dump trees.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// One per dump present in both.
    pub pairs: Vec<Pair>,
    /// Dumps only under A, only under B.
    pub unpaired: Vec<String>,
    /// The log-prob mismatch per step, from metrics files below A, then B.
    pub probs_diff: Vec<ProbsDiff>,
}

/// Compares the dumps below `a` and `b`.
pub fn compare(a: &Path, b: &Path) -> Result<Comparison, ReportError> {
    let (da, db) = (find_dumps(a), find_dumps(b));
    let direct = da.len() == 1 && db.len() == 1;
    let mut pairs = Vec::new();
    let mut unpaired = Vec::new();
    if direct {
        if let (Some((ka, fa)), Some(fb)) = (da.iter().next(), db.values().next()) {
            pairs.push(compare_pair(ka.clone(), &load(fa)?, &load(fb)?));
        }
    } else {
        for (k, fa) in &da {
            match db.get(k) {
                Some(fb) => pairs.push(compare_pair(k.clone(), &load(fa)?, &load(fb)?)),
                None => unpaired.push(format!("{} (only in {})", k, a.display())),
            }
        }
        for k in db.keys().filter(|k| !da.contains_key(*k)) {
            unpaired.push(format!("{} (only in {})", k, b.display()));
        }
    }
    let mut probs_diff = probs_diffs(a);
    probs_diff.extend(probs_diffs(b));
    Ok(Comparison {
        pairs,
        unpaired,
        probs_diff,
    })
}

/// The comparison as text.
pub fn render_text(c: &Comparison) -> String {
    let mut s = String::new();
    for p in &c.pairs {
        let key = if p.key.is_empty() { "." } else { &p.key };
        let _ = writeln!(
            s,
            "{key}: {} APIs matched, {} only in A, {} only in B",
            p.matched,
            p.only_a.len(),
            p.only_b.len()
        );
        match &p.first_divergence {
            Some(d) => {
                let _ = writeln!(
                    s,
                    "  first diverging API: {} ({}: A {} vs B {}, relative difference {:.3e})",
                    d.tensor, d.stat, d.a, d.b, d.rel
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "  no API diverges (every statistic within a relative {DIVERGENCE:e})"
                );
            }
        }
        if !p.largest.is_empty() {
            let _ = writeln!(s, "  largest relative differences:");
            for d in &p.largest {
                let _ = writeln!(
                    s,
                    "    {:.3e}  {} {}  A {}  B {}",
                    d.rel, d.tensor, d.stat, d.a, d.b
                );
            }
        }
        for n in p.only_a.iter().take(5) {
            let _ = writeln!(s, "  only in A: {n}");
        }
        for n in p.only_b.iter().take(5) {
            let _ = writeln!(s, "  only in B: {n}");
        }
    }
    for u in &c.unpaired {
        let _ = writeln!(s, "unpaired dump: {u}");
    }
    if !c.probs_diff.is_empty() {
        let _ = writeln!(
            s,
            "rollout vs actor log-prob mismatch per step (training/rollout_probs_diff_*):"
        );
        for d in &c.probs_diff {
            let f = |x: Option<f64>| x.map_or_else(|| "-".to_string(), |x| format!("{x:.6}"));
            let _ = writeln!(
                s,
                "  {} step {}: mean {} max {}",
                d.file.display(),
                d.step,
                f(d.mean),
                f(d.max)
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, body: &str) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("dump.json"), body).unwrap();
    }

    fn t(max: f64, mean: f64) -> String {
        format!(
            r#"{{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": {max}, "Min": 0.0, "Mean": {mean}, "Norm": 1.0}}"#
        )
    }

    #[test]
    fn the_first_diverging_api_is_found_in_call_order() {
        let d = tempfile::tempdir().unwrap();
        // "Torch.z..." comes first in call order but last alphabetically.
        let a = format!(
            r#"{{"task": "statistics", "data": {{
              "Torch.zz.0.forward": {{"input_args": [{}], "output": [{}]}},
              "Functional.aa.0.forward": {{"input_args": [{}], "output": [{}]}},
              "Functional.only_a.0.forward": {{"input_args": [], "output": []}}}}}}"#,
            t(1.0, 0.5),
            t(1.0, 0.5),
            t(1.0, 0.5),
            t(3.0, 0.5)
        );
        let b = format!(
            r#"{{"task": "statistics", "data": {{
              "Torch.zz.0.forward": {{"input_args": [{}], "output": [{}]}},
              "Functional.aa.0.forward": {{"input_args": [{}], "output": [{}]}}}}}}"#,
            t(1.0, 0.5),
            t(1.0, 0.51),
            t(1.0, 0.5),
            t(1.5, 0.5)
        );
        write(&d.path().join("A/step_1/actor_update/step0/rank0"), &a);
        write(&d.path().join("B/step_1/actor_update/step0/rank0"), &b);
        let c = compare(&d.path().join("A"), &d.path().join("B")).unwrap();
        assert_eq!(c.pairs.len(), 1);
        let p = &c.pairs[0];
        assert_eq!(p.key, "step_1/actor_update/step0/rank0");
        assert_eq!(p.matched, 2);
        assert_eq!(p.only_a, ["Functional.only_a.0.forward"]);
        let f = p.first_divergence.as_ref().unwrap();
        assert_eq!(
            (f.tensor.as_str(), f.stat),
            ("Torch.zz.0.forward.output.0", "Mean")
        );
        assert!((f.rel - 0.01 / 0.51).abs() < 1e-9);
        assert_eq!(p.largest[0].tensor, "Functional.aa.0.forward.output.0");
        assert!((p.largest[0].rel - 1.0).abs() < 1e-12);
        let text = render_text(&c);
        assert!(
            text.contains("first diverging API: Torch.zz.0.forward.output.0"),
            "{text}"
        );
    }

    #[test]
    fn rank_directories_given_directly_pair_and_metrics_are_read() {
        let d = tempfile::tempdir().unwrap();
        let body = format!(
            r#"{{"data": {{"Functional.linear.0.forward": {{"input_args": [{}], "output": []}}}}}}"#,
            t(1.0, 0.5)
        );
        write(&d.path().join("x/rank0"), &body);
        write(&d.path().join("y/rank1"), &body);
        std::fs::write(
            d.path().join("x/metrics-1.jsonl"),
            "{\"step\": 1, \"training/rollout_probs_diff_valid\": 1.0, \"training/rollout_probs_diff_mean\": 0.25, \"training/rollout_probs_diff_max\": 0.5}\n{\"step\": 2, \"training/rollout_probs_diff_valid\": 0.0}\n",
        )
        .unwrap();
        let c = compare(&d.path().join("x/rank0"), &d.path().join("y/rank1")).unwrap();
        assert_eq!(c.pairs.len(), 1);
        assert!(c.pairs[0].first_divergence.is_none());
        let c = compare(&d.path().join("x"), &d.path().join("y/rank1")).unwrap();
        assert_eq!(c.probs_diff.len(), 2);
        assert_eq!(
            (c.probs_diff[0].mean, c.probs_diff[0].max),
            (Some(0.25), Some(0.5))
        );
        assert_eq!(c.probs_diff[1].mean, None);
        assert!(render_text(&c).contains("step 1: mean 0.250000 max 0.500000"));
    }
}
