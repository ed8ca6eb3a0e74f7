//! Plan building: the user document's examples, verl files, inheritance, ranks, step groups.

use rlprof_config::{build_plan, describe, load_document, load_document_str, plan_json};
use rlprof_profiler::plan::{Content, Contents, Level, ProfilePlan, Role, Tool};

mod support;
use support::plan;

fn plan_ov(yaml: &str, ov: &[&str]) -> ProfilePlan {
    let ov: Vec<String> = ov.iter().map(|s| s.to_string()).collect();
    let doc = load_document_str(yaml, "test.yaml", &ov).expect("loads");
    build_plan(&doc).unwrap_or_else(|e| panic!("plan fails: {e}"))
}

const EXAMPLE_A: &str = "
# A. disable collection
global_profiler:
  steps: null
";

const EXAMPLE_B: &str = "
# B. end-to-end collection
global_profiler:
  steps: [1, 2, 5]
actor_rollout_ref:
  actor:
    profiler:
      enable: True
      all_ranks: True
      tool_config:
        npu:
          discrete: False
# rollout & ref follow actor settings
";

const EXAMPLE_C: &str = "
# C. discrete collection
global_profiler:
  steps: [1, 2, 5]
actor_rollout_ref:
  actor:
    profiler:
      enable: True
      all_ranks: True
      tool_config:
        npu:
          discrete: True
# rollout & ref follow actor settings
";

const TRAINER_2: &str = "trainer:\n  nnodes: 1\n  n_gpus_per_node: 2\n";

#[test]
fn example_a_collects_nothing() {
    let p = plan(EXAMPLE_A);
    assert!(p.steps.is_empty());
    assert!(p.step_groups.is_empty());
    assert_eq!(p.tool, None);
    assert!(p.roles.values().all(|r| !r.enable));
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    assert_eq!(p.world_size, 1);
    assert_eq!(p.group_of(1), None);
}

#[test]
fn example_b_end_to_end_all_roles_all_ranks() {
    let p = plan(&format!("{EXAMPLE_B}{TRAINER_2}"));
    assert_eq!(p.tool, Some(Tool::Npu));
    assert_eq!(
        p.tool_source,
        "inferred from actor_rollout_ref.actor.profiler.tool_config.npu"
    );
    assert_eq!(p.steps, vec![1, 2, 5]);
    assert_eq!(p.step_groups, vec![vec![1], vec![2], vec![5]]);
    assert_eq!(p.world_size, 2);
    for role in [Role::Actor, Role::Rollout, Role::Ref] {
        let r = p.role(role).expect("role present");
        assert!(r.enable, "{role:?}");
        assert!(r.all_ranks);
        assert_eq!(r.ranks, vec![0, 1]);
        assert!(!r.discrete, "{role:?}");
        assert_eq!(r.tool, Tool::Npu);
        assert_eq!(r.level, Level::Level0);
        // `contents: []` is CPU only, as verl 0.9.1 collects it (the user document is silent).
        assert_eq!(r.contents, [Content::Cpu].into_iter().collect::<Contents>());
        assert!(r.analysis);
        assert_eq!(r.save_path.to_str(), Some("outputs/profile"));
        assert!(r.collects_on(1));
    }
    assert!(p.role(Role::Critic).is_none());
    assert!(p.role(Role::RewardModel).is_none());
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
}

#[test]
fn example_c_discrete_for_actor_rollout_ref() {
    let p = plan(EXAMPLE_C);
    assert_eq!(p.tool, Some(Tool::Npu));
    assert_eq!(p.step_groups, vec![vec![1], vec![2], vec![5]]);
    for role in [Role::Actor, Role::Rollout, Role::Ref] {
        let r = p.role(role).unwrap();
        assert!(r.enable && r.discrete, "{role:?}");
        assert_eq!(r.ranks, vec![0]);
    }
}

