#!/usr/bin/env bash
# A CUDA 13 build toolchain from PyPI wheels, for `--features cuda` on a machine with no GPU, no
# driver and no CUDA toolkit (CI). Prints the environment the build needs as `export` lines:
#
#   eval "$(scripts/cuda-toolchain.sh [DIR])"
#   cargo build --release -p rlprof-cli --features cuda,nccl
#
# DIR (or $RLPROF_CUDA_DIR; default /opt/rlprof-cuda) receives a venv with the wheels, a
# toolkit-shaped directory of symlinks (bin/ include/ nvvm/ lib64/, lib -> lib64) and link stubs.
# Re-running reuses all of it (pip sees the pinned wheels installed; links are remade).
#
# Modes ($RLPROF_CUDA_LIBS):
#   stub (default): only nvcc, its compiler parts, the runtime and the headers (~130 MB).
#        cuBLAS, cuBLASLt, cuRAND, NVRTC and NCCL are linked against generated stubs: the binary
#        records the same NEEDED libraries, which the GPU machine must provide at run time.
#   full: the real cuBLAS/cuBLASLt/cuRAND/NVRTC/NCCL wheels too (~1 GB), and LD_LIBRARY_PATH,
#        so the binary runs on a GPU machine whose driver supports this CUDA version.
# The driver library (libcuda.so.1) is in no wheel: it is always a stub at link time and the
# GPU machine's driver provides it at run time.
#
# Why each piece is needed (measured; see docs/benchmarks/history.md "CUDA build from PyPI"):
# - only the CUDA 13 wheels ship nvcc/cicc/cudafe++/fatbinary (nvidia-cuda-nvcc-cu12 has ptxas only);
# - candle-kernels compiles with nvcc from PATH and needs CUDA_COMPUTE_CAP without nvidia-smi;
# - cudarc 0.19 knows CUDA versions up to 13.4 and its `nvcc --version` probe panics on 13.5:
#   CUDARC_CUDA_VERSION selects the API it binds;
# - candle-kernels links -lcudart: the wheels have only libcudart.so.13, so an unversioned link.
# Needs python3 (venv), gcc and the crate sources (`cargo fetch`, run here when missing).
# Progress goes to stderr; stdout carries only the export lines.
set -euo pipefail

DIR=${1:-${RLPROF_CUDA_DIR:-/opt/rlprof-cuda}}
LIBS=${RLPROF_CUDA_LIBS:-stub}
# nvcc, crt, nvvm, runtime and nvrtc share one version. The PTX it writes needs a driver of at
# least this CUDA version: pick an older 13.x (e.g. 13.0.88) for an older driver.
VER=${RLPROF_CUDA_VERSION:-13.5.37}
CCCL_VER=${RLPROF_CUDA_CCCL_VERSION:-13.3.5.0.6}
REPO=$(cd "$(dirname "$0")/.." && pwd)

log() { echo "cuda-toolchain: $*" >&2; }

case "$LIBS" in
  stub | full) ;;
  *) log "RLPROF_CUDA_LIBS must be stub or full, not '$LIBS'"; exit 2 ;;
esac

