"""A program exported elsewhere (`cortexm test --pte`), as a case the stages check like any other."""

from __future__ import annotations

from pathlib import Path

from cortexm import cases as case_registry
from cortexm.base.errors import CortexmError
from cortexm.pte.sidecar import program_name, read_sidecar


def given_program(pte: Path) -> case_registry.Case:
    """A program exported elsewhere, as a case: its sidecar gives name and tolerance."""
    from cortexm.pte import load

    load(pte)  # a clear error now for a missing or damaged file
    sidecar = read_sidecar(pte)
    if sidecar is None:
        raise CortexmError(f"{pte}: no sidecar {pte.with_suffix('.json').name} beside it (export it with cortexm export)")

    def not_buildable():
        raise CortexmError(f"{pte} is a given program, not a buildable case")

    return case_registry.Case(program_name(pte, sidecar), f"given program {pte}", not_buildable, qtol=sidecar.qtol or 0,
                              program=pte)
