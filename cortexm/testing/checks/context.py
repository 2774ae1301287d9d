"""What the stages of one case's checks share: the case on its core with its opened bundle,
what earlier stages found, and how a stage records a failure in the case's result."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cortexm.base.errors import CortexmError
from cortexm.base.targets import Core
from cortexm.cases import Case
from cortexm.pte.bundle import Bundle
from cortexm.pte.sidecar import Sidecar
from cortexm.report.results import CaseResult, Status
from cortexm.testing.results import Options, SimOutcome, Simulator


@dataclass
class Checking:
    """One case on one core, checked stage by stage over one opened bundle."""

    case: Case
    core: Core
    options: Options
    bundle: Bundle  # opened once: its program is parsed once for every stage
    result: CaseResult
    simulator: Simulator | None = None  # the core's, once stage `run` has taken it
    references: list | None = None  # the integer reference's outputs, read before the run
    outcome: SimOutcome | None = None  # stage run's: what the later stages judge
    done: bool = False  # a stage ended the case: the later ones have nothing to check

    @property
    def sidecar(self) -> Sidecar:
        if self.bundle.sidecar is None:  # the stage export refuses such a bundle
            raise CortexmError(f"{self.bundle.pte}: no sidecar beside it")
        return self.bundle.sidecar


# A stage: what it finds goes into the case's result, as its own record (cortexm.report.results)
# and its failures (fail).
Stage = Callable[[Checking], None]


def fail(result: CaseResult, stage: str, reason: str, details: str = "") -> None:
    result.status = Status.FAIL
    result.failures.append((stage, reason))
    if not result.reason:
        result.reason = reason
    if details:
        result.details = (result.details + "\n" + details).strip()


def tail(log: str, lines: int = 15) -> str:
    """What to look at in a simulator log: a sanitizer's report from its start, else the end."""
    report = log.find("==ERROR: ")
    if report >= 0:
        return "\n".join(log[report:].splitlines()[:lines + 10])
    return "\n".join(log.rstrip().splitlines()[-lines:])
