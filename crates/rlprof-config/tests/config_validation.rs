//! Validation: every problem is reported with its YAML path, the bad value and the valid values.

use rlprof_config::ConfigError;
use rlprof_config::{build_plan, load_document, load_document_str};

mod support;
use support::problems;

/// The single problem reported for `yaml`, asserting it names `path` and every `needle`.
fn one(yaml: &str, path: &str, needles: &[&str]) -> String {
    let v = problems(yaml);
    assert_eq!(v.len(), 1, "{v:#?}");
    let m = &v[0];
    assert!(
        m.starts_with(&format!("{path}:")),
        "path {path} not first in: {m}"
    );
    for n in needles {
        assert!(m.contains(n), "{n:?} missing in: {m}");
    }
    m.clone()
}

const ACTOR: &str = "actor_rollout_ref.actor.profiler";

fn actor(block: &str) -> String {
    format!(
        "global_profiler: {{tool: npu, steps: [1]}}\nactor_rollout_ref:\n  actor:\n    profiler: {block}\n"
    )
}

#[test]
fn unknown_global_key_with_suggestion() {
    one(
        "global_profiler: {stpes: [1], tool: npu}",
        "global_profiler.stpes",
        &[
            "unknown key",
            "did you mean 'steps'?",
            "valid keys:",
            "profile_continuous_steps",
            "save_path",
        ],
    );
}

#[test]
fn unknown_role_and_nested_keys() {
    one(
        &actor("{enabel: true}"),
        &format!("{ACTOR}.enabel"),
        &["did you mean 'enable'?", "all_ranks"],
    );
    one(
        &actor("{tool_config: {npu: {levle: level1}}}"),
        &format!("{ACTOR}.tool_config.npu.levle"),
        &["did you mean 'level'?", "contents", "analysis"],
    );
    one(
        "global_profiler: {global_tool_config: {torch_memory: {stack_dpeth: 3}}}",
        "global_profiler.global_tool_config.torch_memory.stack_dpeth",
        &["did you mean 'stack_depth'?", "trace_alloc_max_entries"],
    );
    one(
        "actor_rollout_ref: {rollout: {profiler: {tool_config: {tpu: {}}}}}",
        "actor_rollout_ref.rollout.profiler.tool_config.tpu",
        &[
            "unknown key",
            "did you mean 'npu'?",
            "nsys, npu, torch, torch_memory",
        ],
    );
}

#[test]
fn other_sections_are_not_checked() {
    let doc = load_document_str(
        "data: {whatever: 1}\nalgorithm: {foo: bar}\nactor_rollout_ref: {model: {x: 1}, actor: {weird_key: 1, profiler: {enable: false}}}\nnew_section: [1, 2]\n",
        "t",
        &[],
    )
    .unwrap();
    build_plan(&doc).expect("unknown keys outside profiler blocks are the trainer's business");
}

#[test]
fn wrong_type_string_for_bool() {
    one(
        &actor("{enable: 'yes'}"),
        &format!("{ACTOR}.enable"),
        &["'yes'", "a string", "boolean (true or false)"],
    );
    one(
        &actor("{all_ranks: 1}"),
        &format!("{ACTOR}.all_ranks"),
        &["1 is an integer", "true or false"],
    );
    // YAML True/False are booleans.
    let doc = load_document_str(
        &actor("{enable: True, all_ranks: False, ranks: [0]}"),
        "t",
        &[],
    )
    .unwrap();
    let p = build_plan(&doc).unwrap();
    assert!(p.roles.values().next().unwrap().enable);
}

#[test]
fn unknown_tool_level_content() {
    // An unknown global tool is a warning (verl 0.9.1's no-op profiler): tests/verl_parity.rs.
    let m = one(
        &actor("{tool_config: {npu: {level: level3}}}"),
        &format!("{ACTOR}.tool_config.npu.level"),
        &["'level3' is not one of level_none, level0, level1, level2"],
    );
    assert!(m.starts_with("actor_rollout_ref.actor.profiler.tool_config.npu.level: 'level3' is not one of level_none, level0, level1, level2"));
    one(
        &actor("{tool_config: {npu: {contents: [npu, memroy]}}}"),
        &format!("{ACTOR}.tool_config.npu.contents[1]"),
        &[
            "'memroy'",
            "npu, cpu, memory, shapes, module, stack",
            "did you mean 'memory'?",
        ],
    );
    one(
        &actor("{tool: torchh}"),
        &format!("{ACTOR}.tool"),
        &[
            "'torchh'",
            "nsys, npu, torch, torch_memory",
            "did you mean 'torch'?",
        ],
    );
}

