"""`cortexm reduce` on a real failure: the M55's refusal of a 1xN convolution, cut out of a
model of three calls, must fail the same way on the M55 (same stage, a call of the same
operator) and pass on the M7, where the original passes; the case file it writes runs with
`cortexm test --cases`, and holds the original's quantization."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from conftest import run_cli
from cortexm.testing import piece as pieces

HERE = Path(__file__).resolve().parents[1]  # the tests folder: reduce_models


def test_named_call_reads_every_form_of_failure_line():
    assert pieces.named_call("cortex_m::quantized_conv2d.out#3 (features.2): refused") == 3
    assert pieces.named_call("call 18 cortex_m::quantized_mul (x: aten.hardswish) departs") == 18
    assert pieces.named_call("instruction 4 aten::mul.out (left in float)") == 4
    assert pieces.named_call("SQNR against the float model 9.9 dB") is None


def test_first_failure_is_the_earliest_call_named():
    from cortexm.report.results import CaseResult

    calls = [{"instruction": 0, "op": "cortex_m::quantize_per_tensor.out", "node": "q"},
             {"instruction": 1, "op": "cortex_m::quantized_conv2d.out", "node": "conv2d"},
             {"instruction": 2, "op": "cortex_m::quantized_add.out", "node": "add"},
             {"instruction": 3, "op": "cortex_m::dequantize_per_tensor.out", "node": "dq"}]
    result = CaseResult("c", "cortex-m55", "FAIL", failures=[
        ("run", "execute() failed: status 0x12"),
        ("semantic", "call 2 cortex_m::quantized_add (add: aten.add) departs from the quantized model"),
        ("verify", "cortex_m::quantized_conv2d.out#1: arm_convolve_wrapper_s8 refuses")])
    first = pieces.first_failure(result, calls)
    assert (first.stage, first.instruction, first.kind) == ("verify", 1, ("verify", "cortex_m::quantized_conv2d"))
    # A line naming no call, in a program of one computing call: that call.
    alone = CaseResult("c", "cortex-m7", "FAIL", failures=[("compare", "output 0: 3 LSB")])
    assert pieces.first_failure(alone, calls[:2] + calls[3:]).instruction == 1
    assert pieces.first_failure(alone, calls).instruction is None


def test_a_transposed_convolution_shrinks_along_its_own_weight_axes():
    """A transposed conv's weight is [C_in, C_out, kh, kw]: every channel step must give a piece
    torch runs, with the channels it says (a conv2d's [C_out, C_in] slicing would not run)."""
    import torch

    rng = np.random.default_rng(0)
    node = pieces.Node("v0", "aten.conv_transpose2d.input",
                       [("in", 0), ("const", "weight"), ("const", "bias"), ("lit", [2, 2]), ("lit", [1, 1])])
    piece = pieces.Piece([node], {"weight": rng.standard_normal((4, 6, 3, 3)).astype(np.float32),
                                  "bias": rng.standard_normal(6).astype(np.float32)},
                         [rng.standard_normal((1, 4, 5, 5)).astype(np.float32)],
                         [[rng.standard_normal((1, 4, 5, 5)).astype(np.float32)]], [False])
    steps = dict(pieces.smaller(piece))
    assert {"output channels 6 -> 3", "output channels 6 -> 1", "input channels 4 -> 2", "input channels 4 -> 1"} <= set(steps)
    for what, candidate in steps.items():
        x = torch.from_numpy(candidate.example[0])
        y = torch.ops.aten.conv_transpose2d.input(x, torch.from_numpy(candidate.consts["weight"]),
                                                  torch.from_numpy(candidate.consts["bias"]), [2, 2], [1, 1])
        if what.startswith("output channels"):
            assert y.shape[1] == int(what.split()[-1])
        if what.startswith("input channels"):
            assert x.shape[1] == candidate.consts["weight"].shape[0] == int(what.split()[-1])


def test_a_line_naming_the_model_node_names_its_call():
    """A lowering line names the node left in float, not a call number; an export that stopped
    names the node it was handling (lines as cortexm gives them for attention_block and
    matmul_constant)."""
    from cortexm.report.results import CaseResult

    calls = [{"instruction": 5, "op": "cortex_m::quantized_batch_matmul.out", "node": "bmm"},
             {"instruction": 7, "op": "aten::mul.out", "node": "mul"},
             {"instruction": 9, "op": "cortex_m::softmax.out", "node": "softmax"}]
    line = ("left in float: 1 aten::mul.out (mul): the quantizer did not annotate aten.mul.Tensor "
            "(node mul, models.py:126): its operand const float32[1,1,1] is a Python scalar")
    first = pieces.first_failure(CaseResult("c", "cortex-m55", "XFAIL", failures=[("lowering", line)]), calls)
    assert (first.instruction, first.kind) == (7, ("lowering", "aten::mul"))
    # Several nodes, by module where they have one: the earliest call (conv_net_nchw_input's line).
    nchw = [{"instruction": 2, "op": "aten::convolution.out", "node": "conv2d", "module": "c1"},
            {"instruction": 3, "op": "aten::relu.out", "node": "relu", "module": ""},
            {"instruction": 4, "op": "aten::convolution.out", "node": "conv2d_1", "module": "c2"}]
    line = "left in float: 2 aten::convolution.out (c1, c2); 1 aten::relu.out (relu): the model's input 0 is NCHW"
    first = pieces.first_failure(CaseResult("c", "cortex-m7", "FAIL", failures=[("lowering", line)]), nchw)
    assert (first.instruction, first.kind) == (2, ("lowering", "aten::convolution"))
    # Left in float for another reason is not the same failure.
    other = pieces.Failure("lowering", "left in float: 1 aten::convolution.out (conv2d): the quantizer did not annotate "
                           "aten.conv2d.default (node conv2d, r.py:29)", 2, "aten::convolution.out")
    assert first.reason == "the model's input is NCHW" and other.reason != first.reason
    stopped = ("export failed: lowering m failed in quantization: AttributeError: 'Tensor' object has no "
               "attribute 'to_tensor' (handling aten.matmul.default (node matmul, ops.py:192))")
    assert pieces.handled(stopped) == ("aten::matmul.default", "matmul")
    export = pieces.first_failure(CaseResult("c", "cortex-m7", "XFAIL", failures=[("export", stopped)]), [])
    assert (export.instruction, export.kind) == (None, ("export", "aten::matmul"))


def test_reduce_an_export_that_stops_at_a_node(runners, tmp_path):
    """No program to cut from: the node the export stopped at, cut out of the float model, must
    stop the export the same way (the quantizer's error at a matmul by a constant)."""
    out = tmp_path / "reduced"
    done = run_cli("reduce", "matmul_constant", "-t", "cortex-m7", "-o", str(out), "--no-upstream-test")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("matmul_constant node matmul, where the export stops (aten::matmul.default)"), done.stdout
    original = next(line for line in lines if line.startswith("cortex-m7 original:"))
    reduced = next(line for line in lines if line.startswith("cortex-m7 reduced:"))
    error = re.search(r"failed in quantization: (.*) \(handling", original).group(1)
    assert f"failed in quantization: {error} (handling aten.matmul.default" in reduced, done.stdout
    assert "torch.ops.aten.matmul.default(" in next(out.glob("reduced_*.py")).read_text()


def test_reduce_the_m55_1xn_refusal(runners, tmp_path):
    out = tmp_path / "reduced"
    done = run_cli("reduce", f"{HERE / 'reduce_models' / 'conv1xn.py'}:model", "-t", "cortex-m55", "-t", "cortex-m7",
                   "-o", str(out), "--no-upstream-test", "--shrink", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    original = next(line for line in lines if line.startswith("cortex-m55 original:"))
    reduced = next(line for line in lines if line.startswith("cortex-m55 reduced:"))
    stage = re.search(r"(FAIL|XFAIL) (\w+):", original).group(2)
    assert re.search(rf"FAIL {stage}: .*cortex_m::quantized_conv2d", reduced), done.stdout
    assert next(line for line in lines if line.startswith("cortex-m7 reduced:")).endswith("PASS"), done.stdout
    case = next(out.glob("reduced_*.py"))
    assert "aten.conv2d.default" in case.read_text()
    # The reproducer's call is a 1xN conv with stride 2 along W, as the original's.
    assert "[1, 2]" in case.read_text()
    # Its input is the value that reached the call, saved beside it.
    assert np.load(next(out.glob("reduced_*.input-0.npy"))).shape[2] == 1
    again = run_cli("test", "--cases", str(case), "-t", "cortex-m55", "--json", str(tmp_path / "r.json"))
    assert again.returncode == 1, again.stdout + again.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert any(stage == s for r in report["results"] for s, _ in r["failures"]), report
    # The call as a C program on CMSIS-NN alone: the real CMSIS-NN built for the M55 returns the
    # status the argument audit named, the M7's passes, and so does the host's scalar code (the
    # M3's path, which the audit says takes the call).
    audit_status = re.search(r"refuses it with status (-?\d+)", original).group(1)
    assert next(line for line in lines if line.startswith("cortex-m55 C:")).endswith(
        f"FAIL arm_convolve_wrapper_s8 returned status {audit_status}"), done.stdout
    assert next(line for line in lines if line.startswith("cortex-m7 C:")).endswith("PASS"), done.stdout
    c_file = next(out.glob("reduced_*.c"))
    assert _host_run(c_file, tmp_path).splitlines()[-1] == "PASS"


def _host_run(c_file: Path, folder: Path) -> str:
    """The C program built as its header says, for the host, and run: what it printed."""
    import os
    import shutil
    import subprocess

    from cortexm import sources

    tree = sources.locate(sources.CMSIS_NN).path
    if shutil.which("cc") is None or tree is None:
        pytest.skip("needs a host C compiler (apt-get install gcc) and a CMSIS-NN tree (cortexm sources)")
    files = [str(p) for p in (tree / "Source").rglob("*.c") if not p.name.endswith(("_f16.c", "_f32.c"))]
    build = subprocess.run(["cc", "-O2", "-I", str(tree / "Include"), str(c_file), *files, "-lm", "-o",
                            str(folder / "call")], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-2000:]
    ran = subprocess.run([str(folder / "call")], capture_output=True, text=True, env=dict(os.environ))
    assert ran.returncode == (0 if ran.stdout.strip().endswith("PASS") else 1), ran.stdout
    return ran.stdout


def test_reduce_c_program_sees_what_the_memory_oracle_sees(runners, tmp_path):
    """CMSIS-NN's transposed convolution writing past its scratch (docs/defects.md): the runner's
    memory oracle (guards around the planned buffers) and the C program (guards after its own
    buffers, no ExecuTorch) must report the same bytes past the same buffer."""
    out = tmp_path / "reduced"
    done = run_cli("reduce", "transpose_conv2d_pointwise_stride", "-t", "cortex-m7", "-o", str(out),
                   "--no-upstream-test", "--shrink", "0")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    reduced = next(line for line in lines if line.startswith("cortex-m7 reduced:"))
    past, size = re.search(r"wrote (\d+) bytes past the end of its scratch \((\d+) B\)", reduced).groups()
    c_line = next(line for line in lines if line.startswith("cortex-m7 C:"))
    assert f"wrote {past} bytes past the end of the scratch buffer ({size} B)" in c_line, done.stdout
