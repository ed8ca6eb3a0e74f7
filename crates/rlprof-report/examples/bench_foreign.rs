//! Load + summarise time of a foreign Chrome trace (BENCHMARKS.md; docs/benchmarks/history.md,
//! "Loading a foreign Chrome trace"): what `rlprof report FILE --format json` does before
//! rendering.
//!
//! `cargo run --release -p rlprof-report --example bench_foreign -- FILE [ROUNDS]` prints one
//! line per round and the median (and, for checking against other tools, the event count,
//! steps found and the summed kernel time).

use std::path::Path;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = Path::new(args.get(1).expect("usage: bench_foreign FILE [ROUNDS]"));
    let rounds: usize = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(5);
    let mut times = Vec::new();
    for round in 0..rounds {
        let t = Instant::now();
        let loaded = rlprof_report::load(path, &Default::default()).unwrap();
        let t_load = t.elapsed().as_secs_f64();
        let report = rlprof_report::summarise(&loaded);
        let total = t.elapsed().as_secs_f64();
        let events: usize = loaded.profiles.iter().map(|p| p.events.len()).sum();
        let json = serde_json::to_value(&report).unwrap();
        let steps = json["breakdown"].as_array().map_or(0, |v| v.len());
        println!(
            "round {round}: load {t_load:.3} s, load + summarise {total:.3} s; {events} events, {steps} step rows, {} skipped",
            loaded.skipped.len()
        );
        times.push(total);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "rlprof load + summarise: median {:.3} s over {rounds} rounds",
        times[rounds / 2]
    );
}
