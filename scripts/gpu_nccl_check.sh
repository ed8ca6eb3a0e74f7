#!/bin/sh
# GPU check of the NCCL communicator (issue 5): 2 MPI ranks sharing GPU 0, every collective the
# trainer uses compared with MPI's host result. Needs MPICH (mpirun) and libnccl.so.2 + the CUDA
# driver at run time; no CUDA toolkit at build time. Under 2 minutes including the build when
# the dependencies are cached.
set -eu
cargo build --release -p rlprof-trainer --features nccl --example nccl_check
exe="${CARGO_TARGET_DIR:-target}/release/examples/nccl_check"
TMPDIR="$(mktemp -d)" timeout 120 mpirun -np 2 "$exe"
