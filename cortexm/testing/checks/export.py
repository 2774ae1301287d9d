"""Stage export: the case's bundle as the export left it, opened once for every later stage."""

from __future__ import annotations

from pathlib import Path

from cortexm.base.errors import CortexmError
from cortexm.pte.bundle import Bundle
from cortexm.report.results import CaseResult


def opened(exported: Path | str, result: CaseResult) -> Bundle:
    """The bundle at `exported` (a str: why the export failed), its sidecar read; its program
    is read and parsed when a stage first asks for it, once."""
    result.stages.append("export")
    if isinstance(exported, str):
        raise CortexmError(f"export failed: {exported}")
    bundle = Bundle.open(exported)
    if bundle.sidecar is None:
        raise CortexmError(f"{exported}: no sidecar beside it")
    result.pte = str(exported)
    result.data_targets = bundle.sidecar.data_targets
    return bundle
