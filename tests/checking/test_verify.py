"""verify: schema check against a library, scratch audit and backend layout, with the exact lines."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from conftest import run_cli
from cortexm import sources
from cortexm.base.targets import core
from cortexm.cases import all_cases
from cortexm.checking import library
from cortexm.checking.verify import verify_file
from cortexm.pte import load

INSTALLED = Path(library._installed_package())
CORTEX_M_YAML = INSTALLED / "backends/cortex_m/ops/operators.yaml"


def _scratch_of(pte: Path, op: str) -> list[int]:
    """Planned scratch bytes of each call of `op`, read from the program's planned tensors."""
    plan = load(pte).plan()
    names = library.arguments_for(op, 0, library.installed()) or library.installed().lookup(op).arguments
    out = []
    for _, o, call in plan.kernel_calls():
        if o.qualified_name == op:
            out.append(plan.values[call.args[names.index("scratch")]].nbytes)
    return out


def test_scratch_differs_between_backends_and_verify_catches_it(exported):
    """The M55 (MVE) export plans no avgpool scratch; the M7 (DSP) export plans some; verify says so."""
    m7, m55 = exported("avg_pool2d", "cortex-m7"), exported("avg_pool2d", "cortex-m55")
    op = "cortex_m::quantized_avg_pool2d.out"
    planned_m7, planned_m55 = _scratch_of(m7, op), _scratch_of(m55, op)
    assert planned_m7 != planned_m55  # ExecuTorch's own planning differs per backend

    result = run_cli("verify", str(m55), "--target", "cortex-m7")
    assert result.returncode == 1
    index = next(i for i, o, _ in load(m55).plan().kernel_calls() if o.qualified_name == op)
    # The need on M7 is what ExecuTorch itself planned when lowering for M7.
    assert result.stdout.splitlines() == [
        f"FAIL avg_pool2d {op}#{index}: scratch {planned_m55[0]} B planned, cortex-m7 (DSP) needs {planned_m7[0]} B"
    ]
    assert run_cli("verify", str(m7), "--target", "cortex-m7").stdout.splitlines() == ["OK avg_pool2d"]


def test_mve_linear_layout_rejected_on_dsp(exported):
    m55 = exported("linear", "cortex-m55")
    lines = run_cli("verify", str(m55), "--target", "cortex-m7").stdout.splitlines()
    assert any(re.fullmatch(r"FAIL linear cortex_m::quantized_linear\.out#\d+: kernel_sum present \(MVE lowering\), "
                            r"cortex-m7 \(DSP\) ignores it and reads the bias", line) for line in lines), lines
    m7 = exported("linear", "cortex-m7")
    assert any("no kernel_sum" in line for line in run_cli("verify", str(m7), "--target", "cortex-m55").stdout.splitlines())


@pytest.mark.parametrize("core_name", ["cortex-m7", "cortex-m55"])
def test_every_case_verifies_for_its_own_core(exported, core_name):
    """The audit recomputes from the .pte exactly what ExecuTorch planned from the graph."""
    lib = library.load("installed")
    for case in all_cases(grid="default"):
        if case.fails_at("export", core_name):
            continue
        lines = [f.line() for f in verify_file(exported(case.name, core_name), lib, core(core_name))]
        if case.float_ops or any("lowering" in d.stages for d in case.defects_here(core_name)):  # compute left in float
            assert lines and all(line.startswith(f"FLOAT {case.name} left in float: ") for line in lines), lines
        else:
            assert lines == [f"OK {case.name}"]


def _schema_tree(tmp_path: Path, edit) -> Path:
    """A copy of the installed operators.yaml with one schema edited: a library from another commit."""
    target = tmp_path / "operators.yaml"
    text = CORTEX_M_YAML.read_text()
    edited = edit(text)
    assert edited != text
    target.write_text(edited)
    return target


def test_argument_removed_from_library_schema(exported, tmp_path):
    pte = exported("avg_pool2d", "cortex-m7")
    yaml = _schema_tree(tmp_path, lambda t: t.replace(
        "quantized_avg_pool2d.out(Tensor input, int[] kernel_size, int[] stride, int[] padding, bool ceil_mode,",
        "quantized_avg_pool2d.out(Tensor input, int[] kernel_size, int[] stride, int[] padding,"))
    result = run_cli("verify", str(pte), "--library", str(yaml))
    assert result.returncode == 1
    supplied = next(len(c.args) for _, o, c in load(pte).plan().kernel_calls() if "avg_pool2d" in o.name)
    assert result.stdout.splitlines() == [
        f"FAIL avg_pool2d cortex_m::quantized_avg_pool2d.out: model supplies {supplied}, library expects {supplied - 1}"
    ]


