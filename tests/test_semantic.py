"""The semantic reference: a lowered program judged against the quantized model it came from
(cortexm.semantic), point by point, so that a wrong-but-consistent lowering fails and names
the call that made it wrong, while the integer reference, which reads the arguments the
lowering wrote, agrees with the program."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cortexm.base import targets
from cortexm.semantic import judge


def _export(case: str, core: str = "cortex-m7"):
    from cortexm.lowering import export, modelsource

    return export.export(modelsource.load(case), targets.core(core))


def _pass_module():
    """The module whose functions write the cortex_m calls' arguments (the wheel's, in tests)."""
    from executorch.backends.cortex_m.passes import aten_to_cortex_m_pass

    return aten_to_cortex_m_pass


def test_a_right_lowering_means_the_model_point_by_point():
    """Every activation the quantized model computes is found in the program (the call that
    computed it, by shape and value) and is within its operator's tolerance."""
    result = _export("conv2d_relu")
    semantic = result.sidecar["semantic"]
    assert judge.departures(semantic) == []
    ops = [(p["op"], p["model_ops"]) for p in semantic["points"]]
    assert ("cortex_m::quantize_per_tensor", ["input input_1"]) in ops or ops[0][0] == "cortex_m::quantize_per_tensor"
    conv = next(p for p in semantic["points"] if p["op"] == "cortex_m::quantized_conv2d")
    assert "aten.conv2d" in conv["model_ops"] and conv["max_lsb"] <= judge.tolerance(conv["op"]).lsb
    assert semantic["points"][-1]["node"] == "output 0" and semantic["points"][-1]["max_lsb"] == 0
    assert semantic["model_outputs"][0]["shape"] == result.sidecar["outputs"][0]["shape"]
    assert semantic["float"][0]["sqnr_db"] is None or semantic["float"][0]["sqnr_db"] > 20


def test_a_wrong_but_consistent_multiplier_fails_at_its_call(monkeypatch):
    """A lowering that writes every requantize multiplier 10 % too large: the integer reference
    evaluates the program with those arguments and agrees with it; the quantized model does
    not, and the first departure is the convolution's call."""
    module = _pass_module()
    right = module.quantize_multiplier_aot
    monkeypatch.setattr(module, "quantize_multiplier_aot", lambda scale: right(scale * 1.1))
    result = _export("conv2d")
    lines = judge.departures(result.sidecar["semantic"])
    assert lines, "a 10 % requantize error must depart from the model"
    line, details = lines[0]
    assert line.startswith("call 1 cortex_m::quantized_conv2d (") and "aten.conv2d" in line
    assert "departs from the quantized model" in line and "first at [" in line and details


def test_an_inverted_permutation_fails_on_the_outputs_shape(monkeypatch):
    """A permute lowered with the inverse permutation computes a tensor of another shape: the
    program's output is not the model's, whatever the integer reference says of it."""
    from executorch.backends.cortex_m.passes.aten_to_cortex_m_pass import AtenToCortexMPass
    from executorch.exir.dialects._ops import ops as exir_ops

    module = _pass_module()
    right = module._get_permute_replacement

    def inverted(node, dialect_pass):
        spec = right(node, dialect_pass)
        if spec is None:
            return None
        perms = list(spec.args[1])
        return type(spec)(spec.op, (spec.args[0], [perms.index(i) for i in range(len(perms))]), spec.kwargs)

    table = AtenToCortexMPass._DIALECT_SUBSTITUTIONS  # noqa: SLF001 - where the pass looks substitutions up
    monkeypatch.setitem(table, exir_ops.edge.aten.permute_copy.default, inverted)
    result = _export("permute")
    lines = [line for line, _ in judge.departures(result.sidecar["semantic"])]
    assert any(line.startswith("output 0 is float32[") and "the model's is float32[" in line for line in lines), lines


def test_tolerances_are_findings_with_reasons():
    """Every operator that may differ from the model says why; an operator not listed must be exact."""
    for op, tol in judge.TOLERANCES.items():
        assert op.startswith("cortex_m::") and tol.lsb >= 0 and len(tol.why) > 20
    assert judge.tolerance("cortex_m::transpose").lsb == 0
    assert judge.tolerance("aten::permute_copy").lsb == 0
    # The quantize rounds as the model's on the scalar loop; only the M55's Helium loop may not.
    assert judge.tolerance("cortex_m::quantize_per_tensor", "DSP").lsb == 0
    assert judge.tolerance("cortex_m::quantize_per_tensor", "MVE").lsb == 1


def test_layouts_compare_modulo_size_one_dims():
    assert judge.same_layout([1, 4, 5, 5], [0, 2, 3, 1], [0, 2, 3, 1])
    assert not judge.same_layout([1, 4, 5, 5], [0, 1, 2, 3], [0, 2, 3, 1])
    assert judge.same_layout([1, 1, 1, 2], [0, 2, 1, 3], [0, 2, 3, 1])  # ExecuTorch #22520's order


