//! A scripted run made with the profiler's own API: N ranks (one thread each) with steps,
//! phases, role calls, ops (module, shapes, dtypes), kernels, collectives and allocations.

use crate::PlanBuilder;
use rlprof_profiler::plan::{Caps, Content, ExportType, Level, ProfilePlan, RoleCall, Tool};
use rlprof_profiler::{CompletedCollection, Profiler};
use rlprof_profiler::{
    comm, intern, intern_shapes, kernel, mem_alloc, mem_free, name, now, op, phase,
};
use std::path::Path;

/// What one scripted run collects.
#[derive(Clone)]
pub struct Script {
    /// The tool.
    pub tool: Tool,
    /// `tool_config.npu.level`.
    pub level: Level,
    /// `tool_config.npu.export_type` (the tests of the text layout ask for it explicitly).
    pub export_type: ExportType,
    /// The contents.
    pub contents: Vec<Content>,
    /// The profiled steps (the run goes from step 1 to the last of them).
    pub steps: Vec<u64>,
    /// Ranks, one thread each.
    pub world: u32,
    /// Ops per role call; each op issues one kernel and allocates/frees one buffer.
    pub ops: usize,
    /// Collectives per role call.
    pub comms: usize,
    /// Per-collection caps.
    pub caps: Caps,
}

impl Script {
    /// Npu (text export) at `level` with `contents`: steps 1 and 2 on 2 ranks, 5 ops and 1
    /// collective per role call, default caps.
    pub fn npu(level: Level, contents: &[Content]) -> Script {
        Script {
            tool: Tool::Npu,
            level,
            export_type: ExportType::Text,
            contents: contents.to_vec(),
            steps: vec![1, 2],
            world: 2,
            ops: 5,
            comms: 1,
            caps: Caps::default(),
        }
    }
}

/// The plan of a script: every rank of its world collects for the actor, rollout and ref.
fn plan(save: &Path, s: &Script) -> ProfilePlan {
    PlanBuilder::new(save)
        .all_ranks(true)
        .ranks(0..s.world)
        .world(s.world)
        .tool(s.tool)
        .level(s.level)
        .export_type(s.export_type)
        .contents(&s.contents)
        .caps(s.caps)
        .steps(&s.steps)
        .build()
}

/// Spins for `us` microseconds (work that takes time on the host clock).
pub fn busy(us: u64) {
    let t = std::time::Instant::now();
    while t.elapsed().as_micros() < us as u128 {
        std::hint::spin_loop();
    }
}

/// One op with a kernel inside and an allocation freed at its end.
fn one_op(i: usize) {
    let module = intern("model.layers.0.mlp");
    let mut o = op(name!("matmul"), module);
    if o.is_recording() {
        o.shapes(intern_shapes(&[&[4, 8], &[8, 16]]));
        o.dtypes(intern("float32;float32"));
    }
    let addr = 0x1000 + (i as u64) * 0x100;
    mem_alloc(addr, 4096);
    let t0 = now();
    busy(20);
    let t1 = now();
    kernel(
        name!("gemm_f32"),
        t0,
        t1,
        2 * 4 * 8 * 16,
        4 * (32 + 128 + 64),
    );
    mem_free(addr, 4096);
}

/// Runs the script on `s.world` ranks and returns the completed collections.
pub fn collect(save: &Path, s: &Script) -> Vec<CompletedCollection> {
    let profiler = Profiler::new(plan(save, s));
    std::thread::scope(|sc| {
        for r in 0..s.world {
            let rank = profiler.rank(r);
            let s = s.clone();
            sc.spawn(move || {
                let _b = rank.bind_thread();
                let max = s.steps.iter().copied().max().unwrap_or(1);
                for step in 1..=max {
                    let _st = rank.step(step);
                    for (ph, call) in [
                        ("gen", RoleCall::GenerateSequences),
                        ("update_actor", RoleCall::UpdateActor),
                    ] {
                        let _p = phase(ph);
                        let _c = rank.role_call(call);
                        for i in 0..s.ops {
                            one_op(i);
                        }
                        for _ in 0..s.comms {
                            let _g = comm(name!("all_reduce"), intern("dp"), 1 << 20);
                            busy(30);
                        }
                    }
                }
            });
        }
    });
    profiler.completed()
}
