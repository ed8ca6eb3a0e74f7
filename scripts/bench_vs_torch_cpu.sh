#!/usr/bin/env bash
# Per-step CPU seconds of the PyTorch reference workload vs rlprof on the same shapes, robust to a
# loaded machine: each tool runs S1 and S2 steps, alternating with the other tool, and the CPU time
# (user + system of the whole process tree) of S2 - S1 steps divided by S2 - S1 is one step's
# CPU, start-up and warm-up cancelled. Both run 2 ranks with 1 compute thread each.
# Usage: scripts/bench_vs_torch_cpu.sh [reps] [python-with-torch]
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-3}
PY=${2:-/work/venv-bench/bin/python}
S1=4
S2=14
cargo build --release -q
python3 - "$REPS" "$PY" "$S1" "$S2" <<'PYEOF'
import resource, statistics, subprocess, sys, tempfile
reps, py, s1, s2 = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

def cpu(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)

def torch(steps):
    # bench_torch_phases.py STEPS WARMUP runs WARMUP + STEPS steps per rank
    return cpu([py, "scripts/bench_torch_phases.py", str(steps), "1"])

def rlprof(steps):
    with tempfile.TemporaryDirectory() as d:
        return cpu(["./target/release/rlprof", "train", "--quiet", "configs/bench_torch_peer.yaml",
                    f"trainer.total_training_steps={steps + 1}", f"trainer.default_local_dir={d}"])

per_step = {"torch": [], "rlprof": []}
for _ in range(reps):
    for name, run in (("torch", torch), ("rlprof", rlprof)):
        a, b = run(s1), run(s2)
        per_step[name].append((b - a) / (s2 - s1))
        print(f"{name}: {s1} steps {a:.2f} CPU-s, {s2} steps {b:.2f} CPU-s, "
              f"{per_step[name][-1] * 1e3:.1f} CPU-ms per step (both ranks)", flush=True)
t, r = statistics.median(per_step["torch"]), statistics.median(per_step["rlprof"])
print(f"median CPU-ms per step: torch {t * 1e3:.1f}, rlprof {r * 1e3:.1f}, rlprof/torch {r / t:.2f}")
PYEOF
