# The report's device figures (temporal breakdown, comm/comp overlap, kernel types) against
# HolisticTraceAnalysis on the real GPU trace in shared/fixtures/real (HTA is installed in
# /opt/rlprof-venv by 10-consumers.sh). crates/rlprof-report/tests/hta.rs, ignored test run by name.
export RLPROF_VENV=${RLPROF_VENV:-/opt/rlprof-venv}
if ! "$RLPROF_VENV/bin/python" -c 'import hta' 2>/dev/null; then
  "$RLPROF_VENV/bin/pip" install -q HolisticTraceAnalysis
fi
cargo test --release -p rlprof-report --test hta -- --ignored
