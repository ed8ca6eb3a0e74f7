"""Our temporal breakdown DataFrame against HolisticTraceAnalysis's
`TraceAnalysis(trace_dir=...).get_temporal_breakdown()` on the same real GPU trace
(`$RLPROF_FIXTURES/real/hta_negative_queue_16w/rank0.json.gz`). HTA runs in its own Python
(`$RLPROF_HTA_PYTHON`, CI: /opt/rlprof-venv) through hta_temporal.py beside this file.

What tolerance the definitions give. Both sides divide one device timeline into idle, compute
and non-compute time over its span; they differ in two ways only:
- HTA keeps only the GPU events launched by CPU ops of complete profiler steps (all but the
  last `ProfilerStep#N`), the report keeps every device event of the trace; and HTA types a
  kernel by its name (`^nccl.*Kernel`, `^Memcpy|^Memset|^dma`, names with `Sync`), the report by
  its track (the trace's category);
- HTA's times are whole microseconds (the trace's unit, read as integers) and its percentages
  are rounded to 2 decimals; the report's are nanoseconds and unrounded.
So the test computes, independently of both tools, the four figures over HTA's kept events with
HTA's rules (F_kept) and over all device events with the report's rules (F_all). Then
ours - HTA must equal F_all - F_kept: to 0 us for the times (this trace's times are integer us,
so neither side rounds) and to 0.005 percentage points for HTA's rounded percentages. That is
the comparison: any other difference fails it. It also prints how far apart the two tools are.
"""

import gzip
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import rlprof
HTA_SCRIPT = Path(__file__).with_name("hta_temporal.py")


def union(iv):
    total, cur = 0, None
    for s, e in sorted(iv):
        if cur and s <= cur[1]:
            cur = (cur[0], max(cur[1], e))
        else:
            if cur:
                total += cur[1] - cur[0]
            cur = (s, e)
    return total + (cur[1] - cur[0] if cur else 0)


def figures(events):
    """(idle, compute, non-compute, span) in us over (start, end, type) events."""
    span = max(e for _, e, _ in events) - min(s for s, _, _ in events)
    busy = union([(s, e) for s, e, _ in events])
    compute = union([(s, e) for s, e, t in events if t == "COMPUTATION"])
    return [span - busy, compute, busy - compute, span]


def hta_type(name):
    """hta/utils/utils.py get_kernel_type, as crates/rlprof-report/tests/hta.rs reads it."""
    if name.startswith("nccl") and "Kernel" in name[4:]:
        return "COMMUNICATION"
    if name.startswith(("Memcpy", "Memset", "dma")):
        return "MEMORY"
    if "Memcpy" in name or "Sync" in name:
        return "OTHER"
    return "COMPUTATION"


def report_type(e):
    """The report's device tracks of a kineto trace: the category decides."""
    if e.get("cat") == "kernel":
        return "COMMUNICATION" if e["name"].startswith("nccl") else "COMPUTATION"
    return "MEMORY"


@pytest.mark.external
def test_temporal_breakdown_against_hta(real_fixtures, tmp_path):
    hta_python = os.environ.get("RLPROF_HTA_PYTHON")
    assert hta_python, "RLPROF_HTA_PYTHON (a Python with HolisticTraceAnalysis) is not set"
    trace = real_fixtures / "hta_negative_queue_16w" / "rank0.json.gz"
    shutil.copy(trace, tmp_path / "rank0.json.gz")
    p = subprocess.run([hta_python, str(HTA_SCRIPT), str(tmp_path)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-4000:]
    hta = json.loads(p.stdout.strip().splitlines()[-1])
    (row,) = hta["temporal"]

    ours = rlprof.load(tmp_path).get_temporal_breakdown()
    assert len(ours) == 1 and int(ours["rank"].iloc[0]) == row["rank"]
    cols = ["idle_time(us)", "compute_time(us)", "non_compute_time(us)", "kernel_time(us)"]
    o = [float(ours[c].iloc[0]) for c in cols]
    h = [row[c] for c in cols]

    kept = [(ts, ts + dur, hta_type(name)) for ts, dur, name in hta["gpu_events"]]
    with gzip.open(trace, "rt") as f:
        evs = json.load(f)["traceEvents"]
    dev = [e for e in evs if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    every = [(e["ts"], e["ts"] + e["dur"], report_type(e)) for e in dev]
    f_kept, f_all = figures(kept), figures(every)
    print(f"HTA keeps {len(kept)} of {len(every)} device events")
    for c, a, b, fa, fk in zip(cols, o, h, f_all, f_kept):
        print(f"{c}: ours {a:.0f}, HTA {b:.0f}, difference {a - b:+.0f} (expected from the event sets: {fa - fk:+d})")
        assert a - b == fa - fk, f"{c}: ours - HTA = {a - b}, the definitions give {fa - fk}"
    for c, i in [("idle_time_pctg", 0), ("compute_time_pctg", 1), ("non_compute_time_pctg", 2)]:
        ours_pct = float(ours[c].iloc[0])
        hta_pct = float(row[c])
        want = 100 * f_all[i] / f_all[3] - 100 * f_kept[i] / f_kept[3]
        assert abs((ours_pct - hta_pct) - want) <= 0.005 + 1e-9, (c, ours_pct, hta_pct, want)

