"""Where ExecuTorch's own Python reference (backends/cortex_m/ops/operators.py) departs
from what the kernels compute, each departure named, with the exact condition under
which it shows.

What enters: one kernel call (its arguments as cortexm.oracle takes them), the integer
reference's result and operators.py's result (or the exception it raised). What
leaves: how many elements differ, by how much, which named findings allow that, and how
many elements no finding allows.

upstream's tests compare the kernels with operators.py; cortexm compares them with its
integer reference and, call by call, operators.py with that reference. A difference a
finding here allows is a known finding about operators.py; any other is a failure: a
change to operators.py, or to cortexm's reference, that one of the two got wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from cortexm.oracle.tensor import CHANNELS_LAST, is_channels_last

Args = dict


@dataclass(frozen=True)
class Finding:
    name: str
    ops: tuple[str, ...]  # operator names without namespace
    what: str
    allows: Callable[[Args, np.ndarray, np.ndarray], np.ndarray] | None = None  # elements it may change
    raises_when: Callable[[Args], bool] | None = None  # calls where operators.py may raise instead


@dataclass
class CallDifference:
    op: str
    elements: int
    differ: int
    max_lsb: float
    findings: list[str]
    unexplained: int  # differing elements no finding allows (or 1 for an unexplained raise)
    note: str = ""

    def as_dict(self) -> dict:
        return {"op": self.op, "elements": self.elements, "differ": self.differ, "max_lsb": self.max_lsb,
                "findings": self.findings, "unexplained": self.unexplained, "note": self.note}


def lsb(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs(a.astype(np.float64) - b.astype(np.float64))


def _near_half_step(args: Args, a, b) -> np.ndarray:
    """|diff| == 1 where x / scale lies within 4 float32 ulps of a half step."""
    exact = args["input"].data.astype(np.float64) / args["scale"]
    distance = np.abs(exact - np.floor(exact) - 0.5)
    return (lsb(a, b) == 1) & (distance <= 4 * np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64))


def _quotient_tie(args: Args, a, b) -> np.ndarray:
    """|diff| == 1 where the kernel's float32 quotient * scale is exactly on a half step."""
    num = (args["self"].data.astype(np.int64) - args["self_zero_point"]).astype(np.float32)
    den = (args["other"].data.astype(np.int64) - args["other_zero_point"]).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.where(den != 0, num / np.where(den != 0, den, 1), 0).astype(np.float32) * np.float32(args["output_scale"])
    return (lsb(a, b) == 1) & (np.abs(value - np.trunc(value)) == 0.5)


def _rows_below_diff_min(args: Args, a, b) -> np.ndarray:
    x = args["input"].data.astype(np.int64)
    below = (x - x.max(axis=-1, keepdims=True)) < args["diff_min"]
    return np.broadcast_to(below.any(axis=-1, keepdims=True), x.shape)


def _pad_input_taken_as_nhwc(args: Args, a, b) -> np.ndarray:
    x = args["input"]
    return np.full(a.shape, is_channels_last(x) and x.dim_order != CHANNELS_LAST)


CONVS = ("quantized_conv2d", "quantized_conv2d_nhwc", "quantized_depthwise_conv2d", "quantized_depthwise_conv2d_nhwc")

