"""How far a lowered program may depart from the quantized model, per operator, and why.

What enters: the points cortexm.semantic.model.compare recorded (in the sidecar). What
leaves: one line per point outside its operator's tolerance.

The quantized model computes each operator in float between dequantize and quantize,
rounding once, half to even, at the quantize. CMSIS-NN computes in integers: an int32
accumulator, a requantize by a Q31 multiplier and a shift that round the real scale (to
31 bits) and round the product twice (doubling high multiply, then rounding divide by a
power of two, ties away from zero). The two agree except where the exact result lies
within that rounding of a half step, so every requantizing operator may differ by 1 LSB,
and only there; operators that move or compare values without rescaling them must agree
exactly, and so must the quantize on a core whose loop rounds as the model does. Measured on
every built-in and `--grid full` case for the M7 and the M55 (bench/tolerances.py; docs/commands.md,
"The semantic reference"): every point within these, the requantizing operators at 1 LSB on
0.08-7.5 % of their elements (add, bmm, div, softmax and the activation table at 0 so far:
the 1 their arithmetic allows is kept, a tolerance is not tuned to the data at hand).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tolerance:
    lsb: int
    why: str
    # Where a CMSIS-NN variant's core computes otherwise: backend ("MVE") -> (lsb, why).
    variants: tuple[tuple[str, int, str], ...] = ()

    def on(self, backend: str | None) -> Tolerance:
        for name, lsb, why in self.variants:
            if name == backend:
                return Tolerance(lsb, why)
        return self


_REQUANTIZE = ("the requantize rounds the real scale to a Q31 multiplier and rounds twice "
               "(doubling high multiply, rounding shift, ties away from zero) where the model rounds once, "
               "half to even: 1 LSB where the exact result is within that of a half step")

TOLERANCES: dict[str, Tolerance] = {
    "cortex_m::quantize_per_tensor": Tolerance(
        0, "the scalar loop multiplies by the float32 inverse of the scale and rounds half to even, as the model's "
           "quantize does",
        variants=(("MVE", 1, "the M55's Helium loop rounds x * inv_scale once, inside a fused multiply-add, where the "
                             "model rounds the float32 product: an input within one float32 step of a half step lands "
                             "on the other side (cortexm.cases.defects.EXECUTORCH_QUANTIZE_MVE_ROUNDING)"),)),
    "cortex_m::dequantize_per_tensor": Tolerance(0, "(q - zero_point) * scale in float32, as the model computes it"),
    "cortex_m::quantized_conv2d": Tolerance(1, _REQUANTIZE),
    "cortex_m::quantized_conv2d_nhwc": Tolerance(1, _REQUANTIZE),
    "cortex_m::quantized_depthwise_conv2d": Tolerance(1, _REQUANTIZE),
    "cortex_m::quantized_depthwise_conv2d_nhwc": Tolerance(1, _REQUANTIZE),
    "cortex_m::quantized_transpose_conv2d": Tolerance(1, _REQUANTIZE),
    "cortex_m::quantized_transpose_conv2d_nhwc": Tolerance(1, _REQUANTIZE),
    "cortex_m::quantized_linear": Tolerance(1, _REQUANTIZE),
    "cortex_m::quantized_batch_matmul": Tolerance(1, _REQUANTIZE),
    "cortex_m::quantized_add": Tolerance(
        1, "each input is requantized to a common scale with 20 bits of headroom, the sum requantized again: "
           "three fixed-point roundings where the model rounds once"),
    "cortex_m::quantized_mul": Tolerance(1, _REQUANTIZE),
    "cortex_m::quantized_div": Tolerance(1, "the quotient is computed in fixed point and requantized"),
    "cortex_m::quantized_avg_pool2d": Tolerance(
        1, "arm_avgpool_s8 divides the integer sum by the window size, rounding half away from zero; the model "
           "averages in float and rounds half to even at the quantize"),
    "cortex_m::quantized_avg_pool2d_nhwc": Tolerance(1, "as quantized_avg_pool2d"),
    "cortex_m::quantized_activation": Tolerance(
        1, "a 256-entry table built from the model's own float function at each int8 input; the table is "
           "quantized with the output's scale as the model's quantize does, so it differs only at half steps"),
    "cortex_m::softmax": Tolerance(
        1, "CMSIS-NN's exp and reciprocal are fixed-point approximations (Q5.26 input, a Taylor series around "
           "-1/8 and a Newton reciprocal); measured within 1 LSB of the float softmax on every case"),
}


def tolerance(op: str, backend: str | None = None) -> Tolerance:
    """An operator's tolerance on a core of CMSIS-NN variant `backend`; an operator not listed
    moves or selects values and must be exact."""
    return TOLERANCES.get(op, Tolerance(0, "moves or selects values without rescaling them")).on(backend)


def departures(semantic: dict) -> list[tuple[str, str]]:
    """(line, details) for every point and output of a sidecar's `semantic` record that is
    outside its tolerance, the outputs' signature first."""
    lines = [(line, "") for line in signature_mismatches(semantic)]
    for index, point in enumerate(semantic.get("points", [])):
        allowed = point_tolerance(point, semantic.get("backend"))
        if point.get("shape_mismatch"):
            lines.append((f"{_where(point)}: {point['shape_mismatch']}{_by_shape(semantic)}", ""))
        elif point["max_lsb"] > allowed:
            first = point.get("first") or {}
            at = (f"; first at {first['index']}: program {first['program']:g}, model {first['model']:g}"
                  if first else "")
            mechanism = f"; {point['explained']}" if point.get("explained") else ""
            lines.append((f"{_where(point)} departs from the quantized model: {point['differ']} of "
                          f"{point['elements']} elements differ, up to {point['max_lsb']:g} LSB > {allowed} LSB "
                          f"allowed{at}{mechanism}{_unmatched_before(semantic, index)}{_quantization(point)}"
                          f"{_by_shape(semantic)}",
                          _details(point)))
    return lines


