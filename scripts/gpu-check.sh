#!/usr/bin/env bash
# GPU check of the CUDA build (issue 18), in one go on an NVIDIA GPU machine, under 8 minutes:
#   scripts/gpu-check.sh [OUT_DIR]
# 1. builds `rlprof` with `--features cuda` (nvcc from PATH or /usr/local/cuda, else the PyPI
#    wheels through scripts/cuda-toolchain.sh with the real libraries: that needs PyPI);
# 2. trains 3 steps with each tool (npu, torch, torch_memory, and nsys when `nsys` is on PATH),
#    one GPU, every step collected;
# 3. checks that the outputs carry GPU kernels (`cuda_*`, on the GPU) with non-zero durations
#    summing to at most the step time, that device memory events were recorded, that
#    HolisticTraceAnalysis (when importable) reads the torch trace with GPU kernels on a stream,
#    and with 2 GPUs and mpirun that NCCL's all-reduce equals MPI's (examples/nccl_check.rs);
# 4. prints one summary line per check (PASS / FAIL / SKIP) and exits non-zero on any FAIL.
# RLPROF_GPU_CHECK_CPU=1 runs the same checks on the CPU build (no GPU: kernels are `cpu_*` on the
# host), which is how the script itself is tested where no GPU is lent.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-$(mktemp -d /tmp/rlprof-gpu-check.XXXXXX)}
mkdir -p "$OUT"
CPU_MODE=${RLPROF_GPU_CHECK_CPU:-0}
PY=python3
[ -x "${RLPROF_VENV:-/opt/rlprof-venv}/bin/python3" ] && PY=${RLPROF_VENV:-/opt/rlprof-venv}/bin/python3
SUMMARY=()
FAILED=0

result() { # result NAME PASS|FAIL|SKIP DETAIL
  SUMMARY+=("$(printf '%-4s %-22s %s' "$2" "$1" "$3")")
  [ "$2" = FAIL ] && FAILED=1
  echo "gpu-check: $2 $1: $3" >&2
}

# --- toolchain -------------------------------------------------------------------------------
cudarc_version() { # nvcc's "release X.Y" -> cudarc's XY0Y0 form, capped at 13.4 (cudarc 0.19)
  local v major minor
  v=$(nvcc --version | sed -n 's/.*release \([0-9]*\)\.\([0-9]*\).*/\1 \2/p')
  read -r major minor <<<"$v"
  if [ "$major" -gt 13 ] || { [ "$major" = 13 ] && [ "$minor" -gt 4 ]; }; then major=13; minor=4; fi
  echo "${major}0${minor}0"
}

toolchain() {
  if [ "$CPU_MODE" = 1 ]; then
    FEATURES=""
    return 0
  fi
  FEATURES="--features cuda"
  if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH=/usr/local/cuda/bin:$PATH
    export CUDA_HOME=/usr/local/cuda CUDA_PATH=/usr/local/cuda CUDA_ROOT=/usr/local/cuda
  fi
  if command -v nvcc >/dev/null; then
    export CUDARC_CUDA_VERSION=${CUDARC_CUDA_VERSION:-$(cudarc_version)}
  else
    eval "$(RLPROF_CUDA_LIBS=full scripts/cuda-toolchain.sh)" || return 1
  fi
  local cap
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ')
  [ -n "$cap" ] && export CUDA_COMPUTE_CAP=$cap
  echo "gpu-check: $(nvcc --version | tail -1); CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-?}; CUDARC_CUDA_VERSION=$CUDARC_CUDA_VERSION" >&2
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >&2 || true
}

if ! toolchain; then
  result toolchain FAIL "no nvcc on PATH or in /usr/local/cuda, and the PyPI wheels could not be installed"
  printf '%s\n' "${SUMMARY[@]}"
  exit 1
fi

# --- build -----------------------------------------------------------------------------------
BIN=${CARGO_TARGET_DIR:-target}/release/rlprof
t0=$(date +%s)
# shellcheck disable=SC2086
if timeout 420 cargo build --release -p rlprof-cli $FEATURES >"$OUT/build.log" 2>&1; then
  result build PASS "rlprof ${FEATURES:-(cpu)} in $(($(date +%s) - t0)) s"
else
  result build FAIL "see $OUT/build.log: $(tail -1 "$OUT/build.log")"
  printf '%s\n' "${SUMMARY[@]}"
  exit 1
fi

# --- training runs ---------------------------------------------------------------------------
# 1 rank on GPU 0, 3 RL steps, no supervised warm-up, every step collected.
COMMON=(trainer.total_training_steps=3 trainer.sft_warmup_steps=0 trainer.n_gpus_per_node=1
  trainer.nnodes=1 'global_profiler.steps=[1,2,3]')

train() { # train TOOL OVERRIDES...
  local tool=$1
  shift
  local dir=$OUT/$tool bin
  bin=$(realpath "$BIN")
  rm -rf "$dir"
  mkdir -p "$dir"
  [ "$tool" = off ] || set -- "global_profiler.tool=$tool" "$@"
  (cd "$dir" && timeout 150 "$bin" train "${COMMON[@]}" "global_profiler.save_path=$dir/profile" \
    "trainer.default_local_dir=$dir/ckpt" "$@") >"$OUT/$tool.log" 2>&1
}

