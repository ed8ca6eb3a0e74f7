//! Hydra-style overrides: set existing keys, add new ones, value parsing, errors.

use rlprof_config::ConfigError;
use rlprof_config::{Node, build_plan, load_document, load_document_str, parse_override_value};
use rlprof_profiler::plan::{Level, Role, Tool};

const BASE: &str = "
global_profiler:
  tool: null
  steps: null
  save_path: outputs/profile
actor_rollout_ref:
  actor:
    profiler:
      enable: False
      all_ranks: False
      ranks: []
      tool_config:
        npu: {level: level0, contents: [], analysis: True, discrete: False}
trainer:
  nnodes: 1
  n_gpus_per_node: 4
";

fn load(ov: &[&str]) -> Result<Node, ConfigError> {
    let ov: Vec<String> = ov.iter().map(|s| s.to_string()).collect();
    load_document_str(BASE, "base.yaml", &ov)
}

fn errors(ov: &[&str]) -> Vec<String> {
    match load(ov) {
        Err(ConfigError::Invalid(v)) => v,
        other => panic!("expected override errors, got {other:?}"),
    }
}

#[test]
fn set_existing_keys() {
    let doc = load(&[
        "global_profiler.steps=[1,2,5]",
        "global_profiler.tool=npu",
        "actor_rollout_ref.actor.profiler.enable=True",
        "actor_rollout_ref.actor.profiler.ranks=[0,3]",
        "actor_rollout_ref.actor.profiler.tool_config.npu.level=level2",
    ])
    .unwrap();
    let p = build_plan(&doc).unwrap();
    assert_eq!(p.steps, vec![1, 2, 5]);
    assert_eq!(p.tool, Some(Tool::Npu));
    let a = p.role(Role::Actor).unwrap();
    assert!(a.enable);
    assert_eq!(a.ranks, vec![0, 3]);
    assert_eq!(a.level, Level::Level2);
    // rollout follows the overridden actor.
    assert!(p.role(Role::Rollout).unwrap().enable);
}

#[test]
fn later_override_wins() {
    let doc = load(&["global_profiler.steps=[1]", "global_profiler.steps=[4]"]).unwrap();
    assert_eq!(
        doc["global_profiler"]["steps"],
        parse_override_value("[4]").unwrap()
    );
}

#[test]
fn add_new_key_with_plus_creates_maps() {
    let doc = load(&[
        "+actor_rollout_ref.rollout.profiler.tool_config.npu.discrete=true",
        "+new.key=v",
        "global_profiler.tool=npu",
        "global_profiler.steps=[3]",
        "actor_rollout_ref.actor.profiler.enable=true",
        "actor_rollout_ref.actor.profiler.all_ranks=true",
    ])
    .unwrap();
    assert_eq!(doc["new"]["key"], Node::Str("v".into()));
    let p = build_plan(&doc).unwrap();
    assert!(p.role(Role::Rollout).unwrap().discrete);
    assert!(!p.role(Role::Actor).unwrap().discrete);
}

#[test]
fn missing_key_without_plus_is_an_error_suggesting_plus() {
    let v = errors(&["actor_rollout_ref.actor.optim.lr=1e-6"]);
    assert_eq!(v.len(), 1);
    assert!(
        v[0].contains("'actor_rollout_ref.actor.optim' does not exist"),
        "{}",
        v[0]
    );
    assert!(
        v[0].contains("+actor_rollout_ref.actor.optim.lr=1e-6"),
        "{}",
        v[0]
    );
    let v = errors(&["trainer.total_epochs=3"]);
    assert!(
        v[0].contains("'trainer.total_epochs' does not exist")
            && v[0].contains("'+trainer.total_epochs=3'"),
        "{}",
        v[0]
    );
    let v = errors(&["global_profiler.stpes=[1]"]);
    assert!(v[0].contains("did you mean 'steps'?"), "{}", v[0]);
    // A role section the job does not have cannot be created without `+`.
    let v = errors(&["critic.profiler.enable=true"]);
    assert!(
        v[0].contains("'critic' does not exist") && v[0].contains("+critic.profiler.enable=true"),
        "{}",
        v[0]
    );
}

