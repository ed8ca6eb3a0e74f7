//! GPU check of the NCCL communicator: every collective the trainer uses, on small and 64 MB
//! buffers, checked against the values MPI computes on the host. 2 ranks may share one device.
//!
//! ```text
//! cargo build --release -p rlprof-trainer --features nccl --example nccl_check
//! mpirun -np 2 target/release/examples/nccl_check        # scripts/gpu_nccl_check.sh
//! ```
//!
//! Exit status 0 and `NCCL check OK` from rank 0 when everything matches.

use rlprof_trainer::comm::Communicator;
use rlprof_trainer::comm::mpi::MpiComm;
use rlprof_trainer::comm::nccl::NcclComm;
use std::time::Instant;

fn check(
    name: &str,
    len: usize,
    nccl: &NcclComm,
    mpi: &MpiComm,
    f: impl Fn(&dyn Communicator, &[f32]) -> Vec<f32>,
) -> Result<(), String> {
    let r = mpi.rank() as f32;
    let input: Vec<f32> = (0..len).map(|i| (i % 13) as f32 + r).collect();
    let t0 = Instant::now();
    let got = f(nccl, &input);
    let dt = t0.elapsed();
    let want = f(mpi, &input);
    if got != want {
        let bad = got.iter().zip(&want).position(|(a, b)| a != b);
        return Err(format!(
            "{name} ({len} elements): NCCL differs from MPI at {bad:?}"
        ));
    }
    if mpi.rank() == 0 {
        println!(
            "{name:<16} {len:>10} elements ok ({:.2} ms)",
            dt.as_secs_f64() * 1e3
        );
    }
    Ok(())
}

fn run(nccl: &NcclComm, mpi: &MpiComm) -> Result<(), String> {
    let n = mpi.world_size();
    for len in [1024usize, 16 * 1024 * 1024] {
        let len = len / n * n;
        check("all_reduce", len, nccl, mpi, |c, x| {
            let mut b = x.to_vec();
            c.all_reduce_sum(&mut b).unwrap();
            b
        })?;
        check("all_gather", len, nccl, mpi, |c, x| {
            let mut out = vec![0f32; x.len() * n];
            c.all_gather(x, &mut out).unwrap();
            out
        })?;
        check("reduce_scatter", len, nccl, mpi, |c, x| {
            let mut out = vec![0f32; x.len() / n];
            c.reduce_scatter_sum(x, &mut out).unwrap();
            out
        })?;
        check("broadcast", len, nccl, mpi, |c, x| {
            let mut b = x.to_vec();
            c.broadcast(&mut b, 1 % n).unwrap();
            b
        })?;
    }
    nccl.barrier().map_err(|e| e.to_string())
}

fn main() {
    let mpi = MpiComm::init().expect("MPI init");
    let devices = std::env::var("RLPROF_NCCL_DEVICES")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(1)
        .max(1);
    let ordinal = mpi.rank() % devices;
    let result = NcclComm::bootstrap(&mpi, ordinal)
        .map_err(|e| e.to_string())
        .and_then(|nccl| run(&nccl, &mpi));
    match result {
        Ok(()) => {
            if mpi.rank() == 0 {
                println!(
                    "NCCL check OK ({} ranks, {devices} device(s))",
                    mpi.world_size()
                );
            }
            mpi.finalize();
        }
        Err(e) => {
            eprintln!("rank {}: NCCL check FAILED: {e}", mpi.rank());
            std::process::exit(1);
        }
    }
}
