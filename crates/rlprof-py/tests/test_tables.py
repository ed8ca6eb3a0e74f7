"""`rlprof.load`'s DataFrames hold the figures of `rlprof report --format json` (the installed
command), on a synthetic collection written by the installed `rlprof train`."""

import json
import subprocess
import sys

import pandas as pd
import pytest

import rlprof
from conftest import REPO, cli_json, run_cli
from tables_oracle import assert_report_equals, same_cell


def test_version_is_the_commands(rlprof_exe):
    out = run_cli(rlprof_exe, "--version").stdout.strip()
    assert out == f"rlprof {rlprof.__version__}"


def test_usage_error_exit_code(rlprof_exe):
    p = run_cli(rlprof_exe, "no-such-command", check=False)
    assert p.returncode == 2, p
    assert "unrecognized subcommand" in p.stderr


def test_load_is_report_json(rlprof_exe, collection):
    want = cli_json(rlprof_exe, collection)
    r = rlprof.load(collection)
    assert r.json == want
    cells = assert_report_equals(r, want)
    assert cells > 1000, cells
    # What the collection holds: 2 ranks, steps 2 and 3, memory, collectives.
    assert sorted(r.device["rank"]) == [0, 1]
    assert sorted(set(r.steps["step"])) == ["2", "3"]
    assert len(r.memory) == 4 and len(r.comm) > 0


def test_named_views_are_the_json(rlprof_exe, collection):
    j = cli_json(rlprof_exe, collection)
    r = rlprof.load(collection)
    ranks = [(job["id"], rank) for job in j["jobs"] for rank in job["ranks"]]
    dev, tb, ov = r.device, r.get_temporal_breakdown(), r.get_comm_comp_overlap()
    assert len(dev) == len(tb) == len(ov) == len(ranks) == 2
    for i, (job, rank) in enumerate(ranks):
        for k, v in rank["device"].items():
            assert dev[k].iloc[i] == v
        t = rank["temporal"]
        assert tb["rank"].iloc[i] == rank["rank"] and tb["job"].iloc[i] == job
        assert tb["idle_time(us)"].iloc[i] == t["idle_ns"] / 1e3
        assert tb["compute_time(us)"].iloc[i] == t["compute_ns"] / 1e3
        assert tb["non_compute_time(us)"].iloc[i] == t["non_compute_ns"] / 1e3
        assert tb["kernel_time(us)"].iloc[i] == t["total_ns"] / 1e3
        assert tb["idle_time_pctg"].iloc[i] == t["idle_pct"]
        assert tb["compute_time_pctg"].iloc[i] == t["compute_pct"]
        assert tb["non_compute_time_pctg"].iloc[i] == t["non_compute_pct"]
        assert ov["comp_comm_overlap_pctg"].iloc[i] == rank["overlap"]["ratio"] * 100.0
    kb = r.get_gpu_kernel_breakdown()
    want = [(rank["rank"], k["kind"], k["count"], k["sum_ns"] / 1e3, k["pct"]) for _, rank in ranks for k in rank["kernel_types"]]
    got = list(zip(kb["rank"], kb["kernel_type"], kb["count"], kb["sum"], kb["percentage"]))
    assert got == want
    # Per-step roles and the slowest rank.
    b = j["breakdown"]
    roles = r.roles
    assert list(roles["rollout_ns"]) == [x["rollout_ns"] for x in b]
    assert list(roles["log_prob_ns"]) == [x["log_prob_ns"] for x in b]
    assert list(roles["update_ns"]) == [x["update_ns"] for x in b]
    assert list(roles["step_ns"]) == [x["step_ns"] for x in b]
    slow = r.slowest_rank
    assert list(zip(slow["step"], slow["rank"])) == [(x["step"], x["rank"]) for x in b if x["slowest"]]
    assert len(slow) == 2  # one per profiled step
    # Communication with bandwidth, memory peak and timeline.
    bw = list(r.comm["bandwidth_gbps"])
    assert len(bw) == len(j["comm"]) and any(c["bandwidth_gbps"] for c in j["comm"])
    assert all(same_cell(got, c["bandwidth_gbps"]) for got, c in zip(bw, j["comm"]))
    assert list(r.memory["peak_bytes"]) == [m["peak_bytes"] for m in j["memory"]]
    tl = r.memory_timeline
    assert len(tl) == sum(len(m["curve"]) for m in j["memory"])
    assert list(zip(tl["t_ns"], tl["bytes"])) == [tuple(p) for m in j["memory"] for p in m["curve"]]
    peak = tl.groupby("profile")["bytes"].max()
    for m in j["memory"]:
        assert peak[m["profile"]] <= m["peak_bytes"]  # the curve's points never pass the peak
    kinds = set(r.kernels["kind"])
    assert kinds <= {"kernel", "comm", "memcpy"} and kinds, kinds


