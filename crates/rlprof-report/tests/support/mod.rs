//! Shared helpers: real collections made with the profiler API (2 ranks, 2 steps), plans built
//! with [`rlprof_testkit::PlanBuilder`].
#![allow(dead_code)]

pub(crate) mod contract;

use rlprof_profiler::plan::{Content, Level, ProfilePlan, RoleCall};
use rlprof_profiler::{Profiler, comm, intern, kernel, mem_alloc, mem_free, name, now, op, phase};
use rlprof_testkit::PlanBuilder;
use std::path::Path;

/// Npu level1 `[npu, cpu, memory, module]` on ranks 0 and 1 of 2, profiling `steps`.
pub(crate) fn plan(save: &Path, steps: &[u64], discrete: bool) -> ProfilePlan {
    PlanBuilder::new(save)
        .ranks([0, 1])
        .world(2)
        .level(Level::Level1)
        .contents(&[Content::Npu, Content::Cpu, Content::Memory, Content::Module])
        .discrete(discrete)
        .steps(steps)
        .build()
}

fn spin(us: u64) {
    let t = std::time::Instant::now();
    while t.elapsed().as_micros() < us as u128 {
        std::hint::spin_loop();
    }
}

/// One step on a rank: four role calls with ops, kernels, memory and a collective inside.
/// Rank 1's rollout is slower (it is the slow rank).
pub(crate) fn step(rank: &rlprof_profiler::RankProfiler, step: u64, ops: usize) {
    let _s = rank.step(step);
    let module = intern("model.layers.0.mlp");
    for (ph, call) in [
        ("gen", RoleCall::GenerateSequences),
        ("old_log_prob", RoleCall::ComputeLogProb),
        ("ref", RoleCall::ComputeRefLogProb),
        ("update_actor", RoleCall::UpdateActor),
    ] {
        let _p = phase(ph);
        let _c = rank.role_call(call);
        for i in 0..ops {
            let _o = op(name!("matmul"), module);
            let addr = 0x1000 * (i as u64 + 1) + (step << 32);
            mem_alloc(addr, 4096 * (i as u64 + 1));
            {
                let _inner = op(name!("add"), module);
                spin(20);
            }
            let t0 = now();
            spin(30);
            kernel(name!("gemm_kernel"), t0, now(), 1000, 2000);
            if i % 2 == 0 {
                mem_free(addr, 4096 * (i as u64 + 1));
            }
        }
        if call == RoleCall::GenerateSequences && rank.rank() == 1 {
            spin(30_000);
        }
        if call == RoleCall::UpdateActor {
            let mut g = comm(name!("all_reduce"), intern("dp"), 1 << 20);
            g.set_wait_ticks(10);
            spin(50);
        }
    }
}

/// Runs `steps` on 2 ranks into `save`; returns the completed collections.
pub(crate) fn collect(
    save: &Path,
    steps: &[u64],
    discrete: bool,
    ops: usize,
) -> Vec<rlprof_profiler::CompletedCollection> {
    let profiler = Profiler::new(plan(save, steps, discrete));
    let last = *steps.iter().max().unwrap();
    std::thread::scope(|s| {
        for r in 0..2 {
            let rank = profiler.rank(r);
            s.spawn(move || {
                let _b = rank.bind_thread();
                for st in 1..=last {
                    step(&rank, st, ops);
                }
            });
        }
    });
    profiler.completed()
}
