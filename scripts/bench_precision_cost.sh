#!/usr/bin/env bash
# The precision_debugger tool's cost on the tiny config (configs/bench_torch_peer.yaml): runs of
# 12 steps alternate dumping on (statistics, L1, actor_update + ref_compute_log_prob on every
# step from 2) and off (the same tool, no steps listed), PAIRS pairs; prints the medians over
# runs and steps 2..12 of timing_s/step, /ref and /update_actor from the metrics file, on and off.
# Usage: scripts/bench_precision_cost.sh [PAIRS] [RLPROF]
set -euo pipefail
pairs=${1:-3}
bin=${2:-${CARGO_TARGET_DIR:-target}/release/rlprof}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cat >"$out/config.json" <<'JSON'
{"task": "statistics", "level": "L1", "statistics": {"data_mode": ["all"], "summary_mode": "statistics"}}
JSON
run() { # $1 label, $2 run index, $3 steps
  "$bin" train --quiet configs/bench_torch_peer.yaml global_profiler.tool=precision_debugger \
    "global_profiler.save_path=$out/prof_$1_$2" "global_profiler.steps=$3" \
    "+global_profiler.global_tool_config.precision_debugger.config_path=$out/config.json" \
    "+global_profiler.global_tool_config.precision_debugger.stages=[actor_update,ref_compute_log_prob]" \
    "trainer.default_local_dir=$out/ckpt_$1_$2" >/dev/null 2>&1
}
for i in $(seq "$pairs"); do
  run on "$i" "[2,3,4,5,6,7,8,9,10,11,12]"
  run off "$i" "null"
done
python3 - "$out" <<'PY'
import glob, json, statistics, sys
out = sys.argv[1]
res = {}
for mode in ("on", "off"):
    rows = []
    for f in glob.glob(f"{out}/ckpt_{mode}_*/metrics-*.jsonl"):
        rows += [json.loads(l) for l in open(f) if l.strip()]
    rows = [r for r in rows if r.get("step", 0) >= 2]
    res[mode] = {k: round(1e3 * statistics.median(r[f"timing_s/{k}"] for r in rows), 2)
                 for k in ("step", "ref", "update_actor")}
    res[mode]["n"] = len(rows)
res["ratio_step"] = round(res["on"]["step"] / res["off"]["step"], 3)
res["ratio_ref+update"] = round((res["on"]["ref"] + res["on"]["update_actor"]) /
                                (res["off"]["ref"] + res["off"]["update_actor"]), 3)
print(json.dumps(res))
PY
