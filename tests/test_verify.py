"""verify: schema check against a library, scratch audit and backend layout, with the exact lines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cortexm import library, sources
from cortexm.cases import all_cases
from cortexm.pte import load
from cortexm.targets import core
from cortexm.verify import verify_file

from conftest import run_cli

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
        findings = verify_file(exported(case.name, core_name), lib, core(core_name))
        assert [f.line() for f in findings] == [f"OK {case.name}"]


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
        "int[] padding, bool ceil_mode, int zero_point, int multiplier, int shift, Tensor scratch, *, Tensor(a!) out) -> Tensor(a!)\n  variants: function\n  kernels:\n    - arg_meta: null\n      kernel_name: cortex_m::quantized_avg_pool2d_out",
        "int[] padding, bool ceil_mode, bool count_include_pad, int zero_point, int multiplier, int shift, Tensor scratch, *, Tensor(a!) out) -> Tensor(a!)\n  variants: function\n  kernels:\n    - arg_meta: null\n      kernel_name: cortex_m::quantized_avg_pool2d_out"))
    lines = run_cli("verify", str(pte), "--library", str(yaml)).stdout.splitlines()
    assert "FAIL keyword_spotting cortex_m::quantized_avg_pool2d.out: model supplies 11, library expects 12" in lines


def test_generated_registration_is_read(exported, tmp_path):
    """A library given as codegen output: the literal `stack.size() == N` checks are what counts."""
    pte = exported("conv2d", "cortex-m7")
    calls = {o.qualified_name: len(c.args) for _, o, c in load(pte).plan().kernel_calls()}
    lines = [f'Kernel(\n    "{name}",\n    [](KernelRuntimeContext& context, Span<EValue*> stack) {{\n'
             f'        ET_KERNEL_CHECK_MSG(context, stack.size() == {n + (1 if "conv2d" in name else 0)}, InvalidProgram, /*void*/, "");\n    }}\n),'
             for name, n in calls.items()]
    (tmp_path / "RegisterCodegenUnboxedKernelsEverything.cpp").write_text("\n".join(lines))
    result = run_cli("verify", str(pte), "--library", str(tmp_path))
    n = calls["cortex_m::quantized_conv2d.out"]
    assert result.stdout.splitlines() == [f"FAIL conv2d cortex_m::quantized_conv2d.out: model supplies {n}, library expects {n + 1}"]


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
    assert result.stdout.splitlines() == ["MISSING avg_pool2d cortex_m::quantized_avg_pool2d_nhwc.out: not registered in the library"]


def test_library_from_source_tree_matches_installed_package():
    """Two readings of the same schemas (tree yaml vs wheel yaml) agree on every shared cortex_m op."""
    tree = sources.locate(sources.EXECUTORCH)
    if tree.path is None:
        pytest.skip(sources.missing_message(sources.EXECUTORCH))
    ours, wheel = library.load(tree.path), library.load("installed")
    shared = [n for n in ours.kernels if n.startswith("cortex_m::") and n in wheel.kernels]
    assert len(shared) >= 15
    assert {n: ours.kernels[n].expects for n in shared} == {n: wheel.kernels[n].expects for n in shared}
