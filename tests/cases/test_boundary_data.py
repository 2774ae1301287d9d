"""Boundary data (cortexm.cases.data, cortexm.cases.solve): each kind places what it says,
and the solved kinds make the bugs they target visible.

The solver's claims are checked with cortexm.oracle (bit-exact with host CMSIS-NN in
test_oracle.py), whose accumulation shares no code with the solver's: midpoint data must
make a rounding divide that rounds half toward zero give other outputs in every channel,
bounds data must make a missing clamp give other outputs, each where random data rarely does.
"""

from __future__ import annotations

import numpy as np
import pytest

from cortexm.cases import data, solve
from cortexm.oracle import KERNELS, Tensor, fixedpoint
from cortexm.oracle.tensor import CHANNELS_LAST, contiguous

SEED = 20261201


def _quantized(x, scale: float, zero_point: int) -> np.ndarray:
    """The runtime's quantize of float32 inputs: x * (1/scale) in float32, rounded, saturated."""
    inv = np.float32(1.0) / np.float32(scale)
    return np.clip(np.round(x.numpy().astype(np.float32) * inv) + zero_point, -128, 127).astype(np.int64)


def test_square_places_every_pair_of_int8_values():
    import torch

    template = torch.zeros(256, 256)
    pair = [_quantized(data.craft("square", template, 0.02, -3, -128, 127, seed=1, index=k), 0.02, -3).reshape(-1)
            for k in (0, 1)]
    assert len(set(zip(pair[0].tolist(), pair[1].tolist(), strict=True))) == 256 * 256


def test_extremes_put_whole_windows_at_each_bound():
    import torch

    two = _quantized(data.craft("extremes", torch.zeros(2, 3, 4, 5), 0.05, 4, -128, 127, seed=1), 0.05, 4)
    assert (two[0] == -128).all() and (two[1] == 127).all()
    one = _quantized(data.craft("extremes", torch.zeros(1, 3, 5, 4), 0.05, 4, -128, 127, seed=1), 0.05, 4)
    assert (one[:, :, :3] == -128).all() and (one[:, :, 3:] == 127).all()


def _multiplier(real: float) -> tuple[int, int]:
    mantissa, exponent = np.frexp(real)
    return int(round(mantissa * (1 << 31))), int(exponent)


def _calls(rng):
    """(operator, args, out) of a conv, a dilated depthwise conv with a multiplier, a linear."""
    def per_channel(n):
        pairs = [_multiplier(s) for s in rng.uniform(0.0004, 0.004, n)]
        return (contiguous(np.array([m for m, _ in pairs], np.int32)), contiguous(np.array([e for _, e in pairs], np.int32)))

    common = dict(input_offset=5, output_offset=-7, activation_min=-100, activation_max=90)
    m, s = per_channel(6)
    yield "cortex_m::quantized_conv2d", dict(
        common, input=Tensor(rng.integers(-128, 128, (1, 5, 6, 7)).astype(np.int8), CHANNELS_LAST),
        weight=contiguous(rng.integers(-127, 128, (6, 3, 2, 5)).astype(np.int8)),
        bias=contiguous(rng.integers(-3000, 3000, 6).astype(np.int32)), stride=[1, 2], padding=[1, 1], dilation=[1, 1],
        requantize_multipliers=m, requantize_shifts=s), Tensor(np.zeros((1, 6, 6, 4), np.int8), CHANNELS_LAST)
    m, s = per_channel(6)
    yield "cortex_m::quantized_depthwise_conv2d", dict(
        common, input=Tensor(rng.integers(-128, 128, (1, 3, 6, 7)).astype(np.int8), CHANNELS_LAST),
        weight=contiguous(rng.integers(-127, 128, (1, 3, 3, 6)).astype(np.int8)),
        bias=contiguous(rng.integers(-3000, 3000, 6).astype(np.int32)), stride=[1, 1], padding=[1, 2], dilation=[2, 1],
        depth_multiplier=2, requantize_multipliers=m, requantize_shifts=s), \
        Tensor(np.zeros((1, 6, 4, 9), np.int8), CHANNELS_LAST)
    m, s = per_channel(1)
    yield "cortex_m::quantized_linear", dict(
        common, input=contiguous(rng.integers(-128, 128, (6, 17)).astype(np.int8)),
        weights=contiguous(rng.integers(-127, 128, (5, 17)).astype(np.int8)),
        bias=contiguous(rng.integers(-3000, 3000, 5).astype(np.int32)), kernel_sum=None, filter_offset=0,
        requantize_multipliers=m, requantize_shifts=s), contiguous(np.zeros((6, 5), np.int8))


def _outputs(op, args, out, x):
    return KERNELS[op](dict(args, input=Tensor(x, args["input"].dim_order)), out)


def _half_toward_zero(dividend, exponent):
    """The rounding divide with its midpoint adjustment gone: +0.5 rounds to 0, -0.5 to -1 stays."""
    dividend, exponent = np.asarray(dividend, np.int64), np.asarray(exponent, np.int64)
    mask = (np.int64(1) << exponent) - 1
    result = dividend >> exponent
    half = ((dividend & mask) == (mask >> 1) + 1) & (exponent > 0)
    return np.where(half, result + (result < 0), result + ((dividend & mask) > (mask >> 1) + (result < 0)))


