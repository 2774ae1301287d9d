"""Lowering coverage: which calls of a program are not cortex_m kernels, and why.

A model the Cortex-M quantizer did not fully take still exports, verifies and loads: the
operators it left run ExecuTorch's portable kernels, in float where nothing quantized them.
On a microcontroller that is the slow path and the large one, and a layout the CMSIS-NN
kernels do not expect fails only when it runs. This says, before anything runs, every call
that is not a cortex_m kernel, the model node it came from (the sidecar's `calls`, when
there is one), and why it was not lowered:

- its input is contiguous (NCHW): the cortex_m quantizer takes convolutions, pooling,
  softmax and broadcasts only in channels_last, so the legacy lowering leaves them;
- what the quantizer and the passes recorded of its model node (the sidecar's `quantizer` and
  `passes`, cortexm.checking.reasons): the quantizer did not annotate it, and why; a pass
  declined it, in the pass's own words; with the fix where one is known;
- else what the program shows: a dequantize feeds it, or its inputs are computed in float.

A compute operator (convolution, linear, matmul, pooling, softmax, elementwise arithmetic)
that computes in float is a failure of its own, stage `lowering`, unless the case expects it;
so is one that computes on int8 tensors without a cortex_m kernel: ExecuTorch's portable
kernels do not requantize, so its output is not the model's (only what commutes with a
monotone quantization, a max pool or a clamp, is exact on the integers). Data movement (views,
copies, concatenation) and integer clamps are listed, not failed. A program nothing quantized
(no quantize or dequantize, no sidecar saying it was) is a float program: a note, not a failure.
"""

from __future__ import annotations

from dataclasses import dataclass

from cortexm.checking.reasons import SCALAR_FIX, Records
from cortexm.pte.program import ExecutionPlan, TensorValue
from cortexm.pte.sidecar import Sidecar

# Operators whose work is arithmetic a CMSIS-NN kernel should do (aten base names).
COMPUTE = frozenset({
    "convolution", "conv2d", "linear", "addmm", "mm", "bmm", "matmul", "avg_pool2d", "max_pool2d",
    "max_pool2d_with_indices", "adaptive_avg_pool2d", "mean", "sum", "_softmax", "softmax", "_log_softmax",
    "add", "sub", "mul", "div", "rsub", "minimum", "maximum", "hardswish", "hardsigmoid", "sigmoid", "tanh",
    "gelu", "silu", "relu", "hardtanh", "clamp", "leaky_relu", "layer_norm", "native_layer_norm", "batch_norm",
    "_native_batch_norm_legit_no_training", "pow", "sqrt", "rsqrt", "exp",
})
# Of those, the ones exact on quantized integers: a monotone quantization commutes with them, so
# the portable kernel's result on int8 is the model's (the others need a requantization it lacks).
EXACT_ON_INTEGERS = frozenset({"max_pool2d", "max_pool2d_with_indices", "relu", "hardtanh", "clamp",
                               "minimum", "maximum"})
# Of those, the ones the cortex_m quantizer takes only in channels_last (its pattern checks).
LAYOUT_BOUND = frozenset({"convolution", "conv2d", "avg_pool2d", "max_pool2d", "max_pool2d_with_indices",
                          "adaptive_avg_pool2d", "_softmax", "softmax", "add", "mul"})
FLOATS = frozenset({"float32", "float64", "float16", "bfloat16"})
INTEGERS = frozenset({"int8", "uint8", "int16"})
CONTIGUOUS_4D = (0, 1, 2, 3)
QUANTIZE = "cortex_m::quantize_per_tensor"
DEQUANTIZE = "cortex_m::dequantize_per_tensor"
PORTABLE_ON_INTEGERS = ("ExecuTorch's portable kernel computes it on int8 without requantizing: its output is "
                        "not the model's")


@dataclass(frozen=True)
class LeftCall:
    """A call that is not a cortex_m kernel."""

    instruction: int
    op: str  # e.g. aten::convolution.out
    in_float: bool  # it reads or writes float tensors
    compute: bool  # a compute operator (COMPUTE)
    reason: str  # why it was not lowered ("" where it does not fail)
    node: str = ""  # the model node it came from (sidecar `calls`)
    module: str = ""  # the module that holds it
    source: str = ""  # file.py:LINE of the model's code
    on_integers: bool = False  # a compute operator not exact on integers, on integer tensors only

    @property
    def base(self) -> str:
        return base_name(self.op)

    @property
    def fails(self) -> bool:
        return self.compute and (self.in_float or self.on_integers)

    def where(self) -> str:
        """How a report names it: its module, else its model node, else the instruction."""
        return self.module or self.node or f"instruction {self.instruction}"

    def as_dict(self) -> dict:
        return {"instruction": self.instruction, "op": self.op, "in_float": self.in_float, "compute": self.compute,
                "on_integers": self.on_integers, "reason": self.reason, "node": self.node, "module": self.module,
                "source": self.source}


