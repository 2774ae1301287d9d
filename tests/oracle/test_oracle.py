"""The integer oracle (cortexm/oracle) against real components.

1. Host CMSIS-NN: CMSIS-NN's scalar C and tests/oracle_harness/harness.c (the calls the
   op_*.cpp kernels make) in a shared library; every kernel on seeded random and boundary
   cases must agree to the bit. The transposed convolution is compared outside the named
   CMSIS-NN defects (TRANSPOSE_CONV_DEFECTS) and, inside #230's, with CMSIS-NN's fix.
2. The comparisons can fail: the oracle with one primitive perturbed is caught.
3. ExecuTorch's Python operators (operators.py): the same cases must agree except inside
   the named findings of cortexm.oracle.upstream, each with the condition that allows it.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # oracle_harness

from cortexm.oracle import KERNELS, UNSUPPORTED_REASON, Tensor, fixedpoint, upstream
from cortexm.oracle.tensor import CHANNELS_LAST, contiguous
from oracle_harness import host as host_build

SEED = 20261130
MISSING = host_build.missing()


# --- the host library ------------------------------------------------------------------

@pytest.fixture(scope="session")
def host(request):
    """CMSIS-NN (scalar) and the harness, built once and cached by tree, rev and harness source."""
    if MISSING:
        pytest.skip(f"the oracle's host check needs: {MISSING}")
    cache = getattr(request.config, "cache", None)  # None under -p no:cacheprovider
    folder = cache.mkdir("cortexm-oracle-host") if cache else request.getfixturevalue("tmp_path_factory").mktemp("host")
    library, has_fixed = host_build.build(Path(folder))
    return host_build.Host(library, has_fixed)


# --- building cases --------------------------------------------------------------------

@dataclass
class Case:
    kind: str  # "random" or "boundary"
    args: dict
    out: Tensor
    note: str = ""


def channels_last(data) -> Tensor:
    return Tensor(np.asarray(data), CHANNELS_LAST)


def int8(rng, shape) -> np.ndarray:
    return rng.integers(-128, 128, shape).astype(np.int8)


def quantize_multiplier(real: float) -> tuple[int, int]:
    """A real scale as CMSIS-NN's (Q31 multiplier, shift), as the AoT passes compute it."""
    mantissa, exponent = math.frexp(real)
    multiplier = round(mantissa * 2**31)
    if multiplier == 2**31:
        multiplier, exponent = multiplier // 2, exponent + 1
    return multiplier, exponent


def per_channel(rng, channels: int, depth: int) -> tuple[Tensor, Tensor]:
    """Per-channel multipliers and shifts that bring a depth-`depth` int8 dot product near int8."""
    reals = rng.uniform(0.3, 3.0, channels) / (128 * 20 * math.sqrt(max(depth, 1)))
    pairs = [quantize_multiplier(r) for r in reals]
    return (contiguous(np.array([m for m, _ in pairs], np.int32)), contiguous(np.array([s for _, s in pairs], np.int32)))


def activation(rng) -> tuple[int, int]:
    return [(-128, 127), (-128, 127), (0, 127), (-128, -128), (127, 127), (-20, 35)][rng.integers(6)]


# Exact-step requantizations: multiplier ~1.0 makes the result x / 2**-shift rounded once,
# 2**30 (0.5) rounds twice; each accumulator x then sits on, beside or between half steps.
STEP_REQUANTS = [((1 << 31) - 1, 0), ((1 << 31) - 1, -1), ((1 << 31) - 1, -3), ((1 << 31) - 1, -7),
                 (1 << 30, 0), (1 << 30, -2), ((1 << 31) - 1, 1)]
STEP_OFFSETS = [(0, -128, 127), (100, -128, 127), (-100, -128, 127), (0, 0, 127), (5, -7, 9)]


def every_int8(shape_prefix: tuple) -> np.ndarray:
    """All 256 int8 values, shaped (*shape_prefix, 16, 16)."""
    return np.arange(-128, 128, dtype=np.int16).astype(np.int8).reshape(*shape_prefix, 16, 16)


def step_cases(build: Callable[[int, int, int, int, int], tuple[dict, Tensor]]) -> list[Case]:
    """Boundary cases: accumulators equal to every int8 value, under STEP_REQUANTS and STEP_OFFSETS."""
    cases = []
    for multiplier, shift in STEP_REQUANTS:
        for output_offset, low, high in STEP_OFFSETS:
            args, out = build(multiplier, shift, output_offset, low, high)
            cases.append(Case("boundary", args, out, f"mult={multiplier} shift={shift} off={output_offset} act=[{low},{high}]"))
    return cases


def _image(data_nhwc: np.ndarray, nhwc: bool) -> Tensor:
    """An activation as a legacy kernel takes it (NCHW sizes, channels_last) or a *_nhwc one does."""
    return contiguous(data_nhwc) if nhwc else channels_last(data_nhwc.transpose(0, 3, 1, 2))


def conv_geometry(rng, transposed: bool = False) -> dict:
    g = dict(n=int(rng.choice([1, 2])), h=int(rng.integers(1, 9)), w=int(rng.integers(1, 9)),
             kh=int(rng.integers(1, 4)), kw=int(rng.integers(1, 4)), sh=int(rng.integers(1, 4)),
             sw=int(rng.integers(1, 4)), dh=int(rng.integers(1, 3)), dw=int(rng.integers(1, 3)))
    if transposed:
        g.update(dh=1, dw=1, kh=int(rng.integers(1, 5)), kw=int(rng.integers(1, 5)))
    g.update(ph=int(rng.integers(0, g["kh"])), pw=int(rng.integers(0, g["kw"])))
    return g


def _conv_like(rng, g: dict, c: int, o: int, weight: np.ndarray, nhwc: bool, transposed=False, grouped=False,
               **extra) -> tuple[dict, Tensor] | None:
    if transposed:
        oh = (g["h"] - 1) * g["sh"] - 2 * g["ph"] + g["kh"] + g["oph"]
        ow = (g["w"] - 1) * g["sw"] - 2 * g["pw"] + g["kw"] + g["opw"]
    else:
        oh = (g["h"] + 2 * g["ph"] - g["dh"] * (g["kh"] - 1) - 1) // g["sh"] + 1
        ow = (g["w"] + 2 * g["pw"] - g["dw"] * (g["kw"] - 1) - 1) // g["sw"] + 1
    if oh < 1 or ow < 1:
        return None
    x = int8(rng, (g["n"], g["h"], g["w"], c))
    depth = weight[0].size
    multipliers, shifts = per_channel(rng, o, depth)
    low, high = activation(rng) if rng.random() < 0.3 else (-128, 127)
    args = dict(input=None, weight=contiguous(weight),
                bias=None if rng.random() < 0.2 and not grouped else contiguous(rng.integers(-20000, 20000, o).astype(np.int32)),
                stride=[g["sh"], g["sw"]], padding=[g["ph"], g["pw"]])
    if transposed:
        args["output_padding"] = [g["oph"], g["opw"]]
    args.update(dilation=[g["dh"], g["dw"]], **extra, input_offset=int(rng.integers(-127, 129)),
                output_offset=int(rng.integers(-128, 128)), requantize_multipliers=multipliers,
                requantize_shifts=shifts, activation_min=low, activation_max=high, scratch=contiguous(np.zeros(0, np.int8)))
    if transposed:
        args["output_scratch"] = contiguous(np.zeros(0, np.int8))
    args["input"] = _image(x, nhwc)
    return args, _image(np.zeros((g["n"], oh, ow, o), np.int8), nhwc)


