"""Prints HolisticTraceAnalysis's core figures for rank 0 of a trace directory, as JSON.

Used by tests/hta.rs: temporal breakdown, communication/computation overlap, kernel breakdown by
type, and the GPU events HTA kept (ts, dur, name), so the test can tell where HTA's rules differ.
"""
import json
import sys

from hta.trace_analysis import TraceAnalysis

analysis = TraceAnalysis(trace_dir=sys.argv[1])
temporal = analysis.get_temporal_breakdown(visualize=False)
overlap = analysis.get_comm_comp_overlap(visualize=False)
kernel_types, _ = analysis.get_gpu_kernel_breakdown(
    visualize=False, include_memory_kernels=True
)
rank = int(temporal["rank"].iloc[0])
df = analysis.t.get_trace(rank)
names = analysis.t.symbol_table.get_sym_table()
gpu = df[df["stream"].ne(-1)]
print(
    json.dumps(
        {
            "rank": rank,
            "temporal": {
                k: float(temporal[k].iloc[0])
                for k in [
                    "idle_time(us)",
                    "compute_time(us)",
                    "non_compute_time(us)",
                    "kernel_time(us)",
                ]
            },
            "overlap": float(overlap["comp_comm_overlap_pctg"].iloc[0])
            if "comp_comm_overlap_pctg" in overlap
            else float(overlap["comp_comm_overlap_ratio"].iloc[0]) * 100.0,
            "kernel_types": {
                str(r["kernel_type"]): float(r["sum"]) for _, r in kernel_types.iterrows()
            },
            "gpu_events": [
                [int(t), int(d), names[int(n)]]
                for t, d, n in zip(gpu["ts"], gpu["dur"], gpu["name"])
            ],
        }
    )
)
