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
"""

from __future__ import annotations

import numpy as np

KINDS = ("uniform", "steps", "saturate", "ramp")


def craft(kind: str, template, scale: float, zero_point: int, qmin: int, qmax: int, seed: int):
    """Inputs of `kind` with the shape, dtype and memory format of `template` (a float tensor)."""
    import torch

    if kind not in KINDS:
        raise ValueError(f"unknown data kind {kind!r}; one of {', '.join(KINDS)}")
    if kind == "uniform":
        return template
    rng = np.random.default_rng(seed)
    n = template.numel()
    inv = np.float32(1.0) / np.float32(scale)  # as the runtime's quantize computes it
    if kind == "ramp":
        q = qmin + np.arange(n) % (qmax - qmin + 1)
        values = _on_grid(q, zero_point, inv)
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
            span = np.float32((qmax - qmin) / inv)
            values[far] = np.where(rng.random(far.sum()) < 0.5, -4, 4).astype(np.float32) * span
    out = torch.from_numpy(values.astype(np.float32).reshape(tuple(template.shape)))
    if template.dim() == 4 and template.is_contiguous(memory_format=torch.channels_last):
        out = out.contiguous(memory_format=torch.channels_last)
    return out.to(template.dtype)


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
