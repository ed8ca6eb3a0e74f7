//! verl 0.9.1's validation and resolution, held against verl's own source
//! (`verl/utils/profiler/config.py`, `profile.py`, `mstx_profile.py`, `torch_profile.py`,
//! `verl/trainer/ppo/ray_trainer.py`): what verl accepts is accepted with a warning saying what
//! verl does; what verl refuses is refused; where rlprof differs, `config check` says so
//! (`docs/verl-differences.md`).

use rlprof_config::describe;
use rlprof_profiler::ProfilePlan;
use rlprof_profiler::plan::{Content, Layout, Role, RoleCall, ScheduleScope};

mod support;
use support::{plan, problems};

const ACTOR_ON: &str = "actor_rollout_ref: {actor: {profiler: {enable: true, ranks: [0]}}}\n";

fn warned(p: &ProfilePlan, needles: &[&str]) {
    assert!(
        p.warnings
            .iter()
            .any(|w| needles.iter().all(|n| w.contains(n))),
        "no warning with {needles:?} in {:#?}",
        p.warnings
    );
}

/// verl: `curr_step_profile = self.global_steps in steps`, global_steps counting from 1.
#[test]
fn steps_zero_and_negative_warn_as_verl_accepts_them() {
    let p = plan(&format!(
        "global_profiler: {{tool: npu, steps: [0, -1, 2]}}\n{ACTOR_ON}"
    ));
    assert_eq!(p.steps, vec![2]);
    warned(
        &p,
        &[
            "global_profiler.steps[0]",
            "step 0 never comes",
            "verl 0.9.1 accepts",
        ],
    );
    warned(&p, &["global_profiler.steps[1]", "step -1"]);
}

/// verl: `self._this_rank = rank in config.ranks`: a rank beyond the world selects no process.
#[test]
fn ranks_beyond_the_world_warn() {
    let p = plan(
        "trainer: {nnodes: 1, n_gpus_per_node: 2}
global_profiler: {tool: npu, steps: [1]}
actor_rollout_ref: {actor: {profiler: {enable: true, ranks: [0, 5]}}}",
    );
    assert_eq!(p.role(Role::Actor).unwrap().ranks, vec![0]);
    warned(
        &p,
        &[
            "actor_rollout_ref.actor.profiler.ranks[1]",
            "rank 5 is >= world size 2",
            "verl 0.9.1 accepts",
        ],
    );
}

/// verl: `DistProfiler` builds `_NoOpProfiler` for an unknown tool.
#[test]
fn unknown_tool_warns_and_collects_nothing() {
    let p = plan(&format!(
        "global_profiler: {{tool: nsyss, steps: [1]}}\n{ACTOR_ON}"
    ));
    assert!(p.step_groups.is_empty(), "nothing collects");
    assert_eq!(p.tool, None);
    warned(
        &p,
        &[
            "global_profiler.tool",
            "'nsyss'",
            "no-op profiler",
            "did you mean 'nsys'?",
        ],
    );
}

/// verl: `TorchProfilerScheduleConfig.__post_init__` asserts every field >= 0.
#[test]
fn negative_schedule_active_is_refused() {
    let v = problems(
        "global_profiler: {tool: torch, steps: [1]}
actor_rollout_ref: {actor: {profiler: {enable: true, ranks: [0], tool_config: {torch: {schedule: {active: -1}}}}}}",
    );
    assert_eq!(v.len(), 1, "{v:#?}");
    assert!(
        v[0].starts_with(
            "actor_rollout_ref.actor.profiler.tool_config.torch.schedule.active: -1 is negative"
        ),
        "{}",
        v[0]
    );
}

/// verl (`ray_trainer.py`): `worker_nsight_options must be set when using nsys with profile_steps`.
#[test]
fn null_worker_nsight_options_with_nsys_is_refused() {
    let v = problems(&format!(
        "global_profiler: {{tool: nsys, steps: [1], global_tool_config: {{nsys: {{worker_nsight_options: null}}}}}}\n{ACTOR_ON}"
    ));
    assert_eq!(v.len(), 1, "{v:#?}");
    assert!(
        v[0].starts_with("global_profiler.global_tool_config.nsys.worker_nsight_options: null")
    );
}

/// verl (`get_npu_profiler`): CPU always, NPU only when `npu` is listed; `[]` is CPU only.
/// The user document: `cpu` selects host data, so `[npu]` is NPU only here.
#[test]
fn npu_contents_follow_the_document_then_verl() {
    let p = plan(&format!(
        "global_profiler: {{tool: npu, steps: [1]}}\n{ACTOR_ON}"
    ));
    let a = p.role(Role::Actor).unwrap();
    assert_eq!(
        a.contents.to_vec(),
        vec![Content::Cpu],
        "[] is CPU only, as verl"
    );
    assert!(
        !p.verl
            .differences
            .iter()
            .any(|d| d.contains("[npu-contents]")),
        "{:?}",
        p.verl.differences
    );
    let p = plan(
        "global_profiler: {tool: npu, steps: [1]}
actor_rollout_ref: {actor: {profiler: {enable: true, ranks: [0], tool_config: {npu: {contents: [npu]}}}}}",
    );
    assert_eq!(
        p.role(Role::Actor).unwrap().contents.to_vec(),
        vec![Content::Npu]
    );
    let d = describe(&p);
    assert!(d.contains("verl 0.9.1 would differ: [npu-contents]"), "{d}");
    // torch (`get_torch_profiler`): CPU always.
    let p = plan(
        "global_profiler: {tool: torch, steps: [1]}
actor_rollout_ref: {actor: {profiler: {enable: true, ranks: [0], tool_config: {torch: {contents: [cuda]}}}}}",
    );
    assert!(p.role(Role::Actor).unwrap().contents.has(Content::Cpu));
}

