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


# A user's case file: a squeeze-excite block as MobileNetV3 writes it (pool -> flatten -> Linear
# -> ReLU -> Linear -> Hardsigmoid -> view -> mul), whose flatten and view the program holds as
# views of the pool's and the gate's calls, each the shape of a call that computes something else
# (the gate's [1, 16], the pool's [1, 16, 1, 1]); and a strided convolution read through a flatten.
CASES = """
import torch
from torch import nn
import torch.nn.functional as F

from cortexm.cases import register


def channels_last(*shape):
    return (torch.rand(*shape) * 2 - 1).to(memory_format=torch.channels_last)


class SqueezeExcite(nn.Module):
    def __init__(self, c=16):
        super().__init__()
        self.stem, self.head = nn.Conv2d(3, c, 3, padding=1), nn.Conv2d(c, 8, 1)
        self.fc1, self.fc2 = nn.Linear(c, c // 4), nn.Linear(c // 4, c)

    def forward(self, x):
        x = F.relu(self.stem(x))
        n, c = x.shape[:2]
        s = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        s = F.hardsigmoid(self.fc2(F.relu(self.fc1(s))))
        return self.head(x * s.view(n, c, 1, 1))


@register("semantic_squeeze_excite", "MobileNetV3's squeeze-excite, Linear form")
def _():
    return SqueezeExcite().eval(), (channels_last(1, 3, 8, 8),)


@register("semantic_strided_head", "a convolution of stride (2, 1), flattened into a linear")
def _():
    model = nn.Sequential(nn.Conv2d(2, 8, 3, stride=(2, 1), padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(576, 4))
    return model.eval(), (channels_last(1, 2, 24, 6),)
"""


def _user_cases(tmp_path, monkeypatch) -> None:
    """Registers CASES as `cortexm test --cases` does, out of the other tests' view."""
    from cortexm import cases
    from cortexm.cases import registry
    from cortexm.testing import casefiles

    cases.all_cases()
    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))
    monkeypatch.setattr(casefiles, "_FILE_CASES", dict(casefiles._FILE_CASES))
    (tmp_path / "my_cases.py").write_text(CASES)
    casefiles.load_case_file(tmp_path / "my_cases.py")


def _pass_module():
    """The module whose functions write the cortex_m calls' arguments (the wheel's, in tests)."""
    from executorch.backends.cortex_m.passes import aten_to_cortex_m_pass

    return aten_to_cortex_m_pass


def test_a_right_lowering_means_the_model_point_by_point():
    """Every activation the quantized model computes is found in the program (the call that
    computed it, by provenance) and is within its operator's tolerance."""
    result = _export("conv2d_relu")
    semantic = result.sidecar.semantic
    assert judge.departures(semantic) == []
    ops = [(p["op"], p["model_ops"]) for p in semantic["points"]]
    assert ("cortex_m::quantize_per_tensor", ["input input_1"]) in ops or ops[0][0] == "cortex_m::quantize_per_tensor"
    conv = next(p for p in semantic["points"] if p["op"] == "cortex_m::quantized_conv2d")
    assert "aten.conv2d" in conv["model_ops"] and conv["max_lsb"] <= judge.tolerance(conv["op"]).lsb
    assert semantic["points"][-1]["node"] == "output 0" and semantic["points"][-1]["max_lsb"] == 0
    assert tuple(semantic["model_outputs"][0]["shape"]) == result.sidecar.outputs[0].shape
    assert semantic["float"][0]["sqnr_db"] is None or semantic["float"][0]["sqnr_db"] > 20


def test_a_wrong_but_consistent_multiplier_fails_at_its_call(monkeypatch):
    """A lowering that writes every requantize multiplier 10 % too large: the integer reference
    evaluates the program with those arguments and agrees with it; the quantized model does
    not, and the first departure is the convolution's call."""
    module = _pass_module()
    right = module.quantize_multiplier_aot
    monkeypatch.setattr(module, "quantize_multiplier_aot", lambda scale: right(scale * 1.1))
    result = _export("conv2d")
    lines = judge.departures(result.sidecar.semantic)
    assert lines, "a 10 % requantize error must depart from the model"
    line, details = lines[0]
    assert line.startswith("call 1 cortex_m::quantized_conv2d (") and "aten.conv2d" in line
    assert "departs from the quantized model" in line and "first at [" in line and details


