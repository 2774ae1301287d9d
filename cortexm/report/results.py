"""What a test run found, as reports write it: one CaseResult per case and core, each with its
Status, and a CrossCore per case run on several cores (cortexm.testing decides them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Status(str, Enum):
    """A case's verdict on a core. A str, so reports, JSON and comparisons see the plain word;
    a word that is not a status fails where it is set."""

    PASS = "PASS"
    FAIL = "FAIL"
    XFAIL = "XFAIL"  # fails as a known defect predicts (cortexm.cases.defects)
    XPASS = "XPASS"  # a known defect that should show did not: a failure
    ERROR = "ERROR"  # cortexm itself failed
    NOT_RUN = "NOT RUN"  # checked, but not simulated
    # Against a baseline (cortexm.testing.perf, cortexm.semantic.accuracy): a PASS that is
    # slower, faster, less accurate or larger.
    SLOWER = "SLOWER"
    FASTER = "FASTER"
    DEGRADED = "DEGRADED"
    LARGER = "LARGER"

    # The plain word on every Python (an Enum's own str and format name the class before 3.12).
    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


# Statuses that fail a run.
FAILED = (Status.FAIL, Status.XPASS, Status.ERROR, Status.SLOWER, Status.DEGRADED, Status.LARGER)


@dataclass
class CaseResult:
    case: str
    core: str
    status: Status = Status.PASS
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
    # The program has the calls beside which that defect leaves constants (a convolution; on MVE a
    # linear): only such programs can show it fixed (cortexm.cases.defects.shows_dead_weights).
    dead_pattern: bool = False
    pte_bytes: int | None = None
    # The program against the float model over inputs drawn like the calibration data
    # (cortexm.semantic.accuracy): the lowest SQNR over its outputs, top-1 agreement ("k/n"),
    # and each activation point's own SQNR in the quantized model (what --baseline blames).
    accuracy_db: float | None = None
    top1: str | None = None
    accuracy_points: list = field(default_factory=list)
    # The same on the real inputs (cortexm.semantic.realinputs.summary): "example" and
    # "evaluation" -> samples, SQNR, top-1, floor, labels, and each quantization point's
    # saturation (its range, how many values it clipped of how many, the clipping's SQNR).
    accuracy_real: dict = field(default_factory=dict)
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
    # --profile: the run call by call (cortexm.report.profile.Profile.as_dict), or {"error": why not}.
    profile: dict | None = None
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

    def __setattr__(self, name, value) -> None:
        super().__setattr__(name, Status(value) if name == "status" else value)

    @property
    def failed(self) -> bool:
        return self.status in FAILED



@dataclass
class CrossCore:
    case: str
    cores: list[str]  # cores whose run succeeded and were compared
    groups: list[list[str]] = field(default_factory=list)  # cores with identical outputs
    first_difference: str = ""  # "output 0[0, 3, 1, 2]: cortex-m7 12, cortex-m55 13"
    expected: str = ""  # why a difference is by design, or the known defect that explains it
    # The cores disagree, but each computes what its own integer reference predicts.
    predicted: bool = False
    mechanism: str = ""  # whether a known mechanism (ExecuTorch's Helium loops) accounts for it

    @property
    def agree(self) -> bool:
        return len(self.groups) <= 1

    @property
    def failed(self) -> bool:
        return not self.agree and not self.expected

    def line(self) -> str:
        if self.agree:
            return f"OK {self.case}: {', '.join(self.cores)} bit-identical"
        split = " | ".join(", ".join(g) for g in self.groups)
        tail = f" (expected: {self.expected})" if self.expected else (
            f" (each core as its own integer reference predicts: the variants compute differently; {self.mechanism})"
            if self.predicted else "")
        verdict = "DIFF" if self.expected else "FAIL"
        return f"{verdict} {self.case}: cores disagree [{split}]; first at {self.first_difference}{tail}"
