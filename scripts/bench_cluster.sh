#!/usr/bin/env bash
# rlprof against msprof-analyze's `cluster` on one rank tree, alternating runs, medians of wall
# time and peak RSS. The tree comes from scripts/make_cluster_tree.py (real-shaped torch_npu rank
# directories, DB or text layout). Both tools write their output into a scratch copy's place
# (msprof-analyze: -o a scratch directory; rlprof analyse --cluster: cluster_analysis/ inside the
# tree, removed before each run so that it is never read back).
# Usage: scripts/bench_cluster.sh REPS TREE [MSPROF_ANALYZE] [RLPROF]
set -euo pipefail
REPS=${1:?reps}
TREE=${2:?tree}
MSA=${3:-/opt/rlprof-venv/bin/msprof-analyze}
RL=${4:-$(dirname "$0")/../target/release/rlprof}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "cpu $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
run() { # run LABEL CMD...: prints "LABEL wall_s rss_kib"
  local label=$1
  shift
  /usr/bin/time -f "$label %e %M" -o "$out/t" "$@" >/dev/null 2>&1 || echo "$label failed" >&2
  cat "$out/t"
}
for _ in $(seq "$REPS"); do
  rm -rf "$out/msa" && mkdir -p "$out/msa"
  run msprof-analyze "$MSA" cluster -d "$TREE" -o "$out/msa"
  rm -rf "$TREE/cluster_analysis"
  run analyse "$RL" analyse --cluster "$TREE"
  run report "$RL" report "$TREE" --format text
  run report-html "$RL" report "$TREE" -o "$out/r.html" --force
done | tee "$out/all"
rm -rf "$TREE/cluster_analysis"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out/all" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    parts = line.split()
    if len(parts) == 3:
        rows.setdefault(parts[0], []).append((float(parts[1]), int(parts[2])))
for k, v in rows.items():
    print(f"median {k}: {statistics.median(t for t, _ in v):.2f} s, "
          f"{statistics.median(m for _, m in v) / 1024:.1f} MiB peak RSS ({len(v)} runs)")
PY
