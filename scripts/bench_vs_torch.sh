#!/usr/bin/env bash
# Side-by-side per-phase step times: the PyTorch reference workload vs rlprof on the same shapes,
# alternating runs so that machine noise hits both. Sizes: tiny (configs/bench_torch_peer.yaml)
# and base (configs/bench_torch_peer_base.yaml, compute-bound); both sides 2 ranks, 1 thread each.
# Prints, per repetition, `torch {...}` (per-rank medians, ms) and `rlprof {...}` (medians, ms),
# then `cpu MODEL` (from /proc/cpuinfo).
# Usage: scripts/bench_vs_torch.sh [reps] [python-with-torch] [tiny|base]
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-3}
PY=${2:-/work/venv-bench/bin/python}
SIZE=${3:-tiny}
case "$SIZE" in
  tiny) CONFIG=configs/bench_torch_peer.yaml; STEPS=10 ;;
  base) CONFIG=configs/bench_torch_peer_base.yaml; STEPS=6 ;;
  *) echo "size must be tiny or base, not $SIZE" >&2; exit 2 ;;
esac
cargo build --release -q -p rlprof-cli
BIN=${CARGO_TARGET_DIR:-target}/release/rlprof
for i in $(seq "$REPS"); do
  echo "torch $($PY scripts/bench_torch_phases.py "$STEPS" 2 "$SIZE")"
  d=$(mktemp -d)
  # step 1 is warm-up (dropped below), as the torch side's 2 warm-up steps
  "$BIN" train --quiet "$CONFIG" trainer.total_training_steps=$((STEPS + 2)) \
    trainer.default_local_dir="$d" global_profiler.save_path="$d/profile" >/dev/null 2>&1
  python3 - "$d" <<'PY'
import glob, json, statistics, sys
f = sorted(glob.glob(sys.argv[1] + "/metrics-*.jsonl"))[-1]
rows = [json.loads(l) for l in open(f)][2:]
print("rlprof", json.dumps({k: round(1e3 * statistics.median(r["timing_s/" + k] for r in rows), 2)
                            for k in ["gen", "old_log_prob", "ref", "update_actor", "step"]
                            if "timing_s/" + k in rows[0]}))
PY
  rm -rf "$d"
done
echo "cpu $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
