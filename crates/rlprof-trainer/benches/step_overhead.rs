//! Step time with collection on vs off, and per phase, on the PyTorch-peer workload
//! (`configs/bench_torch_peer.yaml`): runs alternate (off, on, on, off, ...) in one process so
//! that machine noise hits both; medians over all steps but the first of each run, of the phases
//! the config runs.
//!
//! `cargo bench -p rlprof-trainer --bench step_overhead -- [reps] [steps]`

use rlprof_profiler::{ProfilePlan, Profiler};
use std::collections::BTreeMap;

#[global_allocator]
static GLOBAL: rlprof_profiler::alloc::TrackingAllocator =
    rlprof_profiler::alloc::TrackingAllocator::system();

const CONFIG: &str = include_str!("../../../configs/bench_torch_peer.yaml");
const PHASES: [&str; 8] = [
    "gen",
    "reward",
    "old_log_prob",
    "ref",
    "adv",
    "update_actor",
    "update_weights",
    "step",
];

fn run(on: bool, steps: u64, dir: &std::path::Path) -> BTreeMap<&'static str, Vec<f64>> {
    let step_list: Vec<String> = (1..=steps).map(|s| s.to_string()).collect();
    let overrides = vec![
        format!("trainer.total_training_steps={steps}"),
        format!("trainer.default_local_dir={}", dir.join("ckpt").display()),
        format!("global_profiler.save_path={}", dir.join("prof").display()),
        format!("global_profiler.steps=[{}]", step_list.join(",")),
    ];
    let doc = rlprof_config::load_document_str(CONFIG, "bench", &overrides).unwrap();
    let plan = if on {
        rlprof_config::build_plan(&doc).unwrap()
    } else {
        ProfilePlan::disabled(2)
    };
    let summary = rlprof_trainer::run(&cfg(&doc), Profiler::new(plan), Default::default()).unwrap();
    let mut out: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for m in summary.metrics.iter().skip(1) {
        // a phase the config does not run has no timing (bypass mode: no `old_log_prob`)
        for p in PHASES {
            if let Some(t) = m.timing_s.get(p) {
                out.entry(p).or_default().push(*t);
            }
        }
    }
    out
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    rlprof_trainer::job::tune_host_allocator();
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let reps = args.first().copied().unwrap_or(3);
    let steps = args.get(1).copied().unwrap_or(6);
    let tmp = tempfile::tempdir().unwrap();
    let mut off: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut on: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for rep in 0..reps {
        // off first on even repetitions, on first on odd ones
        let order = if rep % 2 == 0 {
            [(false, &mut off), (true, &mut on)]
        } else {
            [(true, &mut on), (false, &mut off)]
        };
        for (flag, acc) in order {
            let dir = tmp.path().join(format!("r{rep}_{flag}"));
            for (k, v) in run(flag, steps, &dir) {
                acc.entry(k).or_default().extend(v);
            }
        }
        eprintln!("rep {}/{reps} done", rep + 1);
    }
    println!(
        "phase          off_ms    on_ms   on/off   (medians of {} steps each)",
        off["step"].len()
    );
    for p in PHASES {
        let (Some(a), Some(b)) = (off.get_mut(p), on.get_mut(p)) else {
            continue;
        };
        let (a, b) = (median(a) * 1e3, median(b) * 1e3);
        println!("{p:<12} {a:>8.1} {b:>8.1} {:>8.3}", b / a);
    }
}

/// The job config of `doc` (read once, as the CLI does, and passed to the run).
fn cfg(doc: &rlprof_config::Node) -> rlprof_trainer::TrainConfig {
    rlprof_trainer::TrainConfig::from_doc(doc).unwrap()
}
