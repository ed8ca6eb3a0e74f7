# The CUDA build (issue 18): `--features cuda,nccl` compiled and linted on a machine with no GPU
# and no CUDA toolkit. nvcc, its headers and the CUDA runtime come from the CUDA 13 wheels on
# PyPI (scripts/cuda-toolchain.sh; the driver, cuBLAS, cuRAND, NVRTC and NCCL are link stubs).
# Nothing here runs on a GPU: scripts/gpu-check.sh does that on a GPU machine.
# Cached under /opt when the machine keeps it between runs: the wheels (/opt/rlprof-cuda) and this
# build's target directory (/opt/rlprof-cuda-target), so candle's CUDA kernels (about 11 of the
# 14 minutes of a cold build on 2 cores) are compiled once, and a warm run rebuilds only the
# workspace crates. In a subshell: the toolchain's environment stays out of later parts.
(
  cuda_t0=$(date +%s)
  eval "$(scripts/cuda-toolchain.sh /opt/rlprof-cuda)"
  export CARGO_TARGET_DIR=/opt/rlprof-cuda-target
  cargo build --release -p rlprof-cli --features cuda,nccl
  cargo clippy --release -p rlprof-cli -p rlprof-trainer -p rlprof-profiler --all-targets \
    --features rlprof-cli/cuda,rlprof-cli/nccl,rlprof-trainer/cuda,rlprof-trainer/nccl -- -D warnings
  echo "cuda build and clippy: $(($(date +%s) - cuda_t0)) s"
)
