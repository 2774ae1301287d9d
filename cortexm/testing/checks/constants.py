"""Stage constants: constant bytes no call reads (cortexm.checking.constants). Those a known
defect leaves are noted with it; any other fails the stage."""

from __future__ import annotations

from cortexm.base.targets import Core
from cortexm.cases import defects
from cortexm.pte.bundle import Bundle
from cortexm.report.results import CaseResult
from cortexm.testing.checks.context import Checking, fail


def stage(c: Checking) -> None:
    measure(c.bundle, c.core, c.result)


def measure(bundle: Bundle, core: Core, result: CaseResult) -> None:
    """The stage on its own: `bundle`'s constants on `core`, into `result`."""
    from cortexm.checking import constants

    assert bundle.sidecar is not None  # the stage export refuses a bundle without one
    data, program = bundle.data, bundle.program()
    found = constants.survey(program, program.plan(), data, bundle.sidecar.constants)
    result.pte_bytes, result.constant_bytes, result.dead_bytes = len(data), found.total, found.dead_bytes
    # Whether the program could show the known defect at all: what a claim that it is fixed needs.
    result.dead_pattern = defects.shows_dead_weights({op.qualified_name for _, op, _ in program.plan().kernel_calls()},
                                                     core.backend)
    if not found.dead:
        return
    result.stages.append("constants")
    known = defects.EXECUTORCH_DEAD_WEIGHTS
    applies = known.applies(core.name, defects.default_locators())
    unexplained = [d for d in found.dead if not (applies and (not d.name or known.explains("constants", d.name)))]
    if not unexplained:
        result.dead_cause = known.name
        return
    fail(result, "constants", constants.Constants(found.total, tuple(unexplained)).line(),
         "\n".join(f"buffer {d.buffer} {d.tensor} {d.name}: {d.nbytes} B" for d in unexplained))
