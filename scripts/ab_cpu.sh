#!/usr/bin/env bash
# A/B by CPU seconds (user+sys) of whole runs, alternating; the machine is shared, so CPU time
# is the steadier figure. Usage: scripts/ab_cpu.sh /abs/old/rlprof /abs/new/rlprof REPS [overrides...]
# (configs/bench_torch_peer.yaml, 11 steps per run; one line per run: binary, CPU s, wall s).
set -euo pipefail
A=$1; B=$2; REPS=$3; shift 3
cd "$(dirname "$0")/.."
for i in $(seq "$REPS"); do
  for bin in "$A" "$B"; do
    d=$(mktemp -d)
    python3 - "$bin" "$d" "$@" <<'PY'
import os, resource, subprocess, sys, time
b, d, *ov = sys.argv[1:]
t0 = time.time()
subprocess.run([b, "train", "--quiet", "configs/bench_torch_peer.yaml", "trainer.total_training_steps=11",
                f"trainer.default_local_dir={d}", *ov], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{b} cpu_s {r.ru_utime + r.ru_stime:.2f} wall_s {time.time() - t0:.2f}", flush=True)
PY
    rm -rf "$d"
  done
done
