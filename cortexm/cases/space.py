"""The parameter spaces of the sweepable operators: how to draw a sample within what the
cortex_m backend lowers, build its model, shrink it, and write samples as a case file.

What enters: an operator name, a seed, parameters. What leaves: parameter sets, the
(module, inputs) of a sample, samples registered as cases from their data (`register_data`),
and reproducer case files that register them the same way (`register_sample`). The grid
cases (cortexm.cases.grid) and `cortexm sweep` (cortexm.testing.sweep) both draw from here.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from cortexm.base.errors import CortexmError
from cortexm.cases.registry import register

Params = dict[str, Any]


@dataclass(frozen=True)
class OpSpace:
    """How to draw, build and shrink samples of one operator."""

    draw: Callable[[random.Random], Params]
    build: Callable[[Params], tuple]
    valid: Callable[[Params], bool]
    # Parameters in the order shrinking tries them, with their smallest useful value.
    floors: dict[str, Any]


def _out(size: int, k: int, s: int, p: int, d: int = 1, ceil: bool = False) -> int:
    span = size + 2 * p - d * (k - 1) - 1
    return (-(-span // s) if ceil else span // s) + 1


def _image(p: Params, channels: int):
    import torch

    lo, hi = p.get("range", (-1.0, 1.0))
    n = p.get("batch", 1)
    return (torch.rand(n, channels, p["h"], p["w"]) * (hi - lo) + lo).to(memory_format=torch.channels_last)


def _activation(p: Params):
    from torch import nn

    kind = p.get("act", "none")
    if kind == "relu":
        return nn.ReLU()
    if kind == "relu6":
        return nn.ReLU6()
    if kind == "hardtanh":
        return nn.Hardtanh(-0.5, 0.5)
    return nn.Identity()


def _draw_range(rng: random.Random) -> tuple[float, float]:
    """Input ranges that move the zero point: symmetric, positive-only, lopsided."""
    return rng.choice([(-1.0, 1.0), (0.0, 2.0), (-3.0, 0.5), (-0.1, 4.0)])


# --- operators ----------------------------------------------------------------------------

def _conv_draw(rng: random.Random) -> Params:
    k = (rng.randint(1, 5), rng.randint(1, 5))
    return {"cin": rng.randint(1, 12), "cout": rng.randint(1, 12), "h": rng.randint(1, 16), "w": rng.randint(1, 16),
            "k": k, "stride": (rng.randint(1, 3), rng.randint(1, 3)), "pad": (rng.randint(0, 3), rng.randint(0, 3)),
            "dilation": (rng.choice([1, 1, 2]), rng.choice([1, 1, 2])), "bias": rng.random() < 0.7,
            "act": rng.choice(["none", "relu", "relu6", "hardtanh"]), "range": _draw_range(rng)}


def _conv_valid(p: Params) -> bool:
    return all(_out(p[d], p["k"][i], p["stride"][i], p["pad"][i], p["dilation"][i]) >= 1 for i, d in enumerate(("h", "w")))


def _conv_build(p: Params) -> tuple:
    from torch import nn

    conv = nn.Conv2d(p["cin"], p["cout"], p["k"], p["stride"], p["pad"], p["dilation"], bias=p["bias"])
    return nn.Sequential(conv, _activation(p)).eval(), (_image(p, p["cin"]),)


def _depthwise_draw(rng: random.Random) -> Params:
    p = _conv_draw(rng)
    del p["cout"]  # set by the channel multiplier
    p["mult"] = rng.choice([1, 1, 2, 3])
    return p


def _depthwise_build(p: Params) -> tuple:
    from torch import nn

    conv = nn.Conv2d(p["cin"], p["cin"] * p["mult"], p["k"], p["stride"], p["pad"], p["dilation"], groups=p["cin"],
                     bias=p["bias"])
    return nn.Sequential(conv, _activation(p)).eval(), (_image(p, p["cin"]),)


def _transpose_draw(rng: random.Random) -> Params:
    k = (rng.randint(1, 4), rng.randint(1, 4))
    return {"cin": rng.randint(1, 8), "cout": rng.randint(1, 8), "h": rng.randint(1, 10), "w": rng.randint(1, 10),
            "k": k, "stride": (rng.randint(1, 3), rng.randint(1, 3)),
            "pad": (rng.randint(0, k[0] - 1), rng.randint(0, k[1] - 1)), "bias": rng.random() < 0.7,
            "range": _draw_range(rng)}


def _transpose_valid(p: Params) -> bool:
    # Output size (in - 1) * stride - 2 * pad + k must stay positive; PyTorch needs pad < k.
    return all((p[d] - 1) * p["stride"][i] - 2 * p["pad"][i] + p["k"][i] >= 1 and p["pad"][i] < p["k"][i]
               for i, d in enumerate(("h", "w")))


def _transpose_build(p: Params) -> tuple:
    from torch import nn

    conv = nn.ConvTranspose2d(p["cin"], p["cout"], p["k"], p["stride"], p["pad"], bias=p["bias"])
    return conv.eval(), (_image(p, p["cin"]),)


def _pool_draw(rng: random.Random) -> Params:
    k = (rng.randint(1, 4), rng.randint(1, 4))
    return {"c": rng.randint(1, 16), "h": rng.randint(1, 14), "w": rng.randint(1, 14), "k": k,
            "stride": (rng.randint(1, 3), rng.randint(1, 3)), "pad": (rng.randint(0, k[0] // 2), rng.randint(0, k[1] // 2)),
            "ceil": rng.random() < 0.3, "count_include_pad": rng.random() < 0.5, "range": _draw_range(rng)}


def _pool_valid(p: Params) -> bool:
    return all(p["pad"][i] <= p["k"][i] // 2 and _out(p[d], p["k"][i], p["stride"][i], p["pad"][i], ceil=p["ceil"]) >= 1
               and p[d] + 2 * p["pad"][i] >= p["k"][i] for i, d in enumerate(("h", "w")))


def _avg_pool_build(p: Params) -> tuple:
    from torch import nn

    pool = nn.AvgPool2d(p["k"], p["stride"], p["pad"], ceil_mode=p["ceil"], count_include_pad=p["count_include_pad"])
    return pool.eval(), (_image(p, p["c"]),)


def _max_pool_build(p: Params) -> tuple:
    from torch import nn

    # ceil_mode max pooling is left to portable kernels: outside what this sweep targets.
    return nn.MaxPool2d(p["k"], p["stride"], p["pad"]).eval(), (_image(p, p["c"]),)


def _linear_draw(rng: random.Random) -> Params:
    return {"batch": rng.randint(1, 4), "fin": rng.randint(1, 64), "fout": rng.randint(1, 32), "bias": rng.random() < 0.7,
            "act": rng.choice(["none", "relu", "relu6", "hardtanh"]), "range": _draw_range(rng)}


def _linear_build(p: Params) -> tuple:
    import torch
    from torch import nn

    lo, hi = p["range"]
    x = torch.rand(p["batch"], p["fin"]) * (hi - lo) + lo
    return nn.Sequential(nn.Linear(p["fin"], p["fout"], bias=p["bias"]), _activation(p)).eval(), (x,)


def _binary_draw(rng: random.Random) -> Params:
    return {"c": rng.randint(1, 16), "h": rng.randint(1, 12), "w": rng.randint(1, 12),
            "range": _draw_range(rng), "range2": _draw_range(rng), "act": rng.choice(["none", "relu"])}


def _binary_build(fn) -> Callable[[Params], tuple]:
    def build(p: Params) -> tuple:
        from cortexm.cases.ops import Apply

        other = dict(p, range=p["range2"])
        act = _activation(p)
        return Apply(lambda m, a, b: m.act(fn(a, b)), act=act).eval(), (_image(p, p["c"]), _image(other, p["c"]))

    return build


def _softmax_draw(rng: random.Random) -> Params:
    return {"rows": rng.randint(1, 8), "cols": rng.randint(2, 64), "scale": rng.choice([1.0, 3.0, 8.0])}


def _softmax_build(p: Params) -> tuple:
    import torch

    from cortexm.cases.ops import Apply

    return Apply(lambda m, x: torch.softmax(x, dim=-1)).eval(), ((torch.rand(p["rows"], p["cols"]) * 2 - 1) * p["scale"],)


def _bmm_build(p: Params) -> tuple:
    import torch

    from cortexm.cases.ops import Apply

    lo, hi = p.get("range", (-1.0, 1.0))
    a = torch.rand(p["batch"], p["m"], p["k"]) * (hi - lo) + lo
    b = torch.rand(p["batch"], p["k"], p["n"]) * 2 - 1
    return Apply(lambda m, x, y: torch.bmm(x, y)).eval(), (a, b)


_CONV_FLOORS = {"h": 1, "w": 1, "cin": 1, "cout": 1, "k": (1, 1), "stride": (1, 1), "pad": (0, 0),
                "dilation": (1, 1), "bias": False, "act": "none", "range": (-1.0, 1.0)}
_POOL_FLOORS = {"h": 1, "w": 1, "c": 1, "k": (1, 1), "stride": (1, 1), "pad": (0, 0), "ceil": False,
                "count_include_pad": False, "range": (-1.0, 1.0)}

SPACES: dict[str, OpSpace] = {
    "conv2d": OpSpace(_conv_draw, _conv_build, _conv_valid, _CONV_FLOORS),
    "depthwise_conv2d": OpSpace(_depthwise_draw, _depthwise_build, _conv_valid,
                                {**{k: v for k, v in _CONV_FLOORS.items() if k != "cout"}, "mult": 1}),
    "transpose_conv2d": OpSpace(_transpose_draw, _transpose_build, _transpose_valid,
                                {k: v for k, v in _CONV_FLOORS.items() if k not in ("dilation", "act")}),
    "avg_pool2d": OpSpace(_pool_draw, _avg_pool_build, _pool_valid, _POOL_FLOORS),
    "max_pool2d": OpSpace(lambda r: dict(_pool_draw(r), ceil=False), _max_pool_build, _pool_valid, _POOL_FLOORS),
    "linear": OpSpace(_linear_draw, _linear_build, lambda p: True,
                      {"batch": 1, "fin": 1, "fout": 1, "bias": False, "act": "none", "range": (-1.0, 1.0)}),
    "add": OpSpace(_binary_draw, _binary_build(lambda a, b: a + b), lambda p: True,
                   {"h": 1, "w": 1, "c": 1, "act": "none", "range": (-1.0, 1.0), "range2": (-1.0, 1.0)}),
    "mul": OpSpace(_binary_draw, _binary_build(lambda a, b: a * b), lambda p: True,
                   {"h": 1, "w": 1, "c": 1, "act": "none", "range": (-1.0, 1.0), "range2": (-1.0, 1.0)}),
    "softmax": OpSpace(_softmax_draw, _softmax_build, lambda p: True, {"rows": 1, "cols": 2, "scale": 1.0}),
    "bmm": OpSpace(lambda r: {"batch": r.randint(1, 3), "m": r.randint(1, 8), "k": r.randint(1, 32), "n": r.randint(1, 16),
                              "range": _draw_range(r)},
                   _bmm_build, lambda p: True, {"batch": 1, "m": 1, "k": 1, "n": 1, "range": (-1.0, 1.0)}),
}


def space(op: str) -> OpSpace:
    try:
        return SPACES[op]
    except KeyError:
        raise CortexmError(f"no sweep for {op!r}; sweepable operators: {', '.join(SPACES)}") from None


def draw(op: str, seed: int, count: int) -> list[Params]:
    """`count` valid parameter sets for `op`, the same for the same seed."""
    return list(itertools.islice(samples(op, seed), count))


def samples(op: str, seed: int) -> Iterator[Params]:
    """Valid parameter sets for `op`, one at a time (a sweep of any length holds only those it
    runs): the same sequence for the same seed, `draw`'s first ones first."""
    s, rng = space(op), random.Random(f"{op}:{seed}")
    while True:
        p = s.draw(rng)
        if s.valid(p):
            p["seed"] = rng.randrange(2**31)  # weights and inputs of this sample
            yield p


