#!/usr/bin/env bash
# Separate check (CI does not install the 5 GB torch wheel): PyTorch's own memory snapshot readers
# (`python -m torch.cuda._memory_viz stats|trace`) read the torch_memory snapshots of a trainer run,
# and the trace reader sees exactly the alloc/free entries we recorded (counted independently with
# the stdlib pickle module).  Usage: scripts/check_memory_viz.sh [python-with-torch]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-/work/venv-bench/bin/python}
out=$(mktemp -d)
cargo build --release -q
./target/release/rlprof train --quiet global_profiler.tool=torch_memory global_profiler.save_path="$out/prof" \
  global_profiler.steps=[1] trainer.total_training_steps=1 trainer.sft_warmup_steps=2 \
  trainer.default_local_dir="$out/ckpt" >/dev/null
status=0
for p in $(find "$out/prof" -name '*.pickle'); do
  "$PY" -W ignore -m torch.cuda._memory_viz stats "$p" >/dev/null
  trace=$("$PY" -W ignore -m torch.cuda._memory_viz trace "$p")
  allocs=$(grep -c ' = MEM\[' <<<"$trace" || true)
  frees=$(grep -c '^del ' <<<"$trace" || true)
  want=$(python3 -c "import pickle,sys; t=pickle.load(open(sys.argv[1],'rb'))['device_traces'][0]; print(sum(e['action']=='alloc' for e in t), sum(e['action']=='free_requested' for e in t))" "$p")
  echo "$(basename "$p"): torch trace reader: $allocs allocs, $frees frees; stdlib pickle: $want"
  [ "$allocs $frees" = "$want" ] || status=1
done
rm -rf "$out"
exit $status
