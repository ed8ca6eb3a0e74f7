//! Report generation on a large collection: `cargo run --release -p rlprof-report --example
//! bench_report -- EVENTS` (default 10 M). Records EVENTS events (ops, nested ops, kernels) with
//! the profiler API into a temporary save_path, then times loading, summarising and rendering.

use rlprof_profiler::plan::*;
use rlprof_profiler::{NameId, Profiler, kernel, name, now, op, phase};
use std::collections::BTreeMap;
use std::time::Instant;

fn plan(save: &std::path::Path) -> ProfilePlan {
    let caps = Caps {
        max_events: None,
        max_bytes: None,
    };
    let role = RolePlan {
        enable: true,
        all_ranks: false,
        ranks: vec![0],
        tool: Tool::Npu,
        level: Level::Level0,
        export_type: Default::default(),
        contents: [Content::Npu, Content::Cpu].into_iter().collect(),
        analysis: false,
        discrete: false,
        save_path: save.to_path_buf(),
        torch_step_start: 0,
        torch_step_end: -1,
        torch_memory: TorchMemoryOptions::default(),
        caps,
        schedule: None,
        granularity: Default::default(),
    };
    let mut roles = BTreeMap::new();
    for r in [Role::Actor, Role::Rollout, Role::Ref] {
        roles.insert(r, role.clone());
    }
    ProfilePlan {
        tool: Some(Tool::Npu),
        tool_source: "bench".into(),
        steps: vec![1],
        profile_continuous_steps: false,
        save_path: save.to_path_buf(),
        world_size: 1,
        step_groups: vec![vec![1]],
        roles,
        nsys: NsysOptions::default(),
        torch_memory: TorchMemoryOptions::default(),
        warnings: vec![],
        verl: Default::default(),
    }
}

fn main() {
    let events: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000_000);
    let dir = tempfile::tempdir().unwrap();
    let profiler = Profiler::new(plan(dir.path()));
    let rank = profiler.rank(0);
    let t = Instant::now();
    {
        let _b = rank.bind_thread();
        let _s = rank.step(1);
        for (ph, call) in [
            ("gen", RoleCall::GenerateSequences),
            ("old_log_prob", RoleCall::ComputeLogProb),
            ("update_actor", RoleCall::UpdateActor),
        ] {
            let _p = phase(ph);
            let _c = rank.role_call(call);
            for _ in 0..events / 9 {
                let _o = op(name!("aten::linear"), NameId::NONE);
                let _i = op(name!("aten::addmm"), NameId::NONE);
                let k = now();
                kernel(name!("gemm"), k, now(), 0, 0);
            }
        }
    }
    drop(rank);
    let done = profiler.completed();
    let raw = &done[0].raw_file;
    let raw_mb = std::fs::metadata(raw).unwrap().len() as f64 / 1e6;
    println!(
        "recorded {} events ({raw_mb:.0} MB raw) in {:.1} s",
        done[0].events,
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let loaded = rlprof_report::load(dir.path(), &Default::default()).unwrap();
    let t_load = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let report = rlprof_report::summarise(&loaded);
    let t_sum = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let html = rlprof_report::render_html(&report, &loaded.profiles, &Default::default()).unwrap();
    let t_html = t.elapsed().as_secs_f64();
    let n: usize = loaded.profiles.iter().map(|p| p.events.len()).sum();
    println!(
        "events loaded {n}; load {t_load:.2} s, summarise {t_sum:.2} s, html {t_html:.2} s, total {:.2} s; html {:.1} MB",
        t_load + t_sum + t_html,
        html.len() as f64 / 1e6
    );
}