#[test]
fn examples_json_and_describe() {
    let p = plan(EXAMPLE_B);
    let j = plan_json(&p);
    assert_eq!(j["tool"], "npu");
    assert_eq!(j["steps"], serde_json::json!([1, 2, 5]));
    assert_eq!(j["step_groups"], serde_json::json!([[1], [2], [5]]));
    assert_eq!(j["roles"]["rollout"]["enable"], true);
    assert_eq!(j["roles"]["ref"]["contents"], serde_json::json!(["cpu"]));
    assert_eq!(j["roles"]["actor"]["level"], "level0");
    assert_eq!(j["roles"]["actor"]["caps"]["max_events"], 50_000_000);
    assert_eq!(j["profile_continuous_steps"], false);
    let d = describe(&p);
    assert!(
        d.starts_with("tool npu (inferred from actor_rollout_ref.actor.profiler.tool_config.npu)"),
        "{d}"
    );
    assert!(d.contains("steps [1, 2, 5] -> 3 collections"), "{d}");
    assert!(
        d.contains("actor: all ranks [0], tool npu, end-to-end"),
        "{d}"
    );
    assert!(d.contains("level0, contents cpu, analysis on"), "{d}");
    assert!(d.contains("layout verl"), "{d}");
    assert!(
        d.contains("verl 0.9.1 would differ: [rollout-in-e2e]"),
        "{d}"
    );
    assert!(d.contains("caps 50000000 events, 2 GiB"), "{d}");
    let c = describe(&plan(EXAMPLE_C));
    assert!(
        c.contains("rollout: all ranks [0], tool npu, discrete"),
        "{c}"
    );
    let a = plan(EXAMPLE_A);
    assert_eq!(plan_json(&a)["tool"], serde_json::Value::Null);
    assert!(describe(&a).contains("nothing is collected"));
}

const VERL: &str = r#"
data:
  tokenizer: null
  train_files: ~/data/gsm8k/train.parquet
  train_batch_size: 1024
actor_rollout_ref:
  hybrid_engine: true
  model:
    path: ~/models/deepseek-llm-7b-chat
    enable_gradient_checkpointing: true
  actor:
    strategy: fsdp
    ppo_mini_batch_size: 256
    optim:
      lr: 1e-6
      warmup_style: constant
    profiler:
      _target_: verl.utils.profiler.ProfilerConfig
      tool: ${oc.select:global_profiler.tool,null}
      enable: True
      all_ranks: False
      ranks: [0, 3]
      save_path: ${oc.select:global_profiler.save_path,null}
      tool_config:
        nsys:
          _target_: verl.utils.profiler.config.NsightToolConfig
          discrete: ${oc.select:global_profiler.global_tool_config.nsys.discrete}
        npu:
          _target_: verl.utils.profiler.config.NPUToolConfig
          contents: []
          level: "level1"
          analysis: True
          discrete: False
        torch:
          _target_: verl.utils.profiler.config.TorchProfilerToolConfig
          step_start: 0
          step_end: null
        torch_memory:
          _target_: verl.utils.profiler.config.TorchMemoryToolConfig
          trace_alloc_max_entries: ${oc.select:global_profiler.global_tool_config.torch_memory.trace_alloc_max_entries,100000}
          stack_depth: ${oc.select:global_profiler.global_tool_config.torch_memory.stack_depth,32}
  ref:
    log_prob_micro_batch_size_per_gpu: 16
  rollout:
    name: vllm
    n: 5
    temperature: 1.0
    profiler: ${oc.select:actor_rollout_ref.actor.profiler,null}
critic:
  strategy: fsdp
  profiler:
    _target_: verl.utils.profiler.ProfilerConfig
    tool: ${oc.select:global_profiler.tool,null}
    enable: False
algorithm:
  adv_estimator: grpo
  kl_ctrl:
    type: fixed
trainer:
  nnodes: 2
  n_gpus_per_node: 2
  project_name: verl_examples
  experiment_name: gsm8k
  default_local_dir: checkpoints/${trainer.project_name}/${trainer.experiment_name}
