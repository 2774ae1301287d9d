"""What a test run found, as reports write it: one CaseResult per case and core, each with its
Status, and a CrossCore per case run on several cores (cortexm.testing decides them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, ClassVar


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


# One record per stage that finds something (cortexm.testing.checks, a module each), None in a
# CaseResult until its stage ran. Reports keep the flat keys they always had: FLAT maps a
# record's field to its key (CaseResult.row, CaseResult.from_row).


@dataclass
class Verify:
    """Stage verify (cortexm.checking.verify)."""

    FLAT: ClassVar[dict[str, str]] = {"verdict": "verify"}
    verdict: str = "-"  # ok, or the first problem's status


@dataclass
class Lowering:
    """Stage lowering (cortexm.checking.lowering)."""

    FLAT: ClassVar[dict[str, str]] = {"verdict": "lowering", "lowered": "lowered", "left": "left"}
    verdict: str = "-"  # ok, FAIL (a compute operator left in float), - (not checked)
    # [cortex_m kernel calls, kernel calls], and every call that is not a cortex_m kernel
    # (cortexm.checking.lowering.LeftCall.as_dict).
    lowered: list = field(default_factory=list)
    left: list = field(default_factory=list)


@dataclass
class Constants:
    """Stage constants: the program's constant bytes and those no call reads
    (cortexm.checking.constants), with the known defect that explains them ("" when none does,
    or there are none)."""

    FLAT: ClassVar[dict[str, str]] = {"constant_bytes": "constant_bytes", "dead_bytes": "dead_bytes",
                                      "dead_cause": "dead_cause", "dead_pattern": "dead_pattern",
                                      "pte_bytes": "pte_bytes"}
    constant_bytes: int | None = None
    dead_bytes: int | None = None
    dead_cause: str = ""
    # The program has the calls beside which that defect leaves constants (a convolution; on MVE a
    # linear): only such programs can show it fixed (cortexm.cases.defects.shows_dead_weights).
    dead_pattern: bool = False
    pte_bytes: int | None = None


@dataclass
class Dialect:
    """Stage dialect: the lowered graph against its golden."""

    FLAT: ClassVar[dict[str, str]] = {"verdict": "dialect"}
    verdict: str = "-"  # ok, DIFF, - (no golden)


@dataclass
class Semantic:
    """Stage semantic: the program against the quantized model (cortexm.semantic)."""

    FLAT: ClassVar[dict[str, str]] = {"verdict": "semantic", "lsb": "semantic_lsb", "drift_lsb": "drift_lsb",
                                      "sqnr_db": "sqnr_db", "points": "semantic_points"}
    verdict: str = "-"  # ok, FAIL, - (no model)
    lsb: float | None = None  # the largest departure of a point from the model, in LSB
    drift_lsb: float | None = None  # the whole program against the model without forcing, in output LSB
    sqnr_db: float | None = None  # the program against the float model (lowest over outputs; None: exact)
    # Per point: operator, call, largest difference and its histogram (what bench/tolerances.py
    # measures the tolerance table from).
    points: list = field(default_factory=list)


@dataclass
class Accuracy:
    """Stage accuracy: the program against the float model over inputs drawn like the
    calibration data (cortexm.semantic.accuracy)."""

    FLAT: ClassVar[dict[str, str]] = {"db": "accuracy_db", "top1": "top1", "points": "accuracy_points",
                                      "real": "accuracy_real"}
    db: float | None = None  # the lowest SQNR over its outputs
    top1: str | None = None  # top-1 agreement, "k/n"
    points: list = field(default_factory=list)  # each activation point's SQNR (what --baseline blames)
    # The same on the real inputs (cortexm.semantic.realinputs.summary): "example" and
    # "evaluation" -> samples, SQNR, top-1, floor, labels, and each quantization point's
    # saturation (its range, how many values it clipped of how many, the clipping's SQNR).
    real: dict = field(default_factory=dict)


@dataclass
class Run:
    """Stage run: the program on the core's runner."""

    FLAT: ClassVar[dict[str, str]] = {"sim": "sim", "instructions": "instructions", "remembered": "remembered",
                                      "calls": "calls", "profile": "profile", "memory_use": "memory_use"}
    sim: str = "-"  # ok, FAIL, not run
    instructions: int | None = None
    # Its program ran before with this runner and inputs: the run came from cortexm.sim.memo
    # (the program is unchanged by whatever was edited since).
    remembered: bool = False
    # What each kernel call cost: [instruction index, operator, instructions (or ticks)], for
    # the performance gate (cortexm.testing.perf).
    calls: list = field(default_factory=list)
    # --profile: the run call by call (cortexm.report.profile.Profile.as_dict), or {"error": why not}.
    profile: dict | None = None
    # What the run used of the runner's memory (cortexm.report.fit.parse_memory_line).
    memory_use: dict = field(default_factory=dict)


@dataclass
class Compare:
    """Stage compare: the run's outputs against the integer reference."""

    FLAT: ClassVar[dict[str, str]] = {"max_lsb": "max_lsb", "mismatches": "mismatches", "elements": "elements",
                                      "without_helium": "without_helium", "per_output": "per_output"}
    max_lsb: float | None = None
    mismatches: int | None = None
    elements: int | None = None
    # Per output: [max |diff| LSB, mismatches, elements] against the reference.
    per_output: list = field(default_factory=list, repr=False)
    outputs: list = field(default_factory=list, repr=False)  # the simulator's, for the cross-core check; not reported
    # Digests of the integer reference's outputs without ExecuTorch's Helium loops (M55 only):
    # what the core would give if only that rounding were otherwise.
    without_helium: list | None = field(default=None, repr=False)


