"""The program against the float model: how much accuracy quantization and lowering cost.

The integer reference and the semantic reference judge a program against the quantized
model it was lowered from; neither can see a quantizer that makes a self-consistent but less
accurate model (a narrowed weight range, a per-channel scheme lost, an activation no longer
fused): the program still means its quantized model exactly. Only the float model can.

What enters: the program, the core's CMSIS-NN variant, the quantized and the float model,
and the calibration data. What leaves: the `accuracy` record of the sidecar, measured over
SAMPLES inputs drawn like the calibration data (the samples, and points between two of them,
with a fixed seed per case, so a rerun measures the same): per output, the signal-to-noise ratio of
the program's outputs (the integer reference's: bit-exact with the core) against the float
model's, and for a classifier-shaped output how often the top class agrees; per activation
point of the quantized model, its own SQNR against the float model at the same node, to
name where a less accurate model first loses it. The same measure on the inputs the model will
see (its example inputs, an evaluation set) is realinputs.py's, beside it in the record. Needs
torch.

The floor: an int8 activation resolves 1/256 of its range, about 48 dB for a signal that
fills it; a stage whose own error's energy is more than a hundredth of its signal's (20 dB,
FLOOR_DB) does not compute what it quantizes. Each of a model's L quantization stages adds
its noise to the output, so L stages each at the floor leave the output 10 log10(L) dB
below it: the floor of a program is FLOOR_DB - 10 log10(L), with L its activation
quantization points (20 dB for one, 8.5 for KWS's 14). Below it the program does not compute
its float model, whatever a baseline says (a clamp before hardswish with its bound's sign
flipped gave -22.3 dB). Cases whose example data leave the calibrated range on purpose
(saturation, extremes) are not held to it: their quantized model clips by design.
"""

from __future__ import annotations

import zlib

import numpy as np

SAMPLES = 16
FLOOR_DB = 20.0
# Data kinds whose inputs are in the calibrated range (cortexm.cases.data): held to the floor.
IN_RANGE = ("uniform",)


def draw(calibration: list[tuple], name: str, count: int = SAMPLES) -> list[tuple]:
    """`count` input tuples like the calibration data, the same for every run of `name`: the
    calibration samples themselves, then points between two of them (a random pair, a random
    weight), which stay inside what the quantizer saw without repeating it."""
    import torch

    calibration = [tuple(t.detach() for t in sample) for sample in calibration]
    samples = calibration[:count]
    generator = torch.Generator().manual_seed(zlib.crc32(f"{name}:accuracy".encode()))
    while len(samples) < count and calibration:
        a, b = (int(i) for i in torch.randint(len(calibration), (2,), generator=generator))
        weight = float(torch.rand((), generator=generator))
        samples.append(tuple((x + weight * (y - x)).to(x.dtype) for x, y in zip(calibration[a], calibration[b], strict=False)))
    return samples


def measure(pte: bytes, backend: str, quantized, floating, samples: list[tuple], observe=None,
            labels: np.ndarray | None = None) -> dict:
    """The `accuracy` record (module docstring) of program `pte` over `samples`; `observe(node,
    x)` is given the value x of every activation quantize of the quantized model as it runs;
    `labels` (one class per row of the first classifier output over the samples) add how
    often the program's and the float model's top class is the label."""
    from cortexm.oracle.reference import integer_reference

    signal: list[float] = []
    noise: list[float] = []
    agree: list[list[int]] = []
    points: dict[str, list] = {}
    tops: dict[int, list] = {}  # the first classifier output -> the float model's and the program's top classes
    for sample in samples:
        program, _ = integer_reference(pte, [t.detach().numpy() for t in sample], backend)
        reference, seen = _model_side(quantized, floating, sample, observe)
        for node, (ops, s, n) in seen.items():
            entry = points.setdefault(node, [ops, 0.0, 0.0])
            entry[1] += s
            entry[2] += n
        for k, (ours, ref) in enumerate(zip(program, reference, strict=False)):
            ref = ref.detach().contiguous().numpy().astype(np.float64)
            ours = np.asarray(ours, dtype=np.float64)
            while len(signal) <= k:
                signal.append(0.0)
                noise.append(0.0)
                agree.append([0, 0])
            if ours.shape != ref.shape:
                signal[k] = noise[k] = float("nan")
                continue
            signal[k] += float((ref ** 2).sum())
            noise[k] += float(((ref - ours) ** 2).sum())
            if ref.ndim == 2 and ref.shape[1] > 1:
                agree[k][0] += int((ref.argmax(axis=1) == ours.argmax(axis=1)).sum())
                agree[k][1] += ref.shape[0]
                if k in tops or not tops:
                    tops.setdefault(k, []).append((ref.argmax(axis=1), ours.argmax(axis=1), ref.shape[1]))
    outputs = [{"sqnr_db": _db(s, n), "top1": {"agree": a[0], "of": a[1]} if a[1] else None}
               for s, n, a in zip(signal, noise, agree, strict=True)]
    record = {"samples": len(samples), "outputs": outputs,
              "points": [{"node": node, "model_ops": ops, "sqnr_db": _db(s, n)} for node, (ops, s, n) in points.items()]}
    if labels is not None:
        record["labels"] = _against_labels(labels, tops)
    return record


