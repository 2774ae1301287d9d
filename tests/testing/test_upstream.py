"""`cortexm upstream-tests`: ExecuTorch's own cortex_m tests, their FVP runs routed to this
project's runner on QEMU, with pytest's verdicts, a merged JUnit report and the runner used."""

from __future__ import annotations

import json
import subprocess
import sys

from junitparser import JUnitXml

from cortexm.testing import upstream


def test_upstream_add_tests_on_the_m7(runners, tmp_path):
    report, junit = tmp_path / "report.json", tmp_path / "junit.xml"
    result = subprocess.run([sys.executable, "-m", "cortexm", "upstream-tests", "-t", "cortex-m7",
                             "-k", "test_add and implementation", "--out", str(tmp_path / "out"),
                             "--json", str(report), "--junit", str(junit)],
                            capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stdout + result.stderr
    m7 = json.loads(report.read_text())["cores"]["cortex-m7"]
    # Every upstream add implementation test ran on the runner: programs went through QEMU.
    assert m7["passed"] > 10 and m7["failed"] == 0 and m7["errors"] == 0
    assert m7["stats"]["programs"] >= m7["passed"]
    assert "cortex_m::quantized_add.out" in m7["stats"]["ops"]
    [suite] = JUnitXml.fromfile(str(junit))
    assert suite.name == "cortex-m7" and suite.tests == m7["passed"] + m7["xfailed"] + m7["skipped"]
    assert f"cortex-m7 runner: {m7['stats']['runner']}" in result.stdout


def test_runner_ops_include_upstreams_list_and_the_suites():
    from cortexm import sources
    from cortexm.firmware.ops import suite_ops

    tree = sources.locate(sources.EXECUTORCH).path
    if tree is None:
        import pytest

        pytest.skip(sources.missing_message(sources.EXECUTORCH))
    ops = upstream.runner_ops(tree)
    assert set(suite_ops()) <= set(ops)
    assert {"aten::cat.out", "aten::amax.out", "cortex_m::quantized_div.out"} <= set(ops)  # build_test_runner.sh's


def test_an_operator_the_tree_has_no_kernel_for_stays_out_of_the_runner(runners):
    """A test calling an operator the tree lacks fails alone: the next program's runner is built
    without it (once, every later build failed the same way)."""
    import pytest

    from cortexm.base.errors import CortexmError

    routing = upstream.Routing("cortex-m7", "qemu")
    before = set(routing.ops)
    with pytest.raises(CortexmError, match="no_such_op.out: no kernel"):
        routing.runner({"cortex_m::no_such_op.out"})
    assert routing.ops == before
    assert "cortex_m::no_such_op.out" not in routing.runner({"aten::sub.out"}).ops