@pytest.mark.parametrize("core", ["cortex-m7", "cortex-m55"])
def test_a_value_the_program_only_views_is_judged_through_the_view(core, tmp_path, monkeypatch):
    """Points are mapped to calls by provenance: the flatten and the view, which no call computes,
    are the pool's and the gate's values reshaped, exact. Matched by shape, the flatten was
    compared with the gate's call, 242 LSB apart, and the model's mul read its own gate: a
    right program failed on both cores."""
    _user_cases(tmp_path, monkeypatch)
    semantic = _export("semantic_squeeze_excite", core).sidecar.semantic
    assert judge.departures(semantic) == []
    assert semantic["mapping"] == "provenance" and semantic["unmapped"] == []
    point = {p["model_ops"][-1]: p for p in semantic["points"] if p["model_ops"]}
    pool, flatten = point["aten.avg_pool2d"], point["aten.flatten.using_ints"]
    gate, view = point["aten.hardsigmoid"], point["aten.view"]
    assert gate["op"] == "cortex_m::quantized_linear" and gate["call"] > pool["call"]
    assert (flatten["call"], flatten["view"], flatten["max_lsb"]) == (pool["call"], ["aten.flatten.using_ints"], 0)
    assert (view["call"], view["view"], view["max_lsb"]) == (gate["call"], ["aten.view"], 0)


def test_a_convolution_lowered_with_its_stride_swapped_fails_at_its_call(tmp_path, monkeypatch):
    """README item 5: a convolution lowered with its stride as (w, h) computes a tensor of
    another shape with as many elements, which the flatten after it hides from the integer
    reference. The first line names the convolution's call, the one its provenance says
    computes the point (matched by shape, the convolution had no counterpart and the first
    line blamed the linear)."""
    from executorch.backends.cortex_m.passes.aten_to_cortex_m_pass import AtenToCortexMPass
    from executorch.exir.dialects._ops import ops as exir_ops

    right = _pass_module()._get_convolution_replacement

    def swapped(node, dialect_pass):
        spec = right(node, dialect_pass)
        if spec is None:
            return None
        args = list(spec.args)
        args[3] = list(args[3])[::-1]  # (stride_h, stride_w) -> (stride_w, stride_h)
        return type(spec)(spec.op, tuple(args), spec.kwargs)

    _user_cases(tmp_path, monkeypatch)
    table = AtenToCortexMPass._DIALECT_SUBSTITUTIONS  # where the pass looks substitutions up
    monkeypatch.setitem(table, exir_ops.edge.aten.convolution.default, swapped)
    lines = [line for line, _ in judge.departures(_export("semantic_strided_head").sidecar.semantic)]
    assert lines[0] == ("call 1 cortex_m::quantized_conv2d (quantize_per_tensor_1: aten.conv2d, aten.relu): "
                        "the program's value is [1, 8, 24, 3], the model's is [1, 8, 12, 6]"), lines
    # Each point measures its own calls: the linear, right on what it reads, is not blamed.
    assert not any("quantized_linear" in line for line in lines), lines


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

    table = AtenToCortexMPass._DIALECT_SUBSTITUTIONS  # where the pass looks substitutions up
    monkeypatch.setitem(table, exir_ops.edge.aten.permute_copy.default, inverted)
    result = _export("permute")
    lines = [line for line, _ in judge.departures(result.sidecar.semantic)]
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
    from cortexm.pte.tensors import reference_outputs
    from cortexm.semantic.program import references

    writer.write(_export("conv2d"), tmp_path / "c.pte")
    bundle = Bundle.open(tmp_path / "c.pte")
    plan = load(bundle.pte).plan()
    rng = np.random.default_rng(7)
    mine = [rng.uniform(-2, 2, size=e.shape).astype(np.float32) for e in bundle.sidecar.inputs]
    outputs, record = references(bundle, plan, mine, "DSP")
    assert judge.departures(record) == []
    assert not np.array_equal(outputs[0], reference_outputs(bundle)[0])  # other inputs, other outputs
    assert record["points"][0]["op"] == "cortex_m::quantize_per_tensor"