def _against_labels(labels: np.ndarray, tops: dict[int, list]) -> dict:
    """How often the float model's and the program's top class is the label, on the first
    classifier output; {"error": line} where the labels do not fit it."""
    if not tops:
        return {"error": "labels given, but no output is a classifier's ([rows, classes])"}
    (output, rows), = tops.items()
    floats, ours = np.concatenate([r[0] for r in rows]), np.concatenate([r[1] for r in rows])
    classes = rows[0][2]
    if len(labels) != len(floats):
        return {"error": f"{len(labels)} labels, and output {output} (the classifier) has {len(floats)} rows over the set"}
    if int(labels.max(initial=0)) >= classes:
        return {"error": f"a label is {int(labels.max())}, and output {output} (the classifier) has {classes} classes"}
    return {"output": output, "of": len(labels), "float": int((floats == labels).sum()),
            "program": int((ours == labels).sum())}


# The float model's outputs and the quantized model's points on one sample do not depend on the
# core: a case's export measures each once for all its cores (the last case's only: one at a time).
_MODEL_SIDE: dict[str, tuple] = {}
_MODELS: list = []


def _model_side(quantized, floating, sample: tuple, observe) -> tuple[list, dict]:
    """The float model's outputs on `sample`, and each activation point's (model ops, signal,
    noise) on it; measured once per models and sample content unless `observe` is watching."""
    import hashlib

    import torch

    if observe is None and not (len(_MODELS) == 2 and _MODELS[0] is quantized and _MODELS[1] is floating):
        _MODELS[:] = [quantized, floating]  # held: the memo is theirs alone
        _MODEL_SIDE.clear()
    h = hashlib.sha256()
    for t in sample:
        h.update(f"{tuple(t.shape)}{t.dtype}".encode())
        h.update(t.detach().contiguous().numpy().tobytes())
    key = h.hexdigest()
    if observe is None and key in _MODEL_SIDE:
        return _MODEL_SIDE[key]
    seen: dict = {}
    with torch.no_grad():
        reference = _as_list(floating(*sample))
        _quantized_points(quantized, floating, sample, seen, observe)
    if observe is None:
        _MODEL_SIDE[key] = (reference, seen)
    return reference, seen


def _quantized_points(quantized, floating, sample: tuple, points: dict, observe=None) -> None:
    """Adds to `points` (node -> [model ops, signal, noise]) each activation point's
    dequantized value against the float model's value of the node it quantizes; gives
    `observe` each activation quantize and the value it quantizes."""
    import torch.fx

    from cortexm.semantic.model import is_activation_quantize, model_ops

    floats: dict[str, object] = {}

    class Float(torch.fx.Interpreter):
        def run_node(self, node):
            value = super().run_node(node)
            floats[node.name] = value
            return value

    class Quantized(torch.fx.Interpreter):
        def run_node(self, node):
            value = super().run_node(node)
            if observe is not None and is_activation_quantize(node):
                observe(node, self.env[node.args[0]])
            if is_activation_quantize(node) and node.args[0].name in floats and hasattr(value, "detach"):
                scale, zero_point = float(node.args[1]), int(node.args[2])
                ours = (value.detach().to(torch.float64) - zero_point) * scale
                ref = floats[node.args[0].name]
                if hasattr(ref, "shape") and tuple(ref.shape) == tuple(ours.shape):
                    ref = ref.detach().to(torch.float64)
                    entry = points.setdefault(node.name, [model_ops(node), 0.0, 0.0])
                    entry[1] += float((ref ** 2).sum())
                    entry[2] += float(((ref - ours) ** 2).sum())
            return value

    Float(floating).run(*sample)
    for name, node in _float_nodes(floating).items():
        # A convolution the quantizer folded its BatchNorm into is the BatchNorm's output in
        # the float model: the quantized model's node keeps the convolution's name.
        while len(node.users) == 1 and "batch_norm" in str(next(iter(node.users)).target):
            node = next(iter(node.users))
        if node.name in floats:
            floats[name] = floats[node.name]
    Quantized(quantized).run(*sample)


