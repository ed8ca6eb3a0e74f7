//! Smoke check under `mpirun -np 2`: every collective against its expected result.
fn main() {
    let c = rlprof_mpi::MpiComm::init().expect("mpi");
    let (r, n) = (c.rank(), c.size());
    let mut v: Vec<f32> = (0..10).map(|i| (i + r) as f32).collect();
    c.all_reduce_sum(&mut v);
    let want: Vec<f32> = (0..10)
        .map(|i| (0..n).map(|q| (i + q) as f32).sum())
        .collect();
    assert_eq!(v, want);
    let (lo, hi) = rlprof_mpi::shard_range(10, n, r);
    let send: Vec<f32> = (0..10).map(|i| i as f32).collect();
    let mut part = vec![0.0; hi - lo];
    c.reduce_scatter_sum(&send, &mut part).unwrap();
    assert_eq!(
        part,
        send[lo..hi]
            .iter()
            .map(|x| x * n as f32)
            .collect::<Vec<_>>()
    );
    let mut full = vec![-1.0f32; 10];
    full[lo..hi].copy_from_slice(&send[lo..hi]);
    c.all_gather_shards(&mut full);
    assert_eq!(full, send);
    let mut b = vec![r as f32; 3];
    c.broadcast(&mut b, 1.min(n - 1));
    assert_eq!(b, vec![1.min(n - 1) as f32; 3]);
    c.barrier();
    println!("rank {r}/{n} ok on {}", c.host());
}
