"""A kernel off by one step is caught twice: by the 0-LSB comparison with the integer
reference, and by the cross-core check (which a 1-LSB tolerance alone let through); the
sweep's sampling and shrinking are deterministic."""

from __future__ import annotations

from pathlib import Path

import pytest

from cortexm.cases import space as op_spaces
from cortexm.pte import tensors
from cortexm.testing import app, casefiles, crosscore

PERTURBATION = Path(__file__).resolve().parents[1] / "firmware_perturbation" / "off_by_one_convolve.c"


def test_off_by_one_kernel_is_caught_by_the_reference_and_across_cores(runners):
    """An M7 runner whose CMSIS-NN conv is off by one step on one element fails the 0-LSB
    comparison with the integer reference, and the same case on the M55 disagrees with it."""
    from cortexm.base.targets import core
    from cortexm.firmware import BuildOptions, build_runner
    from cortexm.testing.simulate import RunnerSimulator, simulators

    m7, m55 = core("cortex-m7"), core("cortex-m55")
    perturbed = BuildOptions(extra_sources=(str(PERTURBATION),), link_options=("-Wl,--wrap=arm_convolve_wrapper_s8",))
    runner = build_runner(m7, options=perturbed)
    sims = simulators([m55], "qemu", None, None, progress=lambda _: None)
    sims[m7.name] = RunnerSimulator(m7, "qemu", runner)
    options = app.Options(cores=[m7, m55], pattern="conv2d_1x1", simulators=sims)
    results = app.run(options)

    assert {r.core: r.status for r in results} == {"cortex-m7": "FAIL", "cortex-m55": "PASS"}
    m7_result = next(r for r in results if r.core == "cortex-m7")
    assert m7_result.compare.max_lsb == 1 and m7_result.compare.mismatches == 1
    assert m7_result.failures == [("compare", "max |diff| 1 LSB > tolerance 0 LSB (1/288 elements differ)")]
    [check] = crosscore.cross_core(results, {c.name: c for c in app.select_cases(options)})
    assert check.failed
    assert check.line().startswith("FAIL conv2d_1x1: cores disagree [cortex-m7 | cortex-m55]; first at output 0[")


def test_cross_core_groups_and_first_difference():
    import numpy as np

    a = [np.array([[1, 2], [3, 4]], dtype=np.int8)]
    b = [np.array([[1, 2], [3, 5]], dtype=np.int8)]
    result = crosscore.check("x", {"cortex-m3": a, "cortex-m7": a, "cortex-m55": b})
    assert result.groups == [["cortex-m3", "cortex-m7"], ["cortex-m55"]]
    assert result.first_difference == "output 0[1, 1]: cortex-m3 4, cortex-m55 5 (1 elements differ)"
    assert crosscore.check("x", {"cortex-m3": a, "cortex-m55": a}).agree
    assert not crosscore.check("x", {"cortex-m3": a, "cortex-m55": b}, expected="by design").failed


def _rows(m7, m55, m55_without_helium):
    from cortexm.report.results import Compare

    rows = [app.CaseResult("q", "cortex-m7", compare=Compare(max_lsb=0.0, outputs=m7)),
            app.CaseResult("q", "cortex-m55", compare=Compare(max_lsb=0.0, outputs=m55, without_helium=m55_without_helium))]
    [check] = crosscore.cross_core(rows, {})
    return check


def test_the_helium_rounding_excuses_only_a_difference_it_makes():
    """Each core as its own integer reference predicts is not enough: the known M55 quantize
    rounding excuses a difference only when the M55's reference with the scalar loop's rounding
    agrees with the other core; any other M55-only difference (a wrong kernel_sum that only the
    MVE linear reads, say) fails."""
    import numpy as np

    m7 = [np.array([[1, 2, 3]], dtype=np.int8)]
    m55 = [np.array([[1, 2, 4]], dtype=np.int8)]
    excused = _rows(m7, m55, tensors.digests(m7))
    assert not excused.failed and excused.expected.startswith("quantize_per_tensor rounds differently on MVE")
    other = _rows(m7, m55, tensors.digests(m55))
    assert other.failed and other.predicted
    assert other.line().endswith("they disagree without ExecuTorch's Helium loops too)")
    none_recorded = _rows(m7, m55, None)  # an export without the record: nothing excuses it
    assert none_recorded.failed


@pytest.fixture
def own_registry(monkeypatch):
    """The case registry is process-wide: keep a test's cases out of the others' view."""
    from cortexm import cases
    from cortexm.cases import registry

    cases.all_cases()
    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))
    monkeypatch.setattr(casefiles, "_FILE_CASES", dict(casefiles._FILE_CASES))


