"""Fixtures of the Python tests, run with pytest from the installed wheel (.ci/parts/70-wheel.sh).

The `rlprof` command under test is the one installed beside this Python (the wheel's console
script), never a cargo build. Tests marked `external` need what a fresh clone does not have
(`RLPROF_FIXTURES`: the real third-party profiles; `RLPROF_HTA_PYTHON`: a Python with
HolisticTraceAnalysis). They are deselected unless pytest is given `--external` (as Rust's
ignored tests are run by name), and then fail, not skip, when what they need is missing.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def pytest_addoption(parser):
    parser.addoption("--external", action="store_true", help="also run the tests marked external")


def pytest_configure(config):
    config.addinivalue_line("markers", "external: needs RLPROF_FIXTURES (and RLPROF_HTA_PYTHON for HTA)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--external"):
        return
    keep, drop = [], []
    for item in items:
        (drop if item.get_closest_marker("external") else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session")
def rlprof_exe() -> Path:
    """The installed console script (beside this interpreter)."""
    exe = Path(sys.executable).parent / "rlprof"
    assert exe.is_file(), f"{exe}: the wheel's rlprof command is not installed beside {sys.executable}"
    return exe


def run_cli(exe: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run([str(exe), *args], capture_output=True, text=True, env={**os.environ, "RUST_LOG": "warn"})
    if check:
        assert p.returncode == 0, f"rlprof {' '.join(args)}: exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p


def cli_json(exe: Path, path: Path) -> dict:
    """`rlprof report PATH --format json`, from the installed command."""
    return json.loads(run_cli(exe, "report", str(path), "--format", "json").stdout)


@pytest.fixture(scope="session")
def collection(rlprof_exe, tmp_path_factory) -> Path:
    """A synthetic 2-rank collection: `rlprof train` at the tiny configuration, profiling steps
    2 and 3 end-to-end with the npu tool, memory included (parsed automatically)."""
    root = tmp_path_factory.mktemp("train")
    run_cli(
        rlprof_exe,
        "train",
        "--quiet",
        f"global_profiler.save_path={root / 'prof'}",
        "global_profiler.steps=[2,3]",
        "trainer.total_training_steps=3",
        "trainer.sft_warmup_steps=2",
        "trainer.n_gpus_per_node=2",
        f"trainer.default_local_dir={root / 'ckpt'}",
        "data.train_batch_size=4",
        "actor_rollout_ref.actor.ppo_mini_batch_size=2",
        "actor_rollout_ref.rollout.n=2",
        "actor_rollout_ref.model.hidden_size=32",
        "actor_rollout_ref.model.num_hidden_layers=2",
        "actor_rollout_ref.model.intermediate_size=64",
        "actor_rollout_ref.actor.profiler.tool_config.npu.contents=[npu,cpu,memory]",
    )
    return root / "prof"


@pytest.fixture(scope="session")
def real_fixtures() -> Path:
    """`$RLPROF_FIXTURES/real` (CI: ../shared/fixtures beside the checkout)."""
    root = os.environ.get("RLPROF_FIXTURES")
    assert root, "RLPROF_FIXTURES is not set (the directory holding real/)"
    real = Path(root) / "real"
    assert real.is_dir(), f"{real} is missing"
    return real