def _float_nodes(floating) -> dict:
    return {node.name: node for node in floating.graph.nodes}


def _db(signal: float, noise: float) -> float | None:
    """10 log10(signal / noise), None where it has no finite value (no noise, no signal)."""
    if not (signal > 0 and noise > 0) or signal != signal or noise != noise:
        return None
    return round(10 * float(np.log10(signal / noise)), 2)


def _as_list(value) -> list:
    return list(value) if isinstance(value, (tuple, list)) else [value]


# --- what a report takes from the record -------------------------------------------------------

def summary(record: dict | None) -> tuple[float | None, str | None]:
    """(lowest SQNR over the outputs in dB, top-1 agreement as 'k/n' summed over classifier
    outputs) of an `accuracy` record."""
    if not record:
        return None, None
    sqnrs = [o["sqnr_db"] for o in record.get("outputs", []) if o.get("sqnr_db") is not None]
    tops = [o["top1"] for o in record.get("outputs", []) if o.get("top1")]
    top1 = f"{sum(t['agree'] for t in tops)}/{sum(t['of'] for t in tops)}" if tops else None
    return (min(sqnrs) if sqnrs else None), top1


def floor_db(record: dict) -> float:
    """The floor of a program with the record's quantization points (module docstring)."""
    stages = max(1, len(record.get("points") or []))
    return round(FLOOR_DB - 10 * float(np.log10(stages)), 2)


def below_floor(record: dict | None, data: str) -> str | None:
    """The line a case fails stage `accuracy` with, or None: the record below its floor, for a
    case whose `data` stays in the calibrated range."""
    if data not in IN_RANGE or not record:
        return None
    return floor_line(record, f"{record['samples']} inputs drawn like the calibration data")


def floor_line(record: dict, what: str) -> str | None:
    """'SQNR against the float model ... over `what`, below the floor ...', or None."""
    sqnr, top1 = summary(record)
    if sqnr is None or sqnr >= floor_db(record):
        return None
    return (f"SQNR against the float model {sqnr:g} dB over {what}, below the floor of {floor_db(record):g} dB for its "
            f"{len(record.get('points') or [])} quantization stages{f'; top-1 agrees {top1}' if top1 else ''}")


def with_inputs(points: list[dict], plan, modules: dict[int, str]) -> list[dict]:
    """Each point (a report's `accuracy_points`, with its `call`) with its `module` (the model's
    module of its call, `modules`: instruction -> module path) and `inputs_db`: the lowest SQNR of
    the points whose values its call reads, found through the program (a call without a point of
    its own, a pad or a view, is looked through); None for a point that reads only the model's
    inputs or constants. The SQNR it lost is inputs_db - sqnr_db."""
    from cortexm.pte.program import KernelCall, TensorValue

    at_call = {p["call"]: p for p in points if p.get("call") is not None}
    producer: dict[int, int] = {}  # value index -> the call that last wrote it (its out argument)
    for n, _op, call in plan.kernel_calls():
        if call.args:
            producer[call.args[-1]] = n

    def read(n: int) -> list[int]:
        ins = plan.instructions[n]
        if not isinstance(ins, KernelCall):
            return []
        return [v for v in ins.args[:-1] if 0 <= v < len(plan.values) and v != ins.args[-1]
                and isinstance(plan.values[v], TensorValue) and not plan.values[v].is_constant]

    def sources(n: int, depth: int = 0) -> list[dict]:
        found = []
        for value in read(n):
            before = producer.get(value)
            if before is None or before >= n or depth > 8:
                continue
            found += [at_call[before]] if before in at_call else sources(before, depth + 1)
        return found

    shown = []
    for point in points:
        call = point.get("call")
        fed = [q["sqnr_db"] for q in (sources(call) if call is not None else []) if q.get("sqnr_db") is not None]
        shown.append({**point, "module": modules.get(call, "") if call is not None else "",
                      "inputs_db": min(fed) if fed else None})
    return shown


def lost_at(points: list[dict]) -> dict | None:
    """The point that lost the most SQNR against the points it reads (with_inputs), or None
    when no point lost any."""
    losses = [(p["inputs_db"] - p["sqnr_db"], p) for p in points
              if p.get("inputs_db") is not None and p.get("sqnr_db") is not None]
    if not losses or max(d for d, _ in losses) <= 0:
        return None
    return max(losses, key=lambda d: d[0])[1]


