//! Property tests (proptest, stable Rust) over the Chrome-trace reader, bounded to a few
//! hundred cases so that they add little to the test time:
//! - differential against serde_json on valid input: every event serde_json reads from a
//!   generated trace is loaded with the same name, start and duration;
//! - arbitrary and mutated text never panics, and text serde_json rejects is rejected (after
//!   invalid UTF-8 is replaced by U+FFFD, as the loader repairs it: a trace with a bad byte in
//!   a name still loads).

use proptest::prelude::*;
use rlprof_report::chrome_reader::{Limits, read_stream};
use rlprof_report::model::{Profile, SourceFormat};
use std::path::Path;

fn load(text: &[u8]) -> Result<Profile, rlprof_report::error::ReportError> {
    let mut p = Profile::new("fuzz.json".into(), SourceFormat::TorchTrace, 0, "g".into());
    read_stream(text, Path::new("fuzz.json"), &mut p, &Limits::default()).map(|()| p)
}

/// What serde_json makes of the text the loader reads: invalid UTF-8 replaced by U+FFFD.
fn serde_rejects(bytes: &[u8]) -> bool {
    serde_json::from_str::<serde_json::Value>(&String::from_utf8_lossy(bytes)).is_err()
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn valid_traces_load_like_serde_json_reads_them(
        events in prop::collection::vec((any::<String>(), 0u32..1_000_000, 0u32..10_000), 0..12),
        base in any::<bool>(),
    ) {
        let evs: Vec<serde_json::Value> = events
            .iter()
            .map(|(name, ts, dur)| serde_json::json!({
                "ph": "X", "cat": "cpu_op", "name": format!("op {name}"), "pid": 1, "tid": 2,
                "ts": *ts as f64 + 0.5, "dur": *dur,
                "args": {"Input Dims": [[1, 2]], "note": name},
            }))
            .collect();
        let doc = if base {
            serde_json::json!({"baseTimeNanoseconds": 0, "traceEvents": evs})
        } else {
            serde_json::Value::Array(evs)
        };
        let text = serde_json::to_vec(&doc).unwrap();
        let p = load(&text).unwrap();
        // The reference: what serde_json reads back from the same text.
        let back: serde_json::Value = serde_json::from_slice(&text).unwrap();
        let back = if base { back["traceEvents"].clone() } else { back };
        let mut want: Vec<(String, i64, i64)> = back
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (
                e["name"].as_str().unwrap().to_string(),
                (e["ts"].as_f64().unwrap() * 1000.0).round() as i64,
                e["dur"].as_i64().unwrap() * 1000,
            ))
            .collect();
        let mut got: Vec<(String, i64, i64)> = p
            .events
            .iter()
            .map(|e| (p.strings[e.name as usize].clone(), e.start + p.origin_ns as i64, e.dur))
            .collect();
        want.sort();
        got.sort();
        let names = |v: &[(String, i64, i64)]| v.iter().map(|x| x.0.clone()).collect::<Vec<_>>();
        prop_assert_eq!(names(&got), names(&want));
        for (g, w) in got.iter().zip(&want) {
            prop_assert_eq!(g.2, w.2, "duration of {}", &w.0);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_invalid_json_is_rejected(
        bytes in prop::collection::vec(any::<u8>(), 0..256),
    ) {
        let r = load(&bytes);
        if serde_rejects(&bytes) {
            prop_assert!(r.is_err());
        }
    }

    #[test]
    fn mutated_traces_never_panic(
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let doc = serde_json::json!({"traceEvents": [
            {"ph": "X", "cat": "kernel", "name": "k\u{e9}\"x", "pid": 0, "tid": 7, "ts": 1.5, "dur": 2},
            {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}},
            {"ph": "i", "name": "mark", "pid": 0, "tid": 7, "ts": 3, "s": "t"},
        ]});
        let mut text = serde_json::to_vec(&doc).unwrap();
        for (at, b) in flips {
            let i = at.index(text.len());
            text[i] = b;
        }
        text.truncate(cut.index(text.len() + 1));
        let r = load(&text);
        if serde_rejects(&text) {
            prop_assert!(r.is_err());
        }
    }
}
