//! What the config tests share: a YAML document built into a plan, or into the problems it is
//! refused with.
#![allow(dead_code)]

use rlprof_config::{ConfigError, build_plan, load_document_str};
use rlprof_profiler::ProfilePlan;

/// The plan of `yaml`; panics with the error where it is refused.
pub(crate) fn plan(yaml: &str) -> ProfilePlan {
    let doc = load_document_str(yaml, "test.yaml", &[]).expect("parses");
    build_plan(&doc).unwrap_or_else(|e| panic!("plan fails: {e}"))
}

/// The problems `yaml` is refused with; panics where it builds.
pub(crate) fn problems(yaml: &str) -> Vec<String> {
    let doc = load_document_str(yaml, "test.yaml", &[]).expect("parses");
    match build_plan(&doc) {
        Ok(p) => panic!("expected errors, got plan {p:?}"),
        Err(ConfigError::Invalid(v)) => v,
        Err(e) => panic!("unexpected error {e}"),
    }
}
