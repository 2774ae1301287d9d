"""What the test app's stages pass on and give back: a simulator run's outcome, the result of
one case on one core (CaseResult), and the run's options.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from cortexm.base.targets import Core
from cortexm.checking.library import Library


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

    def run(self, pte: Path, core: Core, inputs: list[Path] | None = None, extra_args: tuple[str, ...] = ()) -> SimOutcome: ...


# Statuses that fail a run: against a baseline, slower (SLOWER), less accurate (DEGRADED) or
# a larger program (LARGER) too.
FAILED = ("FAIL", "XPASS", "ERROR", "SLOWER", "DEGRADED", "LARGER")


@dataclass
class CaseResult:
    case: str
    core: str
    # PASS, FAIL, XFAIL, XPASS, ERROR, NOT RUN (checked, but not simulated); against a baseline
    # (cortexm.testing.perf) a PASS can be SLOWER (a failure) or FASTER.
    status: str = "PASS"
    dialect: str = "-"  # ok, DIFF, - (no golden)
    verify: str = "-"
    lowering: str = "-"  # ok, FAIL (a compute operator left in float), - (not checked)
    # [cortex_m kernel calls, kernel calls], and every call that is not a cortex_m kernel
    # (cortexm.checking.lowering.LeftCall.as_dict).
    lowered: list = field(default_factory=list)
    left: list = field(default_factory=list)
    # The program's constant bytes and those no call reads (cortexm.checking.constants), with the
    # known defect that explains them ("" when none does, or there are none).
    constant_bytes: int | None = None
    dead_bytes: int | None = None
    dead_cause: str = ""
    pte_bytes: int | None = None
    # The program against the float model over inputs drawn like the calibration data
    # (cortexm.semantic.accuracy): the lowest SQNR over its outputs, top-1 agreement ("k/n"),
    # and each activation point's own SQNR in the quantized model (what --baseline blames).
    accuracy_db: float | None = None
    top1: str | None = None
    accuracy_points: list = field(default_factory=list)
    # What the run used of the runner's memory (cortexm.report.fit.parse_memory_line), and
    # whether the case is a deployment (cortexm.cases.tiny): its line is printed.
    memory_use: dict = field(default_factory=dict)
    deployment: bool = False
    sim: str = "-"
    # Its program ran before with this runner and inputs: the run came from cortexm.sim.memo
    # (the program is unchanged by whatever was edited since).
    remembered: bool = False
    # Exported anew since an edit (cortexm.testing.exports.export_all): "unchanged" when the
    # program is byte for byte the one this cache made before, "changed" when the edit reached
    # it, "" when it came from the cache or had no earlier program.
    edit: str = ""
    memory: str = "-"  # the memory oracle: ok, FAIL, - (not run)
    semantic: str = "-"  # the program against the quantized model (cortexm.semantic): ok, FAIL, - (no model)
    semantic_lsb: float | None = None  # the largest departure of a point from the model, in LSB
    drift_lsb: float | None = None  # the whole program against the model without forcing, in output LSB
    sqnr_db: float | None = None  # the program against the float model (lowest over outputs; None: exact)
    # Per point of the semantic check: operator, call, largest difference and its histogram
    # (what bench/tolerances.py measures the tolerance table from).
    semantic_points: list = field(default_factory=list)
    max_lsb: float | None = None
    mismatches: int | None = None
    elements: int | None = None
    instructions: int | None = None
    reason: str = ""  # one line
    details: str = ""  # what to look at: graph diff, worst elements, simulator log tail
    failures: list = field(default_factory=list)  # (stage, line) of every check that failed
    findings: list = field(default_factory=list)  # known findings about upstream's reference this case showed
    stages: list = field(default_factory=list)  # the stages that ran (cortexm.cases.defects.STAGES)
    seconds: dict[str, float] = field(default_factory=dict)
    outputs: list = field(default_factory=list, repr=False)  # the simulator's, for the cross-core check
    # What each kernel call cost: [instruction index, operator, instructions (or ticks)], for
    # the performance gate (cortexm.testing.perf).
    calls: list = field(default_factory=list)
    perf: str = ""  # against a baseline (--baseline): the change in instructions, and the call that made it
    pte: str = ""  # the program that was checked (in the export cache)
    # Digests of the integer reference's outputs without ExecuTorch's Helium loops (M55 only):
    # what the core would give if only that rounding were otherwise.
    without_helium: list | None = field(default=None, repr=False)
    # Per output: [max |diff| LSB, mismatches, elements] against the reference.
    per_output: list = field(default_factory=list, repr=False)
    exhaustive: str = ""  # the operator of an exhaustive case (cortexm.cases.exhaustive)
    pack: str = ""  # the packed program it ran in (cortexm.testing.packs)
    data_targets: dict | None = None  # what solved boundary data met (cortexm.cases.solve)

    @property
    def failed(self) -> bool:
        return self.status in FAILED


@dataclass
class Options:
    cores: list[Core]
    pattern: str | None = None
    case_files: list[Path] = field(default_factory=list)
    goldens: Path | None = None
    library: Library | None = None
    simulators: dict[str, Simulator | str] = field(default_factory=dict)  # core -> simulator, or why there is none
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
    shard: tuple[int, int] | None = None  # (K, N): only the cases of shard K of N (cortexm.testing.shards)
    # Filled by run(): core -> programs simulated (a packed program counts once).
    programs: dict[str, int] = field(default_factory=dict)
