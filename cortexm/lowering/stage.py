"""A lowering stage named while it runs, and its failure in one line naming it."""

from __future__ import annotations

from cortexm.base.errors import CortexmError
from cortexm.base.targets import Core
from cortexm.lowering import decisions
from cortexm.lowering.modelsource import ModelBundle

# Told each stage as it starts (`cortexm export` shows them): a first export spends minutes
# in stages that print nothing of their own.
STAGE_LISTENERS: list = []


class stage:
    """Turns any failure inside a lowering stage into one line naming the stage."""

    def __init__(self, bundle: ModelBundle, core: Core | None, what: str) -> None:
        self.where = f"{bundle.name} for {core.name}" if core else bundle.name
        self.what = what

    def __enter__(self):
        for listener in STAGE_LISTENERS:
            listener(f"{self.where}: {self.what}")
        return self

    def __exit__(self, kind, error, tb):
        if error is None or isinstance(error, (CortexmError, KeyboardInterrupt)):
            return False
        # Pass managers wrap the real error ("An error occurred when running ..."): report the innermost.
        cause = error
        while cause.__cause__ is not None:
            cause = cause.__cause__
        first = (str(cause).strip().splitlines() or [""])[0][:300]
        # The pass and the model node it was handling: the error alone names neither.
        handled = decisions.handled_when(error)
        raise CortexmError(f"lowering {self.where} failed in {self.what}: {type(cause).__name__}: {first}"
                           + (f" ({handled})" if handled else "")) from error
