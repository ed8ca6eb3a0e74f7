"""A notebook session with rlprof, as cells (docs/python.md). Runs as a script too:

    python docs/examples/notebook.py PROFILE_DIR [report.html]

PROFILE_DIR: a save_path of ours (`rlprof train` writes outputs/profile), a PyTorch trace
(`*.pt.trace.json[.gz]`) or torch_npu output. CI runs it on a synthetic collection.
"""

# %% Load once: the same analysis as `rlprof report PATH --format json`
import sys

import pandas as pd

import rlprof

path = sys.argv[1] if len(sys.argv) > 1 else "outputs/profile"
r = rlprof.load(path)
print(r)
pd.set_option("display.width", 160)

# %% Device time per rank, as HolisticTraceAnalysis names it
print("temporal breakdown (HTA's columns):")
print(r.get_temporal_breakdown().to_string(index=False))
print("communication / computation overlap:")
print(r.get_comm_comp_overlap().to_string(index=False))
print("device time per rank (ns):")
print(r.device.to_string(index=False))

# %% Where the step goes: rollout, log-prob passes, update, per step and rank
roles = r.roles
roles["update_share"] = roles["update_ns"] / roles["step_ns"]
print("roles per step:")
print(roles.to_string(index=False))
print("slowest rank per step:")
print(r.slowest_rank[["job", "run", "step", "rank", "step_ns"]].to_string(index=False))

# %% Ascend: CANN's step figures under step_trace_time.csv's names (us)
st = r.get_step_trace_time()
if not st.empty:
    print("CANN step trace time:")
    print(st.to_string(index=False))

# %% Top ops and kernels, collectives and their bandwidth
print("top ops by self time:")
print(r.top.nlargest(5, "self_ns")[["kind", "name", "count", "self_ns", "share"]].to_string(index=False))
if not r.comm.empty:
    print("collectives:")
    print(r.comm[["rank", "name", "count", "bytes", "total_ns", "bandwidth_gbps"]].to_string(index=False))

# %% Memory: the peak of each profile and the curve (plot it with r.memory_timeline.plot)
if not r.memory.empty:
    print("memory peak:")
    print(r.memory[["profile", "rank", "kind", "peak_bytes", "peak_since_start_ns"]].to_string(index=False))
    print(f"memory timeline: {len(r.memory_timeline)} points")

# %% Every table the report has, and the HTML page
print("tables:", ", ".join(f"{k} {v.shape}" for k, v in r.tables.items()))
if len(sys.argv) > 2:
    print("page written to", rlprof.report(path, out=sys.argv[2], force=True))
