"""Running the quantized model beside the program, point by point (torch).

What enters: the program's trace (every call's returned value, from the integer
reference) with each call's provenance (the model node it was made from), its outputs and
their quantization steps, the PT2E quantized model and the float model (GraphModules), and
the inputs. What leaves: the `semantic` record of the sidecar, and the quantized model's own
outputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cortexm.semantic.judge import tolerance
from cortexm.semantic.mapping import RESHAPES, Own, Viewed, apply_views, base_name, is_activation_quantize, map_points, own_nodes

WORST = 5  # elements kept per point to show where it departs
HISTOGRAM_TAIL = 8  # differences counted one by one up to this many LSB, the rest together


@dataclass
class Call:
    """One value the program computed: instruction `n` (None: a program input) of `op`, made
    from the model node named `node` (None where the program does not say)."""

    n: int | None
    op: str
    value: np.ndarray  # logical layout
    node: str | None = None


def model_ops(node) -> list[str]:
    """The model's operators that compute what the quantize `node` quantizes: back from its
    input to the dequantizes that feed them (q/dq themselves left out)."""
    ops, todo, seen = [], [node.args[0]], set()
    while todo:
        current = todo.pop()
        if not hasattr(current, "op") or current in seen:
            continue
        if current.op == "placeholder":
            ops.append(f"input {current.name}")
        if current.op != "call_function":
            continue
        seen.add(current)
        target = str(current.target)
        if "quantize_per" in target:  # dequantize_per_tensor/_channel: the previous point, or a weight
            continue
        ops.append(_op_name(current.target))
        todo += [a for a in current.all_input_nodes]
    return list(reversed(ops))


def model_qparams(node) -> dict:
    """The quantization the model gives what the quantize `node` quantizes: each dequantized
    input of the operators behind it (scale, zero point), and its own output's."""
    inputs, todo, seen = [], [node.args[0]], set()
    while todo:
        current = todo.pop(0)
        if not hasattr(current, "op") or current in seen or current.op != "call_function":
            continue
        seen.add(current)
        if "dequantize_per_tensor" in str(current.target):
            inputs.append([float(current.args[1]), int(current.args[2])])
        elif "quantize_per" not in str(current.target):
            todo += list(current.all_input_nodes)
    return {"inputs": inputs, "output": [float(node.args[1]), int(node.args[2])]}


def _op_name(target) -> str:
    name = getattr(target, "__name__", str(target))  # "conv2d.default"
    namespace = getattr(target, "namespace", "aten")
    return f"{namespace}.{name.removesuffix('.default')}"


def judge_trace(module, float_module, inputs: tuple, trace: list[tuple], outputs: list[np.ndarray],
                output_indices: list[int], scales: list[float | None], backend: str,
                provenance: list | None = None) -> tuple[dict, list[np.ndarray]]:
    """`compare` for a program whose integer reference recorded `trace` (its calls'
    (instruction, operator, value index, value), cortexm.oracle.reference.evaluate) on
    `inputs` (torch tensors), writing output k to value `output_indices[k]`; `provenance` is
    the export's `calls` (cortexm.lowering.provenance: each instruction's model node), None
    for a bundle that does not record it."""
    made_from = {c.get("instruction"): c.get("node") for c in provenance or [] if isinstance(c, dict)}
    given = [Call(None, f"input {k}", t.detach().contiguous().numpy()) for k, t in enumerate(inputs)]
    calls = [Call(n, op, value, made_from.get(n)) for n, op, _, value in trace]
    written = {index: call for (_, _, index, _), call in zip(trace, calls, strict=True)}
    record, model_outputs = compare(module, float_module, inputs, given + calls,
                                    outputs, [written.get(index) for index in output_indices], scales, backend)
    if not trace:
        record["note"] = "the program's calls could not be traced: its outputs are compared whole"
    return record, model_outputs


