# Export consumers: msprof-analyze and HolisticTraceAnalysis read our npu / torch outputs
# (crates/rlprof-export/tests/consumers.rs, ignored tests run by name).
if [ ! -x /opt/rlprof-venv/bin/python ]; then
  python3 -m venv /opt/rlprof-venv
fi
/opt/rlprof-venv/bin/pip install -q msprof-analyze HolisticTraceAnalysis
export RLPROF_VENV=/opt/rlprof-venv
cargo test --release -p rlprof-export --test consumers -- --ignored