# cudarc's name for a CUDA version: 13.5.37 -> 13050, capped at the newest cudarc 0.19 binds.
cudarc_version() {
  local major minor
  major=${1%%.*}
  minor=${1#*.}
  minor=${minor%%.*}
  if [ "$major" -gt 13 ] || { [ "$major" = 13 ] && [ "$minor" -gt 4 ]; }; then
    major=13
    minor=4
  fi
  echo "${major}0${minor}0"
}

wheels() {
  echo "nvidia-cuda-nvcc==$VER" "nvidia-cuda-crt==$VER" "nvidia-nvvm==$VER" \
    "nvidia-cuda-runtime==$VER" "nvidia-cuda-cccl==$CCCL_VER"
  if [ "$LIBS" = full ]; then
    echo "nvidia-cuda-nvrtc==$VER" "nvidia-curand" "nvidia-cublas" "nvidia-nccl-cu13"
  fi
}

install_wheels() {
  if [ ! -x "$DIR/venv/bin/pip" ]; then
    log "creating $DIR/venv"
    mkdir -p "$DIR"
    python3 -m venv "$DIR/venv"
  fi
  # shellcheck disable=SC2046
  "$DIR/venv/bin/pip" install -q --disable-pip-version-check $(wheels) >&2
}

# The wheels' nvidia/cu13 folder: bin/ include/ nvvm/ lib/.
wheel_root() {
  "$DIR/venv/bin/python" -c \
    'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13"))'
}

# Toolkit-shaped directory: what CUDA_HOME-style variables and `-l` flags expect.
make_toolkit() {
  local w=$1 t=$DIR/toolkit
  rm -rf "$t"
  mkdir -p "$t/lib64/stubs"
  ln -s "$w/bin" "$t/bin"
  ln -s "$w/include" "$t/include"
  ln -s "$w/nvvm" "$t/nvvm"
  ln -s lib64 "$t/lib"
  local f
  for f in "$w"/lib/*; do
    ln -s "$f" "$t/lib64/"
  done
  # candle-kernels links -lcudart; the wheel has only the versioned name.
  ln -sf libcudart.so.13 "$t/lib64/libcudart.so"
  if [ "$LIBS" = full ]; then
    local pair
    for pair in nvrtc:13 cublas:13 cublasLt:13 curand:10; do
      ln -sf "lib${pair%%:*}.so.${pair##*:}" "$t/lib64/lib${pair%%:*}.so"
    done
    local nccl
    nccl=$(ls "$w"/../nccl/lib/libnccl.so.2 2>/dev/null || true)
    [ -n "$nccl" ] && ln -sf "$nccl" "$t/lib64/libnccl.so"
  fi
}

# The cudarc sources the stubs are generated from (every symbol cudarc may reference).
cudarc_src() {
  local v
  v=$(awk '/^name = "cudarc"/{getline; gsub(/[" ]/, ""); sub(/version=/, ""); print}' "$REPO/Cargo.lock")
  local d
  d=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/"cudarc-$v" 2>/dev/null | head -1 || true)
  if [ -z "$d" ]; then
    log "fetching crate sources (cargo fetch)"
    (cd "$REPO" && cargo fetch >&2)
    d=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/"cudarc-$v" | head -1)
  fi
  echo "$d"
}

# stub <cudarc sys module> <soname>: a shared library exporting every function cudarc declares
# for that library, each returning an error code. Only for linking; never loaded.
stub() {
  local src=$1 mod=$2 so=$3 out=$DIR/toolkit/lib64/stubs
  grep -oE '^pub unsafe fn [A-Za-z0-9_]+' "$src/src/$mod/sys/mod.rs" | awk '{print $4}' | sort -u |
    awk '{print "int " $1 "(void) { return 999; }"}' >"$out/$mod.c"
  gcc -shared -fPIC -Wl,-soname,"$so" -o "$out/$so" "$out/$mod.c"
  ln -sf "$so" "$out/${so%%.so*}.so"
}

make_stubs() {
  local src
  src=$(cudarc_src)
  stub "$src" driver libcuda.so.1
  if [ "$LIBS" = stub ]; then
    stub "$src" cublas libcublas.so.13
    stub "$src" cublaslt libcublasLt.so.13
    stub "$src" curand libcurand.so.10
    stub "$src" nvrtc libnvrtc.so.13
    stub "$src" nccl libnccl.so.2
  fi
}

print_env() {
  local t=$DIR/toolkit w=$1
  echo "export CUDA_HOME=$t CUDA_PATH=$t CUDA_ROOT=$t CUDA_TOOLKIT_ROOT_DIR=$t"
  echo "export PATH=$t/bin:\$PATH"
  # nvcc finds its headers through nvcc.profile; this names them for anything else that asks.
  echo "export CUDA_INCLUDE_DIR=$t/include"
  # No nvidia-smi to ask: 90 = sm_90a (H100/H200). Set CUDA_COMPUTE_CAP before eval to override.
  echo "export CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-90}"
  echo "export CUDARC_CUDA_VERSION=$(cudarc_version "$VER")"
  if [ "$LIBS" = full ]; then
    echo "export LD_LIBRARY_PATH=$w/lib:$w/../nccl/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
  fi
}

main() {
  log "CUDA $VER wheels ($LIBS libraries) into $DIR"
  install_wheels
  local w
  w=$(wheel_root)
  make_toolkit "$w"
  make_stubs
  log "$("$DIR/toolkit/bin/nvcc" --version | tail -1)"
  print_env "$w"
}

main