@dataclass
class Memory:
    """Stage memory, the memory oracle."""

    FLAT: ClassVar[dict[str, str]] = {"verdict": "memory"}
    verdict: str = "-"  # ok, FAIL, - (not run)


Record = Verify | Lowering | Constants | Dialect | Semantic | Accuracy | Run | Compare | Memory

# CaseResult's record fields and their types, in stage order.
RECORDS: dict[str, type[Record]] = {"verify": Verify, "lowering": Lowering, "constants": Constants, "dialect": Dialect,
                            "semantic": Semantic, "accuracy": Accuracy, "run": Run, "compare": Compare,
                            "memory": Memory}

# A report row's keys, in the order reports have always written them.
ROW_KEYS = ("case", "core", "status", "dialect", "verify", "lowering", "lowered", "left", "constant_bytes",
            "dead_bytes", "dead_cause", "dead_pattern", "pte_bytes", "accuracy_db", "top1", "accuracy_points",
            "accuracy_real", "memory_use", "deployment", "sim", "remembered", "edit", "memory", "semantic",
            "semantic_lsb", "drift_lsb", "sqnr_db", "semantic_points", "max_lsb", "mismatches", "elements",
            "instructions", "reason", "details", "failures", "findings", "stages", "seconds", "calls", "profile",
            "perf", "pte", "without_helium", "per_output", "exhaustive", "pack", "data_targets")


@dataclass
class CaseResult:
    """One case on one core: who it is, its verdict, and each stage's record (None: the stage
    did not run)."""

    case: str
    core: str
    status: Status = Status.PASS
    reason: str = ""  # one line
    details: str = ""  # what to look at: graph diff, worst elements, simulator log tail
    failures: list = field(default_factory=list)  # (stage, line) of every check that failed
    findings: list = field(default_factory=list)  # known findings about upstream's reference this case showed
    stages: list = field(default_factory=list)  # the stages that ran (cortexm.cases.defects.STAGES)
    seconds: dict[str, float] = field(default_factory=dict)
    perf: str = ""  # against a baseline (--baseline): the change in instructions, and the call that made it
    # Whether the case is a deployment (cortexm.cases.tiny): its memory line is printed.
    deployment: bool = False
    # Exported anew since an edit (cortexm.testing.exports.export_all): "unchanged" when the
    # program is byte for byte the one this cache made before, "changed" when the edit reached
    # it, "" when it came from the cache or had no earlier program.
    edit: str = ""
    pte: str = ""  # the program that was checked (in the export cache)
    exhaustive: str = ""  # the operator of an exhaustive case (cortexm.cases.exhaustive)
    pack: str = ""  # the packed program it ran in (cortexm.testing.packs)
    data_targets: dict | None = None  # what solved boundary data met (cortexm.cases.solve), as the export says
    verify: Verify | None = None
    lowering: Lowering | None = None
    constants: Constants | None = None
    dialect: Dialect | None = None
    semantic: Semantic | None = None
    accuracy: Accuracy | None = None
    run: Run | None = None
    compare: Compare | None = None
    memory: Memory | None = None

    def __setattr__(self, name, value) -> None:
        super().__setattr__(name, Status(value) if name == "status" else value)

    @property
    def failed(self) -> bool:
        return self.status in FAILED

    if not TYPE_CHECKING:  # cortexm's own code reads the records, typed
        def __getattr__(self, name: str):
            """A report key that is now a record's field, read through it: what tests written
            against the pytest fixture (`result.instructions`) read. The stages' own names
            (verify, memory...) are the records."""
            found = _FLAT_FIELDS.get(name)
            if found is None:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            record, field_name = found
            return getattr(self.__dict__.get(record) or RECORDS[record](), field_name)

    def row(self) -> dict:
        """The result as reports write it: flat, each record's fields under their keys (a stage
        that did not run: its record's defaults), the outputs left out."""
        flat = {name: getattr(self, name) for name in ROW_KEYS if name not in _RECORD_KEYS}
        for name, kind in RECORDS.items():
            record = getattr(self, name) or kind()
            flat.update({key: getattr(record, f) for f, key in kind.FLAT.items()})
        return {key: flat[key] for key in ROW_KEYS}

    @classmethod
    def from_row(cls, row: dict) -> CaseResult:
        """A report's row (row()) as a result: a record for each stage whose keys hold anything
        but its defaults."""
        records: dict[str, Any] = {}
        for name, kind in RECORDS.items():
            default = kind()
            values = {f: row[key] for f, key in kind.FLAT.items() if key in row}
            if any(v != getattr(default, f) for f, v in values.items()):
                records[name] = kind(**values)
        return cls(**{k: v for k, v in row.items() if k not in _RECORD_KEYS}, **records)


# The keys of a row that records hold.
_RECORD_KEYS = frozenset(key for kind in RECORDS.values() for key in kind.FLAT.values())
# Report key -> (record, field), for the keys that are not a stage's own name.
_FLAT_FIELDS = {key: (name, f) for name, kind in RECORDS.items() for f, key in kind.FLAT.items() if key not in RECORDS}


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