@pytest.mark.parametrize("case", ["minimum", "maximum"])
def test_the_known_layout_defect_shows_semantically_and_is_excused_by_its_mechanism(case):
    from cortexm.cases.defects import EXECUTORCH_MINMAX_OUTPUT_LAYOUT as defect

    lines = [line for line, _ in judge.departures(_export(case).sidecar.semantic)]
    assert lines and all(defect.explains("semantic", line) for line in lines), lines


def _requantizing_view(step: float):
    """A quantized model whose view requantizes (from step 0.02 to `step`), and a program that
    views the quantize's value: right where the model keeps the step, one that lost the
    model's requantize where it does not."""
    import torch
    import torch.fx
    import torchao.quantization.pt2e.quantize_pt2e  # noqa: F401 - registers quantized_decomposed

    from cortexm.semantic.model import Call

    ops = torch.ops.quantized_decomposed
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    node = x
    for name, target, scale in (("q", ops.quantize_per_tensor.default, 0.02),
                                ("dq", ops.dequantize_per_tensor.default, 0.02), ("view", None, None),
                                ("q_view", ops.quantize_per_tensor.default, step),
                                ("dq_view", ops.dequantize_per_tensor.default, step)):
        args = (node, [4, 2]) if target is None else (node, scale, 0, -128, 127, torch.int8)
        node = graph.create_node("call_function", target or torch.ops.aten.view.default, args, name=name)
    graph.output(node)
    module = torch.fx.GraphModule(torch.nn.Module(), graph)
    inputs = (torch.linspace(-1, 1, 8).reshape(2, 4),)
    held = torch.round(inputs[0] / 0.02).to(torch.int8)  # the program's quantize, then its view
    out = (held.reshape(4, 2).float() * 0.02).numpy()
    calls = [Call(0, "cortex_m::quantize_per_tensor", held.numpy(), "q"),
             Call(1, "cortex_m::dequantize_per_tensor", out, "dq_view")]
    return module, inputs, calls, out


@pytest.mark.parametrize("step", [0.02, 0.04])
def test_a_view_holds_its_source_exactly(step):
    """A point the program holds as a view is its source's value reshaped, and may not depart by
    a single LSB: where the model requantizes at the view, the program has lost a requantize."""
    from cortexm.semantic.model import compare

    module, inputs, calls, out = _requantizing_view(step)
    record, _ = compare(module, None, inputs, calls, [out], [calls[1]], [step], "DSP")
    [point] = [p for p in record["points"] if p["node"] == "q_view"]
    assert (record["mapping"], point["call"], point["view"]) == ("provenance", 0, ["aten.view"])
    lines = [line for line, _ in judge.departures(record)]
    if step == 0.02:
        assert point["max_lsb"] == 0 and lines == []
    else:  # round(x / 0.04) against round(x / 0.02): the model's value is half the program's
        assert lines[0].startswith("the view of call 0 cortex_m::quantize_per_tensor (q_view: aten.view) departs "
                                   "from the quantized model: ") and "> 0 LSB allowed" in lines[0], lines


def test_a_program_without_provenance_is_matched_by_shape_and_says_so():
    """A bundle from before the export recorded provenance: points are matched by shape and
    dtype, a fallback every line it gives names."""
    from cortexm.semantic.model import Call, compare

    module, inputs, calls, out = _requantizing_view(0.04)
    anonymous = [Call(c.n, c.op, c.value) for c in calls]
    record, _ = compare(module, None, inputs, anonymous, [out], [anonymous[1]], [0.04], "DSP")
    assert record["mapping"] == "shape" and [u["node"] for u in record["unmapped"]] == ["q_view"]
    [line] = [line for line, _ in judge.departures(record)]
    assert line.startswith("call 1 cortex_m::dequantize_per_tensor (output 0) departs from the quantized model: ")
    assert line.endswith("; before it, the model's q_view (aten.view) [4, 2] has no tensor of its shape in the program; "
                         "matched by shape, the program records no provenance")
