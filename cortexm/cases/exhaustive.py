"""Bounded-exhaustive cases (`cortexm test --grid exhaustive`): every combination of small
shapes and parameters within a scope, packed several to a program.

A covering grid (cortexm.cases.grid) meets every class, or pair of classes, once; a bug that
shows only for one SIMD lane at one bound, one remainder of one quotient, or one way that
size, padding, dilation and stride line up at an edge needs the one combination that makes
it matter. The small-scope hypothesis: most such bugs show on small inputs, if all of them
are tried. Each operator has scopes (a dimension -> its values, every combination taken):

  geometry  one axis (h, then w) through every size, kernel, stride, padding and dilation of
            the scope, the other axis held to a plain geometry (1-wide, or 3-wide with a
            2-tap kernel and padding 1), channels fixed at odd counts (SIMD tails)
  channels  every input and output channel count of the scope (every lane position and tail
            length of CMSIS-NN's 2-, 4- and 16-wide loops) over a few fixed geometries
  shapes    (linear, elementwise, softmax, bmm) every size of the scope

and each combination runs with each data kind of its scope (cortexm.cases.data: solved
bounds, and midpoints where channels vary, for conv, depthwise and linear; windows at the
extremes and rounding ties for the others). Combinations PyTorch refuses (cortexm.cases.space's `valid`: output
sizes below 1, pooling padding above half the kernel) are pruned and counted; so are those in
a known defect's region, which run as cases of their own (an expected failure in a packed
program could write into its neighbours).

`--scope KEY=VALUES` (e.g. `spatial=1..6`, `channels=1..17`, `data=bounds`) replaces a
dimension's values in every scope that has it; the test app hands the words to the export
workers with each job (cortexm.testing.results.Options.scope).

Packing: the cases of one operator and data kind go PACK_INPUTS inputs at a time (the
runner's 16 inputs and 16 outputs, kernels/runner/runner.cpp) into one module whose branches
are the cases' own models, built from their own seeds with their own calibration samples, so
each branch quantizes as the case does alone. One export and one simulator boot serve them
all; cortexm.testing.packs judges each case on its own output.

What leaves: parts and packs registered as cases (grid level "exhaustive"), and the scope's
coverage (`coverage`).
"""

from __future__ import annotations

import itertools
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cortexm.base.errors import CortexmError

if TYPE_CHECKING:
    import torch

Params = dict[str, Any]
PACK_INPUTS = 16  # kernels/runner/runner.cpp: kMaxInputs and kMaxOutputs

# The other axis of a geometry scope: (size, kernel, stride, padding, dilation).
PLAIN_AXES = ((1, 1, 1, 0, 1), (3, 2, 1, 1, 1))
SOLVED = ["bounds", "midpoints"]
PLACED = ["extremes", "steps"]


@dataclass(frozen=True)
class Scope:
    name: str
    dims: dict[str, list]


def _axis_scope(fixed: dict, data: list[str], dilation: bool = True) -> Scope:
    dims = {"axis": ["h", "w"], "other": list(PLAIN_AXES), "spatial": [1, 2, 3, 4], "kernel": [1, 2, 3],
            "stride": [1, 2], "padding": [0, 1], **({"dilation": [1, 2]} if dilation else {}), **fixed, "data": data}
    return Scope("geometry", dims)


# Fixed geometries of the channel scopes: ((h, w), kernel, stride, padding, dilation).
PADDED_3X3 = ((4, 5), (3, 3), (1, 1), (1, 1), (1, 1))
POINTWISE = ((3, 3), (1, 1), (1, 1), (0, 0), (1, 1))
POOL_2X2 = ((4, 5), (2, 2), (1, 1), (0, 0), (1, 1))
CHANNELS = list(range(1, 10))

