"""Packed programs (cortexm.cases.exhaustive): one export and one simulator boot serve
several cases, and each case is judged on its own output.

What enters: a packed program's result on one core (the test app's CaseResult) and its
case. What leaves: one result per case it holds.

A program that passed every check passed for each of its cases: each gets its own output's
comparison with the reference, its own kernel calls (instructions) and semantic points, and
its own output for the cross-core check. A program that failed anything is not split by
guesswork: `passed` says so, and the test app runs its cases alone, each with the model,
quantization and data it had in the pack (cortexm.cases.exhaustive builds them so), judged
as any case is.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from cortexm.report.results import Compare, Run, Semantic, Status

SPLITTABLE = (Status.PASS, Status.NOT_RUN)  # a packed program with any other status is run case by case


def passed(result) -> bool:
    return result.status in SPLITTABLE


def owners(pte: Path, outputs_per_part: int = 1) -> dict[int, int]:
    """Instruction index -> the part whose output it computes (the calls each program output
    depends on, followed back through the values they read)."""
    from cortexm.pte import load

    plan = load(pte).plan()
    calls = {n: call for n, _, call in plan.kernel_calls()}
    producer = {call.args[-1]: n for n, call in calls.items()}
    owner: dict[int, int] = {}
    for k, index in enumerate(plan.outputs):
        part, todo = k // outputs_per_part, [index]
        while todo:
            n = producer.get(todo.pop())
            if n is None or n in owner:
                continue
            owner[n] = part
            todo.extend(calls[n].args[:-1])
    return owner


def split(result, case) -> list:
    """The results of a packed program that passed, one per part."""
    owner = owners(Path(result.pte)) if result.pte else {}
    share = {stage: seconds / len(case.parts) for stage, seconds in result.seconds.items()}
    # Each part's records of its own; the stages that judge the program whole (verify, memory...) it shares.
    run, compare, semantic = result.run or Run(), result.compare or Compare(), result.semantic or Semantic()
    parts = []
    for j, name in enumerate(case.parts):
        calls = [c for c in run.calls if owner.get(c[0]) == j]
        points = [p for p in semantic.points if owner.get(p["call"]) == j]
        stats = compare.per_output[j] if j < len(compare.per_output) else (None, None, None)
        parts.append(dataclasses.replace(
            result, case=name, pack=case.name,
            run=dataclasses.replace(run, calls=calls, instructions=sum(c[2] for c in calls) if calls else None),
            compare=dataclasses.replace(
                compare, outputs=compare.outputs[j:j + 1], per_output=[stats], max_lsb=stats[0], mismatches=stats[1],
                elements=stats[2], without_helium=compare.without_helium[j:j + 1] if compare.without_helium else None),
            semantic=dataclasses.replace(
                semantic, points=points,
                lsb=max((p["max_lsb"] for p in points if p["max_lsb"] is not None), default=None)),
            seconds=dict(share), stages=list(result.stages), failures=[], findings=list(result.findings)))
    return parts
