"""The benchmarks' own code paths, end to end on one small case, so that a refactor cannot break
them silently (bench/suite.py crashed before upstream's flow for a whole round, unseen)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from conftest import MISSING, in_checkout

BENCH = in_checkout("bench")

pytestmark = pytest.mark.skipif(MISSING is not None, reason=f"the benchmarks run firmware: {MISSING}")


@pytest.mark.slow
def test_the_suite_benchmark_runs_cortexm_and_upstreams_flow(runners):
    """`bench/suite.py` on linear_no_bias and upstream's add tests, the runners of the session's build
    cache: every row it exists to print, cortexm cold and warm and upstream's flow."""
    builds = runners["cortex-m7"].build_dir.parent  # the session's runner build cache
    done = subprocess.run([sys.executable, str(BENCH / "suite.py"), "-t", "cortex-m7", "-k", "linear_no_bias", "-j", "1",
                           "--upstream-k", "test_add and implementation", "--builds", str(builds)],
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-1500:]
    for row in ("cortexm cold", "cortexm built", "cortexm warm", "upstream ("):  # the per-program table, both flows
        assert f"cortex-m7   {row}" in done.stdout, done.stdout
    assert "cortex-m7   cold: 1 PASS" in done.stdout and "cortex-m7   upstream: " in done.stdout, done.stdout


@pytest.mark.slow
def test_the_suite_benchmark_runs_every_core_in_one_run(runners):
    """`bench/suite.py --together`: one cortexm run for the M7 and the M55, as the README's main job."""
    builds = runners["cortex-m7"].build_dir.parent
    done = subprocess.run([sys.executable, str(BENCH / "suite.py"), "-t", "cortex-m7", "-t", "cortex-m55", "--together",
                           "-k", "linear_no_bias", "-j", "1", "--no-upstream", "--builds", str(builds)],
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-1500:]
    for row in ("cortexm cold", "cortexm built", "cortexm warm"):  # the per-program table: both cores' 2 programs
        assert re.search(rf"^m7\+m55 +{row} +2 ", done.stdout, re.M), done.stdout
    assert "m7+m55      cold: 2 PASS" in done.stdout, done.stdout


@pytest.mark.slow
def test_the_loop_benchmark_runs_its_steps(runners, tmp_path):
    """`bench/loop.py` cold, warm and a comment edit of the tree, on linear_no_bias."""
    from cortexm import sources

    tree = sources.locate(sources.EXECUTORCH).path
    builds = runners["cortex-m7"].build_dir.parent
    out = tmp_path / "loop.json"
    done = subprocess.run([sys.executable, str(BENCH / "loop.py"), "--executorch-src", str(tree), "-t", "cortex-m7",
                           "-k", "linear_no_bias", "--no-upstream", "--work", str(tmp_path / "work"), "--builds", str(builds),
                           "--steps", "cold,warm,comment edit", "--json", str(out)],
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-1500:]
    rows = {r["step"]: r for r in json.loads(out.read_text())}
    assert list(rows) == ["cold", "warm", "comment edit"]
    assert all(r["exit"] == 0 and r["programs"] >= 1 for r in rows.values()), rows
    assert rows["warm"]["remembered"] == rows["warm"]["programs"], "the warm run ran a simulator again"
