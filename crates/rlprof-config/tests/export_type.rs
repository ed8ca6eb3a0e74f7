//! `tool_config.npu.export_type` (an rlprof extension): `db` by default as in verl 0.9.1,
//! `text` when asked, inherited like the other npu keys, validated with the valid values named.

use rlprof_config::ConfigError;
use rlprof_config::{build_plan, load_document_str};
use rlprof_profiler::plan::{ExportType, ProfilePlan, Role};

fn doc(actor_npu: &str) -> String {
    format!(
        "global_profiler: {{tool: npu, steps: [1]}}\nactor_rollout_ref:\n  actor:\n    profiler: {{enable: true, ranks: [0], tool_config: {{npu: {actor_npu}}}}}\n  rollout: {{}}\n"
    )
}

fn plan(yaml: &str) -> Result<ProfilePlan, ConfigError> {
    build_plan(&load_document_str(yaml, "test.yaml", &[]).expect("parses"))
}

#[test]
fn db_by_default_text_when_asked_and_inherited() {
    let p = plan(&doc("{level: level1}")).unwrap();
    assert_eq!(p.role(Role::Actor).unwrap().export_type, ExportType::Db);
    let p = plan(&doc("{export_type: text}")).unwrap();
    assert_eq!(p.role(Role::Actor).unwrap().export_type, ExportType::Text);
    if let Some(r) = p.role(Role::Rollout) {
        assert_eq!(r.export_type, ExportType::Text, "rollout follows the actor");
    }
}

#[test]
fn an_unknown_export_type_names_the_valid_ones() {
    match plan(&doc("{export_type: sqlite}")) {
        Err(ConfigError::Invalid(v)) => {
            assert_eq!(v.len(), 1, "{v:?}");
            assert!(
                v[0].starts_with("actor_rollout_ref.actor.profiler.tool_config.npu.export_type:"),
                "{}",
                v[0]
            );
            assert!(v[0].contains("'sqlite' is not one of db, text"), "{}", v[0]);
        }
        other => panic!("expected a config error, got {other:?}"),
    }
}
