"""How much of each quantization point's values its range clips, on the inputs the model will see.

A quantize rounds x / scale plus its zero point to an integer and clamps it to [qmin, qmax]: a
value past the range the calibration gave the point becomes the range's end, and everything
after computes with that. Counted here on the quantized model's own quantize nodes, from the
values they are given: round(x * (1 / scale)) + zero point outside [qmin, qmax] before the
clamp, as torch's quantize_per_tensor computes it. Needs torch.

The verdict (`uncovered`): a point whose clipping alone costs more than a hundredth of its
values' energy (the clipped values' error, x less the range's end, against x: below FLOOR_DB,
20 dB) does not compute what it quantizes, by the accuracy floor's own measure
(cortexm.semantic.accuracy). PT2E's HistogramObserver chooses each activation range over the
calibration data to minimise rounding and clipping error together, so on inputs like that
data it clips only tails that carry little (the MSE-optimal int8 range of a Gaussian ends at
3.9 sigma: it clips 0.009 % of the values, 9e-6 of their energy). Energy, not a count of values:
a count small enough to catch a narrow calibration fails a small input for one value of
sixteen just past its range (6 %), and one large enough for that passes a range that clips
a few values fifty times over. The fraction clipped is reported beside it.
"""

from __future__ import annotations

import numpy as np

from cortexm.semantic.accuracy import FLOOR_DB


def count(node, value, counts: dict) -> None:
    """Adds the values a quantize `node` (quantize_per_tensor(x, scale, zero_point, qmin, qmax,
    dtype)) is given, `value` = x, to `counts` (node -> running figures)."""
    import torch

    from cortexm.semantic.model import model_ops

    if not hasattr(value, "dtype") or not value.dtype.is_floating_point or value.numel() == 0:
        return
    scale, zero_point, qmin, qmax = float(node.args[1]), int(node.args[2]), int(node.args[3]), int(node.args[4])
    x = value.detach().to(torch.float32)
    q = torch.round(x * (1.0 / scale)) + zero_point
    clipped = (q < qmin) | (q > qmax)
    low, high = (qmin - zero_point) * scale, (qmax - zero_point) * scale
    wide = x.to(torch.float64)
    error = torch.where(clipped, wide - wide.clamp(low, high), torch.zeros_like(wide))
    entry = counts.setdefault(node.name, {"model_ops": model_ops(node), "range": [low, high],
                                          "span": [float("inf"), float("-inf")],
                                          "clipped": 0, "of": 0, "signal": 0.0, "error": 0.0})
    entry["span"] = [min(entry["span"][0], float(x.min())), max(entry["span"][1], float(x.max()))]
    entry["clipped"] += int(clipped.sum())
    entry["of"] += x.numel()
    entry["signal"] += float((wide ** 2).sum())
    entry["error"] += float((error ** 2).sum())


def entries(counts: dict) -> list[dict]:
    """The sidecar's figures of each point in `counts` (model order): its model operators, its
    range, the span of its values, how many it clipped of how many, and the clipping's own
    SQNR (None: nothing clipped)."""
    return [{"node": node, "model_ops": c["model_ops"], "range": [_short(c["range"][0]), _short(c["range"][1])],
             "span": [_short(c["span"][0]), _short(c["span"][1])], "clipped": c["clipped"], "of": c["of"],
             "clip_db": _db(c["signal"], c["error"])} for node, c in counts.items()]


def uncovered(points: list[dict]) -> list[dict]:
    """The points (sidecar entries) whose clipping alone is below the floor, in model order."""
    return [p for p in points if p.get("clip_db") is not None and p["clip_db"] < FLOOR_DB]


def line(points: list[dict], what: str, calls: dict | None = None) -> str | None:
    """The line a case fails with when a calibrated range does not cover `what` (e.g. "the
    example inputs"): the first point below the floor (later ones may follow from it), or None.
    `calls`: node -> (call, operator) of the program, to name the point by its call."""
    bad = uncovered(points)
    if not bad:
        return None
    p = bad[0]
    call, op = (calls or {}).get(p["node"], (None, None))
    where = f"call {call} {op} ({p['node']}: " if call is not None else f"{p['node']} ("
    more = f"; {len(bad) - 1} later point{'s' if len(bad) > 2 else ''} too" if len(bad) > 1 else ""
    return (f"the calibrated range does not cover {what}: {where}{', '.join(p.get('model_ops') or [])}) clips "
            f"{p['clipped']} of {p['of']} values ({fraction(p)}) to its range [{p['range'][0]:.4g}, {p['range'][1]:.4g}], "
            f"its values span [{p['span'][0]:.4g}, {p['span'][1]:.4g}]: the clipping alone is {p['clip_db']:g} dB SQNR, "
            f"below the floor of {FLOOR_DB:g} dB{more}")


def fraction(point: dict) -> str:
    """'12.5 %' of the point's values clipped; '<0.01 %' for a few of many."""
    share = 100 * point["clipped"] / max(point["of"], 1)
    return "0 %" if not point["clipped"] else "<0.01 %" if share < 0.01 else f"{share:.3g} %"


def _short(value: float) -> float:
    return float(f"{value:.6g}")


def _db(signal: float, error: float) -> float | None:
    """10 log10(signal / error); None where nothing was clipped (a clipped value is past a range
    that holds zero: its signal is never zero)."""
    return round(10 * float(np.log10(signal / error)), 2) if error > 0 else None
