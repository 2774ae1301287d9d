"""What the test app's stages pass on and give back: a simulator run's outcome, the result of
one case on one core (CaseResult), and the run's options.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from cortexm.base.targets import Core
from cortexm.checking.library import Library

if TYPE_CHECKING:
    from cortexm.firmware.build import Runner
    from cortexm.pte.bundle import Bundle


@dataclass
class SimOutcome:
    """What a simulator run gave: outputs (logical layout), or a failure line."""

    outputs: list  # numpy arrays in the outputs' logical shapes
    instructions: int | None
    log: str
    failure: str | None  # one line naming what went wrong, None on success
    calls: dict = field(default_factory=dict)  # instruction index -> its cost (a run with --calls 1)
    remembered: bool = False  # the same program, inputs, runner and simulator ran before (cortexm.sim.memo)


class Simulator(Protocol):
    name: str
    runner: Runner  # the firmware it runs programs on

    def run(self, program: Bundle, core: Core, inputs: list[Path] | None = None,
            extra_args: tuple[str, ...] = ()) -> SimOutcome: ...

    def memory_args(self, fill: int) -> tuple[str, ...]: ...


@dataclass
class Options:
    cores: list[Core]
    pattern: str | None = None
    case_files: list[Path] = field(default_factory=list)
    goldens: Path | None = None
    library: Library | None = None
    simulators: dict[str, Simulator | str] = field(default_factory=dict)  # core -> simulator, or why there is none
    # The simulators still being built (cortexm.testing.simulate.InBackground): run() takes them as
    # `simulators` once the exports are done, the builds having run meanwhile.
    building: Any = None
    jobs: int = 2
    layout: str = "legacy"
    # Programs exported elsewhere (with their sidecar): checked and run as they are, per core.
    ptes: list[Path] = field(default_factory=list)
    grid: str = "default"  # which grid cases run: none, default, full (cortexm.cases.grid)
    # The memory oracle (guards around every planned buffer on a core, sanitizers on the
    # host), and the two fills whose outputs must agree.
    memory: bool = True
    fills: tuple[int, int] = (0x00, 0xFF)
    sim_jobs: int | None = None  # simulator runs at once (default: jobs)
    # --scope's words for --grid exhaustive (cortexm.cases.exhaustive.parse_scope), handed to the
    # export workers with each job.
    scope: tuple[str, ...] = ()
    # Sweep samples (cortexm.testing.sweep) as (case name, operator, parameters): registered as
    # cases and run instead of any other, and handed as data to the export workers with each job.
    samples: tuple[tuple[str, str, dict], ...] = ()
    shard: tuple[int, int] | None = None  # (K, N): only the cases of shard K of N (cortexm.testing.shards)
    # An evaluation set every export measures accuracy on too (cortexm.semantic.evalset): its
    # path and the digest of what was read there, which the export cache keys on.
    evaluation: tuple[str, str] | None = None
    # Seconds each step of a case's own code may take in its export worker (building the model,
    # quantizing it): `--timeout`.
    timeout: float | None = None
    profile: bool = False  # --profile: every simulated case's run call by call (cortexm.report.profile)
    # Filled by run(): core -> programs simulated (a packed program counts once).
    programs: dict[str, int] = field(default_factory=dict)
