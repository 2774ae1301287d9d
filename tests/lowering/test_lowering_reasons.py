"""Every call that is not a cortex_m kernel is named with its module and its true reason, float or
int8 alike: what the quantizer and the passes did to its model node (cortexm.lowering.decisions,
cortexm.checking.reasons), with the fix where one is known and lowers.

The models are tests/lowering_models.py's, exported as a user's FILE.py:FACTORY through the
session's export cache, lowered by the installed wheel (conftest); each reason is checked against
what the quantizer and the passes really did, and each fix by lowering the model written that way.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from cortexm.base.errors import CortexmError
from cortexm.checking import lowering
from cortexm.pte import load
from cortexm.pte.sidecar import read_sidecar

MODELS = Path(__file__).resolve().parents[1] / "lowering_models.py"


def _survey(exported, factory: str, core: str = "cortex-m7"):
    pte = exported(f"{MODELS}:{factory}", core)
    return (pte, *lowering.survey(load(pte).plan(), read_sidecar(pte)))


def _failing(left) -> list:
    return [c for c in left if c.fails]


# --- a compute call on int8 without a kernel ------------------------------------------------------

def test_a_convolution_left_on_int8_fails_with_its_module_and_the_fusion_a_pass_refused(exported):
    pte, _total, _lowered, left = _survey(exported, "conv_relu_cat")
    [conv] = _failing(left)
    assert conv.op == "aten::convolution.out" and conv.module == "conv"
    assert conv.on_integers and not conv.in_float  # no float tensor anywhere near it
    # The pass's own words, about the node it was handling, and why its range is out of reach.
    assert "ActivationFusionPass: 'Cannot fuse activation" in conv.reason and "qmin is out of range" in conv.reason
    assert "relu (act)" in conv.reason and "the parameters it shares with cat" in conv.reason
    assert "without requantizing" in conv.reason
    assert lowering.failure_line(left).startswith("left on int8 without a cortex_m kernel: 1 aten::convolution.out (conv): ")
    # Independently of that judge: the program's convolution departs from the quantized model.
    from cortexm.semantic import judge

    departures = [line for line, _ in judge.departures(read_sidecar(pte).semantic)]
    assert any("aten::convolution" in line for line in departures), departures
    from cortexm.checking.verify import verify_file

    [finding] = [f for f in verify_file(pte, None, None) if f.is_problem]
    assert finding.line().startswith("FAIL conv_relu_cat left on int8 without a cortex_m kernel: 1 aten::convolution.out "
                                     "(conv): "), finding.line()


def test_export_fails_a_convolution_left_on_int8_in_one_line(exported, capsys):
    """What `cortexm export` prints and fails with (the command's exit follows the line it is given:
    tests/checking/test_deployment.py runs it)."""
    from types import SimpleNamespace

    from cortexm.base import targets
    from cortexm.cli import lowering as command

    pte = exported(f"{MODELS}:conv_relu_cat", "cortex-m7")
    result = SimpleNamespace(name="conv_relu_cat", pte=pte.read_bytes(), sidecar=read_sidecar(pte))
    failure = command._say_deployment(result, targets.core("cortex-m7"))
    assert failure.startswith("left on int8 without a cortex_m kernel: 1 aten::convolution.out (conv): the aten.relu.default "
                              "after it, relu (act), was not fused into it"), failure
    assert "lowered: 2 of 5 calls are cortex_m kernels; not lowered: 1 aten::convolution.out" in capsys.readouterr().out


# --- nodes the quantizer did not annotate -----------------------------------------------------------

def test_an_lstm_is_named_as_the_node_the_quantizer_did_not_annotate(exported):
    _pte, _total, _lowered, left = _survey(exported, "lstm")
    failing = _failing(left)
    assert {"sigmoid", "tanh", "mul", "add"} <= {c.base for c in failing}
    for call in failing:
        assert call.module == "lstm"
        assert call.reason.startswith("the quantizer did not annotate aten.lstm.input (node lstm, module lstm, "
                                      "lowering_models.py:"), call.reason
        assert "no pattern of the quantizer has aten.lstm.input" in call.reason
        assert "torch.ao.nn.quantizable.LSTM" in call.reason and "no such operator" not in call.reason


def test_the_quantizable_lstm_fails_in_the_passes_as_the_lstm_reason_says(exported):
    """What FIXES["lstm"] says of torch.ao.nn.quantizable.LSTM, measured: the quantizer annotates
    it, and the passes fail on its input gate's sigmoid (the failure names the pass and module)."""
    with pytest.raises(CortexmError) as failed:
        exported(f"{MODELS}:quantizable_lstm", "cortex-m7")
    assert "failed in the cortex_m passes: AssertionError: quantized_activation input must be int8" in str(failed.value)
    assert "in AtenToCortexMPass, handling " in str(failed.value)
    assert "module lstm.layers.0.layer_fw.cell.input_gate" in str(failed.value)