# Step times (us) and kernels from a torch Chrome trace directory; prints a verdict line.
check_trace() { # check_trace DIR KERNEL_PREFIX
  "$PY" - "$1" "$2" <<'PYEOF'
import glob, gzip, json, sys
root, prefix = sys.argv[1], sys.argv[2]
files = glob.glob(root + "/**/*.pt.trace.json*", recursive=True)
if not files:
    print("FAIL no .pt.trace.json under " + root); sys.exit()
bad, n, worst = [], 0, 0.0
for f in files:
    t = json.load(gzip.open(f) if f.endswith(".gz") else open(f))
    ev = t["traceEvents"]
    steps = [e for e in ev if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")]
    kern = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "kernel"]
    gpu = [k for k in kern if k["name"].startswith(prefix)]
    if not gpu:
        bad.append(f"{f}: no {prefix}* kernels ({len(kern)} kernels)"); continue
    if any(k["dur"] <= 0 for k in gpu):
        bad.append(f"{f}: zero-length kernels")
    for s in steps:
        inside = sum(k["dur"] for k in gpu if s["ts"] <= k["ts"] < s["ts"] + s["dur"])
        worst = max(worst, inside / s["dur"])
        if inside > s["dur"]:
            bad.append(f"{f}: {s['name']} kernels {inside:.0f} us > step {s['dur']:.0f} us")
    if not steps:
        bad.append(f"{f}: no ProfilerStep# ranges")
    n += len(gpu)
print(("FAIL " + "; ".join(bad[:3])) if bad else
      f"PASS {n} kernels in {len(files)} trace(s); kernel time <= step time (max {worst:.0%} of a step)")
PYEOF
}

check_npu() { # check_npu DIR KERNEL_PREFIX CORE
  "$PY" - "$1" "$2" "$3" <<'PYEOF'
import csv, glob, json, sys
root, prefix, core = sys.argv[1:4]
files = glob.glob(root + "/**/ASCEND_PROFILER_OUTPUT/kernel_details.csv", recursive=True)
if not files:
    print("FAIL no kernel_details.csv under " + root); sys.exit()
bad, n, worst = [], 0, 0.0
for f in files:
    rows = list(csv.DictReader(open(f)))
    gpu = [r for r in rows if r["Name"].startswith(prefix) and r["Accelerator Core"].strip() == core]
    if not gpu:
        bad.append(f"{f}: no {prefix}* kernels on {core} ({len(rows)} rows)"); continue
    if any(float(r["Duration(us)"].strip()) <= 0 for r in gpu):
        bad.append(f"{f}: zero-length kernels")
    tv = json.load(open(f.replace("kernel_details.csv", "trace_view.json")))
    steps = [e for e in tv if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")]
    for s in steps:
        s_ts, s_dur = float(s["ts"]), float(s["dur"])
        inside = sum(float(r["Duration(us)"].strip()) for r in gpu
                     if s_ts <= float(r["Start Time(us)"].strip()) < s_ts + s_dur)
        worst = max(worst, inside / s_dur)
        if inside > s_dur:
            bad.append(f"{f}: {s['name']} kernels {inside:.0f} us > step {s_dur:.0f} us")
    if not steps:
        bad.append(f"{f}: no ProfilerStep# in trace_view.json")
    n += len(gpu)
print(("FAIL " + "; ".join(bad[:3])) if bad else
      f"PASS {n} kernels in {len(files)} collection(s); kernel time <= step time (max {worst:.0%} of a step)")
PYEOF
}

check_memory() { # check_memory DIR
  "$PY" - "$1" <<'PYEOF'
import glob, pickle, sys
files = glob.glob(sys.argv[1] + "/**/*.pickle", recursive=True)
if not files:
    print("FAIL no memory snapshot pickle under " + sys.argv[1]); sys.exit()
allocs = 0
for f in files:
    snap = pickle.load(open(f, "rb"))
    for dev in snap.get("device_traces", []):
        allocs += sum(1 for e in dev if e.get("action") == "alloc" and e.get("size", 0) > 0)
print(f"PASS {allocs} allocations in {len(files)} snapshot(s)" if allocs else
      f"FAIL no allocations in {len(files)} snapshot(s)")
PYEOF
}

verdict() { # verdict NAME LINE: LINE is "PASS|FAIL detail" from a checker; anything else fails
  local line=$2
  case "${line%% *}" in
    PASS | FAIL) result "$1" "${line%% *}" "${line#* }" ;;
    *) result "$1" FAIL "checker failed: ${line:-no output}" ;;
  esac
}

PREFIX=cuda_ CORE=GPU
[ "$CPU_MODE" = 1 ] && PREFIX=cpu_ CORE=CPU

