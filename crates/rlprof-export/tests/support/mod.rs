//! Test data made with the profiler's own API: a scripted run on N ranks (one thread each)
//! with steps, phases, role calls, ops (module, shapes, dtypes), kernels, collectives and
//! allocations; returns the completed collections.
#![allow(dead_code)]

use rlprof_profiler::plan::*;
use rlprof_profiler::{CompletedCollection, Profiler};
use rlprof_profiler::{
    comm, intern, intern_shapes, kernel, mem_alloc, mem_free, name, now, op, phase,
};
use std::collections::BTreeMap;
use std::path::Path;

/// What one scripted run collects.
#[derive(Clone)]
pub(crate) struct Script {
    pub tool: Tool,
    pub level: Level,
    /// `tool_config.npu.export_type` (the tests of the text layout ask for it explicitly).
    pub export_type: ExportType,
    pub contents: Vec<Content>,
    pub steps: Vec<u64>,
    pub world: u32,
    /// Ops per role call; each op issues one kernel and allocates/frees one buffer.
    pub ops: usize,
    /// Collectives per role call.
    pub comms: usize,
    /// Per-collection caps.
    pub caps: Caps,
}

impl Script {
    pub(crate) fn npu(level: Level, contents: &[Content]) -> Script {
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

fn role_plan(save: &Path, s: &Script) -> RolePlan {
    RolePlan {
        enable: true,
        all_ranks: true,
        ranks: (0..s.world).collect(),
        tool: s.tool,
        level: s.level,
        export_type: s.export_type,
        contents: s.contents.iter().copied().collect(),
        analysis: false,
        discrete: false,
        save_path: save.to_path_buf(),
        torch_step_start: 0,
        torch_step_end: -1,
        torch_memory: TorchMemoryOptions::default(),
        caps: s.caps,
        schedule: None,
        granularity: Default::default(),
    }
}

fn plan(save: &Path, s: &Script) -> ProfilePlan {
    let mut roles = BTreeMap::new();
    for r in [Role::Actor, Role::Rollout, Role::Ref] {
        roles.insert(r, role_plan(save, s));
    }
    ProfilePlan {
        tool: Some(s.tool),
        tool_source: "test".into(),
        steps: s.steps.clone(),
        profile_continuous_steps: false,
        save_path: save.to_path_buf(),
        world_size: s.world,
        step_groups: s.steps.iter().map(|&x| vec![x]).collect(),
        roles,
        nsys: NsysOptions::default(),
        torch_memory: TorchMemoryOptions::default(),
        warnings: vec![],
        verl: Default::default(),
    }
}

fn busy(us: u64) {
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
pub(crate) fn collect(save: &Path, s: &Script) -> Vec<CompletedCollection> {
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

/// Reads a CSV: (header, rows).
pub(crate) fn read_csv(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let mut r = csv::Reader::from_path(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let h = r.headers().unwrap().iter().map(str::to_string).collect();
    let rows = r
        .records()
        .map(|x| x.unwrap().iter().map(str::to_string).collect())
        .collect();
    (h, rows)
}

/// The Python of the consumer venv (`RLPROF_VENV`, default `/opt/rlprof-venv`) that holds
/// msprof-analyze and HolisticTraceAnalysis. Tests calling it are `#[ignore = "needs ..."]` and run
/// by name in CI; run without the venv they fail, naming what is missing.
pub(crate) fn consumer_python() -> std::path::PathBuf {
    let venv = std::env::var("RLPROF_VENV").unwrap_or_else(|_| "/opt/rlprof-venv".into());
    let py = Path::new(&venv).join("bin/python");
    assert!(
        py.is_file(),
        "{} is missing: install msprof-analyze and HolisticTraceAnalysis there (see .ci/run)",
        py.display()
    );
    py
}