@pytest.mark.parametrize("op", sorted(op_spaces.SPACES))
def test_sweep_samples_are_seeded_valid_and_shrink(op):
    first, again, other = op_spaces.draw(op, 3, 12), op_spaces.draw(op, 3, 12), op_spaces.draw(op, 4, 12)
    assert first == again and first != other
    space = op_spaces.space(op)
    for params in first:
        assert space.valid(params)
        module, inputs = op_spaces.build_sample(op, params)
        module(*inputs)  # a real model that runs
        for candidate in op_spaces.smaller(op, params):
            assert space.valid(candidate) and candidate["seed"] == params["seed"] and candidate != params


def test_reproducer_file_registers_a_runnable_case(tmp_path, own_registry):
    params = op_spaces.draw("transpose_conv2d", 5, 1)[0]
    path = tmp_path / "repro.py"
    path.write_text(op_spaces.case_file([("repro_x", "transpose_conv2d", params)], "a header\nline two"))
    app.load_case_file(path)
    from cortexm.cases import get

    case = get("repro_x")
    module, inputs = case.build()
    assert list(module(*inputs).shape)[:2] == [1, params["cout"]]
    assert bool(case.known_failures) == (params["pad"][0] % params["stride"][0] != 0)


def test_a_sample_registered_from_data_is_keyed_by_its_data(own_registry):
    """As the sweep's process and each export worker register it: the same data twice is one
    case and one key; the same name with other data is another model under another key."""
    from cortexm import cases
    from cortexm.testing import cache

    first, other = op_spaces.draw("linear", 3, 2)
    op_spaces.register_data("sweep_linear_3_0", "linear", first)
    key = cache.key("sweep_linear_3_0", "cortex-m7", "legacy")
    op_spaces.register_data("sweep_linear_3_0", "linear", dict(first))
    assert cache.key("sweep_linear_3_0", "cortex-m7", "legacy") == key
    assert list(cases.get("sweep_linear_3_0").build()[0].parameters())[0].shape[1] == first["fin"]
    op_spaces.register_data("sweep_linear_3_0", "linear", other)
    assert cache.key("sweep_linear_3_0", "cortex-m7", "legacy") != key
    assert list(cases.get("sweep_linear_3_0").build()[0].parameters())[0].shape[1] == other["fin"]


def test_a_sweep_failure_is_written_as_a_reproducer_that_fails_the_same_way(runners, tmp_path, own_registry):
    """With an M7 runner whose conv is off by one step, the sweep's conv2d samples fail; the
    samples ran as data (no case file but the reproducers), and each reproducer, run alone as
    `cortexm test --cases FILE` runs it, fails as its sample did: the shrunk one the same kind
    of way (the same check, on the same core), the one past --shrink exactly so."""
    from cortexm.base.targets import core
    from cortexm.firmware import BuildOptions, build_runner
    from cortexm.testing import sweep
    from cortexm.testing.simulate import RunnerSimulator

    m7 = core("cortex-m7")
    perturbed = BuildOptions(extra_sources=(str(PERTURBATION),), link_options=("-Wl,--wrap=arm_convolve_wrapper_s8",))
    sims = {m7.name: RunnerSimulator(m7, "qemu", build_runner(m7, options=perturbed))}
    out = tmp_path / "out"
    report = sweep.run_sweep("conv2d", [m7], 1, 2, out, sims, jobs=1, shrink_limit=1)

    assert report.samples == 2 and len(report.findings) == 2, [(r.case, r.status, r.reason) for r in report.results]
    assert sorted(p.name for p in out.iterdir()) == sorted(f.repro.name for f in report.findings if f.repro)
    shrunk, as_drawn = report.findings
    assert shrunk.shrunk and shrunk.shrunk != shrunk.params and as_drawn.shrunk is None
    for finding in report.findings:
        assert finding.failure.startswith("FAIL on cortex-m7: max |diff| 1 LSB"), finding.failure
        assert finding.kind == "FAIL on cortex-m7 at compare"
        options = app.Options(cores=[m7], case_files=[finding.repro], simulators=sims, jobs=1)
        results = app.run(options)
        checks = crosscore.cross_core(results, {c.name: c for c in app.select_cases(options)})
        assert [r.case for r in results] == [f"repro_{finding.sample}"]
        assert sweep._kind(f"repro_{finding.sample}", results, checks) == finding.kind
        if finding is as_drawn:
            assert sweep._failure(f"repro_{finding.sample}", results, checks) == finding.failure
