"""Stage lowering: every call that is not a cortex_m kernel, and a compute operator left in
float as a failure of its own unless the case expects it (cortexm.checking.lowering)."""

from __future__ import annotations

from cortexm.report.results import Lowering
from cortexm.testing.checks.context import Checking, fail


def stage(c: Checking) -> None:
    from cortexm.checking import lowering

    result = c.result
    result.stages.append("lowering")
    total, lowered, left = lowering.survey(c.bundle.program().plan(), c.bundle.sidecar)
    record = result.lowering = Lowering(lowered=[lowered, total], left=[call.as_dict() for call in left])
    line = lowering.failure_line(left, dict(c.case.float_ops))
    record.verdict = "ok" if line is None else "FAIL"
    if line is not None:
        fail(result, "lowering", line, "\n".join(f"instruction {call.instruction} {call.op} ({call.where()}"
                                                 f"{', ' + call.source if call.source else ''}): {call.reason}"
                                                 for call in left if call.fails))
