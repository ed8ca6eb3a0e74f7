# verl 0.9.1's precision_debugger tool: msprobe (PyPI mindstudio-probe) reads and compares the
# dumps `rlprof train global_profiler.tool=precision_debugger` writes
# (crates/rlprof-cli/tests/precision_debugger.rs, ignored tests run by name): rank 0 against
# rank 1, and ours against the golden dump msprobe's own PrecisionDebugger makes of our PyTorch
# reference model (scripts/torch_reference_model.py) on the same weights and inputs. The venv holds
# torch 2.15.0 (full install with its dependencies, ~5 GB; cached at /opt/rlprof-torch-venv and
# reused), mindstudio-probe 26.2 and safetensors.
export RLPROF_MSPROBE_VENV=${RLPROF_MSPROBE_VENV:-/opt/rlprof-torch-venv}
if [ ! -x "$RLPROF_MSPROBE_VENV/bin/python" ]; then
  python3 -m venv "$RLPROF_MSPROBE_VENV"
fi
if ! "$RLPROF_MSPROBE_VENV/bin/python" -c 'import torch, msprobe, safetensors' 2>/dev/null; then
  "$RLPROF_MSPROBE_VENV/bin/pip" install -q torch==2.15.0 mindstudio-probe==26.2.0 safetensors numpy
fi
cargo test --release -p rlprof-cli --test precision_debugger -- --ignored --exact \
  msprobe_compare_matches_every_api_of_rank0_against_rank1
cargo test --release -p rlprof-cli --test precision_debugger -- --ignored --exact --nocapture \
  msprobe_compare_matches_our_dump_against_a_pytorch_reference_golden_dump
