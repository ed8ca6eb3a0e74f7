//! Loads one Ascend profiler DB (`ascend_pytorch_profiler_{rank}.db`) into the report's model
//! and prints the events read and the time it took (for BENCHMARKS.md, against
//! `examples/msprof_load_db.py`, msprof-analyze's own loading of the same tables).

fn main() {
    let path = std::env::args().nth(1).expect("usage: load_db FILE.db");
    let t = std::time::Instant::now();
    let p = rlprof_report::ascend_db_reader::load_db(
        std::path::Path::new(&path),
        "bench",
        &Default::default(),
    )
    .unwrap();
    println!(
        "rlprof: {} events, {} memory events in {:.3} s",
        p.events.len(),
        p.memory.len(),
        t.elapsed().as_secs_f64()
    );
}
