"""What a deployment needs to know before the board: the calls left in float and why, the
constants no call reads, whether it fits, and how far it is from its float model.

The programs are the real lowering's (the built-in cases, through the session's export
cache); the judgements are cortexm.checking.lowering and .constants, cortexm.report.fit and
cortexm.semantic.accuracy.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import MISSING, run_cli
from cortexm.checking import constants, lowering
from cortexm.pte import load, parse


def _survey(pte: Path):
    from cortexm.pte.sidecar import read_sidecar

    return lowering.survey(load(pte).plan(), read_sidecar(pte))


# --- lowering coverage ---------------------------------------------------------------------------

def test_an_nchw_input_leaves_the_convolutions_in_float_and_says_why(exported):
    total, lowered, left = _survey(exported("conv_net_nchw_input", "cortex-m7"))
    floats = [c for c in left if c.fails]
    assert [c.op for c in floats if c.base == "convolution"] == ["aten::convolution.out"] * 2
    assert {c.module for c in floats if c.base == "convolution"} == {"c1", "c2"}  # the model's own names
    line = lowering.failure_line(left)
    assert "2 aten::convolution.out (c1, c2)" in line
    assert "input 0 (float32[1,3,8,8]) is contiguous (NCHW)" in line and "channels_last" in line
    assert lowered < total


def test_a_channels_last_model_is_lowered_whole(exported):
    total, lowered, left = _survey(exported("conv2d_relu", "cortex-m7"))
    assert lowered == total and not left


def test_a_case_that_expects_an_operator_in_float_is_not_failed_for_it(exported):
    _total, _lowered, left = _survey(exported("add_broadcast", "cortex-m7"))
    assert lowering.failure_line(left) is not None
    assert lowering.failure_line(left, {"add": "the cortex_m backend lowers only same-shape adds"}) is None


def test_verify_and_export_fail_a_program_left_in_float(exported, tmp_path):
    pte = exported("conv_net_nchw_input", "cortex-m7")
    verified = run_cli("verify", str(pte))
    assert verified.returncode == 1 and verified.stdout.startswith("FLOAT conv_net_nchw_input left in float: 2 aten::convolution")
    done = run_cli("export", "conv_net_nchw_input", "-t", "cortex-m7", "-o", str(tmp_path / "x.pte"))
    assert done.returncode == 1, done.stderr
    assert "exporting conv_net_nchw_input for cortex-m7: importing torch" in done.stderr.splitlines()[0]
    assert "FAIL conv_net_nchw_input lowering: left in float: 2 aten::convolution.out (c1, c2)" in done.stdout
    assert (tmp_path / "x.pte").is_file()  # written all the same: a user inspects what they got


# --- dead constants ----------------------------------------------------------------------------

def test_the_permuted_weights_originals_are_constants_no_call_reads(exported):
    """The known defect EXECUTORCH_DEAD_WEIGHTS, measured: a convolution's original weight,
    scales and zero points stay in the program beside the permuted copy the kernel reads."""
    from cortexm.cases import defects

    pte = exported("conv2d", "cortex-m7")
    data = pte.read_bytes()
    program = parse(data)
    found = constants.survey(program, program.plan(), data, json.loads(pte.with_suffix(".json").read_text())["constants"])
    names = sorted(d.name for d in found.dead)
    assert {"_frozen_param0", "_scale_0", "_zero_point_0"} <= set(names), names
    assert all(defects.EXECUTORCH_DEAD_WEIGHTS.explains("constants", n) for n in names)
    weight = next(d for d in found.dead if d.name == "_frozen_param0")
    assert weight.tensor == "int8[8,4,3,3]" and weight.nbytes >= 8 * 4 * 3 * 3
    # Every dead buffer is one the program's values never refer to.
    used = constants.referenced(program.plan())
    dead_buffers = {d.buffer for d in found.dead}
    assert not [i for i in used if 0 <= i < len(program.plan().values)
                and getattr(program.plan().values[i], "data_buffer_idx", 0) in dead_buffers]


def test_a_program_without_the_defect_has_no_dead_constants(exported):
    pte = exported("relu", "cortex-m7")
    program = parse(pte.read_bytes())
    assert constants.survey(program, program.plan()).dead == ()


# --- accuracy against the float model --------------------------------------------------------------

def test_accuracy_is_measured_over_inputs_like_the_calibration_data(exported):
    from cortexm.semantic import accuracy

    record = json.loads(exported("keyword_spotting", "cortex-m7").with_suffix(".json").read_text())["accuracy"]
    assert record["samples"] == accuracy.SAMPLES
    sqnr, top1 = accuracy.summary(record)
    assert sqnr is not None and sqnr > accuracy.floor_db(record)
    assert top1.endswith(f"/{accuracy.SAMPLES}")
    assert [p["node"] for p in record["points"]][:2] == ["quantize_per_tensor", "quantize_per_tensor_1"]


def test_the_drawn_inputs_are_the_calibration_samples_then_points_between_them():
    import torch

    from cortexm.semantic import accuracy

    calibration = [(torch.full((2, 3), float(k)),) for k in range(4)]
    drawn = accuracy.draw(calibration, "case")
    assert len(drawn) == accuracy.SAMPLES and all(torch.equal(a[0], b[0]) for a, b in zip(drawn, calibration, strict=False))
    assert all(0 <= float(d[0].min()) and float(d[0].max()) <= 3 for d in drawn[4:])
    again = accuracy.draw(calibration, "case")
    assert all(torch.equal(a[0], b[0]) for a, b in zip(drawn, again, strict=True))  # the same every run


def test_the_floor_falls_with_the_number_of_quantization_stages():
    from cortexm.semantic import accuracy

    one = {"samples": 16, "points": [{}], "outputs": [{"sqnr_db": 19.0, "top1": None}]}
    fourteen = {**one, "points": [{}] * 14}
    assert accuracy.floor_db(one) == 20.0 and accuracy.floor_db(fourteen) == 8.54
    assert "below the floor of 20 dB for its 1 quantization stages" in accuracy.below_floor(one, "uniform")
    assert accuracy.below_floor(fourteen, "uniform") is None
    assert accuracy.below_floor(one, "saturate") is None  # its data leaves the calibrated range on purpose


class _Result:
    def __init__(self, case, core, db, top1, points, status="PASS"):
        from cortexm.report.results import Accuracy

        self.case, self.core, self.accuracy = case, core, Accuracy(db, top1, points)
        self.status, self.reason, self.failures = status, "", []


def _points(*dbs):
    return [{"node": f"q{k}", "model_ops": ["aten.conv2d"], "sqnr_db": db, "call": k, "op": "cortex_m::quantized_conv2d"}
            for k, db in enumerate(dbs)]


def test_a_less_accurate_model_is_degraded_and_the_point_that_lost_it_named():
    from cortexm.semantic import accuracy

    baseline = {"results": [{"case": "kws", "core": "cortex-m7", "accuracy_db": 38.0, "top1": "16/16",
                             "accuracy_points": _points(45.0, 41.0, 40.0)}]}
    worse = _Result("kws", "cortex-m7", 31.5, "14/16", _points(45.0, 30.2, 29.5))
    changes = accuracy.gate([worse], baseline)
    assert worse.status == "DEGRADED"
    assert changes[0] == ("DEGRADED kws cortex-m7: SQNR against the float model 38 -> 31.5 dB (-6.50 dB); top-1 "
                               "agrees with the float model 16/16 -> 14/16; first lost at call 1 "
                               "cortex_m::quantized_conv2d (q1: aten.conv2d): the quantized model's own SQNR 41 -> 30.2 dB")
    same = _Result("kws", "cortex-m7", 38.0, "16/16", _points(45.0, 41.0, 40.0))
    assert accuracy.gate([same], baseline) == [] and same.status == "PASS" and same.failures == []
    # A case that failed another check (its golden, say) keeps that status, and the report keeps
    # the accuracy it lost: a mutant of the quantizer changes both.
    failed = _Result("kws", "cortex-m7", 31.5, "14/16", _points(45.0, 30.2, 29.5), status="FAIL")
    accuracy.gate([failed], baseline)
    assert failed.status == "FAIL" and [stage for stage, _ in failed.failures] == ["degraded"]


def test_a_baseline_that_compares_nothing_fails(tmp_path):
    base = tmp_path / "base.json"
    base.write_text(json.dumps({"results": [{"case": "elsewhere", "core": "cortex-m3", "instructions": 5}]}))
    result = run_cli("test", "-t", "cortex-m7", "-k", "relu", "--grid", "none", "--sim", "none", "--baseline", str(base))
    assert result.returncode == 1
    assert f"NOTHING COMPARED: {base} has no result for any case and core of this run" in result.stdout


def test_an_accuracy_gate_against_a_baseline_without_accuracy_fails(tmp_path):
    """A baseline that has the run's case and core but no accuracy figure: the accuracy gate
    compared nothing, and says so (it said "no case lost accuracy", exit 0)."""
    base = tmp_path / "base.json"
    base.write_text(json.dumps({"results": [{"case": "relu", "core": "cortex-m7", "instructions": None}]}))
    result = run_cli("test", "-t", "cortex-m7", "-k", "relu", "--grid", "none", "--sim", "none", "--baseline", str(base))
    assert result.returncode == 1, result.stdout[-800:]
    assert f"NOTHING COMPARED: {base} has no accuracy figure" in result.stdout
    assert "no case lost accuracy" not in result.stdout


# --- the semantic failure names the argument -------------------------------------------------------

def test_a_departure_line_puts_the_call_arguments_beside_the_models_quantization():
    from cortexm.semantic import judge

    point = {"node": "quantize_per_tensor_3", "model_ops": ["aten.add"], "call": 4, "op": "cortex_m::quantized_add",
             "max_lsb": 41.0, "differ": 90, "elements": 100, "first": None,
             "call_args": {"self_zero_point": -128, "other_zero_point": -128, "output_zero_point": -5, "output_shift": -20},
             "model_qparams": {"inputs": [[0.0078, -128], [0.0116, 23]], "output": [0.0156, -5]}}
    (line, _details), = judge.departures({"points": [point], "backend": "DSP"})
    assert line.endswith("; the call's arguments: self_zero_point=-128, other_zero_point=-128, output_zero_point=-5, "
                         "output_shift=-20; the model's quantization: inputs (scale 0.0078, zero point -128), "
                         "(scale 0.0116, zero point 23), output (scale 0.0156, zero point -5)")


# --- does it fit -------------------------------------------------------------------------------------

def test_needs_are_placed_whole_on_a_boards_regions():
    from cortexm.report import fit

    profile = fit.given_profile(["flash=64K", "ram=32K", "sram=16K:arena"])
    needs = [fit.Need("code", "code", 40_000), fit.Need("program", "program", 30_000),
             fit.Need("stack", "stack", 2_000), fit.Need("planned buffer 1", "arena", 30_000),
             fit.Need("method allocator", "arena", 12_000)]
    verdict = fit.place(needs, profile)
    assert not verdict.fits and [n.what for n in verdict.unplaced] == ["program"]
    assert verdict.line().startswith("DOES NOT FIT given memory: 30,000 B find no room (program 30,000 B)")
    assert [(r.name, r.used) for r in verdict.regions] == [("flash", 40_000), ("ram", 32_000), ("sram", 12_000)]


@pytest.mark.parametrize("spec, message", [("flash", "give NAME=SIZE"), ("x=1M", "roles are"),
                                           ("sram=2M:stack,weights", "roles are")])
def test_a_wrong_memory_spec_is_one_line(spec, message):
    from cortexm.base.errors import CortexmError
    from cortexm.report import fit

    with pytest.raises(CortexmError, match=message):
        fit.given_profile([spec])


def test_the_board_profiles_name_their_source():
    from cortexm.report import fit

    boards = fit.profiles()
    assert {"stm32f746g-disco", "corstone-300"} <= set(boards)
    assert all(p.source and p.core for p in boards.values())
    assert all(set(roles) <= set(fit.ROLES) for p in boards.values() for _, _, roles in p.regions)


@pytest.mark.skipif(MISSING is not None, reason=f"firmware tests need: {MISSING}")
def test_fit_measures_a_program_on_its_own_runner_and_agrees_with_its_run_log(exported, runners, tmp_path):
    from cortexm.report import fit

    pte = exported("conv2d_relu", "cortex-m7")
    done = run_cli("fit", str(pte), "-t", "cortex-m7", "--board", "stm32f746g-disco", "--memory", "flash=16K",
                   "--memory", "ram=4K", "--json")
    assert done.returncode == 1, done.stderr  # the tiny board does not take it
    report = json.loads(done.stdout)
    needs = {n["what"]: n["nbytes"] for n in report["needs"]}
    verdicts = {b["board"]: b for b in report["boards"]}
    assert verdicts["stm32f746g-disco"]["fits"] and not verdicts["given memory"]["fits"]
    # What the program's own plan says, and what its run on that runner printed.
    assert needs["planned buffer 1"] == sum(load(pte).plan().non_const_buffer_sizes[1:])
    assert needs["program"] == pte.stat().st_size
    log = run_cli("run", str(pte), "-t", "cortex-m7", "--log").stdout
    measured = fit.parse_memory_line(log)
    assert 0 < needs["stack"] <= 64 * 1024 and measured["planned"] == needs["planned buffer 1"]
