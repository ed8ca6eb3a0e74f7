//! Property tests (proptest, stable Rust) over the YAML config reader, bounded so that they
//! add little to the test time: arbitrary text, arbitrary overrides and well-formed documents
//! with arbitrary values at the profiler's keys never panic the loader or the plan builder.

use proptest::prelude::*;
use rlprof_config::{build_plan, load_document_str};

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// A YAML scalar or small flow collection, as a user might type it.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|v| v.to_string()),
        any::<f64>().prop_map(|v| v.to_string()),
        Just("null".to_string()),
        Just("true".to_string()),
        Just("[]".to_string()),
        prop::collection::vec(any::<i32>(), 0..5).prop_map(|v| format!("{v:?}")),
        "[a-z_0-9 .:/-]{0,12}",
        any::<String>().prop_map(|s| serde_json::to_string(&s).unwrap()),
    ]
}

const KEYS: [&str; 10] = [
    "global_profiler.tool",
    "global_profiler.steps",
    "global_profiler.save_path",
    "global_profiler.profile_continuous_steps",
    "actor_rollout_ref.actor.profiler.enable",
    "actor_rollout_ref.actor.profiler.ranks",
    "actor_rollout_ref.actor.profiler.all_ranks",
    "actor_rollout_ref.actor.profiler.tool_config.npu.level",
    "actor_rollout_ref.actor.profiler.tool_config.npu.contents",
    "actor_rollout_ref.actor.profiler.tool_config.npu.discrete",
];

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        if let Ok(doc) = load_document_str(&text, "<fuzz>", &[]) {
            let _ = build_plan(&doc);
        }
    }

    #[test]
    fn arbitrary_overrides_never_panic(
        overrides in prop::collection::vec(any::<String>(), 0..4),
    ) {
        if let Ok(doc) = load_document_str("global_profiler:\n  tool: npu\n", "<fuzz>", &overrides) {
            let _ = build_plan(&doc);
        }
    }

    #[test]
    fn arbitrary_values_at_known_keys_never_panic(
        picks in prop::collection::vec((0..KEYS.len(), value()), 1..6),
    ) {
        let overrides: Vec<String> = picks
            .into_iter()
            .map(|(k, v)| format!("{}={v}", KEYS[k]))
            .collect();
        if let Ok(doc) = load_document_str("", "<fuzz>", &overrides) {
            let _ = build_plan(&doc);
        }
    }
}
