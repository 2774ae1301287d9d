"""Grid cases: each operator over classes of its parameters, chosen so that every class
(default grid) or every pair of classes (full grid) is exercised at least once.

Hand-picked cases leave whole classes out (no case had different h and w for a
depthwise stride, so a kernel swapping them passed). Here each operator has
dimensions (kernel, stride, padding, dilation with h != w, batch 2, 1/odd/>=17
channels at CMSIS-NN's path thresholds, fused activations, input data on
rounding ties, saturation and every integer value) and a seeded greedy covering
picks valid parameter sets until every value (strength 1) or every pair of
values (strength 2) of different dimensions appears in one. The models are
built by cortexm.cases.space's builders, so a grid case and a sweep sample of the same
parameters are the same model.

Names are stable (grid_<op>_<k>); the default grid is a subset of the full one.
"""

from __future__ import annotations

import itertools
import random
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Params = dict[str, Any]

HW = [(7, 9), (9, 6), (5, 11)]
DATA = ["uniform", "steps", "saturate", "ramp"]
RANGES = [(-1.0, 1.0), (0.0, 2.0), (-3.0, 0.5)]
ACTS = ["none", "relu", "relu6", "hardtanh"]
KERNELS_2D = [(1, 1), (3, 3), (3, 1), (1, 3), (2, 3), (5, 2)]
STRIDES_2D = [(1, 1), (2, 2), (2, 1), (1, 2), (1, 3)]
PADS_2D = [(0, 0), (1, 1), (1, 0), (0, 2)]
DILATIONS_2D = [(1, 1), (2, 1), (1, 2)]
CHANNELS = [1, 3, 8, 17]  # one, odd, a multiple of 4 and 8, above 16 (CMSIS-NN path thresholds)


@dataclass(frozen=True)
class OpGrid:
    op: str  # a cortexm.cases.space operator: the builder of the model
    dims: dict[str, list]
    # Parameters that are not classes, derived from the others (e.g. h and w from "hw").
    derive: Callable[[Params], Params] = lambda p: p
    fixed: dict[str, Any] = field(default_factory=dict)


def _hw(p: Params) -> Params:
    h, w = p["hw"]
    return {**{k: v for k, v in p.items() if k != "hw"}, "h": h, "w": w}


GRIDS: dict[str, OpGrid] = {
    "conv2d": OpGrid("conv2d", {
        "k": KERNELS_2D, "stride": STRIDES_2D, "pad": PADS_2D, "dilation": DILATIONS_2D, "cin": CHANNELS,
        "cout": [1, 5, 16, 17], "batch": [1, 2], "act": ACTS, "bias": [True, False], "hw": HW, "data": DATA,
        "range": RANGES}, _hw),
    "depthwise_conv2d": OpGrid("depthwise_conv2d", {
        "k": KERNELS_2D, "stride": STRIDES_2D, "pad": PADS_2D, "dilation": DILATIONS_2D, "cin": CHANNELS,
        "mult": [1, 2, 3], "batch": [1, 2], "act": ACTS, "bias": [True, False], "hw": HW, "data": DATA,
        "range": RANGES}, _hw),
    "transpose_conv2d": OpGrid("transpose_conv2d", {
        "k": [(2, 2), (3, 3), (3, 1), (1, 3), (2, 3)], "stride": [(1, 1), (2, 2), (2, 1), (1, 2)],
        "pad": [(0, 0), (1, 0), (0, 1), (1, 1)], "cin": [1, 4, 17], "cout": [1, 3, 8], "batch": [1, 2],
        "bias": [True, False], "hw": [(4, 5), (5, 3)], "data": DATA, "range": RANGES}, _hw),
    "avg_pool2d": OpGrid("avg_pool2d", {
        "k": [(2, 2), (3, 2), (2, 3), (3, 3), (1, 3)], "stride": [(1, 1), (2, 2), (2, 1), (1, 2)],
        "pad": [(0, 0), (1, 0), (0, 1), (1, 1)], "ceil": [False, True], "count_include_pad": [False, True],
        "c": CHANNELS, "batch": [1, 2], "hw": HW, "data": DATA, "range": RANGES}, _hw),
    "max_pool2d": OpGrid("max_pool2d", {
        "k": [(2, 2), (3, 2), (2, 3), (3, 3), (1, 3)], "stride": [(1, 1), (2, 2), (2, 1), (1, 2)],
        "pad": [(0, 0), (1, 0), (0, 1), (1, 1)], "c": CHANNELS, "batch": [1, 2], "hw": HW, "data": DATA,
        "range": RANGES}, _hw, {"ceil": False, "count_include_pad": False}),
    "linear": OpGrid("linear", {
        "fin": [1, 3, 16, 17, 64], "fout": [1, 5, 17], "batch": [1, 2, 3], "bias": [True, False], "act": ACTS,
        "data": DATA, "range": RANGES}),
    "add": OpGrid("add", {
        "c": CHANNELS, "hw": HW, "batch": [1, 2], "act": ["none", "relu"], "data": DATA, "range": RANGES,
        "range2": RANGES}, _hw),
    "mul": OpGrid("mul", {
        "c": CHANNELS, "hw": HW, "batch": [1, 2], "act": ["none", "relu"], "data": DATA, "range": RANGES,
        "range2": RANGES}, _hw),
    "softmax": OpGrid("softmax", {
        "rows": [1, 2, 5], "cols": [2, 10, 17, 64], "scale": [1.0, 3.0, 8.0], "data": DATA}),
    "bmm": OpGrid("bmm", {
        "batch": [1, 2, 3], "m": [1, 3, 8], "k": [1, 5, 16, 17], "n": [1, 4, 17], "data": DATA, "range": RANGES}),
}