def test_argument_added_to_library_schema(exported, tmp_path):
    """The historical case: a library whose avg_pool2d gained count_include_pad."""
    pte = exported("keyword_spotting", "cortex-m7")
    yaml = _schema_tree(tmp_path, lambda t: t.replace(
        "int[] padding, bool ceil_mode, int zero_point, int multiplier, int shift, Tensor scratch, *, Tensor(a!) out) -> "
        "Tensor(a!)\n  variants: function\n  kernels:\n    - arg_meta: null\n      kernel_name: "
        "cortex_m::quantized_avg_pool2d_out",
        "int[] padding, bool ceil_mode, bool count_include_pad, int zero_point, int multiplier, int shift, Tensor scratch, *, "
        "Tensor(a!) out) -> Tensor(a!)\n  variants: function\n  kernels:\n    - arg_meta: null\n      kernel_name: "
        "cortex_m::quantized_avg_pool2d_out"))
    lines = run_cli("verify", str(pte), "--library", str(yaml)).stdout.splitlines()
    assert "FAIL keyword_spotting cortex_m::quantized_avg_pool2d.out: model supplies 11, library expects 12" in lines


def test_generated_registration_is_read(exported, tmp_path):
    """A library given as codegen output: the literal `stack.size() == N` checks are what counts."""
    pte = exported("conv2d", "cortex-m7")
    calls = {o.qualified_name: len(c.args) for _, o, c in load(pte).plan().kernel_calls()}
    lines = [f'Kernel(\n    "{name}",\n    [](KernelRuntimeContext& context, Span<EValue*> stack) {{\n'
             f'        ET_KERNEL_CHECK_MSG(context, stack.size() == {n + (1 if "conv2d" in name else 0)}, InvalidProgram, '
             f'/*void*/, "");\n    }}\n),'
             for name, n in calls.items()]
    (tmp_path / "RegisterCodegenUnboxedKernelsEverything.cpp").write_text("\n".join(lines))
    result = run_cli("verify", str(pte), "--library", str(tmp_path))
    n = calls["cortex_m::quantized_conv2d.out"]
    assert result.stdout.splitlines() == [f"FAIL conv2d cortex_m::quantized_conv2d.out: model supplies {n}, library expects "
                                          f"{n + 1}"]


def test_operator_missing_from_library(exported, tmp_path):
    pte = exported("softmax", "cortex-m7")
    yaml = _schema_tree(tmp_path, lambda t: re.sub(r"- func: cortex_m::softmax\.out.*?\n(?=- func|\Z)", "", t, flags=re.S))
    lines = run_cli("verify", str(pte), "--library", str(yaml)).stdout.splitlines()
    assert "MISSING softmax cortex_m::softmax.out: not registered in the library" in lines


def test_nhwc_operators_missing_from_older_tree(exported):
    """The main-branch tree lacks the wheel's five *_nhwc operators: MISSING, not a crash."""
    tree = sources.locate(sources.EXECUTORCH)
    if tree.path is None:
        pytest.skip(sources.missing_message(sources.EXECUTORCH))
    if "quantized_avg_pool2d_nhwc" in (tree.path / library.TREE_SCHEMA_FILES[0]).read_text():
        pytest.skip("this ExecuTorch tree already has the *_nhwc operators")
    pte = exported("avg_pool2d", "cortex-m55", layout="explicit")
    result = run_cli("verify", str(pte), "--library", str(tree.path))
    assert result.returncode == 1
    assert result.stdout.splitlines() == ["MISSING avg_pool2d cortex_m::quantized_avg_pool2d_nhwc.out: not registered in the "
                                          "library"]


def test_library_from_source_tree_matches_installed_package():
    """Two readings of the same schemas (tree yaml vs wheel yaml) agree on every shared cortex_m op."""
    tree = sources.locate(sources.EXECUTORCH)
    if tree.path is None:
        pytest.skip(sources.missing_message(sources.EXECUTORCH))
    ours, wheel = library.load(tree.path), library.load("installed")
    shared = [n for n in ours.kernels if n.startswith("cortex_m::") and n in wheel.kernels]
    assert len(shared) >= 15
    assert {n: ours.kernels[n].expects for n in shared} == {n: wheel.kernels[n].expects for n in shared}


def test_without_target_or_sidecar_every_core_is_audited(exported, tmp_path):
    """A program with no sidecar gets a verdict per core with a runner: the DSP lowering's
    conv2d scratch is too small for the M55 (MVE), whose need ExecuTorch planned lowering for it."""
    from cortexm.checking.verify import RUNNER_CORES

    pte = tmp_path / "bare.pte"
    shutil.copy(exported("conv2d", "cortex-m7"), pte)  # without its sidecar
    op = "cortex_m::quantized_conv2d.out"
    index = next(i for i, o, _ in load(pte).plan().kernel_calls() if o.qualified_name == op)
    [planned], [needed] = _scratch_of(pte, op), _scratch_of(exported("conv2d", "cortex-m55"), op)
    result = run_cli("verify", str(pte))
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        f"FAIL bare {op}#{index}: scratch {planned} B planned, {c.name} ({c.backend}) needs {needed} B" if c.backend == "MVE"
        else f"OK bare {c.name} ({c.backend})" for c in RUNNER_CORES]