def point_tolerance(point: dict, backend: str | None) -> int:
    """LSB a point may depart by: its call's operator's; none for a view of a call's value (the
    program does not requantize it; where the model does, the program lost that)."""
    if point.get("view") or not point.get("op"):
        return 0
    return tolerance(point["op"], backend).lsb


def signature_mismatches(semantic: dict) -> list[str]:
    """Each program output whose shape or dtype is not the model's (its graph before the
    cortex_m passes), or whose memory layout is neither the graph's nor eager torch's (they
    differ where the input's layout is ambiguous: one channel, a size-1 dim)."""
    lines = []
    eager = semantic.get("eager_dim_orders") or []
    for k, (ours, model) in enumerate(zip(semantic.get("program_outputs", []), semantic.get("model_outputs", []), strict=False)):
        if model is None:  # not a tensor in the model's graph
            continue
        layouts = [model["dim_order"], *(eager[k] if k < len(eager) else [])]
        if ours["shape"] != model["shape"] or ours["dtype"] != model["dtype"]:
            lines.append(f"output {k} is {ours['dtype']}{ours['shape']}, the model's is {model['dtype']}{model['shape']}")
        elif not any(same_layout(ours["shape"], ours["dim_order"], layout) for layout in layouts):
            lines.append(f"output {k} has dim order {tuple(ours['dim_order'])}, the model's output "
                         f"{tuple(model['dim_order'])}")
    if len(semantic.get("program_outputs", [])) != len(semantic.get("model_outputs", [])):
        lines.append(f"the program has {len(semantic['program_outputs'])} outputs, the model "
                     f"{len(semantic['model_outputs'])}")
    return lines


def same_layout(shape: list[int], a: list[int], b: list[int]) -> bool:
    """Two dim orders lay a tensor of `shape` out alike: they order its dimensions of size
    more than 1 the same way (size-1 dims can go anywhere: ExecuTorch #22520)."""
    a = list(a) or list(range(len(shape)))
    b = list(b) or list(range(len(shape)))
    return [d for d in a if shape[d] > 1] == [d for d in b if shape[d] > 1]


def _unmatched_before(semantic: dict, index: int) -> str:
    """Where the departure may really start: a model value before this point that the program
    does not hold (no call made from its operators: a call dropped; matched by shape, no
    tensor of its shape: a call that computed the wrong shape shows only later)."""
    before = [u for u in semantic.get("unmapped", [])
              if isinstance(u, dict) and u["before_point"] <= index and not u.get("view_of")]
    if not before:
        return ""
    first = before[0]
    ops = ", ".join(first["model_ops"]) or "?"
    missing = "no tensor of its shape" if semantic.get("mapping", "shape") == "shape" else "no call of its own"
    return f"; before it, the model's {first['node']} ({ops}) {first['shape']} has {missing} in the program"


def _by_shape(semantic: dict) -> str:
    """The label of a point matched by the fallback: a bundle whose program records no provenance."""
    return "; matched by shape, the program records no provenance" if semantic.get("mapping") == "shape" else ""


def _where(point: dict) -> str:
    what = f"call {point['call']} {point['op']}" if point.get("call") is not None else point.get("op") or "a value"
    what = f"the view of {what}" if point.get("view") else what
    model = f" ({point['node']}: {', '.join(point['model_ops'])})" if point.get("model_ops") else f" ({point['node']})"
    return what + model


def _quantization(point: dict) -> str:
    """The call's quantization arguments beside the model's: the argument that differs shows."""
    args, model = point.get("call_args"), point.get("model_qparams")
    if not args or not model:
        return ""
    given = ", ".join(f"{name}={value:g}" for name, value in args.items()
                      if any(word in name for word in ("zero_point", "offset", "multiplier", "shift", "scale")))
    inputs = ", ".join(f"(scale {s:.6g}, zero point {z})" for s, z in model.get("inputs", []))
    out = model.get("output") or [None, None]
    return (f"; the call's arguments: {given or 'none'}; the model's quantization: inputs {inputs or 'none'}, "
            f"output (scale {out[0]:.6g}, zero point {out[1]})")


def _details(point: dict) -> str:
    worst = point.get("worst") or []
    return "\n".join(f"{_where(point)}{w['index']}: program {w['program']:g}, model {w['model']:g} ({w['lsb']:g} LSB)"
                     for w in worst)