LEVELS = ("none", "default", "full")


def cover(grid: OpGrid, valid: Callable[[Params], bool], strength: int, seed: int,
          tries: int = 60) -> tuple[list[Params], list[tuple]]:
    """Greedy covering: parameter sets (valid ones only) until every `strength`-tuple of
    values of different dimensions appears in one. Returns them and the tuples no valid
    set can hold."""
    rng = random.Random(seed)
    names = list(grid.dims)

    def tuples_of(p: Params) -> set[tuple]:
        items = [(n, _key(p[n])) for n in names]
        return set(itertools.combinations(items, strength))

    wanted = set(itertools.combinations([(n, _key(v)) for n in names for v in grid.dims[n]], strength))
    wanted = {t for t in wanted if len({n for n, _ in t}) == strength}
    chosen: list[Params] = []
    impossible: list[tuple] = []
    while wanted:
        target = min(wanted)  # deterministic: complete the smallest uncovered tuple
        fixed = {n: _value(grid, n, v) for n, v in target}
        best, best_gain = None, 0
        for _ in range(tries):
            p = {n: fixed.get(n, rng.choice(grid.dims[n])) for n in names}
            if not valid(grid.derive({**grid.fixed, **p})):
                continue
            gain = len(tuples_of(p) & wanted)
            if gain > best_gain:
                best, best_gain = p, gain
        if best is None:
            impossible.append(target)
            wanted.discard(target)
            continue
        chosen.append(best)
        wanted -= tuples_of(best)
    return chosen, impossible


def _key(value) -> str:
    return repr(value)


def _value(grid: OpGrid, name: str, key: str):
    return next(v for v in grid.dims[name] if _key(v) == key)


def grid_cases(op: str) -> list[tuple[str, Params, str]]:
    """(case name, model parameters, level) of `op`: the default grid first, then the rest of the full one."""
    from cortexm.cases import space

    grid = GRIDS[op]
    valid = space.space(grid.op).valid
    seed = zlib.crc32(op.encode())
    singles, _ = cover(grid, valid, 1, seed)
    pairs, _ = cover(grid, valid, 2, seed)
    rows = [(p, "default") for p in singles] + [(p, "full") for p in pairs if p not in singles]
    return [(f"grid_{op}_{k:02d}", p, level) for k, (p, level) in enumerate(rows)]


def model_params(op: str, p: Params, name: str) -> Params:
    """The builder's parameters for grid point `p`, with the weights' seed."""
    grid = GRIDS[op]
    params = grid.derive({**grid.fixed, **p})
    params.pop("data", None)
    params["seed"] = zlib.crc32(name.encode())
    return params


def register_all() -> None:
    """Register every grid case (both levels); cortexm.testing selects by level."""
    from cortexm.cases import defects, space
    from cortexm.cases.registry import GridPlace, register

    for op, grid in GRIDS.items():
        for name, p, level in grid_cases(op):
            params = model_params(op, p, name)
            # A defect's region may depend on how the inputs are placed, which the model does not see.
            known = tuple(getattr(defects, k) for k in space.known_defects(grid.op, {**params, "data": p["data"]}))
            doc = f"{op} " + ", ".join(f"{k}={v}" for k, v in p.items())
            register(name, doc, known_failures=known, data=p["data"], grid=GridPlace(op, level, p))(
                lambda op=grid.op, params=params: space.build_sample(op, params))


def coverage(op: str, names: set[str]) -> dict[str, dict[str, bool]]:
    """For `op`: dimension -> value -> whether a case among `names` exercised it."""
    grid = GRIDS[op]
    run = [p for name, p, _ in grid_cases(op) if name in names]
    return {dim: {_key(v): any(_key(p[dim]) == _key(v) for p in run) for v in values}
            for dim, values in grid.dims.items()}