def build_sample(op: str, params: Params) -> tuple:
    """The module and inputs of a sample; weights and inputs come from the sample's own seed,
    so a reproducer builds the same model whatever its case is called."""
    import torch

    torch.manual_seed(params["seed"])
    return space(op).build(params)


# Regions of a parameter space where a known upstream defect shows: samples there are
# expected failures (cortexm.cases.defects), so a sweep reports only what is new.
def _reverse_conv(p: Params) -> bool:
    """arm_transpose_conv_wrapper_s8 takes the reverse convolution, not arm_transpose_conv_s8 (where
    the three transposed-conv defects live), for strides <= 2 and more than 16 input channels
    (REVERSE_TCOL_EFFICIENT_THRESHOLD)."""
    return max(p["stride"]) <= 2 and p["cin"] > 16


def _padded_rows(p: Params) -> bool:
    """A depthwise conv CMSIS-NN's DSP path runs with rows of its window wholly in the padding
    (cortexm.cases.defects.CMSIS_NN_DEPTHWISE_PADDED_ROWS): taller padding than kernel."""
    return p.get("batch", 1) == 1 and tuple(p["dilation"]) == (1, 1) and p["pad"][0] > p["k"][0]


KNOWN_REGIONS: dict[str, list[tuple[Callable[[Params], bool], str]]] = {
    "transpose_conv2d": [
        (lambda p: p["pad"][0] % p["stride"][0] != 0 and not _reverse_conv(p), "CMSIS_NN_TRANSPOSE_CONV_ROWS"),
        # The too-small scratch, when stride_w > max(kernel_w, stride_h).
        (lambda p: p["stride"][1] > max(p["k"][1], p["stride"][0]) and not _reverse_conv(p),
         "CMSIS_NN_TRANSPOSE_CONV_SCRATCH"),
        (lambda p: p["pad"][0] > p["k"][0] - p["stride"][0] and p["pad"][0] % p["stride"][0] == 0
         and not _reverse_conv(p), "CMSIS_NN_TRANSPOSE_CONV_ROW_OVERRUN"),
    ],
    # One input channel, batch 1: lowered as a depthwise conv, which CMSIS-NN runs as a conv on MVE;
    # the lowering sizes its scratch from the wrong filter dims, which matters for a 1x1 kernel.
    "conv2d": [
        (lambda p: p["cin"] == 1 and p["cout"] > 1 and p.get("batch", 1) == 1 and tuple(p["k"]) == (1, 1)
         and tuple(p["pad"]) == (0, 0) and tuple(p["dilation"]) == (1, 1), "EXECUTORCH_DEPTHWISE_ONE_CHANNEL_SCRATCH"),
        # One input and one output channel: lowered as a depthwise conv of multiplier 1.
        (lambda p: p["cin"] == 1 and p["cout"] == 1 and _padded_rows(p), "CMSIS_NN_DEPTHWISE_PADDED_ROWS"),
    ],
    "depthwise_conv2d": [
        (lambda p: p["mult"] == 1 and _padded_rows(p), "CMSIS_NN_DEPTHWISE_PADDED_ROWS"),
    ],
    # One channel laid out channels-last (the example input as drawn; crafted data is contiguous)
    # gets the dim order (0, 2, 1, 3) (ExecuTorch #22520), and the portable clamp of an activation
    # the multiply cannot fuse refuses it at execute.
    "mul": [
        (lambda p: p["c"] == 1 and p.get("act", "none") != "none" and p.get("data", "uniform") == "uniform",
         "EXECUTORCH_DIM_ORDER_SIZE_ONE"),
    ],
}


