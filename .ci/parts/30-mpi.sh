# Ranks as processes (crates/rlprof-cli/tests/mpi.rs: mpirun -np 2 training, failing and crashing
# ranks, slow rank vs cluster analysis, msprof-analyze agreement). The NCCL communicator is
# compiled (cudarc loads CUDA/NCCL at run time, so no toolkit is needed).
RLPROF_VENV=/opt/rlprof-venv cargo test --release -p rlprof-cli --features mpi --test mpi -- --ignored
cargo check --release -p rlprof-trainer --features nccl
cargo test --release -p rlprof-profiler --features nvtx --lib nvtx