def _step_conv(kind: str, nhwc: bool) -> list[Case]:
    """1 x 1 (and 3 x 3 with one centre tap) convolutions whose accumulator is the input value."""
    def build(multiplier, shift, output_offset, low, high, kernel=1):
        x = every_int8((1,))[..., None]  # (1, 16, 16, 1)
        offset = 7
        weight = np.zeros((1, kernel, kernel, 1), np.int8)  # OHWI, or depthwise [1, H, W, C_out]
        weight[0, kernel // 2, kernel // 2, 0] = 1
        args = dict(input=_image(x, nhwc), weight=contiguous(weight), bias=contiguous(np.array([-offset], np.int32)),
                    stride=[1, 1], padding=[kernel // 2] * 2)
        if kind == "transpose":
            args["output_padding"] = [0, 0]
        args["dilation"] = [1, 1]
        if kind == "depthwise":
            args["depth_multiplier"] = 1
        args.update(input_offset=offset, output_offset=output_offset,
                    requantize_multipliers=contiguous(np.array([multiplier], np.int32)),
                    requantize_shifts=contiguous(np.array([shift], np.int32)), activation_min=low,
                    activation_max=high, scratch=contiguous(np.zeros(0, np.int8)))
        if kind == "transpose":
            args["output_scratch"] = contiguous(np.zeros(0, np.int8))
        return args, _image(np.zeros((1, 16, 16, 1), np.int8), nhwc)

    return step_cases(build) + step_cases(lambda *a: build(*a, kernel=3))


def gen_conv2d(rng, nhwc=False) -> list[Case]:
    cases = []
    while len(cases) < 80:
        g = conv_geometry(rng)
        if rng.random() < 0.25:  # the 1 x 1 kernels
            g.update(kh=1, kw=1, ph=0, pw=0, dh=1, dw=1, sh=int(rng.integers(1, 3)), sw=int(rng.integers(1, 3)))
        elif rng.random() < 0.2:  # the 1 x n path
            g.update(h=1, kh=1, ph=0, dh=1)
        groups = int(rng.choice([1, 1, 1, 2, 3]))
        ki = int(rng.choice([1, 2, 3, 5, 8, 17]))
        c, o = groups * ki, groups * int(rng.integers(1, 7))
        weight = int8(rng, (o, g["kh"], g["kw"], ki))
        built = _conv_like(rng, g, c, o, weight, nhwc, grouped=groups > 1)
        if built:
            cases.append(Case("random", *built, note=f"{g} groups={groups}"))
    return cases + _step_conv("conv", nhwc)


def gen_depthwise(rng, nhwc=False) -> list[Case]:
    cases = []
    while len(cases) < 80:
        g = conv_geometry(rng)
        if not nhwc:
            g["n"] = 1  # op_quantized_depthwise_conv2d.cpp takes batch 1 only
        if rng.random() < 0.3:  # the 3 x 3 kernel
            g.update(kh=3, kw=3, dh=1, dw=1, ph=int(rng.integers(0, 2)), pw=int(rng.integers(0, 2)))
        c, multiplier = int(rng.choice([1, 2, 3, 4, 5, 8, 17])), int(rng.choice([1, 1, 2, 3, 4, 8]))
        weight = int8(rng, (1, g["kh"], g["kw"], c * multiplier))
        built = _conv_like(rng, g, c, c * multiplier, weight, nhwc, depth_multiplier=multiplier)
        if built:
            cases.append(Case("random", *built, note=f"{g} mult={multiplier}"))
    return cases + _step_conv("depthwise", nhwc)


def transpose_conv_geometry(rng) -> dict:
    g = conv_geometry(rng, transposed=True)
    g.update(h=int(rng.integers(1, 6)), w=int(rng.integers(1, 6)),
             oph=int(rng.integers(0, g["sh"])), opw=int(rng.integers(0, g["sw"])))
    return g


def gen_transpose_conv(rng, nhwc=False) -> list[Case]:
    cases = []
    while len(cases) < 300:
        g = transpose_conv_geometry(rng)
        c, o = int(rng.choice([1, 3, 5, 16, 17, 20])), int(rng.integers(1, 7))
        built = _conv_like(rng, g, c, o, int8(rng, (o, g["kh"], g["kw"], c)), nhwc, transposed=True)
        if built:
            cases.append(Case("random", *built, note=str(g)))
    return cases + _step_conv("transpose", nhwc)


def _pool_args(x: Tensor, kernel, stride, padding) -> dict:
    return dict(input=x, kernel_size=list(kernel), stride=list(stride), padding=list(padding))


def _pool_out(size, kernel, stride, padding, ceil_mode):
    """PyTorch's pooled size (no window larger than the padded input: 0)."""
    numerator = size + 2 * padding - kernel
    if numerator < 0:
        return 0
    out = numerator // stride + 1
    if ceil_mode and numerator % stride:
        out += 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1
    return out


def _pool_geometry(rng, ceil_mode: bool) -> dict | None:
    """Random pool geometry (h != w, odd and >= 17 channels, batch 2), None when nothing is pooled."""
    g = dict(n=int(rng.choice([1, 2])), c=int(rng.choice([1, 3, 4, 5, 17, 20])), h=int(rng.integers(1, 10)),
             w=int(rng.integers(1, 10)), kernel=(int(rng.integers(1, 5)), int(rng.integers(1, 5))),
             stride=(int(rng.integers(1, 4)), int(rng.integers(1, 4))))
    g["padding"] = tuple(int(rng.integers(0, k // 2 + 1)) for k in g["kernel"])
    g["oh"], g["ow"] = (_pool_out(s, k, st, p, ceil_mode)
                        for s, k, st, p in zip((g["h"], g["w"]), g["kernel"], g["stride"], g["padding"], strict=True))
    return g if g["oh"] >= 1 and g["ow"] >= 1 else None


def _random_pool(rng, nhwc: bool, ceil_mode: bool) -> tuple[dict, Tensor, str] | None:
    g = _pool_geometry(rng, ceil_mode)
    if g is None:
        return None
    args = _pool_args(_image(int8(rng, (g["n"], g["h"], g["w"], g["c"])), nhwc), g["kernel"], g["stride"], g["padding"])
    out = _image(np.zeros((g["n"], g["oh"], g["ow"], g["c"]), np.int8), nhwc)
    return args, out, f"k={g['kernel']} s={g['stride']} p={g['padding']} ceil={ceil_mode}"


def gen_avg_pool(rng, nhwc=False) -> list[Case]:
    cases = []
    while len(cases) < 80:
        ceil_mode = bool(rng.random() < 0.3)
        drawn = _random_pool(rng, nhwc, ceil_mode)
        if drawn is None:
            continue
        args, out, note = drawn
        multiplier, shift = quantize_multiplier(rng.uniform(0.5, 1.0))
        args.update(ceil_mode=ceil_mode, zero_point=int(rng.integers(-128, 128)), multiplier=multiplier, shift=shift,
                    scratch=contiguous(np.zeros(0, np.int8)))
        cases.append(Case("random", args, out, note))
    # Boundary: windows of 1, 2, 3 and 4 elements whose sums fall on every residue, both signs.
    for kernel, padding in (((1, 2), (0, 0)), ((2, 2), (0, 0)), ((2, 2), (1, 1)), ((3, 3), (1, 1)), ((1, 4), (0, 2))):
        x = every_int8((1,))[..., None]
        oh, ow = (_pool_out(16, k, 1, p, False) for k, p in zip(kernel, padding, strict=True))
        args = _pool_args(_image(x, nhwc), kernel, (1, 1), padding)
        args.update(ceil_mode=False, zero_point=0, multiplier=1 << 30, shift=0, scratch=contiguous(np.zeros(0, np.int8)))
        cases.append(Case("boundary", args, _image(np.zeros((1, oh, ow, 1), np.int8), nhwc), f"k={kernel} p={padding}"))
    return cases


def gen_max_pool(rng, nhwc=False) -> list[Case]:
    cases = []
    while len(cases) < 80:
        drawn = _random_pool(rng, nhwc, False)
        if drawn is None:
            continue
        args, out, note = drawn
        zp = int(rng.integers(-128, 128))
        low, high = activation(rng)
        args.update(dilation=[1, 1], ceil_mode=False, input_zero_point=zp, output_zero_point=zp,
                    activation_min=low, activation_max=high)
        cases.append(Case("random", args, out, note))
    for low, high in ((-128, 127), (-128, -128), (127, 127), (-5, 7), (-300, 300), (-300, -200), (200, 300)):
        x = every_int8((1,))[..., None]
        args = _pool_args(_image(x, nhwc), (2, 3), (1, 2), (1, 1))
        args.update(dilation=[1, 1], ceil_mode=False, input_zero_point=0, output_zero_point=0,
                    activation_min=low, activation_max=high)
        cases.append(Case("boundary", args, _image(np.zeros((1, 17, 8, 1), np.int8), nhwc), f"act=[{low},{high}]"))
    # Padding as wide as the kernel: corner windows hold no element, their outputs keep the memory.
    x = int8(rng, (2, 5, 6, 3))
    args = _pool_args(_image(x, nhwc), (2, 2), (2, 2), (2, 2))
    args.update(dilation=[1, 1], ceil_mode=False, input_zero_point=0, output_zero_point=0, activation_min=-100,
                activation_max=100)
    prior = int8(rng, (2, 5, 5, 3))
    cases.append(Case("boundary", args, _image(prior, nhwc), "empty windows keep the output memory"))
    return cases


def _elementwise_shapes(rng) -> list[tuple[tuple, tuple, tuple, str]]:
    """(self shape, other shape, dim order, note): equal shapes, and channel broadcasts both ways."""
    n, c, h, w = int(rng.choice([1, 2])), int(rng.choice([1, 3, 5, 17])), int(rng.integers(1, 6)), int(rng.integers(1, 6))
    order = CHANNELS_LAST
    choice = rng.integers(4)
    if choice == 0:
        rank = int(rng.integers(1, 5))
        shape = tuple(int(v) for v in rng.integers(1, 6, rank))
        return shape, shape, tuple(range(rank)), "equal"
    if choice == 1:
        return (n, c, h, w), (n, c, h, w), order, "equal channels_last"
    if choice == 2:
        return (n, c, h, w), (1, c, 1, 1), order, "other per-channel"
    return (1, c, 1, 1), (n, c, h, w), order, "self per-channel (swapped)"


def _operands(rng, self_shape, other_shape, order):
    make = (lambda d: Tensor(d, order)) if len(order) == 4 else contiguous
    out_shape = self_shape if np.prod(self_shape) >= np.prod(other_shape) else other_shape
    return make(int8(rng, self_shape)), make(int8(rng, other_shape)), make(np.zeros(out_shape, np.int8))


def gen_add(rng) -> list[Case]:
    cases = []
    for _ in range(80):
        s_shape, o_shape, order, note = _elementwise_shapes(rng)
        a, b, out = _operands(rng, s_shape, o_shape, order)
        s1, s2, so = rng.uniform(0.002, 0.05, 3)
        largest = 2 * max(s1, s2)
        (m1, sh1), (m2, sh2) = quantize_multiplier(s1 / largest), quantize_multiplier(s2 / largest)
        mo, sho = quantize_multiplier(largest / ((1 << 20) * so))
        low, high = activation(rng)
        args = dict(self=a, self_zero_point=int(rng.integers(-128, 128)), self_multiplier=m1, self_shift=sh1,
                    other=b, other_zero_point=int(rng.integers(-128, 128)), other_multiplier=m2, other_shift=sh2,
                    output_zero_point=int(rng.integers(-128, 128)), output_multiplier=mo, output_shift=sho,
                    activation_min=low, activation_max=high)
        cases.append(Case("random", args, out, note))
    # Boundary: every int8 pair at extreme zero points, equal scales (sums on half steps), saturating.
    x = every_int8(())
    for zp1, zp2, zpo, ratio in ((-128, 127, 0, 1.0), (127, -128, -128, 1.0), (0, 0, 127, 0.5), (3, -3, 0, 1 / 3)):
        m, s = quantize_multiplier(0.5)
        mo, so = quantize_multiplier(1 / ((1 << 20) * 0.5 * ratio))
        args = dict(self=contiguous(x), self_zero_point=zp1, self_multiplier=m, self_shift=s,
                    other=contiguous(x.T.copy()), other_zero_point=zp2, other_multiplier=m, other_shift=s,
                    output_zero_point=zpo, output_multiplier=mo, output_shift=so, activation_min=-128, activation_max=127)
        cases.append(Case("boundary", args, contiguous(np.zeros_like(x)), f"zp={zp1},{zp2},{zpo} ratio={ratio}"))
    return cases


def gen_mul(rng) -> list[Case]:
    cases = []
    for _ in range(80):
        s_shape, o_shape, order, note = _elementwise_shapes(rng)
        a, b, out = _operands(rng, s_shape, o_shape, order)
        mo, sho = quantize_multiplier(rng.uniform(0.02, 0.2) ** 2 / rng.uniform(0.01, 0.1))
        args = dict(self=a, self_zero_point=int(rng.integers(-128, 128)), other=b,
                    other_zero_point=int(rng.integers(-128, 128)), output_zero_point=int(rng.integers(-128, 128)),
                    output_multiplier=mo, output_shift=sho)
        cases.append(Case("random", args, out, note))
    x = every_int8(())
    for zp1, zp2, real in ((-128, 127, 2.0**-7), (0, -396, 2.0**-8), (127, 127, 2.0**-15), (5, 0, 1.0)):
        mo, so = quantize_multiplier(real)
        args = dict(self=contiguous(x), self_zero_point=zp1, other=contiguous(x.T.copy()), other_zero_point=zp2,
                    output_zero_point=0, output_multiplier=mo, output_shift=so)
        cases.append(Case("boundary", args, contiguous(np.zeros_like(x)), f"zp={zp1},{zp2} scale={real}"))
    return cases


def gen_div(rng) -> list[Case]:
    cases = []
    for _ in range(60):
        dtype = np.int8 if rng.random() < 0.6 else np.int16
        info = np.iinfo(dtype)
        shape = tuple(int(v) for v in rng.integers(1, 6, int(rng.integers(1, 5))))
        a = rng.integers(info.min, info.max + 1, shape).astype(dtype)
        b = rng.integers(info.min, info.max + 1, shape).astype(dtype)
        zp2 = int(b.reshape(-1)[0])  # at least one zero divisor
        args = dict(self=contiguous(a), self_zero_point=int(rng.integers(-100, 100)), other=contiguous(b),
                    other_zero_point=zp2, output_zero_point=int(rng.integers(-100, 100)),
                    output_scale=float(rng.uniform(0.05, 200.0)))
        cases.append(Case("random", args, contiguous(np.zeros(shape, dtype))))
    # Boundary: quotients on exact half steps (odd / 2), and saturation.
    x = every_int8(())
    for scale, divisor in ((1.0, 2), (0.5, 1), (1000.0, 1), (3.0, 6)):
        args = dict(self=contiguous(x), self_zero_point=0, other=contiguous(np.full_like(x, divisor)), other_zero_point=0,
                    output_zero_point=0, output_scale=scale)
        cases.append(Case("boundary", args, contiguous(np.zeros_like(x)), f"scale={scale} divisor={divisor}"))
    return cases


def gen_activation(rng) -> list[Case]:
    cases = []
    for _ in range(20):
        shape = tuple(int(v) for v in rng.integers(1, 7, int(rng.integers(1, 5))))
        cases.append(Case("random", dict(input=contiguous(int8(rng, shape)), lut=contiguous(int8(rng, (256,)))),
                          contiguous(np.zeros(shape, np.int8))))
    cases.append(Case("boundary", dict(input=contiguous(every_int8(())), lut=contiguous(int8(rng, (256,)))),
                      contiguous(np.zeros((16, 16), np.int8)), "every index"))
    return cases


def gen_min_max(rng) -> list[Case]:
    cases = []
    for _ in range(80):
        rank = int(rng.integers(1, 5))
        base = tuple(int(v) for v in rng.integers(1, 5, rank))
        shapes = []
        for _ in range(2):
            shape = tuple(1 if rng.random() < 0.35 else d for d in base)
            shapes.append(shape[int(rng.integers(0, rank)):] if rng.random() < 0.25 else shape)
        out_shape = tuple(np.broadcast_shapes(*shapes))
        cases.append(Case("random", dict(self=contiguous(int8(rng, shapes[0])), other=contiguous(int8(rng, shapes[1]))),
                          contiguous(np.zeros(out_shape, np.int8)), f"{shapes}"))
    x = every_int8(())
    cases.append(Case("boundary", dict(self=contiguous(x), other=contiguous(np.array(-1, np.int8))),
                      contiguous(np.zeros_like(x)), "0-d other"))
    cases.append(Case("boundary", dict(self=contiguous(x), other=contiguous(x.T.copy())), contiguous(np.zeros_like(x)),
                      "all pairs"))
    return cases


def _linear_args(rng, batch_shape, k, o, bias=True) -> tuple[dict, Tensor]:
    multiplier, shift = quantize_multiplier(rng.uniform(0.3, 3.0) / (128 * 20 * math.sqrt(k)))
    low, high = activation(rng) if rng.random() < 0.3 else (-128, 127)
    args = dict(input=contiguous(int8(rng, (*batch_shape, k))), weights=contiguous(int8(rng, (o, k))),
                bias=contiguous(rng.integers(-20000, 20000, o).astype(np.int32)) if bias else None, kernel_sum=None,
                input_offset=int(rng.integers(-127, 129)),
                filter_offset=0 if rng.random() < 0.7 else int(rng.integers(-127, 129)),
                output_offset=int(rng.integers(-128, 128)), requantize_multipliers=[multiplier], requantize_shifts=[shift],
                activation_max=high, activation_min=low)
    return args, contiguous(np.zeros((*batch_shape, o), np.int8))


def gen_linear(rng) -> list[Case]:
    cases = []
    for _ in range(80):
        batch_shape = [(), (1,), (2,), (2, 3)][rng.integers(4)]
        k, o = int(rng.choice([1, 3, 17, 32, 64, 100])), int(rng.choice([1, 3, 16, 17]))
        cases.append(Case("random", *_linear_args(rng, batch_shape, k, o, bias=rng.random() < 0.8), note=f"k={k} o={o}"))

    def build(multiplier, shift, output_offset, low, high):
        args = dict(input=contiguous(every_int8(()).reshape(256, 1)), weights=contiguous(np.ones((1, 1), np.int8)),
                    bias=contiguous(np.array([-9], np.int32)), kernel_sum=None, input_offset=9, filter_offset=0,
                    output_offset=output_offset, requantize_multipliers=[multiplier], requantize_shifts=[shift],
                    activation_max=high, activation_min=low)
        return args, contiguous(np.zeros((256, 1), np.int8))

    return cases + step_cases(build)


def gen_batch_matmul(rng) -> list[Case]:
    cases = []
    for _ in range(60):
        b, m, n, k = int(rng.integers(1, 4)), int(rng.integers(1, 6)), int(rng.integers(1, 7)), \
            int(rng.choice([1, 3, 16, 17, 40]))
        multiplier, shift = quantize_multiplier(rng.uniform(0.3, 3.0) / (128 * 20 * math.sqrt(k)))
        args = dict(lhs=contiguous(int8(rng, (b, m, k))), lhs_zero_point=int(rng.integers(-127, 129)),
                    rhs_transposed=contiguous(int8(rng, (b, n, k))),
                    rhs_zero_point=0 if rng.random() < 0.6 else int(rng.integers(-127, 129)),
                    output_zero_point=int(rng.integers(-128, 128)), output_multiplier=multiplier, output_shift=shift,
                    scratch=contiguous(np.zeros(0, np.int8)))
        cases.append(Case("random", args, contiguous(np.zeros((b, m, n), np.int8)), f"b={b} m={m} n={n} k={k}"))

    def build(multiplier, shift, output_offset, low, high):
        args = dict(lhs=contiguous(every_int8(()).reshape(1, 256, 1)), lhs_zero_point=0,
                    rhs_transposed=contiguous(np.ones((1, 1, 1), np.int8)), rhs_zero_point=0,
                    output_zero_point=output_offset, output_multiplier=multiplier, output_shift=shift,
                    scratch=contiguous(np.zeros(0, np.int8)))
        return args, contiguous(np.zeros((1, 256, 1), np.int8))

    return cases + [c for c in step_cases(build) if c.note.endswith("act=[-128,127]")]


def _softmax_args(x: np.ndarray, multiplier: int, shift: int, diff_min: int) -> dict:
    return dict(input=contiguous(x), dim=-1, input_zero_point=0, output_zero_point=-128,
                input_multiplier=multiplier, input_shift=shift, diff_min=diff_min)


def gen_softmax(rng) -> list[Case]:
    cases = []
    for _ in range(80):
        rows, size = int(rng.integers(1, 6)), int(rng.choice([1, 2, 3, 7, 10, 17, 33, 100]))
        x = int8(rng, (rows, size)) if rng.random() < 0.7 else rng.integers(-10, 10, (2, rows, size)).astype(np.int8)
        diff_min = int(rng.choice([-992, -248, -31, int(rng.integers(-255, 0))]))
        multiplier, shift = int(rng.integers(1 << 30, 1 << 31)), int(rng.integers(15, 24))
        cases.append(Case("random", _softmax_args(x, multiplier, shift, diff_min), contiguous(np.zeros(x.shape, np.int8))))
    # Boundary: elements exactly at diff_min (and one either side), constant rows, long rows.
    for diff_min in (-1, -17, -100, -255):
        row = np.array([100, 100 + diff_min, 100 + diff_min + 1, 100 + diff_min - 1, 100, -128], np.int64)
        x = np.clip(row, -128, 127).astype(np.int8)[None, :]
        cases.append(Case("boundary", _softmax_args(x, 1472159232, 21, diff_min), contiguous(np.zeros_like(x)),
                          f"diff_min={diff_min}"))
    for size in (1, 2, 255, 511):
        x = np.full((1, size), 5, np.int8)
        cases.append(Case("boundary", _softmax_args(x, 1 << 30, 20, -992), contiguous(np.zeros_like(x)),
                          f"constant row of {size}"))
    return cases


def gen_transpose(rng) -> list[Case]:
    cases = []
    for _ in range(60):
        rank = int(rng.integers(1, 5))
        shape = tuple(int(v) for v in rng.integers(1, 6, rank))
        perm = [int(p) for p in rng.permutation(rank)]
        if rank == 2:
            perm = [1, 0]
        cases.append(Case("random", dict(input=contiguous(int8(rng, shape)), perm=perm),
                          contiguous(np.zeros([shape[p] for p in perm], np.int8)), f"perm={perm}"))
    x = int8(rng, (3, 5))
    cases.append(Case("boundary", dict(input=contiguous(x), perm=[0, 1]), contiguous(np.zeros((3, 5), np.int8)),
                      "rank 2, perm [0, 1]"))
    return cases


def gen_pad(rng) -> list[Case]:
    cases = []
    for _ in range(60):
        rank = int(rng.integers(1, 5))
        shape = tuple(int(v) for v in rng.integers(1, 5, rank))
        last = rank == 4 and rng.random() < 0.6
        as_last = last or (rank == 4 and (shape[1] == 1 or shape[2:] == (1, 1)))
        physical = [shape[d] for d in CHANNELS_LAST] if as_last else list(shape)
        dims = [1] * (4 - rank) + physical
        pre = [0] * (4 - rank) + [int(v) for v in rng.integers(0, 3, rank)]
        post = [0] * (4 - rank) + [int(v) for v in rng.integers(0, 3, rank)]
        padded = [d + a + b for d, a, b in zip(dims, pre, post, strict=True)][4 - rank:]
        if rank == 4 and (last or shape[1] == 1 or shape[2:] == (1, 1)):
            out_shape = (padded[0], padded[3], padded[1], padded[2])
        else:
            out_shape = tuple(padded)
        order = CHANNELS_LAST if last else tuple(range(rank))
        x = Tensor(int8(rng, shape), order)
        out = Tensor(np.zeros(out_shape, np.int8), order)
        value = int(rng.choice([0, -1, 127, -128, int(rng.integers(-128, 128)), 200]))
        cases.append(Case("random", dict(input=x, pre_pad=pre, post_pad=post, pad_value=value), out, f"{shape} {order}"))
    return cases


def gen_quantize(rng) -> list[Case]:
    cases = []
    for _ in range(60):
        dtype = "int8" if rng.random() < 0.7 else "int16"
        info = np.iinfo(dtype)
        shape = tuple(int(v) for v in rng.integers(1, 9, int(rng.integers(1, 5))))
        scale = float(np.exp(rng.uniform(np.log(1e-4), np.log(1.0))))
        x = (rng.standard_normal(shape) * scale * rng.uniform(10, 400)).astype(np.float32)
        low, high = (info.min, info.max) if rng.random() < 0.8 else (info.min + 1, info.max - 3)
        args = dict(input=contiguous(x), scale=scale, zero_point=int(rng.integers(low, high + 1)),
                    quant_min=int(low), quant_max=int(high), dtype=dtype)
        cases.append(Case("random", args, contiguous(np.zeros(shape, dtype))))
    # Boundary: exact half steps (power-of-two scales), signed zeros, saturation at the bounds.
    steps = np.arange(-300, 300) + 0.5
    for exponent, zero_point, dtype in ((-7, 0, "int8"), (-3, -5, "int8"), (0, 3, "int8"), (-12, 0, "int16")):
        x = np.concatenate([steps, np.arange(-300, 300), [0.0, -0.0, 1e4, -1e4]]).astype(np.float32) * np.float32(2.0**exponent)
        info = np.iinfo(dtype)
        args = dict(input=contiguous(x), scale=2.0**exponent, zero_point=zero_point, quant_min=int(info.min),
                    quant_max=int(info.max), dtype=dtype)
        cases.append(Case("boundary", args, contiguous(np.zeros(x.shape, dtype)), f"scale=2**{exponent}"))
    # Boundary: values next to half steps of arbitrary scales, where float32 rounding decides.
    for scale in rng.uniform(0.001, 0.1, 4):
        ties = ((np.arange(-130, 130) + 0.5) * scale).astype(np.float32)
        x = np.concatenate([ties, np.nextafter(ties, np.float32(np.inf)), np.nextafter(ties, np.float32(-np.inf))])
        args = dict(input=contiguous(x), scale=float(scale), zero_point=0, quant_min=-128, quant_max=127, dtype="int8")
        cases.append(Case("boundary", args, contiguous(np.zeros(x.shape, np.int8)), f"near ties, scale={scale}"))
    return cases


def gen_dequantize(rng) -> list[Case]:
    cases = []
    for _ in range(30):
        dtype = "int8" if rng.random() < 0.7 else "int16"
        info = np.iinfo(dtype)
        shape = tuple(int(v) for v in rng.integers(1, 9, int(rng.integers(1, 5))))
        x = rng.integers(info.min, info.max + 1, shape).astype(dtype)
        args = dict(input=contiguous(x), scale=float(np.exp(rng.uniform(np.log(1e-5), 0))),
                    zero_point=int(rng.integers(info.min, info.max + 1)), quant_min=int(info.min), quant_max=int(info.max),
                    dtype=dtype)
        cases.append(Case("random", args, contiguous(np.zeros(shape, np.float32))))
    x = every_int8(())
    for scale, zp in ((0.1, -128), (1 / 3, 127), (2.0**-20, 0)):
        args = dict(input=contiguous(x), scale=scale, zero_point=zp, quant_min=-128, quant_max=127, dtype="int8")
        cases.append(Case("boundary", args, contiguous(np.zeros(x.shape, np.float32)), f"scale={scale} zp={zp}"))
    return cases


def _nhwc(generator):
    return lambda rng: generator(rng, nhwc=True)


GENERATORS: dict[str, Callable] = {
    "cortex_m::quantize_per_tensor": gen_quantize,
    "cortex_m::dequantize_per_tensor": gen_dequantize,
    "cortex_m::quantized_add": gen_add,
    "cortex_m::quantized_mul": gen_mul,
    "cortex_m::quantized_div": gen_div,
    "cortex_m::quantized_activation": gen_activation,
    "cortex_m::minimum": gen_min_max,
    "cortex_m::maximum": gen_min_max,
    "cortex_m::quantized_linear": gen_linear,
    "cortex_m::quantized_batch_matmul": gen_batch_matmul,
    "cortex_m::softmax": gen_softmax,
    "cortex_m::transpose": gen_transpose,
    "cortex_m::pad": gen_pad,
    "cortex_m::quantized_conv2d": gen_conv2d,
    "cortex_m::quantized_conv2d_nhwc": _nhwc(gen_conv2d),
    "cortex_m::quantized_depthwise_conv2d": gen_depthwise,
    "cortex_m::quantized_depthwise_conv2d_nhwc": _nhwc(gen_depthwise),
    "cortex_m::quantized_transpose_conv2d": gen_transpose_conv,
    "cortex_m::quantized_transpose_conv2d_nhwc": _nhwc(gen_transpose_conv),
    "cortex_m::quantized_avg_pool2d": gen_avg_pool,
    "cortex_m::quantized_avg_pool2d_nhwc": _nhwc(gen_avg_pool),
    "cortex_m::quantized_max_pool2d": gen_max_pool,
    "cortex_m::quantized_max_pool2d_nhwc": _nhwc(gen_max_pool),
}


def cases_for(name: str) -> list[Case]:
    seed = SEED + sum(name.encode())  # each operator its own stream, stable across runs
    return GENERATORS[name](np.random.default_rng(seed))


# --- comparing -------------------------------------------------------------------------

def same(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit for bit (floats by their bits)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind == "f":
        bits = np.dtype(f"u{a.itemsize}")
        return bool(np.array_equal(a.view(bits), b.view(bits)))
    return bool(np.array_equal(a, b))


def lsb(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs(a.astype(np.float64) - b.astype(np.float64))


def disagreements(name: str, cases: list[Case], reference: Callable[[str, Case], np.ndarray]) -> list[str]:
    """The cases where the oracle and `reference` differ, described."""
    found = []
    for number, case in enumerate(cases):
        expected = reference(name, case)
        try:
            got = KERNELS[name](case.args, case.out)
        except ValueError as error:
            found.append(f"{name} {case.kind} case {number} ({case.note}): the oracle refuses: {error}")
            continue
        if not same(got, expected):
            count = int(np.sum(lsb(got, expected) > 0)) if got.shape == expected.shape else -1
            found.append(f"{name} {case.kind} case {number} ({case.note}): {count} elements differ")
    return found


def host_reference(host) -> Callable[[str, Case], np.ndarray]:
    return lambda name, case: host.run(name, case.args, case.out)


# Where the walk of arm_minimum_s8 / arm_maximum_s8 (dbf45dbf) reads past an operand; the
# oracle refuses those calls, and nothing else.
OUT_OF_BOUNDS_WALK = "the broadcast walk reads outside an operand"

# The transposed convolution of CMSIS-NN dbf45dbf departs from its semantics in these
# regions, all in arm_transpose_conv_s8 (the wrapper's path unless C > 16 and both strides
# <= 2, where it runs arm_convolve_s8 on the upscaled input and is right everywhere).
TRANSPOSE_CONV_DEFECTS: dict[str, Callable[[dict], bool]] = {
    # CMSIS-NN #230: rows misaligned when padding_h is not a multiple of stride_h (fixed by 4a8f5b5d).
    "pad_h % stride_h != 0 (CMSIS-NN #230)": lambda g: g["ph"] % g["sh"] != 0,
    # Output rows/columns past the last input's reach (bias only) are never written, and the
    # last columns are read past the row buffer: kernel + output_padding - padding > max(kernel, stride).
    "outputs past the last input's reach not written": lambda g: (g["kh"] + g["oph"] - g["ph"] > max(g["kh"], g["sh"])
                                                                 or g["kw"] + g["opw"] - g["pw"] > max(g["kw"], g["sw"])),
    # stride_h rows are flushed per input row, past the batch's output when
    # padding_h > kernel_h - stride_h + output_padding_h; with batch > 1 they land in the next batch.
    "rows written past the batch (batch > 1)": lambda g: g["n"] > 1 and g["ph"] > g["kh"] - g["sh"] + g["oph"],
}
FIXED_BY_4A8F5B5D = "pad_h % stride_h != 0 (CMSIS-NN #230)"


def transpose_geometry(args: dict, nhwc: bool) -> dict:
    x, w = args["input"], args["weight"]
    n, c = (x.shape[0], x.shape[3]) if nhwc else x.shape[:2]
    return dict(n=n, c=c, kh=w.shape[1], kw=w.shape[2], sh=args["stride"][0], sw=args["stride"][1], ph=args["padding"][0],
                pw=args["padding"][1], oph=args["output_padding"][0], opw=args["output_padding"][1])


def transpose_conv_defects(args: dict, nhwc: bool) -> list[str]:
    g = transpose_geometry(args, nhwc)
    if g["c"] > 16 and g["sh"] <= 2 and g["sw"] <= 2:  # REVERSE_TCOL_EFFICIENT_THRESHOLD: arm_convolve_s8
        return []
    return [name for name, applies in TRANSPOSE_CONV_DEFECTS.items() if applies(g)]


# --- 1. the oracle against the host CMSIS-NN ---------------------------------------------

HOST_OPS = sorted(name for name in KERNELS if "transpose_conv2d" not in name)


def test_every_operator_has_a_kernel_and_cases():
    """Every cortex_m operator of the schemas at hand (the installed wheel's, with the *_nhwc
    operators, and the ExecuTorch tree's) has a kernel, none is unsupported, all have cases."""
    import importlib.util
    import re

    from cortexm import sources

    yamls = []
    spec = importlib.util.find_spec("executorch")
    if spec and spec.submodule_search_locations:
        yamls.append(Path(list(spec.submodule_search_locations)[0]) / "backends/cortex_m/ops/operators.yaml")
    tree = sources.locate(sources.EXECUTORCH).path
    if tree is not None:
        yamls.append(tree / sources.EXECUTORCH.marker)
    names = {f"cortex_m::{m}" for y in yamls if y.is_file() for m in re.findall(r"func: cortex_m::(\w+)\.out\(", y.read_text())}
    if not names:
        pytest.skip("no cortex_m operators.yaml here (install executorch or provide the ExecuTorch tree)")
    assert names <= set(KERNELS)
    assert UNSUPPORTED_REASON == {}
    assert set(GENERATORS) == set(KERNELS)


@pytest.mark.parametrize("name", HOST_OPS)
def test_oracle_matches_host_cmsis_nn(host, name):
    """0 LSB on every random and boundary case; the oracle refuses only where the C code
    reads outside its operands."""
    cases, accepted, refused = cases_for(name), [], []
    for case in cases:
        try:
            KERNELS[name](case.args, case.out)
            accepted.append(case)
        except ValueError as error:
            refused.append(str(error))
    assert all(OUT_OF_BOUNDS_WALK in reason for reason in refused), refused
    assert disagreements(name, accepted, host_reference(host)) == []
    kinds = [c.kind for c in accepted]
    outputs = sum(c.out.numel for c in accepted)
    print(f"{name}: {kinds.count('random')} random + {kinds.count('boundary')} boundary cases, "
          f"{outputs} outputs, 0 LSB; {len(refused)} refused (out-of-bounds walk)")


@pytest.mark.parametrize("nhwc", [False, True], ids=["legacy", "nhwc"])
def test_transpose_conv_matches_host_outside_cmsis_nn_defects(host, nhwc):
    """0 LSB wherever no named defect applies; inside #230 alone, 0 LSB against 4a8f5b5d's fix."""
    name = "cortex_m::quantized_transpose_conv2d" + ("_nhwc" if nhwc else "")
    clean, fixed_only, regions = [], [], {defect: [0, 0] for defect in TRANSPOSE_CONV_DEFECTS}
    for case in cases_for(name):
        defects = transpose_conv_defects(case.args, nhwc)
        if not defects:
            clean.append(case)
            continue
        differs = not same(KERNELS[name](case.args, case.out), host.run(name, case.args, case.out))
        for defect in defects:
            regions[defect][0] += 1
            regions[defect][1] += differs
        if defects == [FIXED_BY_4A8F5B5D]:
            fixed_only.append(case)
    assert disagreements(name, clean, host_reference(host)) == []
    if host.has_fixed:
        fixed = lambda _, case: host.transpose_conv(1, case.args, case.out, nhwc)  # noqa: E731
        assert disagreements(name, fixed_only, fixed) == []
    print(f"{name}: {len(clean)} cases outside the defects, 0 LSB; {len(fixed_only)} in #230 only, 0 LSB "
          f"against 4a8f5b5d" + ("" if host.has_fixed else " (not in this tree: not compared)"))
    for defect, (cases, differing) in regions.items():
        print(f"  {defect}: {cases} cases, {differing} differ from dbf45dbf")


def test_linear_kernel_sum_is_the_mve_form_of_the_bias(host):
    """A kernel_sum computed by CMSIS-NN (arm_vector_sum_s8) from the bias gives, in the
    oracle, what the scalar kernel gives with that bias."""
    name = "cortex_m::quantized_linear"
    cases = []
    for case in cases_for(name):
        args = dict(case.args)
        weights = args["weights"].data
        bias = None if args["bias"] is None else args["bias"].data
        sums = host.vector_sum(weights, args["input_offset"], args["filter_offset"], bias)
        args.update(bias=None, kernel_sum=contiguous(sums.reshape(1, -1)))
        cases.append((Case(case.kind, args, case.out, case.note), case))
    found = [f"case {i}" for i, (mve, scalar) in enumerate(cases)
             if not same(KERNELS[name](mve.args, mve.out), host.run(name, scalar.args, scalar.out))]
    assert found == []


def test_backend_tables_read_bias_or_kernel_sum_as_their_variant_does(host):
    """kernels_for: SCALAR and DSP read the bias and ignore a kernel_sum, MVE the reverse and
    refuses a call without one (arm_fully_connected_s8 returns ARG_ERROR)."""
    from cortexm.oracle.backends import kernels_for

    name = "cortex_m::quantized_linear"
    case = next(c for c in cases_for(name) if c.args["bias"] is not None and c.args["weights"].shape[0] > 1)
    bias = case.args["bias"].data
    wrong_sums = contiguous(np.full((1, bias.size), 12345, np.int32))
    scalar = host.run(name, case.args, case.out)
    for backend in ("SCALAR", "DSP"):
        assert same(kernels_for(backend)[name](dict(case.args, kernel_sum=wrong_sums), case.out), scalar)
    sums = host.vector_sum(case.args["weights"].data, case.args["input_offset"], case.args["filter_offset"], bias)
    mve = kernels_for("MVE")[name]
    assert same(mve(dict(case.args, kernel_sum=contiguous(sums.reshape(1, -1))), case.out), scalar)
    with pytest.raises(ValueError, match="kernel_sum"):
        mve(case.args, case.out)


def test_oracle_refuses_what_the_kernel_refuses_or_c_leaves_undefined():
    """Raised, not guessed: a softmax sum of 2**28 or more (shifts by 32 bits and more), a
    grouped convolution without a bias (a null pointer offset per group and read), a
    broadcast that walks outside an operand, and the C++ kernel's own refusals (here:
    legacy depthwise with batch 2)."""
    x = np.full((1, 600), 5, np.int8)
    with pytest.raises(ValueError, match="2\\*\\*28"):
        KERNELS["cortex_m::softmax"](_softmax_args(x, 1 << 30, 20, -992), contiguous(np.zeros_like(x)))
    case = next(c for c in cases_for("cortex_m::quantized_conv2d") if "groups=2" in c.note or "groups=3" in c.note)
    with pytest.raises(ValueError, match="without a bias"):
        KERNELS["cortex_m::quantized_conv2d"](dict(case.args, bias=None), case.out)
    args = dict(self=contiguous(np.zeros((1, 2, 1, 1), np.int8)), other=contiguous(np.zeros((1, 2, 2, 1), np.int8)))
    with pytest.raises(ValueError, match=OUT_OF_BOUNDS_WALK):
        KERNELS["cortex_m::maximum"](args, contiguous(np.zeros((1, 2, 2, 1), np.int8)))
    case = cases_for("cortex_m::quantized_depthwise_conv2d_nhwc")[0]
    legacy = dict(case.args, input=channels_last(np.concatenate([case.args["input"].data] * 2).transpose(0, 3, 1, 2)))
    out = channels_last(np.zeros((2, *case.out.shape[1:]), np.int8).transpose(0, 3, 1, 2))
    with pytest.raises(ValueError, match="batch size must be 1"):
        KERNELS["cortex_m::quantized_depthwise_conv2d"](legacy, out)


def test_oracle_imports_no_torch():
    import subprocess

    code = "import sys, cortexm.oracle; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 0


# --- 2. the comparisons can fail -------------------------------------------------------

def _round_half_up(dividend, exponent):
    """A plausible wrong rounding: midpoints toward +infinity instead of away from zero."""
    dividend, exponent = np.asarray(dividend, np.int64), np.asarray(exponent, np.int64)
    return (dividend + ((np.int64(1) << exponent) >> 1)) >> exponent


def _truncating_high_mult(m1, m2):
    """A plausible wrong arm_nn_doubling_high_mult_no_sat: the high half without the 2**30 rounding offset."""
    return fixedpoint.wrap32((np.asarray(m1, np.int64) * np.asarray(m2, np.int64)) >> 31)


_CLZ = fixedpoint.clz


def _clz_off_by_one(val):
    """A plausible wrong CLZ: one short (a 31-bit count)."""
    return _CLZ(val) - 1


PERTURBATIONS = [
    ("divide_by_power_of_two", _round_half_up, "cortex_m::quantized_conv2d"),
    ("divide_by_power_of_two", _round_half_up, "cortex_m::quantized_linear"),
    ("doubling_high_mult_no_sat", _truncating_high_mult, "cortex_m::quantized_depthwise_conv2d"),
    ("clz", _clz_off_by_one, "cortex_m::softmax"),
]


@pytest.mark.parametrize("primitive,replacement,name", PERTURBATIONS,
                         ids=[f"{p}-{n.split('::')[1]}" for p, _, n in PERTURBATIONS])
def test_a_perturbed_oracle_is_caught(host, monkeypatch, primitive, replacement, name):
    monkeypatch.setattr(fixedpoint, primitive, replacement)
    assert disagreements(name, cases_for(name), host_reference(host)), f"perturbing {primitive} went unnoticed"


# --- 3. the oracle against ExecuTorch's Python operators (operators.py) ------------------

@pytest.fixture(scope="module")
def operators_py():
    """name, case -> operators.py's result (logical layout), as the product runs it."""
    pytest.importorskip("torch")
    pytest.importorskip("executorch")
    from cortexm.oracle.reference import operators_py as run_operators_py

    return lambda name, case: run_operators_py(name, case.args)


def compare_with_operators_py(run, names) -> tuple[list[str], int, int, dict]:
    """(disagreements no finding allows, cases compared, elements compared, per finding: [cases,
    elements, max LSB]), through the product's comparison (cortexm.oracle.upstream)."""
    unexplained, compared, elements = [], 0, 0
    seen = {f.name: [0, 0, 0.0] for f in upstream.FINDINGS}
    for name in names:
        for number, case in enumerate(cases_for(name)):
            try:
                ours = KERNELS[name](case.args, case.out)
            except ValueError:
                continue  # the kernel fails or C leaves it undefined: nothing to compare
            compared += 1
            try:
                theirs = run(name, case)
            except Exception as error:  # operators.py raises whatever torch raises
                theirs = error
            else:
                elements += ours.size
            diff = upstream.compare_call(name, case.args, ours, theirs)
            if diff is None:
                continue
            for finding in diff.findings:
                seen[finding][0] += 1
                seen[finding][1] += diff.differ
                seen[finding][2] = max(seen[finding][2], diff.max_lsb)
            if diff.unexplained:
                unexplained.append(f"{name} case {number} ({case.note}): {diff.note or ''} {diff.unexplained} "
                                   f"elements differ outside every finding, up to {diff.max_lsb} LSB"[:300])
    return unexplained, compared, elements, seen


def test_oracle_matches_operators_py_except_named_findings(operators_py):
    unexplained, compared, elements, seen = compare_with_operators_py(operators_py, sorted(KERNELS))
    assert unexplained == []
    print(f"operators.py: {compared} cases, {elements} elements compared")
    for f in upstream.FINDINGS:
        cases, differing, worst = seen[f.name]
        print(f"  {f.name}: {cases} cases" + (f", {differing} elements, max {worst:g} LSB" if f.allows else " raise"))
    # The table stays exact: a finding that no case shows any more is to be removed.
    assert [name for name, (cases, _, _) in seen.items() if cases == 0] == []


def test_a_perturbed_oracle_disagrees_with_operators_py(operators_py, monkeypatch):
    monkeypatch.setattr(fixedpoint, "divide_by_power_of_two", _round_half_up)
    unexplained, _, _, _ = compare_with_operators_py(operators_py, ["cortex_m::quantized_conv2d", "cortex_m::quantized_linear"])
    assert unexplained, "a wrong rounding in the oracle went unnoticed against operators.py"


def test_program_with_an_infinite_double_is_evaluated():
    """A causal mask's -inf reaches the program as a Double the schema stores as the string
    "-inf" (aten::scalar_tensor's argument): the evaluation takes it as the number (the zoo's
    zoo_causal_mixer; before, every transformer with a mask fell back to another reference)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("executorch")
    from executorch.exir import to_edge

    from cortexm.oracle.reference import evaluate

    class Masked(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("future", torch.triu(torch.ones(4, 4, dtype=torch.bool), diagonal=1))

        def forward(self, x):
            return torch.softmax(x.masked_fill(self.future, float("-inf")), dim=-1)

    x = torch.randn(1, 4, 4)
    pte = to_edge(torch.export.export(Masked(), (x,), strict=True)).to_executorch().buffer
    (out,) = evaluate(pte, [x.numpy()])
    np.testing.assert_allclose(np.asarray(out), Masked()(x).numpy(), rtol=1e-6, atol=1e-7)


def test_a_program_given_as_bytes_is_named_in_one_short_line():
    """A program handed over as bytes (the accuracy measure's, the export's references) that
    cannot be evaluated: the error names it, it does not print the program's bytes."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("executorch")
    from executorch.exir import to_edge

    from cortexm.base.errors import CortexmError
    from cortexm.oracle.reference import evaluate

    x = torch.randn(2, 3)
    pte = to_edge(torch.export.export(torch.nn.ReLU(), (x,), strict=True)).to_executorch().buffer
    for inputs, method in (([], "forward"), ([x.numpy()], "backward")):
        with pytest.raises(CortexmError) as raised:
            evaluate(pte, inputs, method=method)
        message = str(raised.value)
        assert message.startswith("the program: ") and "b'" not in message and len(message) < 200, message
