"""`rlprof.load` + one table against HolisticTraceAnalysis's `TraceAnalysis(...)` + the same
table, on one trace directory, alternated (BENCHMARKS.md).

    python bench_vs_hta.py TRACE_DIR WHEEL_PYTHON HTA_PYTHON [PAIRS]

TRACE_DIR holds one PyTorch trace (the 78.6 MB `*.pt.trace.json` of the make_torch_trace
example). HTA ties a GPU kernel to the CPU op that launched it by the `correlation` argument,
which that synthetic trace gives its kernels but not its ops: HTA then keeps no kernel and its
temporal breakdown fails. And its times are fractional microseconds (50 ns kernels), which HTA rounds down to whole
microseconds, after which its breakdown fails an assertion (idle > span). So the script first
writes, beside TRACE_DIR (`TRACE_DIR-hta/`), a copy whose `cpu_op` events carry `correlation` =
their `External id` and whose times are multiplied by 1000 (whole numbers, the same timeline
1000 times slower), and both tools read that copy (its size is printed). WHEEL_PYTHON is a Python with the rlprof wheel installed, HTA_PYTHON one with
HolisticTraceAnalysis (they may be the same). Each run is a fresh process (nothing cached
between runs); each prints the seconds of `load + get_temporal_breakdown()` measured inside it (after
its imports, as in a notebook),
and the whole process's wall time is measured from outside. Runs alternate ours, HTA, ours,
HTA, ... after one warm-up of each; the medians and the median of the per-pair ratios are
printed, with `uptime` before and after.
"""

import statistics
import subprocess
import sys
import time

OURS = """
import sys, time
import rlprof
t = time.perf_counter()
r = rlprof.load(sys.argv[1])
df = r.get_temporal_breakdown()
dt = time.perf_counter() - t
assert len(df) == 1 and df["kernel_time(us)"].iloc[0] > 0, df
print(dt)
"""

HTA = """
import sys, time
from hta.trace_analysis import TraceAnalysis
t = time.perf_counter()
a = TraceAnalysis(trace_dir=sys.argv[1])
df = a.get_temporal_breakdown(visualize=False)
dt = time.perf_counter() - t
assert len(df) == 1 and df["kernel_time(us)"].iloc[0] > 0, df
print(dt)
"""


def run(python, code, trace_dir):
    t = time.perf_counter()
    p = subprocess.run([python, "-c", code, trace_dir], capture_output=True, text=True)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(p.stderr[-3000:])
    return float(p.stdout.strip().splitlines()[-1]), wall


def with_correlation(trace_dir):
    """The copy of the trace both tools read (see the module's doc)."""
    import glob
    import json
    import os

    (src,) = glob.glob(os.path.join(trace_dir, "*.json"))
    out_dir = trace_dir.rstrip("/") + "-hta"
    dst = os.path.join(out_dir, os.path.basename(src))
    if not os.path.exists(dst):
        os.makedirs(out_dir, exist_ok=True)
        with open(src) as f:
            trace = json.load(f)
        for e in trace["traceEvents"]:
            if e.get("cat") == "cpu_op" and "External id" in e.get("args", {}):
                e["args"]["correlation"] = e["args"]["External id"]
            for k in ("ts", "dur"):
                if isinstance(e.get(k), (int, float)):
                    e[k] = round(e[k] * 1000)
        with open(dst, "w") as f:
            json.dump(trace, f, separators=(",", ":"))
    print(f"trace: {dst}, {os.path.getsize(dst) / 1e6:.1f} MB", flush=True)
    return out_dir


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main():
    trace_dir, ours_py, hta_py = sys.argv[1:4]
    trace_dir = with_correlation(trace_dir)
    pairs = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    print("before:", uptime(), flush=True)
    run(ours_py, OURS, trace_dir), run(hta_py, HTA, trace_dir)  # warm-up (page cache)
    ours, hta = [], []
    for i in range(pairs):
        ours.append(run(ours_py, OURS, trace_dir))
        hta.append(run(hta_py, HTA, trace_dir))
        print(f"pair {i}: rlprof {ours[-1][0]:.3f} s (process {ours[-1][1]:.3f} s), "
              f"HTA {hta[-1][0]:.3f} s (process {hta[-1][1]:.3f} s)", flush=True)
    print("after:", uptime())
    for k, what in [(0, "load + table (in process, after the imports)"), (1, "whole process")]:
        o = statistics.median(x[k] for x in ours)
        h = statistics.median(x[k] for x in hta)
        ratio = statistics.median(b[k] / a[k] for a, b in zip(ours, hta))
        lo = min(b[k] / a[k] for a, b in zip(ours, hta))
        hi = max(b[k] / a[k] for a, b in zip(ours, hta))
        print(f"{what}: rlprof median {o:.3f} s, HTA median {h:.3f} s, HTA / rlprof paired median "
              f"{ratio:.1f}x ({lo:.1f}-{hi:.1f}), {pairs} pairs")


if __name__ == "__main__":
    main()
