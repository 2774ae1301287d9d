"""The performance gate (`cortexm test --baseline`): a kernel change that costs instructions is
reported with the call that grew and the ratio, a speed-up too, and the same tree twice gives
no report at all (QEMU's instruction counts are exact)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cortexm.report import writers as reports
from cortexm.testing import app, perf

SLOW_DISPATCH = Path(__file__).resolve().parents[1] / "firmware_perturbation" / "slow_pointwise_dispatch.c"


def _result(case="c", core="cortex-m7", instructions=1000, calls=None, status="PASS"):
    from cortexm.report.results import Run

    return app.CaseResult(case, core, status=status, run=Run(
        instructions=instructions,
        calls=calls if calls is not None else [[1, "cortex_m::quantize_per_tensor", 100], [2, "cortex_m::quantized_conv2d", 800],
                                               [3, "cortex_m::dequantize_per_tensor", 100]]))


def _report(*results) -> dict:
    return json.loads(reports.to_json(list(results), [], {"runners": {}}))


def test_a_slowdown_names_the_call_that_grew_and_fails():
    base = _report(_result())
    slower = _result(instructions=1300, calls=[[1, "cortex_m::quantize_per_tensor", 100],
                                               [2, "cortex_m::quantized_conv2d", 1100],
                                               [3, "cortex_m::dequantize_per_tensor", 100]])
    [change] = perf.gate([slower], base, 0.05)
    assert change.failed and slower.status == perf.SLOWER and slower.failed
    assert change.line == ("SLOWER c cortex-m7: 1,000 -> 1,300 instructions (+30.0%); most in call 2 "
                           "cortex_m::quantized_conv2d: 800 -> 1,100 (+37.5%)")


def test_a_speedup_is_reported_not_failed_and_small_changes_are_quiet():
    base = _report(_result())
    faster = _result(instructions=900, calls=[[1, "cortex_m::quantize_per_tensor", 100],
                                              [2, "cortex_m::quantized_conv2d", 700],
                                              [3, "cortex_m::dequantize_per_tensor", 100]])
    [change] = perf.gate([faster], base, 0.05)
    assert not change.failed and faster.status == perf.FASTER and not faster.failed
    assert "most in call 2 cortex_m::quantized_conv2d: 800 -> 700" in change.line
    assert perf.gate([_result(instructions=1040)], base, 0.05) == []


def test_a_changed_program_is_blamed_by_operator():
    base = _report(_result())
    other = _result(instructions=2000, calls=[[1, "cortex_m::quantize_per_tensor", 100], [2, "cortex_m::pad", 300],
                                              [3, "cortex_m::quantized_conv2d", 1500],
                                              [4, "cortex_m::dequantize_per_tensor", 100]])
    [change] = perf.gate([other], base, 0.05)
    assert "most in cortex_m::quantized_conv2d (all its calls): 800 -> 1,500" in change.line


def test_runner_growth_fails_and_the_threshold_parses():
    base = {"results": [], "meta": {"runners": {"cortex-m7": {"flash": 100_000, "ram": 1_000}}}}
    [change] = perf.size_gate({"cortex-m7": {"flash": 110_000, "ram": 1_000}}, base, 0.05)
    assert change.failed and change.line == "LARGER cortex-m7 runner flash: 100,000 -> 110,000 B (+10.0%)"
    assert perf.parse_threshold("5%") == 0.05 and perf.parse_threshold("0.1") == 0.1
    from cortexm.base.errors import CortexmError

    with pytest.raises(CortexmError, match="percentage"):
        perf.parse_threshold("fast")


def _run(runner, core, pattern):
    from cortexm.testing.simulate import RunnerSimulator

    options = app.Options(cores=[core], pattern=pattern, simulators={core.name: RunnerSimulator(core, "qemu", runner)},
                          memory=False)
    return app.run(options)


def test_a_kernel_that_lost_its_fast_path_is_reported(runners):
    """An M7 runner whose CMSIS-NN sends pointwise convolutions to the generic 1x1 kernel instead
    of the fast one: every output stays bit-exact, and the gate reports the convolution's call
    with its ratio; the unchanged runner run twice reports nothing."""
    from cortexm.base.targets import core
    from cortexm.firmware import BuildOptions, build_runner

    m7 = core("cortex-m7")
    first = _run(runners["cortex-m7"], m7, "conv2d_1x1")
    again = _run(runners["cortex-m7"], m7, "conv2d_1x1")
    base = _report(*first)
    assert all(r.status == "PASS" and r.run.calls for r in first)
    assert perf.gate(again, base, 0.0) == []  # exact counts: not even a 0 % threshold reports anything

    slow = build_runner(m7, options=BuildOptions(extra_sources=(str(SLOW_DISPATCH),),
                                                 link_options=("-Wl,--wrap=arm_convolve_wrapper_s8",)))
    slower = _run(slow, m7, "conv2d_1x1")
    assert all(r.compare.max_lsb == 0 for r in slower)  # bit-exact still
    changes = perf.gate(slower, base, 0.05)
    assert changes and all(c.failed for c in changes)
    assert all("most in call " in c.line and "cortex_m::quantized_conv2d" in c.line for c in changes), changes