declare -A STEP_S
run_tool() { # run_tool TOOL OVERRIDES...
  local tool=$1 s
  s=$(date +%s%N)
  if train "$@"; then
    STEP_S[$tool]=$(($(date +%s%N) - s))
    result "train $tool" PASS "3 steps in $(((STEP_S[$tool]) / 1000000)) ms (log $OUT/$tool.log)"
    return 0
  fi
  result "train $tool" FAIL "see $OUT/$tool.log: $(tail -1 "$OUT/$tool.log")"
  return 1
}

if run_tool npu 'actor_rollout_ref.actor.profiler.tool_config.npu.contents=[npu,cpu,memory]'; then
  verdict "npu kernels" "$(check_npu "$OUT/npu" "$PREFIX" "$CORE")"
fi
if run_tool torch '+actor_rollout_ref.actor.profiler.tool_config.torch={contents: [cpu, cuda]}'; then
  verdict "torch kernels" "$(check_trace "$OUT/torch" "$PREFIX")"
  if "$PY" -c 'import hta' 2>/dev/null; then
    verdict "hta reads torch" "$("$PY" - "$OUT/torch" "$PREFIX" <<'PYEOF'
import glob, os, sys
from hta.trace_analysis import TraceAnalysis
dirs = sorted({os.path.dirname(f) for f in glob.glob(sys.argv[1] + "/**/*.pt.trace.json*", recursive=True)})
a = TraceAnalysis(trace_dir=dirs[-1])
df = a.t.get_trace(0)
names = a.t.symbol_table.get_sym_table()
k = df[df["stream"] >= 0]
k = k[[names[i].startswith(sys.argv[2]) for i in k["name"]]]
tb = a.get_temporal_breakdown(visualize=False)
ok = len(k) > 0 and float(tb["compute_time(us)"].iloc[0]) > 0
print(("PASS" if ok else "FAIL") + f" {len(k)} {sys.argv[2]}* kernels on stream(s) {sorted(set(k['stream']))}; compute {float(tb['compute_time(us)'].iloc[0]):.0f} us")
PYEOF
)"
  else
    result "hta reads torch" SKIP "HolisticTraceAnalysis not importable by $PY (set RLPROF_VENV to a venv with it)"
  fi
fi
if run_tool torch_memory; then
  verdict "torch_memory allocs" "$(check_memory "$OUT/torch_memory")"
fi
if [ "$CPU_MODE" != 1 ] && command -v nsys >/dev/null; then
  if run_tool nsys; then
    rep=$(find "$OUT/nsys" -name '*.nsys-rep' | head -1)
    if [ -z "$rep" ]; then
      result "nsys kernels" FAIL "no .nsys-rep under $OUT/nsys"
    elif nsys stats --report cuda_gpu_kern_sum --format csv "$rep" >"$OUT/nsys-kern.csv" 2>"$OUT/nsys-stats.log" &&
      [ "$(grep -c . "$OUT/nsys-kern.csv")" -gt 1 ]; then
      result "nsys kernels" PASS "$(($(grep -c . "$OUT/nsys-kern.csv") - 1)) kernel names in the capture ranges ($rep)"
    else
      result "nsys kernels" FAIL "no GPU kernels in $rep (see $OUT/nsys-stats.log)"
    fi
  fi
else
  result "train nsys" SKIP "nsys not on PATH (or CPU mode)"
fi

# --- step time with collection off vs on --------------------------------------------------------
step_ms() { # step_ms LOG: median `timing_s/step` of the run's metrics, in ms
  "$PY" - "$1" <<'PYEOF'
import json, re, statistics, sys
m = re.search(r"metrics: (\S+)", open(sys.argv[1]).read())
steps = [json.loads(l).get("timing_s/step") for l in open(m.group(1))] if m else []
steps = [s for s in steps if s is not None]
print(f"{statistics.median(steps) * 1000:.1f}" if steps else "?")
PYEOF
}
if run_tool off 'global_profiler.steps=null'; then
  line="off $(step_ms "$OUT/off.log") ms"
  for t in npu torch torch_memory; do
    [ -f "$OUT/$t.log" ] && line="$line, $t $(step_ms "$OUT/$t.log") ms"
  done
  result "step time (median)" PASS "$line"
fi

# --- NCCL vs MPI (2 GPUs) --------------------------------------------------------------------
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "$CPU_MODE" = 1 ] || [ "${ngpu:-0}" -lt 2 ] || ! command -v mpirun >/dev/null; then
  result "nccl all-reduce" SKIP "needs 2 GPUs and mpirun (found ${ngpu:-0} GPU(s))"
elif timeout 180 cargo build --release -p rlprof-trainer --features nccl --example nccl_check \
  >"$OUT/nccl-build.log" 2>&1 &&
  RLPROF_NCCL_DEVICES=2 timeout 120 mpirun -np 2 \
    "${CARGO_TARGET_DIR:-target}/release/examples/nccl_check" >"$OUT/nccl.log" 2>&1; then
  result "nccl all-reduce" PASS "$(grep -m1 'NCCL check OK' "$OUT/nccl.log")"
else
  result "nccl all-reduce" FAIL "see $OUT/nccl-build.log / $OUT/nccl.log"
fi

echo "=== gpu-check summary (outputs in $OUT)"
printf '%s\n' "${SUMMARY[@]}"
exit "$FAILED"