def _edited(source: Path, out: Path, edit) -> Path:
    """`source` with `edit` applied through ExecuTorch's own serializer (tests/pte_fuzz.py)."""
    from pte_fuzz import rewrite

    out.write_bytes(rewrite(source.read_bytes(), edit))
    return out


def test_an_argument_cmsis_nn_cannot_take_is_one_line(exported, tmp_path):
    """A stride past int32 in a damaged program reached pybind11, whose refusal lists every
    overload over many lines; verify says which argument, in one line."""
    op = "cortex_m::quantized_conv2d.out"

    def stride_past_int32(pte) -> None:
        plan = pte.program.execution_plan[0]
        call = next(i.instr_args for i in plan.chains[0].instructions
                    if f"{plan.operators[i.instr_args.op_index].name}.{plan.operators[i.instr_args.op_index].overload}" == op)
        names = library.arguments_for(op, len(call.args), library.installed())
        stride = plan.values[call.args[names.index("stride")]].val
        plan.values[stride.items[0]].val.int_val = 1 << 40

    pte = _edited(exported("conv2d", "cortex-m7"), tmp_path / "damaged.pte", stride_past_int32)
    index = next(i for i, o, _ in load(pte).plan().kernel_calls() if o.qualified_name == op)
    result = run_cli("verify", str(pte), "--target", "cortex-m7")
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        f"FAIL damaged {op}#{index}: scratch audit: argument stride is [{1 << 40}, 1], expected two ints from 1 to 2^31-1"]
    assert "incompatible" not in result.stdout + result.stderr


def test_a_refusal_by_cmsis_nn_is_one_line():
    """Whatever gets past the argument checks to pybind11 still comes back as one line."""
    from cortexm.checking import scratch

    cm = scratch.cmsis_nn_module()
    with pytest.raises(scratch.ScratchError) as refused:
        scratch._call(cm, "avgpool_buffer_size", cm.Backend.DSP, dim_dst_width="wide", ch_src=3)
    assert "\n" not in str(refused.value)
    assert re.fullmatch(r"cmsis_nn\.avgpool_buffer_size refused the arguments \(.*incompatible function arguments\): "
                        r"dim_dst_width='wide', ch_src=3", str(refused.value)), str(refused.value)


def test_a_planned_buffer_of_4_gib_is_named_with_its_size(exported, tmp_path):
    """On a Cortex-M its 32-bit size_t reads 4 GiB as 0, and the load failed as `allocator size (0)`."""
    pte = _edited(exported("conv2d", "cortex-m7"), tmp_path / "big.pte",
                  lambda p: p.program.execution_plan[0].non_const_buffer_sizes.__setitem__(1, 1 << 32))
    result = run_cli("verify", str(pte), "--target", "cortex-m7")
    assert result.returncode == 1
    assert result.stdout.splitlines()[0] == (
        "FAIL big memory buffer 1 is 4294967296 B, more than a Cortex-M's 32-bit size_t holds (it would read 0 B)")
    assert "allocator size" not in result.stdout


CONV3D = '''
import torch


class Conv3d(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv3d(2, 4, 3, padding=1)

    def forward(self, x):
        return self.conv(x)


def make():
    return Conv3d().eval(), (torch.randn(1, 2, 4, 6, 6),)
'''


def test_a_5d_convolution_is_refused(tmp_path):
    """A Conv3d lowers to aten::convolution.out on a 5-D input: it loads, and ExecuTorch's portable
    convolution (the runner's) refuses it when it runs. verify says so instead of OK (and that it
    computes in float: nothing lowers a Conv3d)."""
    (tmp_path / "conv3d.py").write_text(CONV3D)
    pte = tmp_path / "conv3d.pte"
    exported = run_cli("export", f"{tmp_path / 'conv3d.py'}:make", "--target", "cortex-m7", "-o", str(pte))
    assert exported.returncode == 1 and "FAIL conv3d lowering: left in float: 1 aten::convolution.out" in exported.stdout
    index = next(i for i, o, _ in load(pte).plan().kernel_calls() if o.qualified_name == "aten::convolution.out")
    result = run_cli("verify", str(pte))
    assert result.returncode == 1
    assert result.stdout.splitlines()[0] == (
        f"FAIL conv3d aten::convolution.out#{index}: input float32[1,2,4,6,6] is 5-D, ExecuTorch's portable "
        f"convolution takes 3-D or 4-D (check_convolution_args)")
    assert result.stdout.splitlines()[1].startswith("FLOAT conv3d left in float: 1 aten::convolution.out (conv)")