def base_name(op: str) -> str:
    """aten::convolution.out -> convolution."""
    return op.split("::", 1)[-1].split(".", 1)[0]


def survey(plan: ExecutionPlan, sidecar: Sidecar | None = None) -> tuple[int, int, list[LeftCall]]:
    """(kernel calls, cortex_m calls, every call that is not a cortex_m kernel)."""
    calls = plan.kernel_calls()
    provenance = {c.get("instruction"): c for c in (sidecar.calls if sidecar else None) or [] if isinstance(c, dict)}
    records = Records.of(sidecar.quantizer, sidecar.passes) if sidecar else None
    # value index -> (instruction, operator) that first wrote it (an out argument: the last)
    producer: dict[int, tuple[int, str]] = {}
    sources = {}  # instruction -> the value its first argument reads
    for n, op, call in calls:
        if call.args:
            producer.setdefault(call.args[-1], (n, op.qualified_name))
            sources[n] = call.args[0]
    contiguous_inputs = [k for k, index in enumerate(plan.inputs) if (tensor := _tensor(plan, index)) is not None
                         and tensor.dim_order == CONTIGUOUS_4D and len(tensor.sizes) == 4]
    legacy = sidecar is None or sidecar.layout == "legacy"
    left: list[LeftCall] = []
    lowered = 0
    for n, op, call in calls:
        name = op.qualified_name
        if op.namespace == "cortex_m":
            lowered += 1
            continue
        tensors = [t for t in (_tensor(plan, a) for a in call.args) if t is not None]
        in_float = any(t.dtype in FLOATS for t in tensors)
        compute = base_name(name) in COMPUTE
        on_integers = (compute and not in_float and base_name(name) not in EXACT_ON_INTEGERS
                       and any(t.dtype in INTEGERS for t in tensors))
        where = provenance.get(n) or {}
        node = str(where.get("node") or "")
        reason = ""
        if compute and (in_float or on_integers):
            # What computed this call's inputs: calls before it (a value may be written in place).
            before = {v: w for v, w in producer.items() if w[0] < n}
            reason = _reason(plan, name, call, before, sources, contiguous_inputs, legacy, records, node, on_integers)
            if on_integers:
                reason += f": {PORTABLE_ON_INTEGERS}"
        left.append(LeftCall(n, name, in_float, compute, reason, node, str(where.get("module") or ""),
                             str(where.get("source") or ""), on_integers))
    return len(calls), lowered, left


def _tensor(plan: ExecutionPlan, index: int) -> TensorValue | None:
    return plan.tensor(index) if 0 <= index < len(plan.values) else None


def _reason(plan: ExecutionPlan, name: str, call, producer: dict, sources: dict, contiguous_inputs: list[int],
            legacy: bool, records: Records | None, node: str, on_integers: bool = False) -> str:
    first = _tensor(plan, call.args[0]) if call.args else None
    if legacy and base_name(name) in LAYOUT_BOUND and first is not None and len(first.sizes) == 4 \
            and first.dim_order == CONTIGUOUS_4D and first.sizes[1] > 1:
        given = [f"input {k} ({tensor.describe()})" for k in contiguous_inputs
                 if (tensor := _tensor(plan, plan.inputs[k])) is not None]
        what = f"the model's {', '.join(given)} {'is' if len(given) == 1 else 'are'}" if given else "its input is"
        return (f"{what} contiguous (NCHW); the cortex_m quantizer takes convolutions, pooling, softmax and "
                "broadcasts only in channels_last: give the model channels_last inputs "
                "(x.to(memory_format=torch.channels_last); for one channel .contiguous(...) keeps NCHW strides)")
    told = records.reason(node, name) if records is not None and node else None
    scalar = _float_constant(plan, call, producer)
    if scalar:
        said = f"its operand {scalar} is a Python scalar, a float constant nothing quantizes: {SCALAR_FIX}"
        return f"{told}; {said}" if told else said
    if told:
        return told
    if on_integers:
        return "no cortex_m kernel took it"
    fed_by = [_through_data_movement(producer, sources, a) for a in call.args[:-1] if a in producer]
    if any(op.startswith(DEQUANTIZE) for _, op in filter(None, fed_by)):
        if records is not None and node and records.annotated(node):
            return "the quantizer annotated it, but no cortex_m pass replaced it with a kernel"
        return "a dequantize feeds it, but no cortex_m kernel took it"
    left_float = [f"{op} (instruction {n})" for n, op in filter(None, fed_by) if not op.startswith("cortex_m::")]
    if left_float:
        return f"its input is computed in float by {left_float[0]}, which was not lowered either"
    return "its inputs are float and nothing quantizes them"