FINDINGS: tuple[Finding, ...] = (
    Finding("avg pool averages in float", ("quantized_avg_pool2d", "quantized_avg_pool2d_nhwc"),
            "operators.py dequantizes, averages in float and requantizes; arm_avgpool_s8 divides the integer "
            "sum by the count, rounding half away from zero. Allowed: 1 LSB, anywhere.",
            allows=lambda args, a, b: lsb(a, b) <= 1),
    Finding("softmax ignores diff_min", ("softmax",),
            "operators.py takes a float softmax of the whole row; arm_softmax_s8 gives -128 to elements below "
            "diff_min and leaves them out of the sum. Allowed: every element of a row holding such an element.",
            allows=_rows_below_diff_min),
    Finding("quantize rounds a different inverse scale", ("quantize_per_tensor",),
            "operators.py multiplies by float32(1.0 / scale) (the inverse taken in double), the kernel by "
            "1.0f / (float)scale; the products round apart next to half steps. Allowed: 1 LSB where x / scale "
            "is within 4 float32 ulps of a half step.",
            allows=_near_half_step),
    Finding("div rounds half to even", ("quantized_div",),
            "operators.py rounds with torch.round (half to even), op_quantized_div.cpp with std::round (half away "
            "from zero). Allowed: 1 LSB where the float32 quotient * scale is exactly on a half step.",
            allows=_quotient_tie),
    Finding("rank-2 transpose ignores perm", ("transpose",),
            "arm_transpose_s8 swaps the two dimensions of a rank-2 tensor whatever perm says; operators.py "
            "permutes by perm. Allowed: everything, for rank 2 with perm [0, 1].",
            allows=lambda args, a, b: np.full(a.shape, args["input"].data.ndim == 2 and list(args["perm"]) == [0, 1])),
    Finding("pad takes an ambiguous input as NHWC", ("pad",),
            "op_pad.cpp reads an input with size(1) == 1 or H == W == 1 as NHWC (is_channels_last_tensor) even "
            "in the contiguous dim order, and pads memory in that order; operators.py pads the logical tensor. "
            "Allowed: everything, for such an input that is not channels_last.",
            allows=_pad_input_taken_as_nhwc),
    Finding("pad value outside int8", ("pad",),
            "op_pad.cpp passes (int8_t)pad_value; operators.py refuses a pad_value outside int8. Allowed: "
            "operators.py raising when pad_value is outside [-128, 127].",
            raises_when=lambda args: not -128 <= args["pad_value"] <= 127),
    Finding("max pool bounds outside int8", ("quantized_max_pool2d", "quantized_max_pool2d_nhwc"),
            "arm_max_pool_s8 clamps to int32 bounds and narrows; operators.py's clamp refuses bounds outside "
            "int8. Allowed: operators.py raising when activation_min or activation_max is outside [-128, 127].",
            raises_when=lambda args: not (-128 <= args["activation_min"] <= 127 and -128 <= args["activation_max"] <= 127)),
    Finding("max pool padding over half the kernel", ("quantized_max_pool2d", "quantized_max_pool2d_nhwc"),
            "arm_max_pool_s8 takes any padding (a window with no element keeps the output's memory); "
            "operators.py calls F.max_pool2d, which refuses padding > kernel / 2. Allowed: operators.py raising then.",
            raises_when=lambda args: any(p > k // 2 for p, k in zip(args["padding"], args["kernel_size"], strict=False))),
    Finding("dilated convolution not evaluable", CONVS,
            "operators.py calls F.conv2d on int32 tensors; torch has no integer dilated convolution on the CPU "
            "(slow_conv_dilated). Allowed: operators.py raising when dilation is not [1, 1].",
            raises_when=lambda args: list(args["dilation"]) != [1, 1]),
)


def findings_for(op: str) -> list[Finding]:
    short = op.split("::")[-1]
    return [f for f in FINDINGS if short in f.ops]


def compare_call(op: str, args: Args, ours: np.ndarray, theirs: np.ndarray | BaseException) -> CallDifference | None:
    """How operators.py's result of one call differs from the integer reference's; None when equal."""
    findings = findings_for(op)
    if isinstance(theirs, BaseException):
        allowing = [f.name for f in findings if f.raises_when and f.raises_when(args)]
        note = f"operators.py raised {type(theirs).__name__}: {(str(theirs).splitlines() or [''])[0][:160]}"
        return CallDifference(op, int(ours.size), 0, 0.0, allowing, 0 if allowing else 1, note)
    if ours.shape != theirs.shape:
        return CallDifference(op, int(ours.size), int(ours.size), float("inf"), [], int(ours.size),
                              f"operators.py gives shape {list(theirs.shape)}, the kernel {list(ours.shape)}")
    differ = lsb(ours, theirs) > 0
    if not differ.any():
        return None
    allowed = np.zeros(ours.shape, bool)
    names = []
    for f in findings:
        if f.allows:
            mask = f.allows(args, ours, theirs) & differ
            if mask.any():
                names.append(f.name)
            allowed |= mask
    return CallDifference(op, int(ours.size), int(differ.sum()), float(lsb(ours, theirs).max()), names,
                          int((differ & ~allowed).sum()))