#[test]
fn content_not_valid_for_tool() {
    one(
        &actor("{tool_config: {npu: {contents: [cuda]}}}"),
        &format!("{ACTOR}.tool_config.npu.contents[0]"),
        &[
            "'cuda' is not valid for the npu tool",
            "npu, cpu, memory, shapes, module, stack",
        ],
    );
    one(
        &actor("{tool_config: {torch: {contents: [cpu, module]}}}"),
        &format!("{ACTOR}.tool_config.torch.contents[1]"),
        &[
            "'module' is not valid for the torch tool",
            "cuda, cpu, memory, shapes, stack",
        ],
    );
}

#[test]
fn steps_not_a_list() {
    one(
        "global_profiler: {tool: npu, steps: 3}",
        "global_profiler.steps",
        &[
            "3 is an integer",
            "must be a list",
            "steps: [3]",
            "global_profiler.steps=[3]",
        ],
    );
}

#[test]
fn bad_steps() {
    // 0 and -2 are accepted with a warning, as verl 0.9.1 accepts them (tests/verl_parity.rs).
    let v = problems("global_profiler: {tool: npu, steps: [0, -2, 1.5, x, 4]}");
    assert_eq!(v.len(), 2, "{v:#?}");
    for (n, (i, bad)) in [(2, "1.5"), (3, "'x'")].into_iter().enumerate() {
        let m = &v[n];
        assert!(
            m.starts_with(&format!(
                "global_profiler.steps[{i}]: {bad} is not a valid step"
            )),
            "{m}"
        );
        assert!(m.contains("integers >= 1"), "{m}");
    }
}

#[test]
fn rank_out_of_range_or_negative() {
    // A rank beyond the world is accepted with a warning, as verl 0.9.1 accepts it
    // (tests/verl_parity.rs).
    let t = "trainer: {nnodes: 1, n_gpus_per_node: 2}\n";
    one(
        &format!("{t}{}", actor("{enable: true, ranks: [-1]}")),
        &format!("{ACTOR}.ranks[0]"),
        &["-1 is not a valid rank", "0..1"],
    );
    one(
        &format!("{t}{}", actor("{ranks: 0}")),
        &format!("{ACTOR}.ranks"),
        &["expected a list of ranks in 0..1", "all_ranks: true"],
    );
}

#[test]
fn bad_world_size() {
    one(
        "trainer: {nnodes: 0}",
        "trainer.nnodes",
        &["0 is not valid", "integer > 0"],
    );
    one(
        "trainer: {n_gpus_per_node: two}",
        "trainer.n_gpus_per_node",
        &["'two'", "integer > 0"],
    );
}

#[test]
fn continuous_with_discrete_role() {
    // As verl does: accepted, with one warning that continuity has no effect on discrete roles.
    let yaml = "global_profiler: {steps: [1, 2], profile_continuous_steps: true}
actor_rollout_ref: {actor: {profiler: {enable: true, all_ranks: true, tool_config: {npu: {discrete: true}}}}}";
    let doc = load_document_str(yaml, "t", &[]).unwrap();
    let p = build_plan(&doc).unwrap();
    let w: Vec<&String> = p
        .warnings
        .iter()
        .filter(|w| w.starts_with("global_profiler.profile_continuous_steps"))
        .collect();
    assert_eq!(w.len(), 1, "{:#?}", p.warnings);
    assert!(
        w[0].contains("no effect") && w[0].contains("actor, rollout, ref"),
        "{}",
        w[0]
    );
    // A disabled discrete role does not warn.
    let doc = load_document_str(
        "global_profiler: {tool: npu, steps: [1, 2], profile_continuous_steps: true}
actor_rollout_ref: {actor: {profiler: {enable: false, tool_config: {npu: {discrete: true}}}}}",
        "t",
        &[],
    )
    .unwrap();
    assert!(
        build_plan(&doc)
            .unwrap()
            .warnings
            .iter()
            .all(|w| !w.contains("no effect"))
    );
}

