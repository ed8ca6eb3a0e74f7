//! Shared helpers for the profiler's integration tests: hand-built plans (through
//! [`rlprof_testkit::PlanBuilder`]) and a scripted step.
#![allow(dead_code)]

use rlprof_profiler::plan::*;
use rlprof_testkit::PlanBuilder;
use std::path::Path;

/// Npu level0 `[npu, cpu]` collecting on `ranks`, in discrete mode or not.
pub(crate) fn role_plan(save: &Path, ranks: Vec<u32>, discrete: bool) -> RolePlan {
    PlanBuilder::new(save)
        .ranks(ranks)
        .discrete(discrete)
        .role_plan()
}

/// A plan of `world` ranks profiling `steps` (in continuous collections or not) whose actor,
/// rollout and ref all have `role`'s plan.
pub(crate) fn plan(
    save: &Path,
    steps: &[u64],
    continuous: bool,
    role: RolePlan,
    world: u32,
) -> ProfilePlan {
    PlanBuilder::new(save)
        .with_role(role)
        .steps(steps)
        .continuous(continuous)
        .world(world)
        .build()
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
