# The Ascend profiler DB layout read by msprof-analyze's DB mode
# (crates/rlprof-export/tests/ascend_db_consumers.rs, ignored tests run by name).
# Runs after 10-consumers.sh, which installs msprof-analyze into /opt/rlprof-venv.
if [ ! -x /opt/rlprof-venv/bin/msprof-analyze ]; then
  python3 -m venv /opt/rlprof-venv
  /opt/rlprof-venv/bin/pip install -q msprof-analyze
fi
export RLPROF_VENV=/opt/rlprof-venv
cargo test --release -p rlprof-export --test ascend_db_consumers -- --ignored
