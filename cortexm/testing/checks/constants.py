"""Stage constants: constant bytes no call reads (cortexm.checking.constants). Those a known
defect leaves are noted with it; any other fails the stage."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cortexm.base.targets import Core
from cortexm.cases import defects
from cortexm.pte.bundle import Bundle
from cortexm.report import results
from cortexm.testing.checks.context import Checking, fail

if TYPE_CHECKING:
    from cortexm.checking.constants import Constants, DeadConstant


def stage(c: Checking) -> None:
    from cortexm.checking.constants import Constants

    result = c.result
    result.constants, found, unexplained = measure(c.bundle, c.core)
    if not found.dead:
        return
    result.stages.append("constants")
    if unexplained:
        fail(result, "constants", Constants(found.total, tuple(unexplained)).line(),
             "\n".join(f"buffer {d.buffer} {d.tensor} {d.name}: {d.nbytes} B" for d in unexplained))


def measure(bundle: Bundle, core: Core) -> tuple[results.Constants, Constants, list[DeadConstant]]:
    """The stage on its own: its record of `bundle`'s constants on `core`, what the survey
    found, and the constants no call reads that no known defect explains."""
    from cortexm.checking import constants

    assert bundle.sidecar is not None  # the stage export refuses a bundle without one
    data, program = bundle.data, bundle.program()
    found = constants.survey(program, program.plan(), data, bundle.sidecar.constants)
    # Whether the program could show the known defect at all: what a claim that it is fixed needs.
    record = results.Constants(found.total, found.dead_bytes, pte_bytes=len(data), dead_pattern=defects.shows_dead_weights(
        {op.qualified_name for _, op, _ in program.plan().kernel_calls()}, core.backend))
    if not found.dead:
        return record, found, []
    known = defects.EXECUTORCH_DEAD_WEIGHTS
    applies = known.applies(core.name, defects.default_locators())
    unexplained = [d for d in found.dead if not (applies and (not d.name or known.explains("constants", d.name)))]
    if not unexplained:
        record.dead_cause = known.name
    return record, found, unexplained
