//! Shared helpers for the profiler's integration tests: hand-built plans.
#![allow(dead_code)]

use rlprof_profiler::plan::*;
use std::collections::BTreeMap;
use std::path::Path;

pub(crate) fn role_plan(save: &Path, ranks: Vec<u32>, discrete: bool) -> RolePlan {
    RolePlan {
        enable: true,
        all_ranks: false,
        ranks,
        tool: Tool::Npu,
        level: Level::Level0,
        export_type: Default::default(),
        contents: [Content::Npu, Content::Cpu].into_iter().collect(),
        analysis: false,
        discrete,
        save_path: save.to_path_buf(),
        torch_step_start: 0,
        torch_step_end: -1,
        torch_memory: TorchMemoryOptions::default(),
        caps: Caps::default(),
        schedule: None,
        granularity: Default::default(),
    }
}

pub(crate) fn plan(
    save: &Path,
    steps: &[u64],
    continuous: bool,
    role: RolePlan,
    world: u32,
) -> ProfilePlan {
    let step_groups = if continuous {
        let mut groups: Vec<Vec<u64>> = vec![];
        for &s in steps {
            match groups.last_mut() {
                Some(g) if *g.last().unwrap() + 1 == s => g.push(s),
                _ => groups.push(vec![s]),
            }
        }
        groups
    } else {
        steps.iter().map(|&s| vec![s]).collect()
    };
    let mut roles = BTreeMap::new();
    for r in [Role::Actor, Role::Rollout, Role::Ref] {
        roles.insert(r, role.clone());
    }
    ProfilePlan {
        tool: Some(Tool::Npu),
        tool_source: "test".into(),
        steps: steps.to_vec(),
        profile_continuous_steps: continuous,
        save_path: save.to_path_buf(),
        world_size: world,
        step_groups,
        roles,
        nsys: NsysOptions::default(),
        torch_memory: TorchMemoryOptions::default(),
        warnings: vec![],
        verl: Default::default(),
    }
}

/// Runs one scripted training step on a rank: the four role calls, with ops inside.
pub(crate) fn scripted_step(rank: &rlprof_profiler::RankProfiler, step: u64, ops_per_call: usize) {
    use rlprof_profiler::{NameId, name, op, phase};
    let _s = rank.step(step);
    for (ph, call) in [
        ("gen", RoleCall::GenerateSequences),
        ("old_log_prob", RoleCall::ComputeLogProb),
        ("ref", RoleCall::ComputeRefLogProb),
        ("update_actor", RoleCall::UpdateActor),
    ] {
        let _p = phase(ph);
        let _c = rank.role_call(call);
        for _ in 0..ops_per_call {
            let _o = op(name!("matmul"), NameId::NONE);
        }
    }
}
