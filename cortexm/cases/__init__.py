"""The built-in case suite: small seeded models that exercise what the cortex_m backend lowers.

A case builds a float module and example inputs; everything random is drawn
from a generator seeded by the case name, so the same case is the same model
on every machine. Calibration data is made in code too (`calibration`).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from cortexm import defects
from cortexm.defects import KnownDefect
from cortexm.errors import CortexmError


@dataclass(frozen=True)
class Case:
    name: str
    doc: str
    build: Callable[[], tuple]  # -> (module, example_inputs)
    # Allowed |difference| from the Python reference, in quantization steps.
    qtol: int = 0
    # Why this case may differ from the reference, or between cores, by design.
    notes: str = ""
    # Known upstream defects this case hits (cortexm.defects): expected failures while
    # the code under test has the defect and the case fails the defect's way.
    known_failures: tuple[KnownDefect, ...] = ()
    # Set for a program exported elsewhere and given to the test app as it is.
    program: Path | None = None
    # Why this case's outputs differ between cores by design ("": they must be bit-identical).
    cross_core: str = ""
    # Where example inputs are placed once quantized (cortexm.cases.data.KINDS).
    data: str = "uniform"
    # For a grid case (cortexm.cases.grid): (operator, level "default" or "full", grid point).
    grid: tuple | None = None

    @property
    def seed(self) -> int:
        return zlib.crc32(self.name.encode())

    def defects_here(self, core_name: str, locate: dict | None = None) -> tuple[KnownDefect, ...]:
        """The known defects this case hits on `core_name` with the code under test
        (`locate`: component -> file finder; default: cortexm.defects.default_locators())."""
        locate = locate if locate is not None else defects.default_locators()
        return tuple(d for d in self.known_failures if d.applies(core_name, locate))

    def fails_at(self, stage: str, core_name: str) -> KnownDefect | None:
        """The known defect expected to stop this case at `stage` on `core_name` here."""
        return next((d for d in self.defects_here(core_name) if d.stage == stage), None)


_REGISTRY: dict[str, Case] = {}


def register(name: str, doc: str, qtol: int = 0, notes: str = "",
             known_failures: dict[str, str] | tuple[KnownDefect, ...] = (), cross_core: str = "",
             data: str = "uniform", grid: tuple | None = None):
    """Decorator: register `fn` (returning (module, inputs)) as a case.

    known_failures: KnownDefects, or for a user's own notes {core or "*": reason}.
    """
    if isinstance(known_failures, dict):
        known_failures = tuple(defects.user_note(reason, cores=() if core == "*" else (core,))
                               for core, reason in known_failures.items())

    def wrap(fn: Callable[[], tuple]) -> Callable[[], tuple]:
        if name in _REGISTRY:
            raise ValueError(f"duplicate case {name}")
        _REGISTRY[name] = Case(name, doc, fn, qtol, notes, tuple(known_failures), cross_core=cross_core, data=data, grid=grid)
        return fn

    return wrap


GRID_LEVELS = {"none": (), "default": ("default",), "full": ("default", "full")}


def all_cases(grid: str = "full") -> list[Case]:
    """Every registered case, with the grid cases of `grid` ("none", "default": what `cortexm
    test` runs, "full")."""
    _load()
    levels = GRID_LEVELS[grid]
    return [c for c in _REGISTRY.values() if c.grid is None or c.grid[1] in levels]


def get(name: str) -> Case:
    _load()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise CortexmError(
            f"no built-in case {name!r} (and it is not FILE.py:FACTORY); `cortexm export --list` shows the cases"
        ) from None


def _load() -> None:
    # Imported lazily: they import torch.
    from cortexm.cases import grid, models, ops  # noqa: F401

    if not any(c.grid for c in _REGISTRY.values()):
        grid.register_all()