def known_defects(op: str, params: Params) -> tuple[str, ...]:
    return tuple(name for applies, name in KNOWN_REGIONS.get(op, []) if applies(params))


def register_sample(name: str, op: str, params: Params, known: tuple[str, ...] = ()) -> None:
    """Register a sample as a case (what reproducer case files call); `known` names cortexm.cases.defects."""
    from cortexm.cases import defects

    register(name, f"{op} {params}", known_failures=tuple(getattr(defects, k) for k in known),
             spec=spec(op, params))(lambda: build_sample(op, params))


def spec(op: str, params: Params) -> str:
    """A sample's operator and parameters as one string: what its case is built from
    (cortexm.cases.registry.Case.spec), the same for the same data in every process."""
    return f"{op} {sorted(params.items())!r}"


def register_data(name: str, op: str, params: Params) -> None:
    """Register a sample as a case from its data, with the known defects of its region: what
    `cortexm sweep` does in its own process, and each export worker for the sample it exports
    (a case registered in one process only is unknown to the others). Idempotent; a sample of
    that name with other data is replaced."""
    from cortexm.cases.registry import REGISTRY

    found = REGISTRY.get(name)
    if found is not None and found.spec == spec(op, params):
        return
    if found is not None and found.spec:
        del REGISTRY[name]
    register_sample(name, op, params, known_defects(op, params))


