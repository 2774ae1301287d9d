"""Stage compare: the run's outputs against the integer reference the export saved, in LSB, at
the case's tolerance, with the comparison `cortexm run` shows (cortexm.pte.tensors.compare_outputs)."""

from __future__ import annotations

from cortexm.pte.tensors import compare_outputs
from cortexm.report.results import Compare
from cortexm.testing.checks.context import Checking, fail


def stage(c: Checking) -> None:
    assert c.outcome is not None and c.references is not None  # stage run ended the case otherwise
    result, sidecar = c.result, c.sidecar
    result.stages.append("compare")
    record = result.compare = Compare(outputs=c.outcome.outputs, without_helium=sidecar.reference_without_helium)
    diffs = compare_outputs(c.outcome.outputs, c.references, sidecar.outputs)
    record.per_output = [[d.max_lsb, d.mismatches, d.elements] for d in diffs]
    record.max_lsb = max((d.max_lsb for d in diffs), default=0.0)
    record.mismatches = sum(d.mismatches for d in diffs)
    record.elements = sum(d.elements for d in diffs)
    if record.max_lsb > c.case.qtol:
        worst = [f"output {d.index}{list(i)}: got {a:.6g}, reference {r:.6g} ({x:g} LSB)"
                 for d in diffs for i, a, r, x in d.worst]
        fail(result, "compare", f"max |diff| {record.max_lsb:g} LSB > tolerance {c.case.qtol} LSB "
                                f"({record.mismatches}/{record.elements} elements differ)", "\n".join(worst))
