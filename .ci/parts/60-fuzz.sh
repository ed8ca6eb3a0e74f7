# Fuzzing (docs/fuzzing.md): each cargo-fuzz target of fuzz/ runs for FUZZ_SECONDS (60) from a
# copy of its committed seed corpus (fuzz/corpus/<target>/), so that the repository is not
# modified; any crash, timeout (30 s on one input) or out-of-memory (2 GiB) fails CI, with the
# input kept under the printed directory. A fixed seed (FUZZ_SEED, 1): a CI run repeats a sequence
# of inputs that was run clean for longer before landing, so a red CI means a regression, not a
# new find of a long-running hunt; hunting for new crashes is done with other seeds (docs/fuzzing.md).
# Stable Rust: `-s none` (no sanitizer; AddressSanitizer needs nightly). libFuzzer's coverage
# instrumentation and `--cfg fuzzing` are stable codegen options.
if ! command -v cargo-fuzz >/dev/null; then
  cargo install cargo-fuzz --locked
fi
fuzz_seconds=${FUZZ_SECONDS:-60}
fuzz_tmp=$(mktemp -d)
(
  cd fuzz
  cargo fuzz build -s none
  for target in $(cargo fuzz list); do
    mkdir -p "$fuzz_tmp/corpus/$target" "$fuzz_tmp/artifacts/$target"
    if [ -d "corpus/$target" ]; then
      cp -R "corpus/$target/." "$fuzz_tmp/corpus/$target/"
    fi
    echo "--- fuzz $target (${fuzz_seconds}s)"
    if ! cargo fuzz run -s none "$target" "$fuzz_tmp/corpus/$target" -- \
      -seed="${FUZZ_SEED:-1}" -max_total_time="$fuzz_seconds" -rss_limit_mb=2048 -timeout=30 \
      -artifact_prefix="$fuzz_tmp/artifacts/$target/" -print_final_stats=1; then
      echo "fuzz target $target failed; its input is under $fuzz_tmp/artifacts/$target" >&2
      false
    fi
  done
)
rm -rf "$fuzz_tmp"
