//! Fixed cost of one end-to-end collection on the training thread: the step scope's start
//! (directories, raw file, metadata, recorder hand-over) and its stop (final flush, end marker,
//! rename into place), with a handful of ops in between, `npu` tool, analysis off.
//!
//! `cargo run --release -p rlprof-profiler --example collection_cost -- [collections]`
//! prints the median and the 90th percentile in microseconds.

use rlprof_profiler::{NameId, Profiler, name, op};
use std::time::Instant;

fn percentile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    let dir = tempfile::tempdir().expect("temporary directory");
    let steps: Vec<String> = (1..=n).map(|s| s.to_string()).collect();
    let yaml = format!(
        "trainer: {{nnodes: 1, n_gpus_per_node: 1}}\n\
         global_profiler: {{tool: npu, steps: [{}], save_path: '{}'}}\n\
         actor_rollout_ref: {{actor: {{profiler: {{enable: true, all_ranks: true, \
         tool_config: {{npu: {{analysis: false}}}}}}}}}}\n",
        steps.join(","),
        dir.path().display()
    );
    let doc = rlprof_config::load_document_str(&yaml, "collection_cost", &[]).expect("config");
    let plan = rlprof_config::build_plan(&doc).expect("plan");
    let profiler = Profiler::new(plan);
    let rank = profiler.rank(0);
    let _bound = rank.bind_thread();
    let (mut start_us, mut stop_us) = (Vec::new(), Vec::new());
    for step in 1..=n {
        let t0 = Instant::now();
        let guard = rank.step(step);
        let t1 = Instant::now();
        for _ in 0..100 {
            let _o = op(name!("matmul"), NameId::NONE);
        }
        let t2 = Instant::now();
        drop(guard);
        let t3 = Instant::now();
        start_us.push((t1 - t0).as_secs_f64() * 1e6);
        stop_us.push((t3 - t2).as_secs_f64() * 1e6);
    }
    assert_eq!(
        profiler.completed().len() as u64,
        n,
        "one collection per step"
    );
    println!(
        "{n} collections: start median {:.0} us (p90 {:.0}), stop median {:.0} us (p90 {:.0})",
        percentile(&mut start_us, 0.5),
        percentile(&mut start_us, 0.9),
        percentile(&mut stop_us, 0.5),
        percentile(&mut stop_us, 0.9)
    );
}
