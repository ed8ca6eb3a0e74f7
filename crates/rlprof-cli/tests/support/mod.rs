//! Helpers shared by the Hydra tests (`hydra_consumer.rs`, `hydra_corpus.rs`).
#![allow(dead_code)]

use serde_json::Value;

/// Paths where two trees differ (the first `limit`): keys, values and JSON types (int vs
/// float). `a` is Hydra's tree, `b` rlprof's.
pub(crate) fn diff(a: &Value, b: &Value, path: &str, limit: usize, out: &mut Vec<String>) {
    if out.len() >= limit {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                match y.get(k) {
                    Some(w) => diff(v, w, &format!("{path}.{k}"), limit, out),
                    None => out.push(format!("{path}.{k}: only in Hydra ({v})")),
                }
            }
            for k in y.keys().filter(|k| !x.contains_key(*k)) {
                out.push(format!("{path}.{k}: only in rlprof ({})", y[k]));
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                diff(v, w, &format!("{path}[{i}]"), limit, out);
            }
        }
        (Value::Number(x), Value::Number(y))
            if x.as_f64() == y.as_f64() && x.is_f64() == y.is_f64() => {}
        _ if a == b => {}
        _ => out.push(format!("{path}: Hydra {a}, rlprof {b}")),
    }
}