def smaller(op: str, params: Params) -> list[Params]:
    """Candidates one step smaller than `params`, most aggressive first."""
    s = space(op)
    candidates = []
    for key, floor in s.floors.items():
        value = params.get(key)
        if key == "seed":
            continue
        if value is None or value == floor:
            continue
        steps = [floor]
        if isinstance(value, int) and not isinstance(value, bool) and value - 1 != floor:
            steps += [max(floor, value // 2), value - 1]
        elif isinstance(value, tuple) and all(isinstance(v, int) for v in value):
            steps += [tuple(f if i == j else v for j, (v, f) in enumerate(zip(value, floor, strict=False)))
                      for i in range(len(value))]
        for step in steps:
            candidate = dict(params, **{key: step})
            if candidate != params and s.valid(candidate) and candidate not in candidates:
                candidates.append(candidate)
    return candidates


def case_file(entries: list[tuple[str, str, Params]], header: str) -> str:
    """Python source of a case file registering each (name, op, params)."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    lines += ["from cortexm.cases.space import register_sample", ""]
    return "\n".join(lines) + "\n" + registrations(entries)


def registrations(entries: list[tuple[str, str, Params]]) -> str:
    """The lines of a case file that register each (name, op, params)."""
    lines = []
    for name, op, params in entries:
        known = known_defects(op, params)
        lines.append(f"register_sample({name!r}, {op!r}, {params!r}" + (f", known={known!r})" if known else ")") + "\n")
    return "".join(lines)
