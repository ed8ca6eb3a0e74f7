//! Cost of one instrumented scope (enter + exit), rlprof vs puffin vs tracing + tracing-chrome,
//! all measured in the same run, interleaved round by round; medians over rounds.
//!
//! `cargo bench -p rlprof-profiler --bench scope_cost` prints a Markdown table for BENCHMARKS.md.

use rlprof_profiler::plan::*;
use rlprof_profiler::{Profiler, name, op};
use rlprof_testkit::PlanBuilder;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Instant;
use tracing_subscriber::prelude::*;

const PER_ROUND: u64 = 200_000;
const ROUNDS: usize = 21;

fn plan(save: &std::path::Path) -> ProfilePlan {
    PlanBuilder::new(save)
        .all_ranks(true)
        .uncapped()
        .roles(&[Role::Actor])
        .steps(&(1..=ROUNDS as u64).collect::<Vec<_>>())
        .tool_source("bench")
        .build()
}

fn time_ns(f: &mut dyn FnMut(u64)) -> f64 {
    let t = Instant::now();
    f(PER_ROUND);
    t.elapsed().as_nanos() as f64 / PER_ROUND as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn dir_bytes(p: &std::path::Path) -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir(p).unwrap().flatten() {
        let m = e.metadata().unwrap();
        n += if m.is_dir() {
            dir_bytes(&e.path())
        } else {
            m.len()
        };
    }
    n
}

fn main() {
    let tmp = tempfile::tempdir().unwrap();
    let mut results: BTreeMap<&str, Vec<f64>> = BTreeMap::new();

    // rlprof, collection off (no collection active anywhere).
    let module = rlprof_profiler::intern("model.layers.0.mlp");
    let mut rl_off = |n: u64| {
        for i in 0..n {
            let _g = op(name!("matmul"), module);
            black_box(i);
        }
    };
    let mut baseline = |n: u64| {
        for i in 0..n {
            black_box(i);
        }
    };

    // tracing + tracing-chrome (its own subscriber, set per round).
    let chrome_path = tmp.path().join("trace.json");
    let (chrome_layer, chrome_guard) = tracing_chrome::ChromeLayerBuilder::new()
        .file(&chrome_path)
        .build();
    let chrome_sub = tracing_subscriber::registry().with(chrome_layer);
    let chrome_dispatch = tracing::Dispatch::new(chrome_sub);
    let mut chrome_scopes = 0u64;

    puffin::set_scopes_on(true);
    let mut puffin_scopes = 0u64;

    let profiler = if std::env::var("BENCH_DEVNULL").is_ok() {
        fn null(_: &std::path::Path) -> std::io::Result<std::fs::File> {
            std::fs::File::options().write(true).open("/dev/null")
        }
        Profiler::with_raw_opener(plan(&tmp.path().join("rlprof")), null)
    } else {
        Profiler::new(plan(&tmp.path().join("rlprof")))
    };
    let rank = profiler.rank(0);
    let _bound = rank.bind_thread();
    let mut rl_scopes = 0u64;

    let mut clock_only = |n: u64| {
        for _ in 0..n {
            black_box(rlprof_profiler::now());
        }
    };
    for round in 0..ROUNDS {
        results
            .entry("clock read alone (rlprof::now)")
            .or_default()
            .push(time_ns(&mut clock_only));
        results
            .entry("baseline (empty loop)")
            .or_default()
            .push(time_ns(&mut baseline));
        results
            .entry("rlprof, not collecting")
            .or_default()
            .push(time_ns(&mut rl_off));
        {
            let _step = rank.step(round as u64 + 1);
            let t = time_ns(&mut |n| {
                for i in 0..n {
                    let _g = rlprof_profiler::scope(name!("matmul"));
                    black_box(i);
                }
            });
            rl_scopes += PER_ROUND;
            results.entry("rlprof, collecting").or_default().push(t);
            let t = time_ns(&mut |n| {
                for i in 0..n {
                    let _g = op(name!("matmul"), module);
                    black_box(i);
                }
            });
            results
                .entry("rlprof op with module path, collecting")
                .or_default()
                .push(t);
        }
        let t = time_ns(&mut |n| {
            for i in 0..n {
                puffin::profile_scope!("matmul");
                black_box(i);
            }
            puffin::GlobalProfiler::lock().new_frame();
        });
        puffin_scopes += PER_ROUND;
        results.entry("puffin, scopes on").or_default().push(t);
        let t = tracing::dispatcher::with_default(&chrome_dispatch, || {
            time_ns(&mut |n| {
                for i in 0..n {
                    let _s = tracing::info_span!("matmul").entered();
                    black_box(i);
                }
            })
        });
        chrome_scopes += PER_ROUND;
        results
            .entry("tracing + tracing-chrome")
            .or_default()
            .push(t);
    }
    drop(chrome_guard);
    drop(chrome_dispatch);

    // plain scopes (24 B) and ops with a module path (48 B) were recorded in equal numbers
    let rl_bytes = dir_bytes(&tmp.path().join("rlprof")) as f64 / (2 * rl_scopes) as f64;
    let chrome_bytes = std::fs::metadata(&chrome_path).unwrap().len() as f64 / chrome_scopes as f64;
    let _ = puffin_scopes;

    let med: BTreeMap<&str, f64> = results
        .iter()
        .map(|(k, v)| (*k, median(v.clone())))
        .collect();
    let base = med["baseline (empty loop)"];
    let on = med["rlprof, collecting"] - base;
    println!(
        "| case | median ns/scope (enter+exit, loop overhead subtracted) | ratio to rlprof collecting |"
    );
    println!("|---|---|---|");
    for (k, v) in &med {
        if *k == "baseline (empty loop)" {
            println!("| {k} | {:.2} (raw loop, not subtracted) | |", v);
            continue;
        }
        let c = (v - base).max(0.0);
        println!("| {k} | {:.2} | {:.2}x |", c, c / on);
    }
    println!();
    println!(
        "raw bytes per scope: rlprof {:.1} B, tracing-chrome {:.1} B (ratio {:.1}x)",
        rl_bytes,
        chrome_bytes,
        chrome_bytes / rl_bytes
    );
    println!("rounds {ROUNDS} x {PER_ROUND} scopes per case, interleaved; medians over rounds");
}