def test_new_tables_appear_without_python_changes():
    """A table the report gains later (at the top level, per rank, nested) is a DataFrame."""
    j = {
        "jobs": [
            {
                "id": "job1",
                "world_size": 1,
                "ranks": [
                    {
                        "rank": 0,
                        "device": {"kernel_ns": 5},
                        "cann": {"computing_ns": 7, "free_ns": None},
                        "stages": [{"step": 1, "stage_ns": 3}, {"step": 2, "stage_ns": 4}],
                    }
                ],
            }
        ],
        "step_trace": [{"job": "job1", "rank": 0, "step": 1, "bubble_ns": 11, "parts": [{"name": "a", "ns": 1}]}],
        "notes": ["n"],
    }
    r = rlprof.Report(j)
    assert set(r.tables) == {"jobs", "ranks", "ranks.stages", "step_trace", "step_trace.parts"}
    assert r.tables["ranks"]["cann.computing_ns"].tolist() == [7]
    assert r.tables["ranks"]["cann.free_ns"].isna().all()
    st = r.tables["ranks.stages"]
    assert st.columns.tolist() == ["job", "rank", "step", "stage_ns"]
    assert st["stage_ns"].tolist() == [3, 4] and st["job"].tolist() == ["job1", "job1"]
    assert r.tables["step_trace.parts"].columns.tolist() == ["job", "rank", "step", "name", "ns"]
    assert assert_report_equals(r, j) > 0
    assert r.notes == ["n"]


def test_nullable_integers_stay_exact():
    big = 2**53 + 1  # not representable as float64
    r = rlprof.Report({"comm": [{"bytes": big, "wait_ns": None}, {"bytes": None, "wait_ns": 3}]})
    c = r.tables["comm"]
    assert str(c["bytes"].dtype) == "Int64" and c["bytes"].iloc[0] == big
    assert pd.isna(c["bytes"].iloc[1]) and c["wait_ns"].iloc[1] == 3


def test_report_writes_the_page(collection, tmp_path):
    out = rlprof.report(collection, out=tmp_path / "r.html")
    assert out == tmp_path / "r.html"
    page = out.read_text()
    assert page.lstrip().lower().startswith("<!doctype html") and "</html>" in page
    size = out.stat().st_size
    with pytest.raises(RuntimeError, match="exists"):
        rlprof.report(collection, out=out)
    rlprof.report(collection, out=out, force=True)
    assert out.stat().st_size > 0
    raw = next(collection.rglob("rlprof_raw"))
    with pytest.raises(RuntimeError, match="raw data"):
        rlprof.report(collection, out=raw / "r.html", force=True)
    assert not (raw / "r.html").exists()
    assert size > 1000


def test_load_error_is_an_exception(tmp_path):
    with pytest.raises(RuntimeError):
        rlprof.load(tmp_path / "nothing-here")


def test_cli_report_and_cluster_from_the_venv(rlprof_exe, collection, tmp_path):
    out = tmp_path / "cli.html"
    run_cli(rlprof_exe, "report", str(collection), "-o", str(out))
    assert out.stat().st_size > 1000
    text = run_cli(rlprof_exe, "report", str(collection), "--format", "text").stdout
    assert "rank" in text
    p = run_cli(rlprof_exe, "analyse", "--cluster", str(collection))
    cj = json.loads((collection / "cluster_analysis" / "cluster_analysis.json").read_text())
    assert cj, p.stdout


def test_notebook_example_runs(collection, tmp_path):
    """docs/examples/notebook.py, as docs/python.md shows it."""
    script = REPO / "docs" / "examples" / "notebook.py"
    p = subprocess.run(
        [sys.executable, str(script), str(collection), str(tmp_path / "nb.html")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "temporal breakdown" in p.stdout and "slowest rank" in p.stdout
    assert (tmp_path / "nb.html").stat().st_size > 1000


def test_module_is_the_installed_wheel():
    """These tests hold the installed wheel, never the source tree's python/ folder."""
    from pathlib import Path

    assert REPO not in Path(rlprof.__file__).resolve().parents, rlprof.__file__
    assert Path(rlprof.__file__).with_name("py.typed").is_file()
    assert Path(rlprof.__file__).with_name("_native.pyi").is_file()