/// The user document: `ranks: []` collects nothing; verl would profile rank 0.
#[test]
fn empty_ranks_collect_nothing() {
    let p = plan(
        "global_profiler: {tool: npu, steps: [1]}
actor_rollout_ref: {actor: {profiler: {enable: true, ranks: []}}}",
    );
    assert!(p.role(Role::Actor).unwrap().ranks.is_empty());
    assert!(describe(&p).contains("verl 0.9.1 would differ: [empty-ranks]"));
}

/// verl applies `tool_config.torch.schedule` to `actor_update` only (`scheduled=True`), with
/// `repeat: 0` meaning one window in end-to-end mode and skip_first/wait/warmup honoured.
#[test]
fn torch_schedule_is_the_update_stages() {
    let p = plan(
        "global_profiler: {tool: torch, steps: [1]}
actor_rollout_ref: {actor: {profiler: {enable: true, ranks: [0], tool_config: {torch: {schedule: {skip_first: 1, wait: 1, warmup: 1, active: 2}}}}}}",
    );
    let a = p.role(Role::Actor).unwrap();
    let s = a.schedule.unwrap();
    assert_eq!(
        (s.skip_first, s.wait, s.warmup, s.active, s.repeat),
        (1, 1, 1, 2, 1)
    );
    assert_eq!(a.schedule_scope, ScheduleScope::Update);
    assert!(a.schedule_for(RoleCall::UpdateActor).is_some());
    assert!(a.schedule_for(RoleCall::ComputeLogProb).is_none());
    assert!(describe(&p).contains("[torch-e2e-earlier-stages]"));
}

/// verl hands `profile_token_*` to the rollout engine, in discrete mode only.
#[test]
fn token_windows_apply_to_discrete_rollout_only() {
    let p = plan(
        "global_profiler: {tool: npu, steps: [1]}
actor_rollout_ref:
  actor: {profiler: {enable: true, ranks: [0], tool_config: {npu: {profile_token_start: 2, profile_token_end: 4}}}}
  rollout: {profiler: {tool_config: {npu: {discrete: false, profile_token_start: 1, profile_token_end: 3}}}}",
    );
    let a = p.role(Role::Actor).unwrap();
    assert!(a.schedule_for(RoleCall::ComputeLogProb).is_none());
    assert!(a.schedule_for(RoleCall::UpdateActor).is_none());
    warned(
        &p,
        &[
            "actor_rollout_ref.actor.profiler.tool_config.npu.profile_token_start/profile_token_end has no effect on actor",
            "actor_rollout_ref.rollout.profiler.tool_config.npu",
        ],
    );
    warned(
        &p,
        &[
            "actor_rollout_ref.rollout.profiler.tool_config.npu.profile_token_start/profile_token_end has no effect while actor_rollout_ref.rollout.profiler.tool_config.npu.discrete: false",
        ],
    );
    let r = p.role(Role::Rollout).unwrap();
    assert!(r.schedule_for(RoleCall::GenerateSequences).is_none());
}

/// An end-to-end training role and a discrete role on one rank: a warning naming both keys.
#[test]
fn end_to_end_and_discrete_roles_on_one_rank_warn() {
    let p = plan(
        "global_profiler: {tool: npu, steps: [1]}
actor_rollout_ref:
  actor: {profiler: {enable: true, ranks: [0]}}
  rollout: {profiler: {tool_config: {npu: {discrete: true}}}}",
    );
    warned(
        &p,
        &[
            "actor_rollout_ref.rollout.profiler.tool_config.npu.discrete: true cannot take effect on ranks [0]",
            "actor_rollout_ref.actor.profiler.tool_config.npu.discrete: false",
        ],
    );
    assert!(describe(&p).contains("[e2e-holds-discrete]"));
}

/// `global_profiler.rlprof.layout` (rlprof's own node) picks the step-grouped layout.
#[test]
fn layout_option() {
    let yaml = |l: &str| {
        format!("global_profiler: {{tool: npu, steps: [1], rlprof: {{layout: {l}}}}}\n{ACTOR_ON}")
    };
    assert_eq!(plan(&yaml("verl")).layout, Layout::Verl);
    assert_eq!(plan(&yaml("step_grouped")).layout, Layout::StepGrouped);
    let v = problems(&yaml("flat"));
    assert!(
        v[0].starts_with("global_profiler.rlprof.layout: 'flat' is not one of verl, step_grouped"),
        "{v:?}"
    );
    assert_eq!(
        plan(&format!(
            "global_profiler: {{tool: npu, steps: [1]}}\n{ACTOR_ON}"
        ))
        .layout,
        Layout::Verl
    );
}

/// verl's torch_memory windows: one snapshot per `memory_snapshot_num_steps` profiled steps.
#[test]
fn torch_memory_windows() {
    let p = plan(
        "global_profiler: {tool: torch_memory, steps: [1, 2, 3], global_tool_config: {torch_memory: {memory_snapshot_num_steps: 2}}}
actor_rollout_ref: {actor: {profiler: {enable: true, ranks: [0]}}}",
    );
    assert_eq!(p.step_groups, vec![vec![1, 2], vec![3]]);
    assert!(describe(&p).contains("[memory-last-window]"));
}