def compare(module, float_module, inputs: tuple, calls: list[Call], outputs: list[np.ndarray],
            output_calls: list[Call | None], scales: list[float | None], backend: str) -> tuple[dict, list[np.ndarray]]:
    """The semantic record of a program whose integer reference computed `calls` and
    `outputs` (logical layout; `output_calls[k]` wrote output k; `scales[k]` its step) for a
    core of CMSIS-NN variant `backend`, and the quantized model's own outputs for `inputs`."""
    import torch

    with torch.no_grad():
        plain = _as_list(module(*inputs))
        forced = _Forced(module, calls, backend)
        forcedout = _as_list(forced.run(*inputs))
        floats = _as_list(float_module(*inputs)) if float_module is not None else []
    points = list(forced.points)
    drift, model_floats = [], []
    for k, (ours, scale) in enumerate(zip(outputs, scales, strict=False)):
        call = output_calls[k] if k < len(output_calls) else None
        model = _numpy(forcedout[k]) if k < len(forcedout) else None
        points.append(_point(f"output {k}", [], call, model, ours, scale or 1.0, backend))
        if k < len(plain):
            drift.append(_drift(_numpy(plain[k]), ours, scale))
        if k < len(floats):
            model_floats.append(_float_drift(_numpy(floats[k]), ours, scale))
    record = {
        "reference": "the PT2E quantized model (convert_pt2e, before the cortex_m passes), run in torch",
        "backend": backend,  # the CMSIS-NN variant whose tolerances apply
        # The dim orders eager torch gives the float model's outputs (the graph records one layout
        # where an input's is ambiguous: one channel, say, is NCHW and NHWC at once).
        "eager_dim_orders": _eager_layouts(float_module, inputs) if float_module is not None else [],
        # How each point found its call: "provenance" (cortexm.semantic.mapping), or "shape" for
        # a program that records no provenance (the first call of the point's shape and dtype).
        "mapping": "provenance" if forced.mapping is not None else "shape",
        "points": points,
        "unmapped": forced.unmapped,
        "drift": drift,
        "float": model_floats,
    }
    return record, [_numpy(t) for t in plain]


class _Forced:
    """The model run node by node; at each activation quantize, the program's value for it
    is found, compared, and used from there on."""

    def __init__(self, module, calls: list[Call], backend: str) -> None:
        import torch.fx

        self.backend = backend
        self.calls = [c for c in calls if np.issubdtype(c.value.dtype, np.integer)]
        names = {node.name for node in module.graph.nodes}
        made_from = [c.node if c.node in names else None for c in self.calls]
        # None: the program records no provenance (a bundle from before it did), points are
        # matched by shape (_by_shape), a fallback the record labels.
        self.mapping = map_points(module.graph, made_from) if any(made_from) else None
        # What the program holds for each point already compared: its call, value, and the
        # model's view operators between the two (a point viewed from another).
        self.held: dict[str, tuple[Call, np.ndarray, list[str]]] = {}
        self.claimed: set[int] = set()
        self.points: list[dict] = []
        self.unmapped: list[dict] = []
        # The latest program call that each model value depends on: a later point's call
        # must come after it (a call cannot use what has not been computed yet).
        self.after: dict = {}
        outer = self

        class Interpreter(torch.fx.Interpreter):
            def run_node(self, node):
                value = super().run_node(node)
                return outer.visit(node, value)

        self.interpreter = Interpreter(module)

    def run(self, *inputs):
        return self.interpreter.run(*inputs)

    def visit(self, node, value):
        import torch

        if self.mapping is None:
            return self._by_shape(node, value)
        if not is_activation_quantize(node) or not isinstance(value, torch.Tensor):
            return value
        return self._by_provenance(node, value)

    def _by_provenance(self, node, value):
        import torch

        model = value.detach().contiguous().numpy()
        how = self.mapping.get(node.name)
        views: list[str] = []
        if isinstance(how, Own):
            call, ours = self._own(node, how, model)
        elif isinstance(how, Viewed) and how.source in self.held:
            call, source, before = self.held[how.source]
            ours = apply_views(how, torch.from_numpy(source.copy())).contiguous().numpy()
            views = before + [_op_name(n.target) for n in how.nodes]
        else:
            # Not observed: no call of its own and operators that compute (a call dropped), or a
            # view of a point the program does not hold (that point's departure is its own line).
            missing = {"view_of": how.source} if isinstance(how, Viewed) else {}
            self.unmapped.append({"node": node.name, "model_ops": model_ops(node), "shape": list(model.shape),
                                  "before_point": len(self.points), **missing})
            return value
        # A view moves values: it must hold them exactly.
        point = _point(node.name, model_ops(node), call, model, ours, 1.0, self.backend, 0 if views else None)
        self.points.append({**point, **({"view": views} if views else {}), "model_qparams": model_qparams(node)})
        if point.get("shape_mismatch"):
            return value
        self.held[node.name] = (call, ours, views)
        return _forced(value, ours)

    def _own(self, node, how: Own, model: np.ndarray) -> tuple[Call, np.ndarray]:
        """The call of the point's own that holds its value, and that value. Of several (mapping.Own),
        the first within its operator's tolerance; in a program that departs, the first of the
        model's shape (where the error starts: a linear before the minimum its hardswish adds,
        what the next calls read), else the last."""
        reshapes = any(base_name(n) in RESHAPES for n in own_nodes(node))
        held = []
        for k in how.calls:
            call = self.calls[k]
            ours = call.value
            if reshapes and ours.shape != model.shape and ours.size == model.size:
                # The call computes what the model's operators reshape (a layout copy before a
                # flatten): the program views it, in its logical order, as the model's shape.
                ours = ours.reshape(model.shape)
            if ours.shape == model.shape and _max_diff(ours, model) <= tolerance(call.op, self.backend).lsb:
                return call, ours
            held.append((call, ours))
        return next((h for h in held if h[1].shape == model.shape), held[-1])

    def _by_shape(self, node, value):
        """The fallback for a program that records no provenance: the first unclaimed call of the
        point's shape and dtype after its inputs' calls, the first within tolerance if any. It can
        take a call that computes something else (a view's shape is often another call's)."""
        import torch

        after = max((self.after.get(a, -1) for a in node.all_input_nodes), default=-1)
        self.after[node] = after
        if not is_activation_quantize(node) or not isinstance(value, torch.Tensor):
            return value
        model = value.detach().contiguous().numpy()
        candidates = [k for k, c in enumerate(self.calls)
                      if k not in self.claimed and c.value.shape == model.shape and c.value.dtype == model.dtype
                      and (c.n if c.n is not None else -1) > after]
        if not candidates:
            # The program computes no such tensor: a reshaped or reordered value, or a wrong shape.
            self.unmapped.append({"node": node.name, "model_ops": model_ops(node), "shape": list(model.shape),
                                  "before_point": len(self.points)})
            return value
        within = [k for k in candidates
                  if _max_diff(self.calls[k].value, model) <= tolerance(self.calls[k].op, self.backend).lsb]
        chosen = (within or candidates)[0]
        self.claimed.add(chosen)
        call = self.calls[chosen]
        self.points.append({**_point(node.name, model_ops(node), call, model, call.value, 1.0, self.backend),
                            "model_qparams": model_qparams(node)})
        self.after[node] = call.n if call.n is not None else -1
        return _forced(value, call.value)


