"""The case registry: what a case is, and `register`, the decorator that adds one.

The suite's modules (cortexm.cases.ops, .models, .grid) and a user's case files register
here; cortexm.cases reads the registry once they are loaded.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from cortexm.base import files
from cortexm.cases import defects
from cortexm.cases.defects import KnownDefect


class GridPlace(NamedTuple):
    """Where a grid case (cortexm.cases.grid) or an exhaustive one (cortexm.cases.exhaustive) sits."""

    op: str  # the operator whose space it is from
    level: str  # "default" or "full" (grid), "exhaustive" (a packed program) or "exhaustive-part"
    params: dict | None  # the point in the space (None for a packed program)


@dataclass(frozen=True)
class Case:
    name: str
    doc: str
    build: Callable[[], tuple]  # -> (module, example_inputs)
    # Allowed |difference| from the Python reference, in quantization steps.
    qtol: int = 0
    # Why this case may differ from the reference, or between cores, by design.
    notes: str = ""
    # Known upstream defects this case hits (cortexm.cases.defects): expected failures while
    # the code under test has the defect and the case fails the defect's way.
    known_failures: tuple[KnownDefect, ...] = ()
    # Set for a program exported elsewhere and given to the test app as it is.
    program: Path | None = None
    # Why this case's outputs differ between cores by design ("": they must be bit-identical).
    cross_core: str = ""
    # Where example inputs are placed once quantized (cortexm.cases.data.KINDS).
    data: str = "uniform"
    # Where a grid or exhaustive case sits in its operator's space (None: any other case).
    grid: GridPlace | None = None
    # A packed program: the cases it holds, in branch order, and how many inputs each takes
    # (cortexm.testing.packs judges each on its own output).
    parts: tuple[str, ...] = ()
    part_inputs: int = 1
    # Compute operators this case expects left in float (cortexm.checking.lowering): (operator
    # base name, why), e.g. ("add", "the cortex_m backend lowers only same-shape adds").
    float_ops: tuple[tuple[str, str], ...] = ()
    # A model as a user deploys it (cortexm.cases.tiny): the test app prints its deployment line.
    deployment: bool = False
    # What a case registered from data is built from besides cortexm's code (a sweep sample's
    # operator and parameters, cortexm.cases.space): its name does not say it, so an export's
    # cache key covers it (cortexm.testing.cache).
    spec: str = ""

    @property
    def input_keys(self) -> tuple[str, ...]:
        """Per example input, what seeds its placed data: the case (or, packed, the part) and
        the input's index in it, so a packed case gets the data it gets alone."""
        return tuple(f"{part}:{i}" for part in self.parts for i in range(self.part_inputs))

    @property
    def seed(self) -> int:
        return zlib.crc32(self.name.encode())

    def defects_here(self, core_name: str, locate: dict | None = None) -> tuple[KnownDefect, ...]:
        """The known defects this case hits on `core_name` with the code under test
        (`locate`: component -> file finder; default: cortexm.cases.defects.default_locators())."""
        locate = locate if locate is not None else defects.default_locators()
        return tuple(d for d in self.known_failures if d.applies(core_name, locate))

    def fails_at(self, stage: str, core_name: str) -> KnownDefect | None:
        """The known defect expected to stop this case at `stage` on `core_name` here."""
        return next((d for d in self.defects_here(core_name) if d.stage == stage), None)


REGISTRY: dict[str, Case] = {}


def register(name: str, doc: str, qtol: int = 0, notes: str = "",
             known_failures: dict[str, str] | tuple[KnownDefect, ...] = (), cross_core: str = "",
             data: str = "uniform", grid: GridPlace | None = None, parts: tuple[str, ...] = (), part_inputs: int = 1,
             float_ops: dict[str, str] | None = None, deployment: bool = False, spec: str = ""):
    """Decorator: register `fn` (returning (module, inputs)) as a case.

    known_failures: KnownDefects, or for a user's own notes {core or "*": reason}.
    float_ops: {operator base name (e.g. "add"): why the case expects it left in float}.
    """
    if isinstance(known_failures, dict):
        known_failures = tuple(defects.user_note(reason, cores=() if core == "*" else (core,))
                               for core, reason in known_failures.items())

    files.check_name(name, "case name")  # it names the case's export files and cache entry

    def wrap(fn: Callable[[], tuple]) -> Callable[[], tuple]:
        if name in REGISTRY:
            raise ValueError(f"duplicate case {name}")
        REGISTRY[name] = Case(name, doc, fn, qtol, notes, tuple(known_failures), cross_core=cross_core, data=data, grid=grid,
                              parts=tuple(parts), part_inputs=part_inputs, float_ops=tuple(sorted((float_ops or {}).items())),
                              deployment=deployment, spec=spec)
        return fn

    return wrap