global_profiler:
  _target_: verl.utils.profiler.ProfilerConfig
  tool: npu
  steps: [2, 4]
  profile_continuous_steps: False
  save_path: "outputs/profile"
  global_tool_config:
    nsys:
      _target_: verl.utils.profiler.config.NsightToolConfig
      discrete: False
      controller_nsight_options:
        trace: "cuda,nvtx,cublas,ucx"
        cuda-memory-usage: "true"
        cuda-graph-trace: "graph"
      worker_nsight_options:
        trace: "cuda,nvtx,cublas,ucx"
        cuda-memory-usage: "true"
        cuda-graph-trace: "graph"
        capture-range: "cudaProfilerApi"
        capture-range-end: null
        kill: none
    torch_memory:
      trace_alloc_max_entries: 100_000
      stack_depth: 32
      context: "all"
      stacks: "all"
      kw_args: {}
"#;

#[test]
fn verl_style_file_with_extra_sections_loads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ppo_trainer.yaml");
    std::fs::write(&path, VERL).unwrap();
    let doc = load_document(Some(&path), &[]).expect("loads");
    let p = build_plan(&doc).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.tool, Some(Tool::Npu));
    assert_eq!(p.tool_source, "global_profiler.tool");
    assert_eq!(p.world_size, 4);
    assert_eq!(p.steps, vec![2, 4]);
    let actor = p.role(Role::Actor).unwrap();
    assert_eq!(actor.ranks, vec![0, 3]);
    assert_eq!(actor.level, Level::Level1);
    assert_eq!(actor.torch_step_end, -1);
    assert_eq!(actor.torch_memory.trace_alloc_max_entries, 100_000);
    // rollout's profiler is an interpolation: it follows the actor.
    let rollout = p.role(Role::Rollout).unwrap();
    assert!(rollout.enable);
    assert_eq!(rollout.ranks, vec![0, 3]);
    assert_eq!(rollout.level, Level::Level1);
    let critic = p.role(Role::Critic).expect("critic has a profiler block");
    assert!(!critic.enable);
    assert!(p.role(Role::RewardModel).is_none());
    assert_eq!(
        p.nsys.worker_nsight_options["capture-range"],
        serde_json::json!("cudaProfilerApi")
    );
}

#[test]
fn inheritance_rollout_and_ref_absent_follow_actor() {
    let p = plan(
        "global_profiler: {tool: npu, steps: [3]}
actor_rollout_ref:
  actor:
    profiler:
      enable: true
      ranks: [0]
      save_path: /tmp/prof
      max_events: 1000
      tool_config: {npu: {level: level2, contents: [npu, memory], analysis: false}}
",
    );
    for role in [Role::Rollout, Role::Ref] {
        let r = p.role(role).unwrap();
        assert!(r.enable);
        assert_eq!(r.ranks, vec![0]);
        assert_eq!(r.level, Level::Level2);
        assert_eq!(
            r.contents,
            [Content::Npu, Content::Memory]
                .into_iter()
                .collect::<Contents>()
        );
        assert!(!r.analysis);
        assert_eq!(r.save_path.to_str(), Some("/tmp/prof"));
        assert_eq!(r.caps.max_events, Some(1000));
        assert_eq!(r.caps.max_bytes, Some(2 << 30));
    }
}