def _forced(value, ours: np.ndarray):
    """The program's value `ours`, in the model value's own layout: what the model carries on from."""
    import torch

    forced = torch.empty_strided(value.shape, value.stride(), dtype=value.dtype)
    forced.copy_(torch.from_numpy(ours.copy()))
    return forced


def _point(node: str, ops: list[str], call: Call | None, model: np.ndarray | None, ours: np.ndarray,
           scale: float, backend: str | None = None, allowed: int | None = None) -> dict:
    """The point `node` compared: the program's value `ours` (of `call`) against the model's,
    `allowed` LSB apart (None: what the call's operator may)."""
    point: dict = {"node": node, "model_ops": ops, "call": call.n if call else None, "op": call.op if call else None}
    if model is None or model.shape != ours.shape:
        what = "no model value" if model is None else f"the model's is {list(model.shape)}"
        return {**point, "shape_mismatch": f"the program's value is {list(ours.shape)}, {what}",
                "max_lsb": 0.0, "differ": 0, "elements": int(ours.size)}
    diff = _lsb(ours, model, scale)
    if allowed is None:
        allowed = tolerance(call.op, backend).lsb if call else 0
    over = np.argwhere(diff > allowed)
    order = np.argsort(diff, axis=None)[::-1][:WORST]
    worst = [_element(np.unravel_index(i, diff.shape), ours, model, diff) for i in order if diff.flat[i] > 0]
    point = {**point, "max_lsb": float(diff.max()) if diff.size else 0.0, "differ": int((diff > 0).sum()),
             "elements": int(diff.size), "histogram": _histogram(diff),
             "first": _element(tuple(over[0]), ours, model, diff) if len(over) else None, "worst": worst}
    if len(over) and model.ndim == 4 and _lsb(ours, _read_as_contiguous(model), scale).max() <= allowed:
        point["explained"] = SCRAMBLED
    return point


