# The Python wheel (issue 32; docs/python.md): the wheel `pip install .` builds, built here with
# maturin from PyPI in a build venv and installed into a fresh venv; the installed `rlprof`
# command (`--version`, `train`, `report`, `analyse --cluster`) on a synthetic collection and on
# a real torch_npu DB tree; then pytest (crates/rlprof-py/tests) from that venv, the external
# tests included: the real fixtures (RLPROF_FIXTURES) and HolisticTraceAnalysis, which runs in
# /opt/rlprof-venv (installed by 10-consumers.sh, checked by 50-hta-real.sh).
# Kept between runs: the build venv (/opt/rlprof-maturin-venv), pip's cache
# (/opt/rlprof-pip-cache: maturin, pandas and pytest are not downloaded again) and the cargo
# target directory (CARGO_TARGET_DIR, shared with the steps above: the wheel is a release build
# of crates that `cargo test --release` has built, so most of it is reused).
# In a subshell: the venvs' environment stays out of later parts.
(
  wheel_t0=$(date +%s)
  export PIP_CACHE_DIR=${PIP_CACHE_DIR:-/opt/rlprof-pip-cache} PIP_DISABLE_PIP_VERSION_CHECK=1
  build_venv=${RLPROF_MATURIN_VENV:-/opt/rlprof-maturin-venv}
  if [ ! -x "$build_venv/bin/python" ]; then
    python3 -m venv "$build_venv"
  fi
  "$build_venv/bin/pip" install -q 'maturin>=1.7,<2'
  work=$(mktemp -d)
  "$build_venv/bin/maturin" build --release --out "$work/wheels"
  python3 -m venv "$work/venv"
  "$work/venv/bin/pip" install -q "$work"/wheels/rlprof-*.whl pytest
  rl="$work/venv/bin/rlprof"
  "$rl" --version
  "$work/venv/bin/python" -c 'import rlprof; print("import rlprof", rlprof.__version__, rlprof.__file__)'
  RUST_LOG=warn "$rl" train --quiet global_profiler.save_path="$work/prof" global_profiler.steps=[2,3] \
    trainer.total_training_steps=3 trainer.sft_warmup_steps=2 trainer.n_gpus_per_node=2 \
    trainer.default_local_dir="$work/ckpt" data.train_batch_size=4 \
    actor_rollout_ref.actor.ppo_mini_batch_size=2 actor_rollout_ref.rollout.n=2 \
    actor_rollout_ref.model.hidden_size=32 actor_rollout_ref.model.num_hidden_layers=2 \
    actor_rollout_ref.model.intermediate_size=64
  "$rl" report "$work/prof" -o "$work/report.html"
  "$rl" report "$work/prof" --format json >"$work/report.json"
  "$rl" analyse --cluster "$work/prof"
  test -s "$work/prof/cluster_analysis/cluster_analysis.json"
  # A real torch_npu tree (read-only fixtures: analyse writes cluster_analysis/, so a copy).
  cp -R "$RLPROF_FIXTURES/real/msinsight_pytorch/db/level1" "$work/npu" && chmod -R u+w "$work/npu"
  "$rl" report "$work/npu" --format text >/dev/null
  "$rl" analyse --cluster "$work/npu"
  "$work/venv/bin/python" docs/examples/notebook.py "$work/prof" "$work/notebook.html"
  (
    cd crates/rlprof-py/tests
    RLPROF_HTA_PYTHON=/opt/rlprof-venv/bin/python "$work/venv/bin/python" -m pytest -q -p no:cacheprovider --external
  )
  rm -rf "$work"
  echo "wheel build, install and tests: $(($(date +%s) - wheel_t0)) s"
)
