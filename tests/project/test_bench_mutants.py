"""bench/mutants.py: its verdict rules (what counts as a kill) and its mutants."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

from conftest import in_checkout

_spec = importlib.util.spec_from_file_location("bench_mutants", in_checkout("bench", "mutants.py"))
mutants = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = mutants  # its dataclasses look their module up
_spec.loader.exec_module(mutants)


def _row(status, failures=(), case="q", core="cortex-m55"):
    return {"case": case, "core": core, "status": status, "reason": "max |diff| 127 LSB", "failures": [list(f) for f in failures]}


def _verdict(base_rows, rows, base_checks=(), checks=()):
    worse = mutants.judge({"results": base_rows, "cross_core": list(base_checks)},
                          {"results": rows, "cross_core": list(checks)}, Path("/work"))
    out = mutants.Outcome("m", "cpp", "", "", "SURVIVED")
    return mutants._judged(out, worse)


def test_a_new_failure_kills():
    out = _verdict([_row("PASS")], [_row("FAIL", [("compare", "max |diff| 3 LSB")])])
    assert (out.verdict, out.stages) == ("KILLED", ["compare"])


def test_an_excused_failure_unexcused_by_the_edit_is_no_kill():
    """A known defect keyed to the mutated file stops excusing its own, unchanged failure."""
    same = [("compare", "max |diff| 127 LSB")]
    check = {"case": "q", "groups": [["cortex-m7"], ["cortex-m55"]], "first_difference": "output 0[0]"}
    out = _verdict([_row("XFAIL", same)], [_row("FAIL", same)],
                   [{**check, "failed": False, "expected": "quantize wraps on MVE"}], [{**check, "failed": True, "expected": ""}])
    assert (out.verdict, out.stages) == ("SURVIVED", [mutants.WITHDRAWN])
    # The same failure plus one it did not have: a kill.
    out = _verdict([_row("XFAIL", same)], [_row("FAIL", same + [("memory", "wrote 1 bytes past")])])
    assert out.verdict == "KILLED" and out.stages == ["memory"]


def test_a_golden_diff_alone_is_no_kill():
    """A contributor regenerates the goldens after an intended change: a golden diff says the
    lowering changed, not that it is wrong. A semantic departure is a kill, and says so."""
    golden = ("dialect", "lowered graph differs from tests/goldens/cortex-m7/q.txt")
    out = _verdict([_row("PASS")], [_row("FAIL", [golden])])
    assert (out.verdict, out.checks) == ("SURVIVED", ["golden"])
    semantic = ("semantic", "call 2 cortex_m::maximum (q: aten.minimum) departs from the quantized model")
    out = _verdict([_row("PASS")], [_row("FAIL", [golden, semantic])])
    assert (out.verdict, out.checks) == ("KILLED", ["golden", "semantic"])
    counted = mutants._judged(mutants.Outcome("m", "python", "", "", "SURVIVED"),
                              mutants.judge({"results": [_row("PASS")]}, {"results": [_row("FAIL", [golden])]},
                                            Path("/work")), count_golden=True)
    assert counted.verdict == "KILLED"


def test_every_cmsis_nn_mutant_is_one_line_of_the_cmsis_nn_tree():
    """Each CMSIS-NN mutant changes one line of CMSIS-NN's Source/ or Include/, and applies to
    the CMSIS-NN tree cortexm uses (checked with `git apply --check`, which writes nothing)."""

    from cortexm import sources

    selected = mutants.select(None, "cmsis_nn")
    assert len(selected) >= 15
    _one_line_each(selected, "cmsis-nn")
    assert all(f.startswith(("Source/", "Include/")) for m in selected for f in m.files)
    _applies(selected, sources.CMSIS_NN)


def _one_line_each(selected, tree: str) -> None:
    for m in selected:
        text = m.patch.read_text()
        removed = [l for l in text.splitlines() if l.startswith("-") and not l.startswith("---")]
        added = [l for l in text.splitlines() if l.startswith("+") and not l.startswith("+++")]
        assert m.tree == tree and m.what and len(removed) == 1 and len(added) <= 1, m.name


def _applies(selected, kind) -> None:
    """Each patch applies to the tree of `kind` cortexm uses (`git apply --check` writes nothing)."""
    import subprocess

    from cortexm import sources

    tree = sources.locate(kind).path
    if tree is None:
        pytest.skip(sources.missing_message(kind))
    if shutil.which("git") is None:
        pytest.skip("git not found: the patches are checked with `git apply --check`")
    for m in selected:
        done = subprocess.run(["git", "apply", "--check", str(m.patch)], cwd=tree, capture_output=True, text=True)
        assert done.returncode == 0, f"{m.name}: {done.stderr.strip()}"


def test_only_takes_several_names():
    """--only python/14,python/31 runs those two and nothing else (a subset re-run after a fix)."""
    chosen = mutants.select("python/14,python/31", None)
    assert [m.name.split("-")[0] for m in chosen] == ["python/14", "python/31"]
    assert mutants.select("python/14", "cpp") == []


def test_every_quantizer_mutant_is_one_line_of_the_backends_python():
    """Each quantizer mutant changes one line of backends/cortex_m's Python (what decides how a
    model quantizes) and applies to the ExecuTorch tree cortexm uses."""
    from cortexm import sources

    selected = mutants.select(None, "quantizer")
    assert len(selected) >= 5
    _one_line_each(selected, "executorch")
    assert all(f.startswith("backends/cortex_m/") and f.endswith(".py") for m in selected for f in m.files)
    _applies(selected, sources.EXECUTORCH)
