"""The built-in case suite: small seeded models that exercise what the cortex_m backend lowers.

A case builds a float module and example inputs; everything random is drawn
from a generator seeded by the case name, so the same case is the same model
on every machine. Calibration data is made in code too (`calibration`).

What enters: nothing but names. What leaves: `Case`s (registry.py; ops.py, models.py, the
MLPerf Tiny tier tiny.py and the parameter grid grid.py register them), the operators' parameter spaces that grid
cases and sweeps draw from (space.py), data placed on quantization boundaries (data.py),
and the known upstream defects a case may hit, recognised by content (defects.py).
"""

from __future__ import annotations

from cortexm.base.errors import CortexmError
from cortexm.cases import registry
from cortexm.cases.registry import Case, register  # noqa: F401  (the face: user case files use these)

GRID_LEVELS = {"none": (), "default": ("default",), "full": ("default", "full"), "exhaustive": ("default", "exhaustive")}


def all_cases(grid: str = "full", scope: dict[str, list] | None = None) -> list[Case]:
    """Every registered case, with the grid cases of `grid` ("none", "default": what `cortexm
    test` runs, "full", "exhaustive": the default grid and the packed programs of the
    exhaustive scope, cortexm.cases.exhaustive, with `scope`'s values)."""
    _load()
    if grid == "exhaustive":
        from cortexm.cases import exhaustive

        exhaustive.register_all(scope)
    levels = GRID_LEVELS[grid]
    return [c for c in registry.REGISTRY.values() if c.grid is None or c.grid.level in levels]


def get(name: str) -> Case:
    _load()
    if name.startswith("exh_") and name not in registry.REGISTRY:  # an exhaustive case, in an export worker
        from cortexm.cases import exhaustive

        exhaustive.register_all()
    try:
        return registry.REGISTRY[name]
    except KeyError:
        raise CortexmError(
            f"no built-in case {name!r} (and it is not FILE.py:FACTORY); `cortexm export --list` shows the cases"
        ) from None


def _load() -> None:
    # Imported lazily: they import torch.
    from cortexm.cases import grid, models, ops, tiny  # noqa: F401

    # An export worker registers the exhaustive scope's cases first: those do not count.
    if not any(c.grid and not c.grid.level.startswith("exhaustive") for c in registry.REGISTRY.values()):
        grid.register_all()
