#!/usr/bin/env bash
# Writes the seed corpus of each fuzz target under fuzz/corpus/<target>/ from synthetic data
# only: collections written by the repository's own examples (the profiler's RawWriter, then
# the npu and torch exporters), and the repository's own configs. Run from anywhere:
#   fuzz/make_corpus.sh
# It replaces the seeds it writes; it keeps the corpus small (a few hundred events per seed).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
out=$root/fuzz/corpus
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ex() { cargo run -q -p rlprof-export --example "$@"; }
ex ascend_layouts make "$tmp/db" 300
ex ascend_layouts export "$tmp/db" db >/dev/null
ex ascend_layouts make "$tmp/text" 300
ex ascend_layouts export "$tmp/text" text >/dev/null
ex make_torch_trace "$tmp/torch" 30 >/dev/null

col=host_1_20250101000000000_ascend_pt
mkdir -p "$out"/{raw_decode,chrome_json,ascend_csv,ascend_db,config_compose}

# raw_decode: a clean collection, the same cut in the middle of a chunk (a killed process),
# and the header alone.
raw=$tmp/db/$col/rlprof_raw/rank_0.rlraw
cp "$raw" "$out/raw_decode/clean.rlraw"
head -c $(( $(stat -c %s "$raw") / 2 )) "$raw" > "$out/raw_decode/cut.rlraw"
head -c 16 "$raw" > "$out/raw_decode/header.rlraw"

# chrome_json: the torch exporter's PyTorch trace and the npu text layout's trace_view.json.
cp "$(find "$tmp/torch" -name '*.pt.trace.json' | head -n 1)" "$out/chrome_json/torch.json"
text_out=$tmp/text/$col/ASCEND_PROFILER_OUTPUT
if [ -f "$text_out/trace_view.json" ]; then
  cp "$text_out/trace_view.json" "$out/chrome_json/trace_view.json"
fi
printf '{"traceEvents":[{"ph":"X","name":"a","pid":1,"tid":1,"ts":1.5,"dur":2}]}' \
  > "$out/chrome_json/tiny.json"

# ascend_csv: the CSV files in the target's order, separated by NUL bytes (a missing file is an
# empty part).
{
  first=1
  for f in kernel_details.csv memory_record.csv operator_memory.csv op_statistic.csv step_trace_time.csv; do
    [ "$first" = 1 ] || printf '\0'
    first=0
    if [ -f "$text_out/$f" ]; then cat "$text_out/$f"; fi
  done
} > "$out/ascend_csv/text_layout.bin"
if [ -f "$text_out/kernel_details.csv" ]; then
  head -n 4 "$text_out/kernel_details.csv" > "$out/ascend_csv/kernels_only.csv"
fi

# ascend_db: the npu DB layout's database.
cp "$(find "$tmp/db/$col" -name 'ascend_pytorch_profiler*.db' | head -n 1)" "$out/ascend_db/layout.db"

# config_compose: YAML, a NUL byte, then overrides one per line.
for y in "$root"/configs/*.yaml; do
  { cat "$y"; printf '\0'; printf 'trainer.total_epochs=2\n+extra.key=[1,2]\n'; } \
    > "$out/config_compose/$(basename "$y" .yaml).bin"
done
printf 'a: 1\nb: ${a}\nc:\n  d: "${b}-x"\n  e: ${oc.env:HOME,/tmp}\n\0a=3\n~c.e\n+f={x: 1}\n' \
  > "$out/config_compose/interpolation.bin"

du -sh "$out"
