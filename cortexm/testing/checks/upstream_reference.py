"""Stage upstream-reference: ExecuTorch's Python reference against the integer one, call by
call, as recorded at export: differences a named finding allows are noted
(cortexm.oracle.upstream), any other fails the case."""

from __future__ import annotations

from cortexm.testing.checks.context import Checking, fail


def stage(c: Checking) -> None:
    result = c.result
    calls = (c.sidecar.upstream_reference or {}).get("calls") or []
    if not calls:
        return
    result.stages.append("upstream-reference")
    for call in calls:
        result.findings += [f for f in call["findings"] if f not in result.findings]
    unexplained = [call for call in calls if call["unexplained"]]
    if unexplained:
        u = unexplained[0]
        what = u["note"] or f"{u['unexplained']} of {u['elements']} elements differ (up to {u['max_lsb']:g} LSB)"
        fail(result, "upstream-reference",
             f"ExecuTorch's Python reference of {u['op']} (call {u['call']}) departs from the integer reference "
             f"as no known finding does: {what}",
             "\n".join(f"call {u['call']} {u['op']}: {u['differ']} of {u['elements']} differ, up to {u['max_lsb']:g} LSB; "
                       f"{u['unexplained']} unexplained; {u['note']}" for u in unexplained))