#[test]
fn torch_memory_ints_must_be_positive() {
    one(
        "global_profiler: {global_tool_config: {torch_memory: {trace_alloc_max_entries: 0}}}",
        "global_profiler.global_tool_config.torch_memory.trace_alloc_max_entries",
        &["0 is not valid", "integer > 0"],
    );
    one(
        &actor("{tool_config: {torch_memory: {stack_depth: -3}}}"),
        &format!("{ACTOR}.tool_config.torch_memory.stack_depth"),
        &["-3 is not valid", "integer > 0"],
    );
}

#[test]
fn bad_caps() {
    one(
        "global_profiler: {max_events: 0}",
        "global_profiler.max_events",
        &["0 is not valid", "integer > 0, or null for no limit"],
    );
    one(
        &actor("{max_bytes: lots}"),
        &format!("{ACTOR}.max_bytes"),
        &["'lots'", "integer > 0"],
    );
}

#[test]
fn tool_cannot_be_inferred() {
    one(
        "global_profiler: {steps: [1]}\nactor_rollout_ref: {actor: {profiler: {enable: true, all_ranks: true}}}",
        "global_profiler.tool",
        &["not set", "nsys, npu, torch, torch_memory"],
    );
    one(
        "global_profiler: {steps: [1]}
actor_rollout_ref:
  actor: {profiler: {enable: true, all_ranks: true, tool_config: {npu: {discrete: false}}}}
  rollout: {profiler: {tool_config: {torch: {contents: [cpu]}}}}",
        "global_profiler.tool",
        &[
            "several tools",
            "actor_rollout_ref.actor.profiler.tool_config.npu",
            "actor_rollout_ref.rollout.profiler.tool_config.torch",
            "set global_profiler.tool",
        ],
    );
}

#[test]
fn three_problems_at_once() {
    let v = problems(
        "global_profiler: {tool: npu, stpes: [1], steps: [0]}
actor_rollout_ref: {actor: {profiler: {enable: 'yes', tool_config: {npu: {level: level3}}}}}",
    );
    // steps: [0] is a warning (verl 0.9.1 accepts it), not a problem.
    assert_eq!(v.len(), 3, "{v:#?}");
    assert!(
        v.iter()
            .any(|m| m.starts_with("global_profiler.stpes: unknown key; did you mean 'steps'?"))
    );
    assert!(
        v.iter()
            .any(|m| m.starts_with("actor_rollout_ref.actor.profiler.enable: 'yes' is a string"))
    );
    assert!(v.iter().any(|m| {
        m.starts_with("actor_rollout_ref.actor.profiler.tool_config.npu.level: 'level3'")
    }));
    // The Display of the error lists them all.
    let doc = load_document_str(
        "global_profiler: {stpes: 1, tool: 3, save_path: 3}",
        "t",
        &[],
    )
    .unwrap();
    let e = build_plan(&doc).unwrap_err().to_string();
    assert!(
        e.contains("global_profiler.stpes")
            && e.contains("global_profiler.tool")
            && e.contains("global_profiler.save_path"),
        "{e}"
    );
}

#[test]
fn yaml_syntax_error_names_file_line_column() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yaml");
    std::fs::write(&path, "global_profiler:\n  steps: [1, 2\n  tool: npu\n").unwrap();
    let Err(ConfigError::Invalid(v)) = load_document(Some(&path), &[]) else {
        panic!("expected a syntax error");
    };
    assert_eq!(v.len(), 1);
    let m = &v[0];
    assert!(m.starts_with(&path.display().to_string()), "{m}");
    assert!(m.contains("YAML syntax error"), "{m}");
    let re_line_col = m
        .split(':')
        .nth(1)
        .and_then(|l| l.parse::<usize>().ok())
        .is_some();
    assert!(re_line_col, "line number after the file name: {m}");
    assert!(m.contains("line") && m.contains("column"), "{m}");
}

#[test]
fn missing_file_names_path() {
    let p = std::path::Path::new("/nonexistent/dir/ppo_trainer.yaml");
    let Err(ConfigError::Invalid(v)) = load_document(Some(p), &[]) else {
        panic!("expected an error");
    };
    assert!(
        v[0].starts_with("/nonexistent/dir/ppo_trainer.yaml: cannot read"),
        "{v:?}"
    );
}

#[test]
fn not_a_mapping() {
    one(
        "global_profiler: [1, 2]",
        "global_profiler",
        &["is a list", "mapping"],
    );
    one(
        "actor_rollout_ref: {actor: {profiler: 5}}",
        ACTOR,
        &["5 is an integer", "mapping"],
    );
}