SCOPES: dict[str, list[Scope]] = {
    "conv2d": [
        _axis_scope({"channels": [3], "out_channels": [5], "act": ["relu6"]}, ["bounds"]),
        Scope("channels", {"geometry": [PADDED_3X3, POINTWISE], "channels": CHANNELS, "out_channels": CHANNELS,
                           "act": ["relu6"], "data": SOLVED}),
        Scope("batch", {"geometry": [PADDED_3X3, POINTWISE], "batch": [2], "channels": [1, 4], "out_channels": [2, 3],
                        "act": ["relu6"], "data": SOLVED}),
    ],
    "depthwise_conv2d": [
        _axis_scope({"channels": [3], "multiplier": [1, 2], "act": ["relu6"]}, ["bounds"]),
        Scope("channels", {"geometry": [PADDED_3X3, POOL_2X2], "channels": CHANNELS, "multiplier": [1, 2, 3],
                           "act": ["relu6"], "data": SOLVED}),
    ],
    "avg_pool2d": [
        _axis_scope({"channels": [5]}, PLACED, dilation=False),
        Scope("channels", {"geometry": [POOL_2X2], "channels": list(range(1, 18)), "batch": [1, 2], "data": PLACED}),
        Scope("modes", {"geometry": [((5, 4), (3, 2), (2, 1), (1, 1), (1, 1)), ((4, 4), (2, 3), (2, 2), (0, 1), (1, 1))],
                        "ceil": [False, True], "count_include_pad": [False, True], "channels": [3, 4], "data": PLACED}),
    ],
    "max_pool2d": [
        _axis_scope({"channels": [5]}, PLACED, dilation=False),
        Scope("channels", {"geometry": [POOL_2X2], "channels": list(range(1, 18)), "batch": [1, 2], "data": PLACED}),
    ],
    "linear": [
        Scope("shapes", {"features_in": [*range(1, 10), 16, 17], "features_out": CHANNELS, "batch": [1, 2],
                         "act": ["relu6"], "data": SOLVED}),
    ],
    "add": [
        Scope("shapes", {"spatial": [1, 2], "channels": list(range(1, 18)),
                         "act": ["none", "relu"], "data": PLACED}),
    ],
    "mul": [
        Scope("shapes", {"spatial": [1, 2], "channels": list(range(1, 18)),
                         "act": ["none", "relu"], "data": PLACED}),
    ],
    "softmax": [
        Scope("shapes", {"rows": [1, 2, 3], "cols": [*range(2, 18), 31, 32, 33], "data": ["ramp"]}),
    ],
    "bmm": [
        Scope("shapes", {"batch": [1, 2], "m": [1, 3], "inner": CHANNELS, "n": [1, 4], "data": ["extremes"]}),
    ],
}

# How many of each case's tensors a pack holds per case (inputs, outputs).
ARITY = {"add": 2, "mul": 2, "bmm": 2}


def _params(op: str, p: Params) -> Params:
    """The builder's parameters (cortexm.cases.space) of one combination."""
    geometry: Params = {}
    if "axis" in p:
        varied = (p["spatial"], p["kernel"], p["stride"], p["padding"], p.get("dilation", 1))
        h, w = (varied, p["other"]) if p["axis"] == "h" else (p["other"], varied)
        geometry = {"h": h[0], "w": w[0], "k": (h[1], w[1]), "stride": (h[2], w[2]), "pad": (h[3], w[3]),
                    "dilation": (h[4], w[4])}
    elif "geometry" in p:
        (h, w), k, stride, pad, dilation = p["geometry"]
        geometry = {"h": h, "w": w, "k": k, "stride": stride, "pad": pad, "dilation": dilation}
    batch, act, spread = p.get("batch", 1), p.get("act", "none"), (-1.0, 1.0)
    if op == "conv2d":
        return {**geometry, "cin": p["channels"], "cout": p["out_channels"], "batch": batch, "act": act, "bias": True,
                "range": spread}
    if op == "depthwise_conv2d":
        return {**geometry, "cin": p["channels"], "mult": p["multiplier"], "batch": batch, "act": act, "bias": True,
                "range": spread}
    if op in ("avg_pool2d", "max_pool2d"):
        geometry.pop("dilation")
        return {**geometry, "c": p["channels"], "batch": batch, "ceil": p.get("ceil", False),
                "count_include_pad": p.get("count_include_pad", False), "range": spread}
    if op == "linear":
        return {"fin": p["features_in"], "fout": p["features_out"], "batch": batch, "act": act, "bias": True,
                "range": spread}
    if op in ("add", "mul"):
        h = w = p["spatial"]
        return {"h": h, "w": w, "c": p["channels"], "batch": batch, "act": act, "range": spread, "range2": (0.0, 2.0)}
    if op == "softmax":
        return {"rows": p["rows"], "cols": p["cols"], "scale": 3.0}
    return {"batch": batch, "m": p["m"], "k": p["inner"], "n": p["n"], "range": spread}  # bmm


def parse_scope(items: tuple[str, ...] | list[str]) -> dict[str, list]:
    """`KEY=VALUES` items (VALUES: `1..6`, `1,3,5` or words) as dimension -> values; a key no
    scope has is one line naming the keys there are."""
    keys = sorted({k for scopes in SCOPES.values() for s in scopes for k in s.dims if k not in ("axis", "other", "geometry")})
    chosen: dict[str, list] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or key not in keys or not text:
            raise CortexmError(f"--scope {item!r}: expected KEY=VALUES with KEY one of {', '.join(keys)} "
                               "(VALUES as 1..6, 1,3,5 or words)")
        chosen[key] = _values(item, text)
    return chosen


def _values(item: str, text: str) -> list:
    if ".." in text:
        lo, _, hi = text.partition("..")
        if not (lo.isdigit() and hi.isdigit()) or int(lo) > int(hi) or int(hi) - int(lo) > 256:
            raise CortexmError(f"--scope {item!r}: a range is LOW..HIGH, two integers at most 256 apart")
        return list(range(int(lo), int(hi) + 1))
    words = [w.strip() for w in text.split(",") if w.strip()]
    values: list[int | bool | str] = []
    for word in words:
        if word.lstrip("-").isdigit():
            values.append(int(word))
        elif word in ("true", "false"):
            values.append(word == "true")
        else:
            values.append(word)
    return values


