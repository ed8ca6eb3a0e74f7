//! Configuration: verl-compatible YAML, Hydra-style overrides, validation -> plan.
//!
//! Flow: [`load_document`] / [`load_document_str`] read YAML and apply overrides into one merged
//! [`serde_yaml::Value`]; [`build_plan`] validates the profiler sections (`global_profiler`,
//! `actor_rollout_ref.{actor,rollout,ref}.profiler`, `critic.profiler`,
//! `reward_model.profiler`) and resolves them into a [`ProfilePlan`]; [`plan_json`] and
//! [`describe`] render the plan. Every problem is reported at once, each message starting with
//! its YAML path.

mod build;
mod describe;
mod overrides;
mod schema;
mod values;

use serde_yaml::{Mapping, Value};
use std::path::Path;

use crate::error::ProfilerError;
use crate::plan::ProfilePlan;

pub use build::group_steps;
pub use overrides::parse_value as parse_override_value;

/// Reads the YAML file (None = empty document), applies Hydra-style overrides, returns the merged
/// document.
pub fn load_document(path: Option<&Path>, overrides: &[String]) -> Result<Value, ProfilerError> {
    match path {
        None => load_document_str("", "<empty>", overrides),
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| {
                ProfilerError::Config(vec![format!(
                    "{}: cannot read configuration file: {e}",
                    p.display()
                )])
            })?;
            load_document_str(&text, &p.display().to_string(), overrides)
        }
    }
}

/// Same as [`load_document`], but from YAML text (for built-in default configs); `origin` names
/// it in errors.
pub fn load_document_str(
    text: &str,
    origin: &str,
    overrides: &[String],
) -> Result<Value, ProfilerError> {
    let mut doc: Value = if text.trim().is_empty() {
        Value::Mapping(Mapping::new())
    } else {
        serde_yaml::from_str(text).map_err(|e| {
            let at = match e.location() {
                Some(l) => format!("{origin}:{}:{}", l.line(), l.column()),
                None => origin.to_string(),
            };
            ProfilerError::Config(vec![format!("{at}: YAML syntax error: {e}")])
        })?
    };
    if doc.is_null() {
        doc = Value::Mapping(Mapping::new());
    }
    if !doc.is_mapping() {
        return Err(ProfilerError::Config(vec![format!(
            "{origin}: the document is {}, expected a mapping of sections (global_profiler, actor_rollout_ref, ...)",
            values::kind(&doc)
        )]));
    }
    let errors = overrides::apply_overrides(&mut doc, overrides);
    if !errors.is_empty() {
        return Err(ProfilerError::Config(errors));
    }
    Ok(doc)
}

/// Validates the profiler sections of a merged document and resolves them into a plan.
///
/// Rollout and ref follow the actor (keys they do not set take the actor's effective values);
/// critic and reward_model are in the plan only when their section has a `profiler` block.
/// All problems are returned together as [`ProfilerError::Config`]; non-fatal findings go to
/// [`ProfilePlan::warnings`].
pub fn build_plan(doc: &Value) -> Result<ProfilePlan, ProfilerError> {
    build::build_plan(doc)
}

/// The `rlprof config check --json` object.
pub fn plan_json(plan: &ProfilePlan) -> serde_json::Value {
    describe::plan_json(plan)
}

/// The plan in words, for `rlprof config check` and the start-up log (multi-line).
pub fn describe(plan: &ProfilePlan) -> String {
    describe::describe(plan)
}