#[test]
fn keys_the_yaml_does_not_write_need_plus_as_in_struct_mode() {
    // Hydra composes in struct mode: a key the composed YAML does not have cannot be set
    // without `+`, rlprof's own profiler keys (which verl 0.9.1 lacks) included.
    let plain = [
        "actor_rollout_ref.actor.profiler.enable=True",
        "actor_rollout_ref.actor.profiler.max_events=10",
        "trainer.n_gpus_per_node=2",
    ];
    for o in plain {
        let e = load_document_str("global_profiler: {steps: null}", "a.yaml", &[o.to_string()])
            .unwrap_err();
        let msg = e.problems().join("\n");
        assert!(msg.contains(&format!("+{o}")), "{o}: {msg}");
    }
    let e = load_document_str(
        "actor_rollout_ref: {actor: {profiler: {enable: true}}}",
        "a.yaml",
        &["actor_rollout_ref.actor.profiler.max_events=10".to_string()],
    )
    .unwrap_err();
    assert!(
        e.problems()[0].contains("profiler key this config does not write"),
        "{:?}",
        e.problems()
    );
    let doc = load_document_str(
        "global_profiler: {steps: null}",
        "a.yaml",
        &[
            "global_profiler.steps=[1,2,5]".to_string(),
            "+global_profiler.tool=npu".to_string(),
            "+actor_rollout_ref.actor.profiler.enable=True".to_string(),
            "+actor_rollout_ref.rollout.profiler.tool_config.npu.discrete=True".to_string(),
            "+actor_rollout_ref.actor.profiler.max_events=10".to_string(),
            "+trainer.n_gpus_per_node=2".to_string(),
            "+global_profiler.global_tool_config.nsys.worker_nsight_options.kill=sigkill"
                .to_string(),
        ],
    )
    .unwrap();
    let p = build_plan(&doc).unwrap();
    assert_eq!(p.world_size, 2);
    assert!(p.role(Role::Actor).unwrap().enable);
    assert_eq!(p.role(Role::Actor).unwrap().caps.max_events, Some(10));
    assert!(p.role(Role::Rollout).unwrap().discrete);
    assert_eq!(
        p.nsys.worker_nsight_options["kill"],
        serde_json::json!("sigkill")
    );
}

#[test]
fn plus_on_existing_key_errors_and_double_plus_sets_either_way() {
    let v = errors(&["+global_profiler.save_path=/p"]);
    assert!(
        v[0].contains("already at") && v[0].contains("++global_profiler.save_path=/p"),
        "{}",
        v[0]
    );
    // As in Hydra: a null key counts as absent, and a list or dict value merges either way.
    let doc = load(&["+global_profiler.steps=[1]", "+global_profiler.tool=npu"]).unwrap();
    assert_eq!(doc["global_profiler"]["tool"], Node::Str("npu".into()));
    let doc = load(&[
        "++global_profiler.steps=[2]",
        "++global_profiler.max_events=7",
    ])
    .unwrap();
    assert_eq!(doc["global_profiler"]["max_events"], Node::Int(7));
}

#[test]
fn override_without_equals_is_an_error() {
    let v = errors(&["global_profiler.steps"]);
    assert_eq!(v.len(), 1);
    assert!(
        v[0].starts_with("override 'global_profiler.steps': missing '='"),
        "{}",
        v[0]
    );
}

#[test]
fn all_override_problems_reported_together() {
    let v = errors(&["a", "global_profiler.nope=1", "global_profiler.steps=[1,2"]);
    assert_eq!(v.len(), 3, "{v:#?}");
}

#[test]
fn delete_with_tilde() {
    let doc = load(&["~global_profiler.save_path"]).unwrap();
    assert!(doc["global_profiler"].get("save_path").is_none());
}

#[test]
fn value_parsing() {
    let p = |s: &str| parse_override_value(s).unwrap();
    assert_eq!(p("null"), Node::Null);
    assert_eq!(p("True"), Node::Bool(true));
    assert_eq!(p("False"), Node::Bool(false));
    assert_eq!(p("true"), Node::Bool(true));
    assert_eq!(p("false"), Node::Bool(false));
    assert_eq!(p("42"), Node::Int(42));
    assert_eq!(p("-3"), Node::Int(-3));
    assert_eq!(p("1.5"), Node::Float(1.5));
    assert_eq!(
        p("[1,2,5]"),
        Node::List(vec![Node::Int(1), Node::Int(2), Node::Int(5)])
    );
    assert_eq!(p("[]"), Node::List(vec![]));
    assert_eq!(
        p("[[1,2],[True,null]]"),
        Node::List(vec![
            Node::List(vec![Node::Int(1), Node::Int(2)]),
            Node::List(vec![Node::Bool(true), Node::Null]),
        ])
    );
    assert_eq!(
        p("[npu,cpu]"),
        Node::List(vec![Node::Str("npu".into()), Node::Str("cpu".into())])
    );
    // Quoted `'True'` is still text, not a boolean.
    assert_eq!(p("'True'"), Node::Str("True".into()));
    assert_eq!(p("\"hello world\""), Node::Str("hello world".into()));
    assert_eq!(p("level1"), Node::Str("level1".into()));
    assert_eq!(p("/tmp/a b"), Node::Str("/tmp/a b".into()));
    assert!(parse_override_value("[1,2").is_err());
}

#[test]
fn overrides_apply_to_files_and_empty_documents() {
    let doc = load_document(
        None,
        &[
            "+global_profiler.steps=[1]".to_string(),
            "+global_profiler.tool=torch".to_string(),
        ],
    )
    .unwrap();
    let p = build_plan(&doc).unwrap();
    assert_eq!(p.tool, Some(Tool::Torch));
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("c.yaml");
    std::fs::write(&f, BASE).unwrap();
    let doc = load_document(
        Some(&f),
        &["global_profiler.save_path=/data/prof".to_string()],
    )
    .unwrap();
    let p = build_plan(&doc).unwrap();
    assert_eq!(p.save_path.to_str(), Some("/data/prof"));
    assert_eq!(
        p.role(Role::Actor).unwrap().save_path.to_str(),
        Some("/data/prof")
    );
    assert_eq!(p.world_size, 4);
}