@dataclass(frozen=True)
class Combination:
    op: str
    scope: str
    params: Params  # the builder's, with "data" and "seed"
    name: str


def combinations(op: str, chosen: dict[str, list]) -> tuple[list[Combination], dict]:
    """Every valid combination of `op`'s scopes with `chosen` values in place, and the count
    per scope of what was enumerated and pruned (coverage)."""
    from cortexm.cases import space

    valid = space.space(op).valid
    found: list[Combination] = []
    counts: dict[str, dict[str, int]] = {}
    for scope in SCOPES[op]:
        dims = {k: chosen.get(k, v) for k, v in scope.dims.items()}
        tally = counts.setdefault(scope.name, {"combinations": 0, "refused by PyTorch": 0, "in a known defect's region": 0})
        for values in itertools.product(*dims.values()):
            p = dict(zip(dims, values, strict=True))
            tally["combinations"] += 1
            params = _params(op, p)
            if not valid(params):
                tally["refused by PyTorch"] += 1
                continue
            params["data"] = p["data"]
            # Run alone, not packed: an expected failure could write into its neighbours.
            tally["in a known defect's region"] += bool(space.known_defects(op, params))
            name = f"exh_{op}_{zlib.crc32(repr(sorted(params.items())).encode()):08x}"
            params["seed"] = zlib.crc32(name.encode())
            found.append(Combination(op, scope.name, params, name))
    unique = list({c.name: c for c in found}.values())  # scopes may share a combination
    return unique, counts


def register_all(chosen: dict[str, list] | None = None) -> None:
    """Register every exhaustive case of the scope (`chosen`: --scope's values, parse_scope;
    default: the scopes as SCOPES has them), packed; idempotent."""
    from cortexm.cases import defects, space
    from cortexm.cases.registry import REGISTRY, GridPlace, register

    chosen = chosen or {}
    for op in SCOPES:
        found, _ = combinations(op, chosen)
        packable: dict[str, list] = {}
        for c in found:
            known = tuple(getattr(defects, k) for k in space.known_defects(op, c.params))
            model = {k: v for k, v in c.params.items() if k != "data"}
            if c.name not in REGISTRY:  # another scope may have it already (names are their parameters')
                register(c.name, f"{op} ({c.scope}) " + ", ".join(f"{k}={v}" for k, v in c.params.items() if k != "seed"),
                         known_failures=known, data=c.params["data"],
                         grid=GridPlace(op, "exhaustive" if known else "exhaustive-part", c.params))(
                    lambda op=op, model=model: space.build_sample(op, model))
            if not known:
                packable.setdefault(c.params["data"], []).append(c)
        per_pack = PACK_INPUTS // ARITY.get(op, 1)
        for data, parts in packable.items():
            for start in range(0, len(parts), per_pack):
                chunk = parts[start:start + per_pack]
                names = tuple(c.name for c in chunk)
                pack = f"exh_{op}_{data}_{zlib.crc32(' '.join(names).encode()):08x}"
                if pack in REGISTRY:
                    continue
                register(pack, f"{op}: {len(chunk)} exhaustive cases in one program ({data})", data=data,
                         grid=GridPlace(op, "exhaustive", None), parts=names, part_inputs=ARITY.get(op, 1))(
                    lambda op=op, chunk=chunk: build_pack(op, [{k: v for k, v in c.params.items() if k != "data"}
                                                              for c in chunk]))


def build_pack(op: str, branches: list[Params]) -> tuple:
    """(module, inputs, calibration) of cases packed in one program: each branch its case's
    model, built from its own seed, with the calibration samples the case gets alone
    (cortexm.cases.data.like, as cortexm.lowering.modelsource draws them), so it quantizes as it
    does alone."""
    from torch import nn

    from cortexm.cases import space
    from cortexm.cases.data import CALIBRATION_SAMPLES, like
    from cortexm.cases.ops import Pack

    modules: list[nn.Module] = []
    inputs: list[torch.Tensor] = []
    calibration: list[list[torch.Tensor]] = [[] for _ in range(CALIBRATION_SAMPLES)]
    for params in branches:
        module, xs = space.build_sample(op, params)
        modules.append(module)
        inputs += list(xs)
        calibration[0] += list(xs)
        for sample in calibration[1:]:
            sample += [like(t) for t in xs]
    return Pack(nn.ModuleList(modules), ARITY.get(op, 1)).eval(), tuple(inputs), [tuple(s) for s in calibration]


def coverage(chosen: dict[str, list], names: set[str]) -> list[dict]:
    """Per operator and scope: combinations, what was pruned, cases, and how many of those cases
    are among `names` (e.g. the simulated ones)."""
    rows = []
    for op in SCOPES:
        found, counts = combinations(op, chosen)
        for scope, tally in counts.items():
            mine = [c for c in found if c.scope == scope]
            rows.append({"operator": op, "scope": scope, **tally, "cases": len(mine),
                         "simulated": sum(c.name in names for c in mine)})
    return rows
