#!/usr/bin/env bash
# Paired whole-process timing: runs command A and command B in turn (A B A B ...) RUNS times each
# after one warm-up of each, measures every run with GNU time (/usr/bin/time: wall, user, system
# seconds, peak RSS), and prints each figure's min / median / max and the median of the per-pair
# ratios A/B. Pairing keeps the ratio meaningful when the machine's speed drifts; quote medians.
# Usage: scripts/paired_time.sh RUNS 'COMMAND A' 'COMMAND B'   (each command one shell string)
set -euo pipefail
runs=${1:?runs}
a=${2:?command A}
b=${3:?command B}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
one() { # $1 label, $2 command, $3 record?
  /usr/bin/time -f "%e %U %S %M" -o "$out/t" sh -c "$2" >/dev/null 2>&1 || {
    echo "command failed: $2" >&2
    exit 1
  }
  [ "$3" = yes ] && echo "$1 $(cat "$out/t")" >>"$out/all"
  return 0
}
one A "$a" no
one B "$b" no
for _ in $(seq "$runs"); do
  one A "$a" yes
  one B "$b" yes
done
python3 - "$out/all" <<'PY'
import statistics, sys
rows = {"A": [], "B": []}
for line in open(sys.argv[1]):
    k, wall, user, sys_s, rss = line.split()
    rows[k].append((float(wall), float(user), float(sys_s), int(rss) / 1024))
cols = {"wall s": lambda r: r[0], "user s": lambda r: r[1], "cpu s": lambda r: r[1] + r[2],
        "peak MiB": lambda r: r[3]}
for k in "AB":
    for name, f in cols.items():
        v = [f(r) for r in rows[k]]
        print(f"{k} {name:9} {min(v):10.3f} {statistics.median(v):10.3f} {max(v):10.3f}")
for name in ("user s", "cpu s", "wall s"):
    f = cols[name]
    ratios = [f(x) / f(y) for x, y in zip(rows["A"], rows["B"]) if f(y) > 0]
    if not ratios:
        print(f"A/B {name:7} (B measured 0)")
        continue
    print(f"A/B {name:7} {min(ratios):10.4f} {statistics.median(ratios):10.4f} {max(ratios):10.4f}")
PY
