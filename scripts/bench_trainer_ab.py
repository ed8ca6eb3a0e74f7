#!/usr/bin/env python3
"""Per-phase step times of two rlprof builds on the same trainer config, alternated (A B, B A, ...)
so that machine noise hits both: medians over the runs of each build's per-run medians (steps 3+;
the first two are warm-up, as in scripts/bench_vs_torch.sh), and the ratio A / B.

Usage: scripts/bench_trainer_ab.py BIN_A BIN_B [reps] [tiny|base]
"""
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZES = {
    "tiny": ("configs/bench_torch_peer.yaml", 10),
    "base": ("configs/bench_torch_peer_base.yaml", 6),
}
PHASES = ["gen", "ref", "update_actor", "step"]


def run(binary, config, steps):
    d = tempfile.mkdtemp()
    try:
        subprocess.run(
            [binary, "train", "--quiet", config, f"trainer.total_training_steps={steps + 2}",
             f"trainer.default_local_dir={d}", f"global_profiler.save_path={d}/profile"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        f = sorted(glob.glob(d + "/metrics-*.jsonl"))[-1]
        rows = [json.loads(line) for line in open(f)][2:]
        return {k: 1e3 * statistics.median(r["timing_s/" + k] for r in rows) for k in PHASES}
    finally:
        shutil.rmtree(d)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    bins = sys.argv[1:3]
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 6
    config, steps = SIZES[sys.argv[4] if len(sys.argv) > 4 else "tiny"]
    config = os.path.join(ROOT, config)
    res = {b: {k: [] for k in PHASES} for b in bins}
    for r in range(reps):
        for b in bins if r % 2 == 0 else bins[::-1]:
            for k, v in run(b, config, steps).items():
                res[b][k].append(v)
    with open("/proc/cpuinfo") as f:
        cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "?")
    for k in PHASES:
        a, b = (statistics.median(res[x][k]) for x in bins)
        print(f"{k:13s} A {a:8.2f} ms  B {b:8.2f} ms  A/B {a / b:.3f}")
    print(f"cpu {cpu}")


if __name__ == "__main__":
    main()
