"""The built-in case suite: small seeded models that exercise what the cortex_m backend lowers.

A case builds a float module and example inputs; everything random is drawn
from a generator seeded by the case name, so the same case is the same model
on every machine. Calibration data is made in code too (`calibration`).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

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
    # Known upstream defects: core name (or "*" for all) -> reason naming the upstream fix.
    # The suite expects these to fail, and fails when one starts passing.
    known_failures: dict[str, str] = field(default_factory=dict)
    # Set for a program exported elsewhere and given to the test app as it is.
    program: Path | None = None

    @property
    def seed(self) -> int:
        return zlib.crc32(self.name.encode())

    def known_failure(self, core_name: str) -> str | None:
        return self.known_failures.get(core_name) or self.known_failures.get("*")


_REGISTRY: dict[str, Case] = {}


def register(name: str, doc: str, qtol: int = 1, notes: str = "", known_failures: dict[str, str] | None = None):
    """Decorator: register `fn` (returning (module, inputs)) as a built-in case."""

    def wrap(fn: Callable[[], tuple]) -> Callable[[], tuple]:
        if name in _REGISTRY:
            raise ValueError(f"duplicate case {name}")
        _REGISTRY[name] = Case(name, doc, fn, qtol, notes, dict(known_failures or {}))
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
