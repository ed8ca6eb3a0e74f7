#!/usr/bin/env bash
# Side-by-side step times: PyTorch reference workload vs rlprof on the same shapes, alternating
# runs so that machine noise hits both. Needs a Python with torch (default /work/venv-bench).
# Usage: scripts/bench_vs_torch.sh [reps] [python]
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-3}
PY=${2:-/work/venv-bench/bin/python}
cargo build --release -q
for i in $(seq "$REPS"); do
  echo "torch $($PY scripts/bench_torch_phases.py 10 2)"
  d=$(mktemp -d)
  ./target/release/rlprof train --quiet configs/bench_torch_peer.yaml trainer.total_training_steps=11 \
    trainer.default_local_dir="$d" >/dev/null 2>&1
  python3 - "$d" <<'PY'
import glob, json, statistics, sys
f = sorted(glob.glob(sys.argv[1] + "/metrics-*.jsonl"))[-1]
rows = [json.loads(l) for l in open(f)][1:]
print("rlprof", json.dumps({k: round(1e3 * statistics.median(r["timing_s/" + k] for r in rows), 2)
                            for k in ["gen", "old_log_prob", "ref", "update_actor", "step"]
                            if "timing_s/" + k in rows[0]}))
PY
  rm -rf "$d"
done
