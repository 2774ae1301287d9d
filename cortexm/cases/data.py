"""Example inputs placed where integer kernels round, saturate or clip.

Random inputs rarely land on a quantization boundary. A case with `data` other
than "uniform" gets inputs chosen after quantization, from the input's own
scale and zero point (`craft`, called by cortexm.lowering.export once PT2E has
calibrated), so they hit exactly the values a one-line rounding or clamping bug
would get wrong:

  steps     half the elements at x * (1/scale) exactly on a rounding tie (q + 0.5) as the
            runtime's quantize computes it in float32, a quarter one float32 step either side
            of a tie, the rest exactly on grid values q
  saturate  grid values, with a third of the elements far outside the representable range
            (they must saturate to quant_min / quant_max)
  ramp      every integer q from quant_min to quant_max in turn (every LUT entry, the
            activation bounds themselves)
  extremes  windows entirely at quant_min and entirely at quant_max: with a batch of two or
            more, whole images alternately at each; else the top rows at quant_min and the
            bottom ones at quant_max (rows alternately for 2-D and 3-D inputs)
  square    for a two-input operator, every pair of int8 values once: input 0 holds
            q_min + i // 256 and input 1 q_min + i % 256 at element i (the full 256 x 256
            square in 65,536 elements)
  beyond    the example inputs as the case gives them, outside the calibrated range on purpose
            (a quantize must saturate values far past it): measured against the float model,
            held neither to the floor nor to the calibration's coverage (cortexm.semantic)
  bounds, midpoints
            solved from the lowered program (cortexm.cases.solve, placed by
            cortexm.lowering.export): the first conv, depthwise conv or linear call's outputs
            at each activation bound in every channel, or its requantize exactly on rounding
            half steps; here, until then, random values exactly on the grid
"""

from __future__ import annotations

import numpy as np

CALIBRATION_SAMPLES = 8  # per model: the example inputs and this many less one drawn `like` them

KINDS = ("uniform", "steps", "saturate", "ramp", "extremes", "square", "beyond", "bounds", "midpoints")
GIVEN = ("uniform", "beyond")  # the case's own example inputs, not placed
SOLVED = ("bounds", "midpoints")  # placed from the lowered program (cortexm.cases.solve)


def craft(kind: str, template, scale: float, zero_point: int, qmin: int, qmax: int, seed: int, index: int = 0):
    """Inputs of `kind` with the shape, dtype and memory format of `template` (a float tensor);
    `index`: which of the model's inputs it is."""
    import torch

    if kind not in KINDS:
        raise ValueError(f"unknown data kind {kind!r}; one of {', '.join(KINDS)}")
    if kind in GIVEN:
        return template
    rng = np.random.default_rng(seed)
    n = template.numel()
    inv = np.float32(1.0) / np.float32(scale)  # as the runtime's quantize computes it
    if kind == "ramp":
        q = qmin + np.arange(n) % (qmax - qmin + 1)
        values = _on_grid(q, zero_point, inv)
    elif kind == "square":
        span = qmax - qmin + 1
        i = np.arange(n) % (span * span)
        values = _on_grid(qmin + (i // span if index == 0 else i % span), zero_point, inv)
    elif kind == "extremes":
        values = _on_grid(_extremes(tuple(template.shape), qmin, qmax).reshape(-1), zero_point, inv)
    elif kind in SOLVED:
        values = _on_grid(rng.integers(qmin, qmax + 1, n), zero_point, inv)
    else:
        q = rng.integers(qmin, qmax + 1, n)
        values = _on_grid(q, zero_point, inv)
        if kind == "steps":
            ties = rng.random(n) < 0.5
            values[ties] = _on_tie(np.minimum(q[ties], qmax - 1), zero_point, inv)
            near = (rng.random(n) < 0.5) & ties
            away = np.where(rng.random(near.sum()) < 0.5, np.float32(np.inf), np.float32(-np.inf)).astype(np.float32)
            values[near] = np.nextafter(values[near], away)
        else:  # saturate
            far = rng.random(n) < 1 / 3
            reach = np.float32((qmax - qmin) / inv)
            values[far] = np.where(rng.random(far.sum()) < 0.5, -4, 4).astype(np.float32) * reach
    out = torch.from_numpy(values.astype(np.float32).reshape(tuple(template.shape)))
    if template.dim() == 4 and template.is_contiguous(memory_format=torch.channels_last):
        out = out.contiguous(memory_format=torch.channels_last)
    return out.to(template.dtype)


def _extremes(shape: tuple[int, ...], qmin: int, qmax: int) -> np.ndarray:
    """quant_min or quant_max per element, in blocks a window can lie entirely inside."""
    index = np.indices(shape)
    if len(shape) == 4 and shape[0] >= 2:
        low = index[0] % 2 == 0  # whole images
    elif len(shape) == 4:
        low = index[2] < (shape[2] + 1) // 2  # top rows
    elif len(shape) >= 2 and shape[-2] >= 2:
        low = index[-2] % 2 == 0  # rows
    else:
        low = index[-1] < (shape[-1] + 1) // 2
    return np.where(low, qmin, qmax)


def on_grid(q: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """float32 inputs that the runtime's quantize (x * (1/scale) in float32) maps to the
    integers q exactly."""
    return _on_grid(np.asarray(q, np.int64), zero_point, np.float32(1.0) / np.float32(scale)).astype(np.float32)


def _on_grid(q: np.ndarray, zero_point: int, inv: np.float32) -> np.ndarray:
    """float32 x with round(x * inv) == q - zero_point exactly."""
    return _solve(np.asarray(q - zero_point, dtype=np.float64), inv)


def _on_tie(q: np.ndarray, zero_point: int, inv: np.float32) -> np.ndarray:
    """float32 x with fl32(x * inv) == q - zero_point + 0.5 exactly, where one exists; else
    the float32 x whose product is nearest the tie."""
    return _solve(np.asarray(q - zero_point, dtype=np.float64) + 0.5, inv)


def _solve(target: np.ndarray, inv: np.float32) -> np.ndarray:
    """For each target t, the float32 x nearest to t / inv whose float32 product x * inv is
    nearest to t (searched over a few float32 steps around the quotient)."""
    x = (target / np.float64(inv)).astype(np.float32)
    best, best_err = x.copy(), np.abs(np.float64(1) * (x * inv) - target)
    for direction in (np.float32(np.inf), np.float32(-np.inf)):
        y = x.copy()
        for _ in range(4):
            y = np.nextafter(y, direction)
            err = np.abs(np.float64(1) * (y * inv) - target)
            better = err < best_err
            best[better], best_err[better] = y[better], err[better]
    return best


def like(t):
    """A calibration sample: a random tensor with t's shape, layout and value range."""
    import torch

    lo, hi = float(t.min()), float(t.max())
    if hi <= lo:
        lo, hi = -1.0, 1.0
    sample = torch.rand(t.shape) * (hi - lo) + lo
    if t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous():
        sample = sample.to(memory_format=torch.channels_last)
    return sample.to(t.dtype)