@pytest.mark.parametrize("index", range(3))
def test_midpoints_show_a_rounding_divide_that_misses_half_steps(monkeypatch, index):
    op, args, out = list(_calls(np.random.default_rng(SEED)))[index]
    solved, met = solve.solve("midpoints", op, args, out, seed=SEED)
    right = _outputs(op, args, out, solved)
    with monkeypatch.context() as m:
        m.setattr(fixedpoint, "divide_by_power_of_two", _half_toward_zero)
        wrong = _outputs(op, args, out, solved)
        random_wrong = _outputs(op, args, out, args["input"].data)
    random_right = _outputs(op, args, out, args["input"].data)
    differ = (right != wrong)
    assert met["met"] >= 4 and differ.sum() >= met["met"] // 2, met
    assert differ.sum() > (random_right != random_wrong).sum()
    if op != "cortex_m::quantized_conv2d":  # channels that share no input: every one meets its half steps
        channel_axis = 1
        assert all(differ.take(c, axis=channel_axis).any() for c in range(differ.shape[channel_axis])), met


@pytest.mark.parametrize("index", range(3))
def test_bounds_show_a_missing_clamp(monkeypatch, index):
    op, args, out = list(_calls(np.random.default_rng(SEED + 1)))[index]
    solved, met = solve.solve("bounds", op, args, out, seed=SEED)
    clamped = _outputs(op, args, out, solved)
    low, high = args["activation_min"], args["activation_max"]
    unclamped_args = dict(args, activation_min=-(2**15), activation_max=2**15 - 1)  # the clamp as good as gone
    unclamped = _outputs(op, unclamped_args, out, solved)
    random_clamped = _outputs(op, args, out, args["input"].data)
    random_unclamped = _outputs(op, unclamped_args, out, args["input"].data)
    assert met["met"] >= 4, met
    assert (clamped == high).any() and (clamped == low).any()
    assert (unclamped != clamped).sum() > (random_unclamped != random_clamped).sum(), \
        "no more outputs beyond a bound than random data gives: a missing clamp would not show"


def test_bounds_go_beyond_each_bound_at_every_pixel_position_in_every_channel_lane():
    """The MVE depthwise kernel clamps four pixels with four call sites, four channels a vector
    (lanes): a target tied to one pixel position leaves the other sites' clamps unjudged (a
    depthwise whose second pixel lost its upper clamp passed). Judged with the oracle: for each
    channel lane (mod 4) and each pixel position (mod 4), some output is beyond each bound (a
    target kind tied to one position met 9 and 10 of the 16)."""
    rng = np.random.default_rng(SEED + 2)
    pairs = [_multiplier(s) for s in rng.uniform(0.002, 0.003, 16)]  # random inputs reach 3 and 5 of the 16
    args = dict(input_offset=5, output_offset=-7, activation_min=-100, activation_max=90,
                input=Tensor(rng.integers(-128, 128, (1, 16, 8, 8)).astype(np.int8), CHANNELS_LAST),
                weight=contiguous(rng.integers(-127, 128, (1, 3, 3, 16)).astype(np.int8)),
                bias=contiguous(rng.integers(-3000, 3000, 16).astype(np.int32)), stride=[1, 1], padding=[1, 1],
                dilation=[1, 1], depth_multiplier=1,
                requantize_multipliers=contiguous(np.array([m for m, _ in pairs], np.int32)),
                requantize_shifts=contiguous(np.array([e for _, e in pairs], np.int32)))
    op, out = "cortex_m::quantized_depthwise_conv2d", Tensor(np.zeros((1, 16, 8, 8), np.int8), CHANNELS_LAST)
    solved, met = solve.solve("bounds", op, args, out, seed=SEED)
    assert met["met"] == met["targets"], met
    wide = _outputs(op, dict(args, activation_min=-128, activation_max=127), out, solved).reshape(16, 64)
    for beyond in (wide > args["activation_max"], wide < args["activation_min"]):
        met_at = {(c % 4, p % 4) for c, p in zip(*np.nonzero(beyond), strict=True)}
        assert met_at == {(lane, position) for lane in range(4) for position in range(4)}, sorted(met_at)


def test_only_the_solvable_calls_are_solved():
    with pytest.raises(ValueError):
        solve.solve("bounds", "cortex_m::quantized_add", {}, contiguous(np.zeros(1, np.int8)), seed=1)
    assert set(solve.SOLVABLE) <= set(KERNELS) and set(solve.KINDS) <= set(data.SOLVED)


@pytest.mark.parametrize("case", ["conv2d_bounds", "conv2d_midpoints", "depthwise_conv2d_midpoints",
                                  "depthwise_conv2d_bounds", "depthwise_conv2d_dilated_bounds",
                                  "depthwise_conv2d_dilated_w_bounds", "linear_bounds", "linear_midpoints"])
def test_a_built_in_boundary_case_meets_every_target_in_every_channel(exported, case):
    """Each case has more independent windows than targets (the solver freezes a window once it
    lands one): with fewer, linear_midpoints met 4 of its 28 and no -0.5 at all."""
    import json

    pte = exported(case, "cortex-m7")
    placed = json.loads(pte.with_suffix(".json").read_text())["data_targets"]
    assert placed["met"] == placed["targets"] > 0, placed