def test_a_conv1d_gets_its_true_reason_and_the_fix_that_lowers(exported):
    _pte, _total, _lowered, left = _survey(exported, "conv1d_net")
    [conv] = _failing(left)
    assert conv.module == "c1" and conv.in_float
    assert conv.reason.startswith("the quantizer did not annotate aten.conv1d.default (node conv1d, module c1, ")
    assert "fix: nn.Conv2d with a (1, k) kernel" in conv.reason
    _pte, total, lowered, left = _survey(exported, "conv2d_row_net")  # the fix, as written
    assert lowered == total and not left


def test_a_scalar_operand_is_named_with_the_fix_that_lowers(exported):
    _pte, _total, _lowered, left = _survey(exported, "scaled_by_scalar")
    [mul] = _failing(left)
    assert mul.op == "aten::mul.out"
    assert "the quantizer did not annotate aten.mul.Tensor" in mul.reason
    assert "'Tried annotating unsupported configuration of operators'" in mul.reason  # upstream's reporter
    assert "is a Python scalar" in mul.reason and "torch.full(SHAPE, VALUE)" in mul.reason
    _pte, total, lowered, left = _survey(exported, "scaled_by_tensor")
    assert lowered == total and not left


def test_a_mean_no_pattern_takes_is_not_called_quantized_around(exported):
    _pte, _total, _lowered, left = _survey(exported, "mean_over_width")
    [mean] = _failing(left)
    assert mean.reason.startswith("the quantizer did not annotate aten.mean.dim (node mean, ")
    assert "no pattern of the quantizer has aten.mean.dim" in mean.reason


# --- an export failing inside the passes ----------------------------------------------------------

def test_an_export_that_fails_in_the_passes_names_the_operator_and_module_handled(exported):
    with pytest.raises(CortexmError) as failed:
        exported(f"{MODELS}:attention_value_projection", "cortex-m7")
    line = str(failed.value)
    assert "failed in the cortex_m passes: RuntimeError: expected scalar type torch.int8 but found torch.int32" in line
    assert "(in ReplaceScalarWithTensorArgPass, handling aten.bmm.default (node " in line
    assert ", module attn, lowering_models.py:" in line


# --- a float program ---------------------------------------------------------------------------------

def test_a_float_program_is_a_note_not_a_failed_lowering(tmp_path):
    """Upstream's Arduino AddModel, made the way it is: a float add, never quantized."""
    import torch
    from executorch.exir import to_edge

    from cortexm.base import targets
    from cortexm.checking.verify import verify_file

    class Add(torch.nn.Module):
        def forward(self, x, y):
            return x + y

    pte = tmp_path / "AddModel.pte"
    pte.write_bytes(to_edge(torch.export.export(Add(), (torch.ones(3), torch.ones(3)))).to_executorch().buffer)
    findings = verify_file(pte, None, targets.core("cortex-m33"))
    assert [f.status for f in findings] == ["NOTE", "OK"], [f.line() for f in findings]
    assert findings[0].text.startswith("a float program: no call quantizes or dequantizes and no sidecar says it was quantized")
    assert not any(f.is_problem for f in findings)