def test_departure_lines_name_the_point_and_the_first_element():
    record = {"program_outputs": [{"shape": [1, 2], "dtype": "float32", "dim_order": [0, 1]}],
              "model_outputs": [{"shape": [1, 2], "dtype": "float32", "dim_order": [0, 1]}],
              "points": [{"node": "q1", "model_ops": ["aten.add"], "call": 4, "op": "cortex_m::quantized_add",
                          "max_lsb": 3.0, "differ": 2, "elements": 8,
                          "first": {"index": [0, 1], "program": 5.0, "model": 2.0, "lsb": 3.0},
                          "worst": [{"index": [0, 1], "program": 5.0, "model": 2.0, "lsb": 3.0}]},
                         {"node": "q2", "model_ops": ["aten.relu"], "call": 5, "op": "cortex_m::quantized_add",
                          "max_lsb": 1.0, "differ": 1, "elements": 8}]}
    [(line, details)] = judge.departures(record)
    assert line == ("call 4 cortex_m::quantized_add (q1: aten.add) departs from the quantized model: 2 of 8 elements "
                    "differ, up to 3 LSB > 1 LSB allowed; first at [0, 1]: program 5, model 2")
    assert details.endswith("[0, 1]: program 5, model 2 (3 LSB)")


def test_a_scrambled_layout_is_recognised_as_that_mechanism_only():
    """The known minimum/maximum defect (NHWC written, read as NCHW) excuses a departure only
    when the program's values are exactly the model's, scrambled that way."""
    from cortexm.cases.defects import EXECUTORCH_MINMAX_OUTPUT_LAYOUT as defect
    from cortexm.semantic.model import SCRAMBLED, Call, _point

    model = np.arange(-50, 50, dtype=np.int8).reshape(1, 4, 5, 5)
    scrambled = np.ascontiguousarray(model.transpose(0, 2, 3, 1)).reshape(model.shape)
    point = _point("q", ["aten.minimum"], Call(2, "cortex_m::minimum", scrambled), model, scrambled, 1.0)
    assert point.get("explained") == SCRAMBLED
    [(line, _)] = judge.departures({"points": [point]})
    assert defect.explains("semantic", line)
    other = scrambled.copy()
    other[0, 0, 0, 0] += 1  # not the mechanism: another bug on top of it
    point = _point("q", ["aten.minimum"], Call(2, "cortex_m::maximum", other), model, other, 1.0)
    [(line, _)] = judge.departures({"points": [point]})
    assert "explained" not in point and not defect.explains("semantic", line)


def test_the_export_writes_both_models_and_the_models_outputs(tmp_path):
    from cortexm.lowering import writer

    written = writer.write(_export("add"), tmp_path / "add.pte")
    names = {p.name for p in written}
    assert {"add.quantized.pt2", "add.float.pt2", "add.model-0.bin"} <= names
    sidecar = json.loads((tmp_path / "add.json").read_text())
    assert sidecar["semantic"]["models"] == {"quantized": "add.quantized.pt2", "float": "add.float.pt2"}
    assert sidecar["semantic"]["outputs"] == ["add.model-0.bin"]


def test_custom_inputs_are_judged_by_both_references_on_those_inputs(tmp_path):
    """`cortexm run -i` compares with the references computed for the inputs given, not with
    the sidecar's, which are for the example inputs (cortexm.semantic.program)."""
    from cortexm.lowering import writer
    from cortexm.pte import load
    from cortexm.pte.bundle import Bundle
    from cortexm.semantic.program import references
    from cortexm.pte.tensors import reference_outputs

    writer.write(_export("conv2d"), tmp_path / "c.pte")
    bundle = Bundle.open(tmp_path / "c.pte")
    plan = load(bundle.pte).plan()
    rng = np.random.default_rng(7)
    mine = [rng.uniform(-2, 2, size=e["shape"]).astype(np.float32) for e in bundle.sidecar.inputs]
    outputs, record = references(bundle, plan, mine, "DSP")
    assert judge.departures(record) == []
    assert not np.array_equal(outputs[0], reference_outputs(bundle)[0])  # other inputs, other outputs
    assert record["points"][0]["op"] == "cortex_m::quantize_per_tensor"


@pytest.mark.parametrize("case", ["minimum", "maximum"])
def test_the_known_layout_defect_shows_semantically_and_is_excused_by_its_mechanism(case):
    from cortexm.cases.defects import EXECUTORCH_MINMAX_OUTPUT_LAYOUT as defect

    lines = [line for line, _ in judge.departures(_export(case).sidecar["semantic"])]
    assert lines and all(defect.explains("semantic", line) for line in lines), lines
