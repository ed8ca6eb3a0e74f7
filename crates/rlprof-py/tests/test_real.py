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
    # Device figures exist wherever the profile has device events.
    if any(rank["device"]["events"] for job in want["jobs"] for rank in job["ranks"]):
        tb = r.get_temporal_breakdown()
        assert (tb["kernel_time(us)"] > 0).all()
