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

from cortexm.defects import KnownDefect, installed_identities
from cortexm.errors import CortexmError


@dataclass(frozen=True)
class Case:
    name: str
    doc: str
    build: Callable[[], tuple]  # -> (module, example_inputs)
    # Allowed |difference| from the Python reference, in quantization steps.
    qtol: int = 1
    # Why this case may differ from the reference, or between cores, by design.
    notes: str = ""
    # Known upstream defects this case hits (cortexm.defects): expected failures while
    # the component is at a revision that has the defect; a pass then fails the run.
    known_failures: tuple[KnownDefect, ...] = ()
    # Set for a program exported elsewhere and given to the test app as it is.
    program: Path | None = None
    # Why this case's outputs differ between cores by design ("": they must be bit-identical).
    cross_core: str = ""

    @property
    def seed(self) -> int:
        return zlib.crc32(self.name.encode())

    def known_failure(self, core_name: str, identities: dict[str, str | None] | None = None, ran: bool = True) -> str | None:
        """The reason this case is expected to fail on `core_name` here, or None."""
        identities = identities if identities is not None else installed_identities()
        for defect in self.known_failures:
            if defect.applies(core_name, identities, ran):
                return defect.reason
        return None


_REGISTRY: dict[str, Case] = {}


def register(name: str, doc: str, qtol: int = 1, notes: str = "",
             known_failures: dict[str, str] | tuple[KnownDefect, ...] = (), cross_core: str = ""):
    """Decorator: register `fn` (returning (module, inputs)) as a case.

    known_failures: KnownDefects, or for a user's own notes {core or "*": reason}.
    """
    if isinstance(known_failures, dict):
        known_failures = tuple(KnownDefect(reason, cores=() if core == "*" else (core,))
                               for core, reason in known_failures.items())

    def wrap(fn: Callable[[], tuple]) -> Callable[[], tuple]:
        if name in _REGISTRY:
            raise ValueError(f"duplicate case {name}")
        _REGISTRY[name] = Case(name, doc, fn, qtol, notes, tuple(known_failures), cross_core=cross_core)
        return fn

    return wrap


def all_cases() -> list[Case]:
    _load()
    return list(_REGISTRY.values())


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
    from cortexm.cases import models, ops  # noqa: F401
