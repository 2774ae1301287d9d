"""The cross-core differential check: one case, exported for each core and run on each
core's runner (scalar CMSIS-NN on M3, DSP on M4/M7/M33, MVE on M55), must give
bit-identical outputs.

CMSIS-NN's variants are written to be bit-exact with each other (its unit tests
check every variant against the same expected bytes), and the lowering quantizes
before it looks at the core, so any difference is a defect in one variant or in
a backend-specific lowering — even when every core is within 1 LSB of the
Python reference. A case that differs by design says so (`Case.cross_core`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from cortexm.cases import defects
from cortexm.pte.tensors import digests
from cortexm.report.results import CrossCore, Status

if TYPE_CHECKING:
    from cortexm import cases as case_registry
    from cortexm.report.results import CaseResult


def check(case: str, outputs: dict[str, list[np.ndarray]], expected: str = "") -> CrossCore:
    """Compare the outputs each core produced for one case."""
    cores = list(outputs)
    result = CrossCore(case, cores, expected=expected)
    for core in cores:
        for group in result.groups:
            if _same(outputs[group[0]], outputs[core]):
                group.append(core)
                break
        else:
            result.groups.append([core])
    if not result.agree:
        a, b = result.groups[0][0], result.groups[1][0]
        result.first_difference = _first_difference(outputs[a], outputs[b], a, b)
    return result


def _same(x: list[np.ndarray], y: list[np.ndarray]) -> bool:
    return len(x) == len(y) and all(a.shape == b.shape and a.tobytes() == np.ascontiguousarray(b).tobytes()
                                    for a, b in zip((np.ascontiguousarray(v) for v in x), y, strict=True))


def _first_difference(x: list[np.ndarray], y: list[np.ndarray], a: str, b: str) -> str:
    for k, (u, v) in enumerate(zip(x, y, strict=False)):
        if u.shape != v.shape:
            return f"output {k} shape: {a} {list(u.shape)}, {b} {list(v.shape)}"
        diff = np.argwhere(u != v)
        if len(diff):
            index = tuple(int(i) for i in diff[0])
            return f"output {k}{list(index)}: {a} {u[index]:.6g}, {b} {v[index]:.6g} ({len(diff)} elements differ)"
    return "output count"


def cross_core(results: list[CaseResult], cases: dict[str, case_registry.Case]) -> list[CrossCore]:
    """The cross-core check of every case that ran on two or more cores."""
    checks = []
    for name in dict.fromkeys(r.case for r in results):
        rows = [r for r in results if r.case == name and r.compare and r.compare.outputs]
        if len(rows) >= 2:
            case = cases.get(name)
            found = check(name, {r.core: r.compare.outputs for r in rows if r.compare}, case.cross_core if case else "")
            if not found.agree and not found.expected:
                _explain_cross_core(found, rows, case)
            checks.append(found)
    return checks


def _explain_cross_core(check: CrossCore, rows: list[CaseResult], case) -> None:
    """Cores that disagree while each computes what its own integer reference predicts (the
    reference models each variant) differ by a known defect or by one not yet recorded;
    cores whose deviation from their reference is an expected failure are explained by it."""
    off = [r for r in rows if r.compare and r.compare.max_lsb]
    if not off:
        check.predicted = True
        # A known defect excuses only its own mechanism: the cores must agree once the M55's
        # Helium quantize loop rounds as the scalar one does.
        agreed = {r.core: r.compare.without_helium or digests(r.compare.outputs) for r in rows if r.compare}
        check.mechanism = ("the cores agree without ExecuTorch's Helium loops" if len({tuple(d) for d in agreed.values()}) == 1
                           else "they disagree without ExecuTorch's Helium loops too")
        line = check.line()
        locate = defects.default_locators()
        known = [d for d in defects.CROSS_CORE_FINDINGS
                 if any(d.applies(r.core, locate) for r in rows) and d.explains("cross-core", line)]
        if known:
            check.expected = f"{known[0].name}: {known[0].reason}"
    elif all(r.status == Status.XFAIL for r in off):
        check.expected = "the expected failures of " + ", ".join(f"{r.core} ({r.reason.split(':')[0]})" for r in off)
