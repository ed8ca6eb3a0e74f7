//! Collective throughput of the trainer's MPI communicator against plain blocking rsmpi calls
//! on the same buffers, in the same run (`mpirun -np 2`):
//!
//! ```text
//! cargo build --release -p rlprof-trainer --features mpi --example mpi_collectives
//! mpirun -np 2 target/release/examples/mpi_collectives [ITERS]
//! ```
//!
//! Sizes 4 MB and 64 MB of f32 (the buffer each rank passes in); all-reduce, all-gather
//! (the output is the size; each rank contributes size / world) and reduce-scatter (the input is
//! the size). Each measurement is the median of ITERS (default 10) calls after one warm-up, with
//! a barrier before each call; rank 0 prints a Markdown table. The plain nonblocking column
//! (rsmpi immediate collective + wait) separates MPI's nonblocking algorithms from this layer's
//! own cost (copies, polling).

use mpi::collective::SystemOperation;
use mpi::topology::Communicator as _;
use mpi::traits::*;
use rlprof_trainer::comm::Communicator;
use rlprof_trainer::comm::mpi::MpiComm;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn time(iters: usize, barrier: &dyn Fn(), mut f: impl FnMut()) -> f64 {
    f();
    let mut t = Vec::with_capacity(iters);
    for _ in 0..iters {
        barrier();
        let t0 = Instant::now();
        f();
        t.push(t0.elapsed().as_secs_f64());
    }
    median(t)
}

fn main() {
    let iters: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10);
    let ours = MpiComm::init().expect("MPI init");
    let world = mpi::topology::SimpleCommunicator::world();
    let n = world.size() as usize;
    let rank = world.rank();
    let barrier = || world.barrier();
    let mut rows = Vec::new();
    for mb in [4usize, 64] {
        let len = mb * 1024 * 1024 / 4 / n * n;
        let big: Vec<f32> = (0..len).map(|i| (i % 97) as f32).collect();
        let mut out = vec![0f32; len];
        let mut shard = vec![0f32; len / n];
        let mut buf = big.clone();
        let plain_ar = time(iters, &barrier, || {
            world.all_reduce_into(&big[..], &mut out[..], SystemOperation::sum())
        });
        let nb_ar = time(iters, &barrier, || {
            mpi::request::scope(|sc| {
                world
                    .immediate_all_reduce_into(sc, &big[..], &mut out[..], SystemOperation::sum())
                    .wait();
            })
        });
        let ours_ar = time(iters, &barrier, || ours.all_reduce_sum(&mut buf).unwrap());
        let part = big[..len / n].to_vec();
        let plain_ag = time(iters, &barrier, || {
            world.all_gather_into(&part[..], &mut out[..])
        });
        let nb_ag = time(iters, &barrier, || {
            mpi::request::scope(|sc| {
                world
                    .immediate_all_gather_into(sc, &part[..], &mut out[..])
                    .wait();
            })
        });
        let ours_ag = time(iters, &barrier, || {
            ours.all_gather(&part, &mut out).unwrap()
        });
        let plain_rs = time(iters, &barrier, || {
            world.reduce_scatter_block_into(&big[..], &mut shard[..], SystemOperation::sum())
        });
        let nb_rs = time(iters, &barrier, || {
            mpi::request::scope(|sc| {
                world
                    .immediate_reduce_scatter_block_into(
                        sc,
                        &big[..],
                        &mut shard[..],
                        SystemOperation::sum(),
                    )
                    .wait();
            })
        });
        let ours_rs = time(iters, &barrier, || {
            ours.reduce_scatter_sum(&big, &mut shard).unwrap()
        });
        for (op, plain, nb, mine) in [
            ("all_reduce", plain_ar, nb_ar, ours_ar),
            ("all_gather", plain_ag, nb_ag, ours_ag),
            ("reduce_scatter", plain_rs, nb_rs, ours_rs),
        ] {
            rows.push((mb, op, plain, nb, mine));
        }
    }
    if rank == 0 {
        println!(
            "| size | op | plain rsmpi blocking | plain rsmpi nonblocking + wait | MpiComm (polled, owned buffers) | MpiComm / blocking |"
        );
        println!("|---|---|---|---|---|---|");
        for (mb, op, plain, nb, mine) in rows {
            let gbs = |s: f64| (mb as f64 * 1024.0 * 1024.0) / s / 1e9;
            println!(
                "| {mb} MB | {op} | {:.2} ms ({:.2} GB/s) | {:.2} ms ({:.2} GB/s) | {:.2} ms ({:.2} GB/s) | {:.2}x |",
                plain * 1e3,
                gbs(plain),
                nb * 1e3,
                gbs(nb),
                mine * 1e3,
                gbs(mine),
                mine / plain
            );
        }
    }
    drop(world);
    ours.finalize();
}
