"""Inputs solved for the first conv, depthwise conv or linear call of a lowered program:
every output channel driven to its activation bounds, or onto requantize rounding midpoints.

Random data sets an output exactly on a bound, or a rounding divide exactly on its half
step, too rarely for a bug there to show. Here the call's accumulator is treated as what it
is, a linear function of the input,

    acc(e) = const(e) + sum over taps t of w(e, t) * x[idx(e, t)]

(const: the bias and the input offset's share; padding taps weigh nothing), and for each
target an output element of the target's channel is chosen and the inputs of its window
still free are moved until its accumulator lands in the target's interval; they are then
frozen, so later targets cannot undo it. Targets, per output channel (so every lane
position of CMSIS-NN's SIMD loops meets each; the elements chosen rotate through pixel
positions mod 4 too, shifted per channel, so each lane meets each target at each position):

  bounds     the requantized value beyond activation_max and beyond activation_min (where
             the clamp changes it), and exactly on each
  midpoints  the rounding divide of arm_nn_requantize exactly on a half step: quotient 0
             (+0.5), quotient -1 (-0.5), and one positive and one negative quotient further
             out, where the output is not clamped

What enters: the call's arguments as cortexm.oracle takes them (`SOLVABLE` names the
operators), the kind, a seed. What leaves: the call's int8 input in its logical layout, and
how many targets were met. Only the arithmetic of the DSP and scalar variants is solved for
(the M55 linear's kernel_sum is that same sum, precomputed), so every core gets the same
inputs.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from cortexm.oracle import fixedpoint as fp
from cortexm.oracle.tensor import Tensor, flat, from_memory
from cortexm.oracle.window import dims, pairs, windows

SOLVABLE = ("cortex_m::quantized_conv2d", "cortex_m::quantized_depthwise_conv2d", "cortex_m::quantized_linear")
KINDS = ("bounds", "midpoints")
QMIN, QMAX = -128, 127


@dataclass
class Accumulators:
    """A call's accumulators as a linear function of its input's memory (flat)."""

    idx: np.ndarray  # (E, T) index into the input's memory; 0 where the tap is padding
    w: np.ndarray  # (E, T) weights, 0 for padding
    const: np.ndarray  # (E,)
    channel: np.ndarray  # (E,) the output channel of each element
    position: np.ndarray  # (E,) the output pixel (or row) of each element
    multiplier: np.ndarray  # (E,)
    shift: np.ndarray  # (E,)
    output_offset: int
    activation: tuple[int, int]

    def acc(self, x: np.ndarray) -> np.ndarray:
        return self.const + (self.w * x[self.idx]).sum(axis=1)

    def requantized(self, acc) -> np.ndarray:
        """What arm_nn_requantize gives, before the output offset and the clamp."""
        return fp.requantize(fp.wrap32(acc), self.multiplier, self.shift)


def accumulators(op: str, args: dict, out: Tensor) -> Accumulators:
    x = args["input"]
    out_offset, activation = int(args["output_offset"]), (int(args["activation_min"]), int(args["activation_max"]))
    if op == "cortex_m::quantized_linear":
        fin, fout = x.shape[-1], out.shape[-1]
        rows = x.numel // fin
        weights = flat(args["weights"])[: fin * fout].reshape(fout, fin) + int(args["filter_offset"])
        bias = np.zeros(fout, np.int64) if args["bias"] is None else flat(args["bias"])[:fout]
        idx = np.broadcast_to(np.arange(rows)[:, None, None] * fin + np.arange(fin), (rows, fout, fin))
        w = np.broadcast_to(weights, (rows, fout, fin))
        const = np.broadcast_to(bias + int(args["input_offset"]) * weights.sum(axis=1), (rows, fout))
        channel = np.broadcast_to(np.arange(fout), (rows, fout))
        position = np.broadcast_to(np.arange(rows)[:, None], (rows, fout))
        multiplier = np.full(rows * fout, flat(args["requantize_multipliers"])[0])
        shift = np.full(rows * fout, flat(args["requantize_shifts"])[0])
        return Accumulators(idx.reshape(rows * fout, fin), w.reshape(rows * fout, fin), const.reshape(-1),
                            channel.reshape(-1), position.reshape(-1), multiplier, shift, out_offset, activation)
    n, h, wd, c = dims(x, False)
    _, oh, ow, oc = dims(out, False)
    stride, padding, dilation = pairs(op, stride=args["stride"], padding=args["padding"], dilation=args["dilation"])
    weight = args["weight"]
    ids = np.arange(n * h * wd * c).reshape(n, h, wd, c)
    if op == "cortex_m::quantized_depthwise_conv2d":
        _, kh, kw, _ = weight.shape
        per = oc // c
        taps = np.stack([t for _, _, t in windows(ids, (oh, ow), (kh, kw), stride, padding, dilation, -1)], axis=-1)
        idx = taps[:, :, :, np.arange(oc) // per, :]  # (n, oh, ow, oc, kh*kw): output channel o reads o // per
        w = np.broadcast_to(flat(weight).reshape(kh * kw, oc).T, idx.shape)
    else:
        o, kh, kw, ki = weight.shape
        groups = c // ki
        taps = np.stack([t for _, _, t in windows(ids, (oh, ow), (kh, kw), stride, padding, dilation, -1)], axis=3)
        taps = taps.reshape(n, oh, ow, kh * kw, groups, ki)
        group = np.arange(oc) // (oc // groups)
        idx = np.moveaxis(taps[:, :, :, :, group, :], 4, 3).reshape(n, oh, ow, oc, kh * kw * ki)
        w = np.broadcast_to(flat(weight).reshape(oc, kh * kw * ki), idx.shape)
    pad = idx < 0
    w = np.where(pad, 0, w).reshape(-1, idx.shape[-1])
    idx = np.where(pad, 0, idx).reshape(-1, idx.shape[-1])
    bias = np.zeros(oc, np.int64) if args["bias"] is None else flat(args["bias"])[:oc]
    channel = np.broadcast_to(np.arange(oc), (n, oh, ow, oc)).reshape(-1)
    position = np.broadcast_to(np.arange(n * oh * ow).reshape(n, oh, ow, 1), (n, oh, ow, oc)).reshape(-1)
    const = bias[channel] + int(args["input_offset"]) * w.sum(axis=1)
    multipliers, shifts = flat(args["requantize_multipliers"]), flat(args["requantize_shifts"])
    return Accumulators(idx, w, const, channel, position, multipliers[channel], shifts[channel], out_offset, activation)


def _first_at_least(f, target: int, lo: int, hi: int) -> int | None:
    """The smallest a in [lo, hi] with f(a) >= target for a non-decreasing f, or None."""
    if f(hi) < target:
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if f(mid) >= target:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _interval(f, value: int, lo: int, hi: int, at_least: bool = False) -> tuple[int, int] | None:
    """The accumulators in [lo, hi] where f equals `value` (or is at least it)."""
    first = _first_at_least(f, value, lo, hi)
    if first is None:
        return None
    if at_least:
        return first, hi
    beyond = _first_at_least(f, value + 1, lo, hi)
    last = hi if beyond is None else beyond - 1
    return (first, last) if first <= last else None


def targets(acc: Accumulators, e: int, kind: str, rng: random.Random, lo: int, hi: int) -> list[tuple[str, tuple[int, int]]]:
    """(name, accumulator interval) of each target reachable for element e, whose accumulator
    can span [lo, hi]."""
    m, s = int(acc.multiplier[e]), int(acc.shift[e])
    lo, hi = max(lo, -(2**31)), min(hi, 2**31 - 1)
    found = []
    if kind == "bounds":
        value = lambda a: int(fp.requantize(a, m, s)) + acc.output_offset  # noqa: E731
        low, high = acc.activation
        reaches_low = _first_at_least(value, low, lo, hi)
        below = (lo, hi) if reaches_low is None else (lo, reaches_low - 1) if reaches_low > lo else None
        # Beyond a bound first (where a missing or misplaced clamp shows), then on it.
        for name, interval in (("beyond max", _interval(value, high + 1, lo, hi, at_least=True)),
                               ("beyond min", below),
                               ("at max", _interval(value, high, lo, hi)),
                               ("at min", _interval(value, low, lo, hi))):
            if interval:
                found.append((name, interval))
        return found
    right = max(-s, 0)
    if right == 0:
        return found  # no rounding divide: nothing to land on
    left = max(s, 0)
    doubled = lambda a: int(fp.doubling_high_mult_no_sat(fp.wrap32(a * (1 << left)), m))  # noqa: E731
    low, high = acc.activation
    visible = range(low - acc.output_offset, high - acc.output_offset)  # quotients whose rounding shows
    positive = [q for q in visible if q > 0]
    negative = [q for q in visible if q < -1]
    quotients = [("+0.5", 0), ("-0.5", -1)]
    if positive:
        quotients.append(("positive midpoint", rng.choice(positive)))
    if negative:
        quotients.append(("negative midpoint", rng.choice(negative)))
    for name, q in quotients:
        interval = _interval(doubled, q * (1 << right) + (1 << (right - 1)), lo, hi)
        if interval:
            found.append((name, interval))
    return found


def _land(x: np.ndarray, free: np.ndarray, idx: np.ndarray, w: np.ndarray, a: int, lo: int, hi: int) -> int | None:
    """Moves the free inputs of one element's window until its accumulator `a` lies in [lo, hi];
    the new accumulator, or None (x unchanged) when it cannot."""
    taps = [t for t in np.argsort(-np.abs(w)) if w[t] != 0 and free[idx[t]]]
    if not taps:
        return a if lo <= a <= hi else None
    saved = x[idx[taps]].copy()
    want = (lo + hi) // 2
    for t in taps:  # coarse: the largest weights first
        i, wt = idx[t], int(w[t])
        step = int(np.clip(round((want - a) / wt), QMIN - x[i], QMAX - x[i]))
        x[i] += step
        a += wt * step
    if lo <= a <= hi:
        return a
    landed = _fine(x, idx, w, taps[-24:], a, lo, hi)
    if landed is None:
        x[idx[taps]] = saved
    return landed


def _fine(x, idx, w, taps, a: int, lo: int, hi: int) -> int | None:
    """One tap, else a pair of taps, moved by small steps into [lo, hi]."""
    def single(t, a):
        i, wt = idx[t], int(w[t])
        lo_step, hi_step = sorted(((lo - a) / wt, (hi - a) / wt))
        step = int(np.ceil(lo_step))
        if step <= hi_step and QMIN <= x[i] + step <= QMAX:
            x[i] += step
            return a + wt * step
        return None

    for t in taps:
        done = single(t, a)
        if done is not None:
            return done
    for t1 in taps:
        i1, w1 = idx[t1], int(w[t1])
        for d in range(-12, 13):
            if d == 0 or not QMIN <= x[i1] + d <= QMAX:
                continue
            x[i1] += d
            for t2 in taps:
                if t2 != t1:
                    done = single(t2, a + w1 * d)
                    if done is not None:
                        return done
            x[i1] -= d
    return None


def solve(kind: str, op: str, args: dict, out: Tensor, seed: int) -> tuple[np.ndarray, dict]:
    """The call's input (int8, logical layout) placed for `kind`, and {"targets", "met", "by"}."""
    if kind not in KINDS or op not in SOLVABLE:
        raise ValueError(f"cannot solve {kind!r} for {op}")
    acc = accumulators(op, args, out)
    rng = random.Random(seed)
    size = args["input"].numel
    x = np.asarray([rng.randint(QMIN, QMAX) for _ in range(size)], np.int64)
    free = np.ones(size, bool)
    reach_lo = acc.const + np.minimum(acc.w * QMIN, acc.w * QMAX).sum(axis=1)
    reach_hi = acc.const + np.maximum(acc.w * QMIN, acc.w * QMAX).sum(axis=1)
    by: dict[str, list[int]] = {}
    used: set[int] = set()
    channels = int(acc.channel.max()) + 1 if acc.channel.size else 0
    elements = [[int(e) for e in np.flatnonzero(acc.channel == c)] for c in range(channels)]
    wanted = []
    for c in range(channels):  # the targets the channel's widest-reaching element can reach
        widest = max(elements[c], key=lambda e: int(reach_hi[e] - reach_lo[e]))
        wanted.append([name for name, _ in targets(acc, widest, kind, rng, int(reach_lo[widest]), int(reach_hi[widest]))])
    # Round by round (each channel's first target, then each one's second, ...): windows
    # shared between channels run out, and no channel should get them all.
    for k in range(max(map(len, wanted), default=0)):
        for c in range(channels):
            if k >= len(wanted[c]):
                continue
            name = wanted[c][k]
            tally = by.setdefault(name, [0, 0])
            tally[1] += 1
            # Most free inputs first; among those, the pixel position (mod 4: the SIMD kernels
            # pair pixels or group four, each position its own clamp) this target meets in this
            # channel: it shifts with the target and the channel, and once more every four
            # channels, so with 16 channels each target meets every position in every channel
            # lane (mod 4), with 4 every position.
            where = (k + c + c // 4) % 4
            order = sorted((e for e in elements[c] if e not in used),
                           key=lambda e: (-int(free[acc.idx[e]][acc.w[e] != 0].sum()), acc.position[e] % 4 != where))
            for e in order[:16]:
                interval = next((iv for n, iv in targets(acc, e, kind, random.Random(f"{seed}:{c}:{k}"),
                                                         int(reach_lo[e]), int(reach_hi[e])) if n == name), None)
                if interval is None:
                    continue
                now = int(acc.const[e] + (acc.w[e] * x[acc.idx[e]]).sum())
                if _land(x, free, acc.idx[e], acc.w[e], now, *interval) is not None:
                    free[acc.idx[e][acc.w[e] != 0]] = False
                    used.add(e)
                    tally[0] += 1
                    break
    met = sum(v[0] for v in by.values())
    return from_memory(x, args["input"]).astype(np.int8), {"targets": sum(v[1] for v in by.values()), "met": met,
                                                          "by": {k: f"{v[0]}/{v[1]}" for k, v in by.items()}}
