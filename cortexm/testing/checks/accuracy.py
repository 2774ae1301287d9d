"""Stage accuracy: the program against the float model (cortexm.semantic.accuracy, .realinputs):
shown, and failed below the floor or where a calibrated range does not cover the real inputs
(the example inputs where the case's data stays in the calibrated range, an evaluation set).
Below the floor the line names the point that lost the most, its module, and its SQNR and that
of the points it reads."""

from __future__ import annotations

from cortexm.base.errors import CortexmError
from cortexm.report.results import Accuracy
from cortexm.testing.checks.context import Checking, fail


def stage(c: Checking) -> None:
    from cortexm.semantic import accuracy, realinputs

    result, sidecar = c.result, c.sidecar
    record = sidecar.accuracy
    if not record:
        return
    result.stages.append("accuracy")
    db, top1 = accuracy.summary(record)
    found = result.accuracy = Accuracy(db, top1)
    calls = realinputs.calls_of(sidecar.semantic)
    points = [{**p, "call": calls.get(p["node"], (None, None))[0], "op": calls.get(p["node"], (None, None))[1]}
              for p in record.get("points", [])]
    modules = {call["instruction"]: str(call.get("module") or "")
               for call in sidecar.calls or [] if isinstance(call, dict) and isinstance(call.get("instruction"), int)}
    try:
        found.points = accuracy.with_inputs(points, c.bundle.program().plan(), modules)
    except CortexmError:  # a program the reader refuses fails in its own stage; the points stay as recorded
        found.points = points
    found.real = realinputs.summary(record, calls)
    floor = accuracy.below_floor(record, sidecar.data)
    for line in realinputs.failures(record, sidecar.data, calls):
        fail(result, "accuracy", line + (accuracy.lost_line(found.points) if line == floor else ""))
