"""Stage semantic: the program against the model it was lowered from (cortexm.semantic), as the
export recorded it: the outputs' shapes, dtypes and layouts, and every point within its
operator's tolerance. Independent of the simulator: a wrong lowering fails here even when the
runner and the integer reference agree on it."""

from __future__ import annotations

from cortexm.report.results import Semantic
from cortexm.testing.checks.context import Checking, fail


def stage(c: Checking) -> None:
    from cortexm.semantic import judge

    result, semantic = c.result, c.sidecar.semantic
    if not semantic:
        return
    result.stages.append("semantic")
    points = semantic.get("points", [])
    record = result.semantic = Semantic(
        lsb=max((p["max_lsb"] for p in points), default=None),
        drift_lsb=max((d["max_lsb"] for d in semantic.get("drift", []) if d.get("max_lsb") is not None), default=None),
        sqnr_db=min((f["sqnr_db"] for f in semantic.get("float", []) if f.get("sqnr_db") is not None), default=None),
        points=[{k: p.get(k) for k in ("op", "call", "node", "max_lsb", "histogram")} for p in points])
    departures = judge.departures(semantic)
    for line, details in departures:
        fail(result, "semantic", line, details)
    record.verdict = "FAIL" if departures else "ok"
