"""`rlprof.load` on the real third-party profiles (`$RLPROF_FIXTURES/real`, see PROVENANCE.md
there): every DataFrame holds the figures `rlprof report --format json` gives for the same path.
Marked external: run by .ci/parts/70-wheel.sh with `--external`."""

import pytest

import rlprof
from conftest import cli_json
from tables_oracle import assert_report_equals

REAL = [
    "hta_cpu_only",
    "hta_negative_queue_16w",
    "ascend_mstt_trace_view",
    "torch_cpu_withstack",
    "msinsight_pytorch/db/level0",
    "msinsight_pytorch/db/level1",
    "msinsight_pytorch/db/level2",
    "msinsight_pytorch/text/level0",
    "msinsight_pytorch/text/level1",
    "msinsight_pytorch/text/level2",
]


@pytest.mark.external
@pytest.mark.parametrize("name", REAL)
def test_real_profile_tables_are_report_json(rlprof_exe, real_fixtures, name):
    path = real_fixtures / name
    assert path.exists(), f"{path} is missing"
    want = cli_json(rlprof_exe, path)
    r = rlprof.load(path)
    assert r.json == want
    assert assert_report_equals(r, want) > 0
    assert len(r.inputs) > 0
    # CANN's step figures under step_trace_time.csv's names: the JSON's ns / 1000.
    st, cann = r.get_step_trace_time(), want.get("cann_steps", [])
    assert len(st) == len(cann)
    for i, row in enumerate(cann):
        assert st["rank"].iloc[i] == row["rank"] and st["Step"].iloc[i] == row["step"]
        assert st["Computing"].iloc[i] == row["computing_ns"] / 1e3
        assert st["Communication(Not Overlapped)"].iloc[i] == row["communication_not_overlapped_ns"] / 1e3
        assert st["Free"].iloc[i] == row["free_ns"] / 1e3
    if name.startswith("msinsight_pytorch"):
        assert len(st) == 2, st  # one profiled step on each of the 2 ranks
    # Device figures exist wherever the profile has device events.
    if any(rank["device"]["events"] for job in want["jobs"] for rank in job["ranks"]):
        tb = r.get_temporal_breakdown()
        assert (tb["kernel_time(us)"] > 0).all()