def lost_line(points: list[dict]) -> str:
    """'; lost most at call 15 cortex_m::quantized_linear (module classifier; quantize_per_tensor_17:
    aten.linear): 43.49 dB before it, 8.45 dB after', or "" when no point lost SQNR."""
    point = lost_at(points)
    if point is None:
        return ""
    call = f"call {point['call']} {point['op']} " if point.get("call") is not None and point.get("op") else ""
    module = f"module {point['module'] or '(the model itself)'}; " if "module" in point else ""
    return (f"; lost most at {call}({module}{point['node']}: {', '.join(point.get('model_ops') or [])}): "
            f"{point['inputs_db']:g} dB before it, {point['sqnr_db']:g} dB after")


# --- against an earlier run (`cortexm test --baseline`) ---------------------------------------

DEGRADED = "DEGRADED"  # a status (cortexm.report.results.Status): the report is not part of an export
DEFAULT_MAX_DROP_DB = 1.0


def compared(results, baseline: dict) -> int:
    """How many results have an accuracy figure that the baseline has too, for the same case
    and core: 0 when a baseline (an older report, one made with --sim none...) has none."""
    before = {(r.get("case"), r.get("core")): r for r in baseline.get("results", []) if isinstance(r, dict)}
    return sum(1 for r in results
               if r.accuracy and r.accuracy.db is not None
               and (before.get((r.case, r.core)) or {}).get("accuracy_db") is not None)


def gate(results, baseline: dict, max_drop_db: float = DEFAULT_MAX_DROP_DB) -> list[str]:
    """Each result's accuracy against the baseline's for the same case and core: an SQNR
    lower by more than `max_drop_db`, or fewer top-1 agreements, is DEGRADED (a failure, one
    line each), named with the activation point of the quantized model whose own SQNR fell most."""
    before = {(r["case"], r["core"]): r for r in baseline.get("results", [])}
    changes = []
    for result in results:
        old, now = before.get((result.case, result.core)), result.accuracy
        if old is None or now is None:  # a case not in the baseline, or not measured now: no figures to compare
            continue
        worse = []
        if old.get("accuracy_db") is not None and now.db is not None and old["accuracy_db"] - now.db > max_drop_db:
            worse.append(f"SQNR against the float model {old['accuracy_db']:g} -> {now.db:g} dB "
                         f"({now.db - old['accuracy_db']:+.2f} dB)")
        agreed, agrees = _agreements(old.get("top1")), _agreements(now.top1)
        if agreed is not None and agrees is not None and agrees < agreed:
            worse.append(f"top-1 agrees with the float model {old['top1']} -> {now.top1}")
        if not worse:
            continue
        line = "; ".join(worse) + _blame(old.get("accuracy_points") or [], now.points)
        # Recorded whatever the status: a case that failed another check lost accuracy too.
        result.failures.append(("degraded", line))
        if result.status in ("PASS", "SLOWER", "FASTER"):
            result.status, result.reason = DEGRADED, line
        changes.append(f"{DEGRADED} {result.case} {result.core}: {line}")
    return changes


def _agreements(top1: str | None) -> int | None:
    try:
        return int(str(top1).split("/")[0]) if top1 else None
    except ValueError:
        return None


def _blame(old: list, new: list) -> str:
    """'; first lost at call 4 cortex_m::quantized_conv2d (quantize_per_tensor_3: aten.conv2d,
    aten.relu): its own SQNR 41.0 -> 30.2 dB': of the points whose own SQNR fell within 1 dB
    of the largest fall, the first in the model."""
    before = {p.get("node"): p.get("sqnr_db") for p in old}
    drops = [(before[p["node"]] - p["sqnr_db"], p) for p in new
             if before.get(p.get("node")) is not None and p.get("sqnr_db") is not None]
    if not drops or max(d for d, _ in drops) <= 0:
        return ""
    largest = max(d for d, _ in drops)
    drop, point = next((d, p) for d, p in drops if d >= largest - 1.0)
    call = f"call {point['call']} {point['op']} " if point.get("call") is not None else ""
    module = f"module {point['module'] or '(the model itself)'}; " if "module" in point else ""
    inputs = (f"; now {point['inputs_db']:g} dB before it, {point['sqnr_db']:g} dB after"
              if point.get("inputs_db") is not None else "")
    return (f"; first lost at {call}({module}{point['node']}: {', '.join(point.get('model_ops') or [])}): the quantized "
            f"model's own SQNR {before[point['node']]:g} -> {point['sqnr_db']:g} dB{inputs}")