#[test]
fn inheritance_rollout_partially_set_overrides_only_its_keys() {
    let p = plan(
        "global_profiler: {tool: npu, steps: [3]}
actor_rollout_ref:
  actor:
    profiler:
      enable: true
      all_ranks: true
      tool_config: {npu: {level: level1}}
  rollout:
    profiler:
      tool_config: {npu: {discrete: true}}
",
    );
    let actor = p.role(Role::Actor).unwrap();
    let rollout = p.role(Role::Rollout).unwrap();
    let r#ref = p.role(Role::Ref).unwrap();
    assert!(!actor.discrete);
    assert!(rollout.discrete);
    assert!(!r#ref.discrete);
    assert!(rollout.enable && rollout.all_ranks);
    assert_eq!(rollout.level, Level::Level1);
}

#[test]
fn inheritance_fully_set_roles_keep_their_own_values() {
    let p = plan(
        "global_profiler: {tool: npu, steps: [3]}
trainer: {nnodes: 1, n_gpus_per_node: 4}
actor_rollout_ref:
  actor:
    profiler: {enable: true, all_ranks: true, tool_config: {npu: {level: level1, discrete: false}}}
  rollout:
    profiler: {enable: false, all_ranks: false, ranks: [2], tool_config: {npu: {level: level_none, discrete: true}}}
  ref:
    profiler: {enable: true, all_ranks: false, ranks: [3, 1, 3], save_path: ref_out, tool_config: {npu: {level: level2, contents: [cpu]}}}
",
    );
    let rollout = p.role(Role::Rollout).unwrap();
    assert!(!rollout.enable);
    assert_eq!(rollout.ranks, vec![2]);
    assert_eq!(rollout.level, Level::LevelNone);
    assert!(rollout.discrete);
    let r#ref = p.role(Role::Ref).unwrap();
    assert_eq!(r#ref.ranks, vec![1, 3]);
    assert_eq!(r#ref.level, Level::Level2);
    assert_eq!(
        r#ref.contents,
        [Content::Cpu].into_iter().collect::<Contents>()
    );
    assert_eq!(r#ref.save_path.to_str(), Some("ref_out"));
    assert_eq!(p.role(Role::Actor).unwrap().ranks, vec![0, 1, 2, 3]);
}

#[test]
fn critic_does_not_inherit_from_actor() {
    let p = plan(
        "global_profiler: {tool: npu, steps: [1]}
actor_rollout_ref: {actor: {profiler: {enable: true, all_ranks: true}}}
critic: {profiler: {_target_: x}}
reward_model: {profiler: {enable: true, ranks: [0]}}
",
    );
    let c = p.role(Role::Critic).unwrap();
    assert!(!c.enable && !c.all_ranks && c.ranks.is_empty());
    let rm = p.role(Role::RewardModel).unwrap();
    assert!(rm.enable);
    assert_eq!(rm.ranks, vec![0]);
}

fn rank_case(actor: &str) -> ProfilePlan {
    plan(&format!(
        "global_profiler: {{tool: npu, steps: [1]}}\n{TRAINER_2}actor_rollout_ref:\n  actor:\n    profiler: {actor}\n"
    ))
}

#[test]
fn rank_selection_matrix_world_size_two() {
    let all = rank_case("{enable: true, all_ranks: true}");
    assert_eq!(all.role(Role::Actor).unwrap().ranks, vec![0, 1]);
    assert!(all.warnings.is_empty());

    let one = rank_case("{enable: true, ranks: [1]}");
    let a = one.role(Role::Actor).unwrap();
    assert_eq!(a.ranks, vec![1]);
    assert!(!a.collects_on(0) && a.collects_on(1));
    assert!(one.warnings.is_empty());

    let none = rank_case("{enable: true, all_ranks: false, ranks: []}");
    let a = none.role(Role::Actor).unwrap();
    assert!(a.ranks.is_empty());
    assert!(!a.collects_on(0) && !a.collects_on(1));
    let w = none
        .warnings
        .iter()
        .find(|w| w.starts_with("actor_rollout_ref.actor.profiler:"))
        .expect("warning for actor");
    assert!(w.contains("collects nothing"), "{w}");
    assert!(
        w.contains("actor_rollout_ref.actor.profiler.all_ranks=True"),
        "{w}"
    );
    assert!(
        w.contains("actor_rollout_ref.actor.profiler.ranks=[0]"),
        "{w}"
    );
    assert!(!w.contains('\n'));
    assert!(describe(&none).contains("warning: actor_rollout_ref.actor.profiler:"));
}

#[test]
fn steps_without_enabled_role_warns() {
    let p = plan("global_profiler: {tool: torch, steps: [2]}");
    assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
    assert!(p.warnings[0].contains("no role is enabled"));
}

#[test]
fn continuous_steps_grouping() {
    let p = plan(
        "global_profiler: {tool: npu, steps: [5, 1, 2, 2, 7, 8, 9], profile_continuous_steps: true}
actor_rollout_ref: {actor: {profiler: {enable: true, ranks: [0]}}}",
    );
    assert_eq!(p.steps, vec![1, 2, 5, 7, 8, 9]);
    assert_eq!(p.step_groups, vec![vec![1, 2], vec![5], vec![7, 8, 9]]);
    assert_eq!(p.group_of(8), Some(&[7u64, 8, 9][..]));
    assert_eq!(
        plan_json(&p)["step_groups"],
        serde_json::json!([[1, 2], [5], [7, 8, 9]])
    );
    let p = plan_ov(
        EXAMPLE_B,
        &["++global_profiler.profile_continuous_steps=True"],
    );
    assert_eq!(p.step_groups, vec![vec![1, 2], vec![5]]);
    let p = plan("global_profiler: {tool: npu, steps: [1, 2, 5]}");
    assert_eq!(p.step_groups, vec![vec![1], vec![2], vec![5]]);
}

#[test]
fn tool_specific_resolution() {
    let p = plan(
        "global_profiler:
  tool: nsys
  steps: [1]
  global_tool_config: {nsys: {discrete: true}, torch_memory: {trace_alloc_max_entries: 10, stack_depth: 4}}
actor_rollout_ref:
  actor: {profiler: {enable: true, ranks: [0]}}
  rollout: {profiler: {tool: torch, tool_config: {torch: {contents: [cuda, shapes], discrete: true}}}}
  ref: {profiler: {tool: torch_memory}}
",
    );
    let a = p.role(Role::Actor).unwrap();
    assert_eq!(a.tool, Tool::Nsys);
    assert!(a.discrete, "nsys discrete follows the global nsys discrete");
    let r = p.role(Role::Rollout).unwrap();
    assert_eq!(r.tool, Tool::Torch);
    assert!(r.discrete);
    // torch: CPU activity always, as verl 0.9.1 collects it.
    assert_eq!(
        r.contents,
        [Content::Cuda, Content::Shapes, Content::Cpu]
            .into_iter()
            .collect::<Contents>()
    );
    let f = p.role(Role::Ref).unwrap();
    assert_eq!(f.tool, Tool::TorchMemory);
    assert!(!f.discrete);
    assert_eq!(
        f.contents,
        [Content::Memory].into_iter().collect::<Contents>()
    );
    assert_eq!(f.torch_memory.trace_alloc_max_entries, 10);
    assert_eq!(f.torch_memory.stack_depth, 4);
}

#[test]
fn caps_global_and_role_override() {
    let p = plan(
        "global_profiler: {tool: npu, steps: [1], max_events: 10, max_bytes: null}
actor_rollout_ref: {actor: {profiler: {enable: true, ranks: [0], max_bytes: 99}}}
",
    );
    let a = p.role(Role::Actor).unwrap();
    assert_eq!(a.caps.max_events, Some(10));
    assert_eq!(a.caps.max_bytes, Some(99));
    let c = p.role(Role::Rollout).unwrap();
    assert_eq!(c.caps.max_bytes, Some(99));
    let p = plan("global_profiler: {tool: npu, max_bytes: null}");
    assert_eq!(p.role(Role::Actor).unwrap().caps.max_bytes, None);
}

#[test]
fn empty_document_and_missing_file_path_none() {
    let doc = load_document(None, &[]).unwrap();
    let p = build_plan(&doc).unwrap();
    assert!(p.steps.is_empty());
    assert_eq!(p.save_path.to_str(), Some("outputs/profile"));
    assert_eq!(p.roles.len(), 3);
}

#[test]
fn load_document_str_errors_name_origin() {
    let e = load_document_str("a: [1\n", "builtin:ppo_trainer", &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("builtin:ppo_trainer:"), "{e}");
    let e = load_document_str("- 1\n- 2\n", "list.yaml", &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("list.yaml: the document is a list"), "{e}");
}
