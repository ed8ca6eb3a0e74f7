//! Report generation on a large collection: `cargo run --release -p rlprof-report --example
//! bench_report -- EVENTS` (default 10 M). Records EVENTS events (ops, nested ops, kernels) with
//! the profiler API into a temporary save_path (or `BENCH_SAVE`, which is kept, for timing
//! `rlprof report` on it from outside), then times loading, summarising and rendering.

use rlprof_profiler::plan::*;
use rlprof_profiler::{NameId, Profiler, kernel, name, now, op, phase};
use rlprof_testkit::PlanBuilder;
use std::time::Instant;

fn plan(save: &std::path::Path) -> ProfilePlan {
    PlanBuilder::new(save)
        .uncapped()
        .tool_source("bench")
        .build()
}

fn main() {
    let events: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000_000);
    let tmp = tempfile::tempdir().unwrap();
    let kept = std::env::var_os("BENCH_SAVE").map(std::path::PathBuf::from);
    let dir = kept.as_deref().unwrap_or(tmp.path());
    let profiler = Profiler::new(plan(dir));
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
    let loaded = rlprof_report::load(dir, &Default::default()).unwrap();
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
