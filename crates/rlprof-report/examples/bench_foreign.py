"""Foreign-trace benchmark: rlprof load + summarise vs Python json.load vs HolisticTraceAnalysis.

Usage (BENCHMARKS.md; docs/benchmarks/history.md, "Loading a foreign Chrome trace"):
    python bench_foreign.py TRACE_DIR BENCH_FOREIGN_BINARY [ROUNDS]
TRACE_DIR holds one uncompressed *.pt.trace.json (from the make_torch_trace example);
BENCH_FOREIGN_BINARY is the built bench_foreign example. Rounds are interleaved (ours, json.load,
HTA) so the three see the same machine load; medians are printed. Run with a Python that has
HolisticTraceAnalysis installed.
"""
import glob
import json
import re
import statistics
import subprocess
import sys
import time


def ours(binary, path):
    out = subprocess.run([binary, path, "1"], check=True, capture_output=True, text=True).stdout
    return float(re.search(r"load \+ summarise ([0-9.]+) s", out).group(1))


def json_load(path):
    t = time.perf_counter()
    with open(path) as f:
        d = json.load(f)
    dt = time.perf_counter() - t
    assert len(d["traceEvents"]) > 0
    return dt


def hta_load(trace_dir):
    from hta.trace_analysis import TraceAnalysis

    t = time.perf_counter()
    a = TraceAnalysis(trace_dir=trace_dir)
    dt = time.perf_counter() - t
    assert list(a.t.get_all_traces().keys()) == [0]
    return dt


def main():
    trace_dir, binary = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    (path,) = glob.glob(f"{trace_dir}/*.json")
    times = {"rlprof load + summarise": [], "json.load": [], "HTA TraceAnalysis": []}
    for r in range(rounds):
        row = [ours(binary, path), json_load(path), hta_load(trace_dir)]
        for k, v in zip(times, row):
            times[k].append(v)
        print(f"round {r}: " + ", ".join(f"{k} {v:.3f} s" for k, v in zip(times, row)), flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in med.items():
        print(f"{k}: median {v:.3f} s over {rounds} rounds")
    base = med["rlprof load + summarise"]
    print(f"json.load / rlprof = {med['json.load'] / base:.1f}x, HTA / rlprof = {med['HTA TraceAnalysis'] / base:.1f}x")


if __name__ == "__main__":
    main()