def _float_constant(plan: ExecutionPlan, call, producer: dict) -> str | None:
    """A binary elementwise call's float operand that is a constant no call computes (a Python
    scalar made a tensor), described; None otherwise."""
    if len(call.args) < 3:
        return None
    for arg in call.args[:2]:
        tensor = _tensor(plan, arg)
        if tensor is not None and tensor.is_constant and tensor.dtype in FLOATS and arg not in producer \
                and 0 < len(tensor.sizes) and all(s == 1 for s in tensor.sizes):
            return f"const {tensor.describe()}"
    return None


def _through_data_movement(producer: dict, sources: dict, value: int, steps: int = 64) -> tuple[int, str] | None:
    """The call that computed `value`, looking through copies, views and layout changes (which
    compute nothing): what a dequantize feeding a layout change feeds."""
    found = producer.get(value)
    for _ in range(steps):
        if found is None or base_name(found[1]) in COMPUTE or found[1].startswith("cortex_m::"):
            return found
        source = sources.get(found[0])
        if source is None or source not in producer:
            return found
        found = producer[source]
    return found


def failure_lines(left: list[LeftCall], expected: dict[str, str] | None = None) -> list[str]:
    """The lines a case fails stage `lowering` with, one per kind: the compute operators left in
    float, and those left on int8 without a kernel, that the case does not expect (`expected`:
    operator base name -> why it may stay), grouped by operator, the first reason that names a fix."""
    failing = [c for c in left if c.fails and c.base not in (expected or {})]
    lines = []
    for kind, group in (("left in float", [c for c in failing if c.in_float]),
                        ("left on int8 without a cortex_m kernel", [c for c in failing if not c.in_float])):
        if group:
            lines.append(f"{kind}: {_grouped(group)}")
    return lines


def failure_line(left: list[LeftCall], expected: dict[str, str] | None = None) -> str | None:
    """failure_lines as one line (None: nothing fails)."""
    return "; ".join(failure_lines(left, expected)) or None


def _grouped(failing: list[LeftCall]) -> str:
    groups: dict[str, list[LeftCall]] = {}
    for c in failing:
        groups.setdefault(c.op, []).append(c)
    parts = []
    for op, group in groups.items():
        places = list(dict.fromkeys(c.where() for c in group))
        shown = ", ".join(places[:4]) + (f", ... ({len(places)} places)" if len(places) > 4 else "")
        parts.append(f"{len(group)} {op} ({shown})")
    reason = next((c.reason for c in failing if "channels_last" in c.reason or "fix:" in c.reason), failing[0].reason)
    return f"{'; '.join(parts)}: {reason}"


def float_program(plan: ExecutionPlan, sidecar: Sidecar | None = None) -> str | None:
    """The note for a program nothing quantized (no quantize or dequantize call, no cortex_m kernel,
    no sidecar: cortexm's export always quantizes), or None: such a model is meant to be float
    (upstream's Arduino AddModel), and its portable float calls are not a failed lowering."""
    if sidecar is not None:
        return None
    calls = plan.kernel_calls()
    if any(op.namespace == "cortex_m" or "quantize" in op.name for _, op, _ in calls):
        return None
    return (f"a float program: no call quantizes or dequantizes and no sidecar says it was quantized, so its "
            f"{len(calls)} {'call runs' if len(calls) == 1 else 'calls run'} ExecuTorch's portable kernels in float, "
            "as a model meant to be float does "
            "(cortexm export quantizes one for the CMSIS-NN kernels)")


def record(plan: ExecutionPlan, sidecar: Sidecar | None = None) -> dict:
    """The `lowering` record of a report: calls, the share lowered, every call left."""
    total, lowered, left = survey(plan, sidecar)
    return {"calls": total, "cortex_m": lowered, "left": [c.as_dict() for c in left]}
