"""Run by test_hta.py in a Python with HolisticTraceAnalysis: prints, as one JSON line, HTA's
`get_temporal_breakdown()` for a trace directory (every column, as HTA gives it) and the GPU
events HTA kept (ts, dur, name), so the test can account for the events HTA drops."""

import json
import sys

from hta.trace_analysis import TraceAnalysis

analysis = TraceAnalysis(trace_dir=sys.argv[1])
temporal = analysis.get_temporal_breakdown(visualize=False)
rank = int(temporal["rank"].iloc[0])
df = analysis.t.get_trace(rank)
names = analysis.t.symbol_table.get_sym_table()
gpu = df[df["stream"].ne(-1)]
print(
    json.dumps(
        {
            "temporal": json.loads(temporal.to_json(orient="records")),
            "gpu_events": [[int(t), int(d), names[int(n)]] for t, d, n in zip(gpu["ts"], gpu["dur"], gpu["name"])],
        }
    )
)