def test_upstreams_arduino_float_examples_verify(tmp_path):
    from cortexm import sources
    from cortexm.base import targets
    from cortexm.checking.verify import verify_file

    tree = sources.locate(sources.EXECUTORCH).path
    examples = [tree / "examples" / "arduino" / "examples" / name / "model.pte" for name in ("AddModel", "HelloExecuTorch")] \
        if tree else []
    if not examples or not all(e.is_file() for e in examples):
        pytest.skip(sources.missing_message(sources.EXECUTORCH) if tree is None
                    else "this ExecuTorch tree has no examples/arduino/examples/{AddModel,HelloExecuTorch}/model.pte")
    for example in examples:
        findings = verify_file(example, None, targets.core("cortex-m33"))
        assert [f.status for f in findings] == ["NOTE", "OK"], [f.line() for f in findings]


# --- the pinned tree's spatial mean --------------------------------------------------------------------

def test_the_pinned_trees_spatial_mean_is_a_known_defect(exported, monkeypatch):
    """mean_hw on main cff6f4dd: no pattern annotates aten.mean.dim, and that tree's DecomposeMeanPass
    rewrites only adaptive_avg_pool2d (upstream PR #22154 adds the mean; the 1.5.1 wheel has it and
    lowers mean_hw whole, as tests/goldens records). The line is the one a mean no pattern takes gets (mean_over_width, on
    the wheel); `cortexm export mean_hw` on that tree names the defect after it."""
    from types import SimpleNamespace

    from cortexm import cases, sources
    from cortexm.base import targets
    from cortexm.cases import defects
    from cortexm.cli import lowering as command
    from cortexm.sources import backend_source

    known = defects.EXECUTORCH_SPATIAL_MEAN
    assert known in cases.get("mean_hw").known_failures
    assert not known.applies("cortex-m7", {"lowering": backend_source.lowering_file})  # the wheel this process lowers with
    tree = sources.locate(sources.EXECUTORCH).path
    if tree is None:
        pytest.skip(sources.missing_message(sources.EXECUTORCH))
    in_tree = {"lowering": lambda rel: tree / rel}
    if not known.applies("cortex-m7", in_tree):
        pytest.skip(f"the ExecuTorch tree at {tree} is not one with the defect (main cff6f4dd's decompose_mean_pass.py)")
    pte = exported(f"{MODELS}:mean_over_width", "cortex-m7")
    line = lowering.failure_line(lowering.survey(load(pte).plan(), read_sidecar(pte))[2])
    assert known.explains("lowering", line)
    monkeypatch.setattr(defects, "default_locators", lambda: in_tree)
    sidecar = read_sidecar(pte).replaced(source={"case": "mean_hw"})
    found = command._known_defect(SimpleNamespace(sidecar=sidecar), targets.core("cortex-m7"), line)
    assert found is known


def test_dead_weights_look_fixed_only_where_a_program_could_show_them(exported, monkeypatch):
    from rich.console import Console

    from cortexm.base import targets
    from cortexm.pte.bundle import Bundle
    from cortexm.report import summary
    from cortexm.report.results import CaseResult, Constants
    from cortexm.testing.checks import constants

    measured = {}
    for case in ("linear", "conv2d"):
        record, _, _ = constants.measure(Bundle.open(exported(case, "cortex-m7")), targets.core("cortex-m7"))
        measured[case] = CaseResult(case, "cortex-m7", constants=record)
    assert not measured["linear"].constants.dead_pattern and measured["linear"].constants.dead_bytes == 0
    assert measured["conv2d"].constants.dead_pattern and measured["conv2d"].constants.dead_bytes  # the defect, in the wheel
    out = io.StringIO()
    monkeypatch.setattr(summary, "console", lambda: Console(file=out, width=400))
    summary._dead_constants([measured["linear"]])  # a linear on the M7: nothing to show the defect
    assert "looks fixed" not in out.getvalue() and "0 of" in out.getvalue()
    fixed = CaseResult("conv2d", "cortex-m7", constants=Constants(constant_bytes=832, dead_bytes=0, dead_pattern=True))
    summary._dead_constants([fixed])  # a convolution without the dead copy: the defect is gone
    assert "cortex_m dead weights looks fixed here" in out.getvalue()
