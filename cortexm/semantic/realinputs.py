"""The program against the float model on the inputs the model will see, and whether its
calibration covers them.

accuracy.py measures over inputs drawn like the calibration data, where a calibration too
narrow for the model's inputs measures itself (an MLP calibrated on [-0.02, 0.02] and given
inputs in [-1, 1] measured 47.7 dB there, and 6 dB on its own example input). Here the same
measure runs on the real inputs: the model's example inputs (the factory's, or those a case
places) and an evaluation set the user gives (cortexm.semantic.evalset), each with the
saturation of every quantization point (cortexm.semantic.saturation) and, for a set with
labels, how often the program's and the float model's top class is the label.

What enters: what accuracy.measure takes, the model bundle, the evaluation set. What leaves:
the `accuracy` record's `example` and `evaluation` entries beside the drawn inputs' figures,
and the lines a case fails with (`failures`): on each real set the first point whose range
does not cover it, and the floor (accuracy.floor_db). Example inputs that a case places
outside the calibrated range on purpose (data kinds not in accuracy.IN_RANGE) are measured,
not judged; an evaluation set is always judged. Needs torch.
"""

from __future__ import annotations

from cortexm.base.errors import CortexmError
from cortexm.semantic import accuracy, evalset, saturation


def record(pte: bytes, backend: str, quantized, floating, calibration: list[tuple], bundle,
           evaluation: evalset.EvalSet | None = None) -> dict:
    """The `accuracy` record of program `pte`: over the inputs drawn like `calibration`, the
    bundle's example inputs and the evaluation set."""
    measured = accuracy.measure(pte, backend, quantized, floating, accuracy.draw(calibration, bundle.name))
    measured["example"] = _measure(pte, backend, quantized, floating, [tuple(bundle.example_inputs)])
    if evaluation is not None:
        entry: dict = {"name": evaluation.name, "sha256": evaluation.digest}
        try:
            samples = evalset.samples(evaluation, tuple(bundle.example_inputs))
        except CortexmError as e:
            entry["error"] = f"does not fit the model: {e}"
        else:
            entry.update(_measure(pte, backend, quantized, floating, samples, evaluation.labels))
        measured["evaluation"] = entry
    return measured


def _measure(pte: bytes, backend: str, quantized, floating, samples: list[tuple], labels=None) -> dict:
    counts: dict = {}
    measured = accuracy.measure(pte, backend, quantized, floating, samples,
                                observe=lambda node, x: saturation.count(node, x, counts), labels=labels)
    measured["saturation"] = saturation.entries(counts)
    return measured


def sets(record: dict | None, data: str):
    """(key, what it is, its record, whether it is judged) of each real set a record holds."""
    for key in ("example", "evaluation"):
        entry = (record or {}).get(key)
        if entry:
            what = "the example inputs" if key == "example" else f"the evaluation set {entry.get('name')}"
            yield key, what, entry, key == "evaluation" or data in accuracy.IN_RANGE


def calls_of(semantic: dict | None) -> dict:
    """node -> (call, operator) of every point of a sidecar's semantic record: what names a
    point's call in `failures` and `summary`."""
    return {p.get("node"): (p.get("call"), p.get("op")) for p in (semantic or {}).get("points", [])}


def failures(record: dict | None, data: str, calls: dict | None = None) -> list[str]:
    """The lines a case fails stage `accuracy` with: the drawn inputs below the floor, and on
    each judged real set, an evaluation set that does not fit, the first point whose range
    does not cover it, labels that do not fit, the floor. `calls`: node -> (call, operator)."""
    lines = [line for line in [accuracy.below_floor(record, data)] if line]
    for _key, what, entry, judged in sets(record, data):
        if not judged:
            continue
        if entry.get("error"):
            lines.append(f"{what} {entry['error']}")
            continue
        samples = f"{what} ({entry['samples']} sample{'s' if entry['samples'] != 1 else ''})"
        lines += [line for line in (saturation.line(entry.get("saturation") or [], what, calls),
                                    accuracy.floor_line(entry, samples)) if line]
        if (entry.get("labels") or {}).get("error"):
            lines.append(f"{what}: its labels do not fit: {entry['labels']['error']}")
    return lines


def summary(record: dict | None, calls: dict | None = None) -> dict:
    """What a report shows of each real set: samples, the lowest SQNR over the outputs, top-1
    agreement, the floor, labels, and every point's saturation with its call (`calls`)."""
    shown = {}
    for key, _what, entry, _judged in sets(record, "uniform"):
        if entry.get("error"):
            shown[key] = {k: entry.get(k) for k in ("name", "sha256", "error")}
            continue
        sqnr, top1 = accuracy.summary(entry)
        points = [{**p, "call": (calls or {}).get(p["node"], (None, None))[0],
                   "op": (calls or {}).get(p["node"], (None, None))[1]} for p in entry.get("saturation") or []]
        shown[key] = {k: v for k, v in (("name", entry.get("name")), ("sha256", entry.get("sha256")),
                                        ("samples", entry["samples"]), ("sqnr_db", sqnr), ("top1", top1),
                                        ("floor_db", accuracy.floor_db(entry)), ("labels", entry.get("labels")),
                                        ("saturation", points)) if v is not None}
    return shown