# A departure with this mechanism: the right values, in channels-last memory order, read back
# as if they were contiguous (a kernel that writes NHWC into an output planned NCHW).
SCRAMBLED = "it is the model's value laid out channels-last and read as contiguous"


def _read_as_contiguous(value: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(value.transpose(0, 2, 3, 1)).reshape(value.shape)


def _element(index, ours, model, diff) -> dict:
    index = tuple(int(i) for i in index)
    return {"index": list(index), "program": float(ours[index]), "model": float(model[index]), "lsb": float(diff[index])}


def _lsb(ours: np.ndarray, model: np.ndarray, scale: float) -> np.ndarray:
    diff = np.abs(ours.astype(np.float64) - model.astype(np.float64)) / scale
    # Dequantized values carry float32 rounding, not a difference of steps.
    return np.round(diff, 3) if np.issubdtype(ours.dtype, np.floating) else diff


def _max_diff(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a.astype(np.int64) - b.astype(np.int64)).max()) if a.size else 0.0


def _histogram(diff: np.ndarray) -> dict[str, int]:
    """Elements per difference in whole LSB (what the tolerance table is measured from)."""
    steps, counts = np.unique(np.minimum(np.ceil(diff), HISTOGRAM_TAIL + 1).astype(np.int64), return_counts=True)
    return {(str(int(s)) if s <= HISTOGRAM_TAIL else f">{HISTOGRAM_TAIL}"): int(c) for s, c in zip(steps, counts, strict=True)}


def _drift(model: np.ndarray, ours: np.ndarray, scale: float | None) -> dict:
    """The whole program against the model without forcing: what rounding adds up to."""
    if model.shape != ours.shape:
        return {"max_lsb": None, "differ": None, "elements": int(ours.size)}
    diff = _lsb(ours, model, scale or 1.0)
    return {"max_lsb": float(diff.max()) if diff.size else 0.0, "differ": int((diff > 0).sum()), "elements": int(diff.size)}


def _float_drift(reference: np.ndarray, ours: np.ndarray, scale: float | None) -> dict:
    """The program against the float model: signal-to-quantization-noise ratio in dB, the
    largest error in output steps, and for a classifier-shaped output whether the top class
    agrees."""
    if reference.shape != ours.shape or not np.issubdtype(ours.dtype, np.floating):
        return {"sqnr_db": None, "max_err_lsb": None, "top1": None}
    ref, got = reference.astype(np.float64), ours.astype(np.float64)
    noise, signal = float(((ref - got) ** 2).sum()), float((ref ** 2).sum())
    # None where it has no finite value: no noise at all (max_err_lsb says 0), or no signal.
    sqnr = round(10 * np.log10(signal / noise), 2) if noise > 0 and signal > 0 else None
    top1 = None
    if ref.ndim == 2 and ref.shape[1] > 1:
        top1 = bool((ref.argmax(axis=1) == got.argmax(axis=1)).all())
    return {"sqnr_db": sqnr, "max_err_lsb": round(float(np.abs(ref - got).max()) / (scale or 1.0), 3) if ref.size else 0.0,
            "top1": top1}


def _eager_layouts(float_module, inputs: tuple) -> list[list[list[int]]]:
    """Per output, the dim orders eager torch gives it for the inputs as they are and, where a
    4-D input is both contiguous and channels-last (one channel, or one pixel), laid out with
    channels-last strides too: torch picks the output's layout from the input's strides."""
    import torch

    variants = [inputs]
    if any(t.dim() == 4 and t.is_contiguous() and t.is_contiguous(memory_format=torch.channels_last) for t in inputs):
        variants.append(tuple(_channels_last_strided(t) if t.dim() == 4 else t for t in inputs))
    layouts: list[list[list[int]]] = []
    with torch.no_grad():
        for variant in variants:
            for k, out in enumerate(_as_list(float_module(*variant))):
                if k == len(layouts):
                    layouts.append([])
                if hasattr(out, "dim_order") and list(out.dim_order()) not in layouts[k]:
                    layouts[k].append(list(out.dim_order()))
    return layouts


def _channels_last_strided(t):
    import torch

    n, c, h, w = t.shape
    return torch.empty_strided(t.shape, (h * w * c, 1, w * c, c), dtype=t.dtype).copy_(t)


def _as_list(value) -> list:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def _numpy(t) -> np.ndarray:
    return t.detach().contiguous().numpy().copy() if hasattr(t, "detach") else np.asarray(t)
