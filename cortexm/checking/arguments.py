"""What CMSIS-NN refuses on a core: the argument checks of the functions a cortex_m call reaches.

A cortex_m kernel (ExecuTorch backends/cortex_m/ops/op_*.cpp) hands its call to a CMSIS-NN
entry (arm_convolve_wrapper_s8, arm_avgpool_s8, ...) that picks a function by the call's
shapes and parameters and by the code the core was built with: ARM_MATH_MVEI (MVE, the M55,
which has ARM_MATH_DSP too), ARM_MATH_DSP (the M7), neither (scalar, the M3). A function may
return an error status instead of computing (ARM_CMSIS_NN_ARG_ERROR -1, ARM_CMSIS_NN_FAILURE
-3); the kernel logs `... failed with status N`, and the run stops naming no module.

`decide(op, args, backend)` walks that path from the values a .pte records, mapped to CMSIS-NN's
dims and parameters as the kernel maps them, and returns the functions entered and the first
refusal. Each condition on the path is a `Check` naming the CMSIS-NN file and function it is from
and quoting it as the source writes it (CMSIS-NN dbf45dbf, ExecuTorch's pin at cff6f4dd), with C's
arithmetic: `%` and `/` truncate, dims the function keeps in uint16_t wrap. tests/checking/test_arguments.py
finds every quote in the CMSIS-NN tree and runs that CMSIS-NN, built for the M55, M7 and M3, on
QEMU over a grid of calls: the statuses and paths are these.

Not walked here: quantized_linear and quantized_batch_matmul, whose only checks are a missing
buffer on MVE (arm_fully_connected_s8, arm_batch_matmul_s8: `ctx->buf == NULL`), which the
kernel_sum and scratch audits of cortexm.checking.verify already name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cortexm.checking.library import Library
from cortexm.checking.scratch import CallArguments, ScratchError, named_args
from cortexm.pte.program import ExecutionPlan, KernelCall

STATUS_NAMES = {-1: "ARM_CMSIS_NN_ARG_ERROR", -2: "ARM_CMSIS_NN_NO_IMPL_ERROR", -3: "ARM_CMSIS_NN_FAILURE"}
ARG_ERROR, FAILURE = -1, -3

CONV = "Source/ConvolutionFunctions/"
POOL = "Source/PoolingFunctions/"
SUPPORT = "Include/arm_nnsupportfunctions.h"


@dataclass(frozen=True)
class Check:
    """A condition of CMSIS-NN's code, quoted as its source writes it."""

    file: str  # in the CMSIS-NN tree
    function: str
    condition: str
    status: int | None = None  # what the function returns when it holds; None: it chooses a path


CHECKS: list[Check] = []  # every quote below, in the order of the code


def _check(file: str, function: str, condition: str, status: int | None = None) -> Check:
    check = Check(file, function, condition, status)
    CHECKS.append(check)
    return check


# The constants the checks read, quoted too. The threshold is GCC's (ArmClang's is 8): the runner is built with GCC.
_check(SUPPORT, "CONVERT_DW_CONV_WITH_ONE_INPUT_CH_AND_OUTPUT_CH_ABOVE_THRESHOLD",
       "#else #define CONVERT_DW_CONV_WITH_ONE_INPUT_CH_AND_OUTPUT_CH_ABOVE_THRESHOLD (1)")
_check(SUPPORT, "REVERSE_TCOL_EFFICIENT_THRESHOLD", "#define REVERSE_TCOL_EFFICIENT_THRESHOLD (16)")
_check(SUPPORT, "CH_IN_BLOCK_MVE", "#define CH_IN_BLOCK_MVE (124)")
_check(CONV + "arm_depthwise_conv_get_buffer_sizes_s8.c", "arm_depthwise_conv_s8_opt_get_buffer_size_mve",
       "return (4 * CH_IN_BLOCK_MVE * filter_dims->w * filter_dims->h) * (int32_t)sizeof(int8_t);")
_check(CONV + "arm_depthwise_conv_get_buffer_sizes_s8.c", "arm_depthwise_conv_s8_opt_get_buffer_size_dsp",
       "return (input_dims->c * filter_dims->w * filter_dims->h) * sizeof(int16_t);")
_check(POOL + "arm_avgpool_get_buffer_sizes_s8.c", "arm_avgpool_s8_get_buffer_size_dsp", "return (ch_src * sizeof(int32_t));")
DW_TO_CONV_THRESHOLD, REVERSE_TCOL_EFFICIENT_THRESHOLD, CH_IN_BLOCK_MVE = 1, 16, 124


def _c_div(a: int, b: int) -> int:
    """C's integer division (toward zero); by zero, what a Cortex-M's SDIV gives: 0."""
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _c_rem(a: int, b: int) -> int:
    return a - _c_div(a, b) * b


def _u16(x: int) -> int:
    return x & 0xFFFF


@dataclass(frozen=True)
class Dims:
    n: int
    h: int
    w: int
    c: int


@dataclass(frozen=True)
class Pair:
    h: int
    w: int

    def __str__(self) -> str:
        return f"[{self.h}, {self.w}]"


@dataclass(frozen=True)
class Call:
    """One call in CMSIS-NN's terms: dims {n, h, w, c}, parameters per axis, whether each buffer is given."""

    input: Dims
    filter: Dims
    output: Dims
    padding: Pair
    stride: Pair
    dilation: Pair = Pair(1, 1)
    ch_mult: int = 1
    buffer: bool = True  # ctx->buf != NULL: the kernel passes NULL for an empty scratch tensor
    reverse_buffer: bool = True  # the transposed convolution's second context (output_scratch)


@dataclass(frozen=True)
class Refusal:
    function: str  # the CMSIS-NN function that returns the status
    check: Check
    parameter: str  # what of the call the check is about, in the kernel's terms
    why: str  # its values, and what the check makes of them

    @property
    def status(self) -> int:
        return self.check.status or 0

    def text(self, where: str) -> str:
        """`cortex-m55 (MVE) arm_convolve_1_x_n_s8 refuses it with status -3 (ARM_CMSIS_NN_FAILURE): padding ...`"""
        return (f"{where} {self.function} refuses it with status {self.status} ({STATUS_NAMES[self.status]}): "
                f"{self.parameter}: {self.why} [{self.check.file.rsplit('/', 1)[-1]}: {self.check.condition}]")


@dataclass
class Decision:
    path: list[str] = field(default_factory=list)  # CMSIS-NN functions entered, in order
    refusal: Refusal | None = None

    @property
    def status(self) -> int:
        return self.refusal.status if self.refusal else 0

    def enter(self, function: str) -> None:
        self.path.append(function)

    def refuse(self, function: str, check: Check, parameter: str, why: str) -> Decision:
        self.refusal = Refusal(function, check, parameter, why)
        return self


# --- convolution: Source/ConvolutionFunctions/arm_convolve_wrapper_s8.c and what it calls ------------------------

IS_1X1 = _check(SUPPORT, "arm_nn_is_convolve_1x1",
               "(conv_params->padding.w == 0) && (conv_params->padding.h == 0) && (filter_dims->w == 1) && "
               "(filter_dims->h == 1) && (conv_params->dilation.w == 1) && (conv_params->dilation.h == 1) && "
               "(input_dims->c == filter_dims->c)")
IS_1X1_FAST = _check(SUPPORT, "arm_nn_is_convolve_1x1_fast", "(conv_params->stride.w == 1) && (conv_params->stride.h == 1)")
IS_1_X_N = _check(SUPPORT, "arm_nn_is_convolve_1_x_n",
                 "(input_dims->h == 1) && (conv_params->dilation.w == 1) && (filter_dims->h == 1) && "
                 "((conv_params->stride.w * input_dims->c) % 4 == 0) && (input_dims->c == filter_dims->c)")
FAST_1X1_ARGS = _check(CONV + "arm_convolve_1x1_s8_fast.c", "arm_convolve_1x1_s8_fast",
                      "conv_params->padding.w != 0 || conv_params->padding.h != 0 || conv_params->stride.w != 1 || "
                      "conv_params->stride.h != 1", ARG_ERROR)
CONV_1X1_ARGS = _check(CONV + "arm_convolve_1x1_s8.c", "arm_convolve_1x1_s8",
                      "conv_params->padding.w != 0 || conv_params->padding.h != 0", ARG_ERROR)
CONV_1_X_N_ARGS = _check(CONV + "arm_convolve_1_x_n_s8.c", "arm_convolve_1_x_n_s8",
                        "(input_dims->h != 1) || conv_params->dilation.w != 1 || ctx->buf == NULL || "
                        "conv_params->stride.w == 0 || (conv_params->stride.w * input_dims->c % 4 != 0)", ARG_ERROR)
CONV_1_X_N_PADDING = _check(CONV + "arm_convolve_1_x_n_s8.c", "arm_convolve_1_x_n_s8",
                           "pad_x * 2 + asym_pad != total_pad", FAILURE)
CONV_1_X_N_FALLBACK = _check(CONV + "arm_convolve_1_x_n_s8.c", "arm_convolve_1_x_n_s8",
                            "right_pad_num + no_pad_num + left_pad_num != output_x")
CONV_1_X_N_START = _check(CONV + "arm_convolve_1_x_n_s8.c", "arm_convolve_1_x_n_s8", "input_start < 0", FAILURE)
CONV_1_X_N_ROWS = _check(CONV + "arm_convolve_1_x_n_s8.c", "arm_convolve_1_x_n_s8", "lhs_rows < 0", FAILURE)
CONVOLVE_BUFFER = _check(CONV + "arm_convolve_s8.c", "arm_convolve_s8", "ctx->buf == NULL", ARG_ERROR)
CONVOLVE_GROUPS = _check(CONV + "arm_convolve_s8.c", "arm_convolve_s8",
                        "input_ch % groups != 0 || output_ch % groups != 0", ARG_ERROR)


def convolve_wrapper(c: Call, backend: str, d: Decision) -> Decision:
    """arm_convolve_wrapper_s8: the same dispatch on every backend."""
    d.enter("arm_convolve_wrapper_s8")
    if (c.padding.w == 0 and c.padding.h == 0 and c.filter.w == 1 and c.filter.h == 1 and c.dilation.w == 1
            and c.dilation.h == 1 and c.input.c == c.filter.c):  # IS_1X1
        if c.stride.w == 1 and c.stride.h == 1:  # IS_1X1_FAST
            d.enter("arm_convolve_1x1_s8_fast")
            if c.padding.w != 0 or c.padding.h != 0 or c.stride.w != 1 or c.stride.h != 1:
                return d.refuse("arm_convolve_1x1_s8_fast", FAST_1X1_ARGS, "padding, stride", f"{c.padding}, {c.stride}")
            return d
        d.enter("arm_convolve_1x1_s8")
        if c.padding.w != 0 or c.padding.h != 0:
            return d.refuse("arm_convolve_1x1_s8", CONV_1X1_ARGS, "padding", str(c.padding))
        return d
    if (c.input.h == 1 and c.dilation.w == 1 and c.filter.h == 1 and _c_rem(c.stride.w * c.input.c, 4) == 0
            and c.input.c == c.filter.c):  # IS_1_X_N
        return convolve_1_x_n(c, backend, d)
    return convolve_s8(c, backend, d)


def convolve_1_x_n(c: Call, backend: str, d: Decision) -> Decision:
    d.enter("arm_convolve_1_x_n_s8")
    f = "arm_convolve_1_x_n_s8"
    if c.input.h != 1 or c.dilation.w != 1 or not c.buffer or c.stride.w == 0 or _c_rem(c.stride.w * c.input.c, 4) != 0:
        return d.refuse(f, CONV_1_X_N_ARGS, "scratch" if not c.buffer else "input, dilation, stride",
                        "none given (0 B)" if not c.buffer else f"height {c.input.h}, {c.dilation}, {c.stride}")
    if backend != "MVE":
        return convolve_s8(c, backend, d)
    pad_x, stride_x, output_x = c.padding.w, c.stride.w, c.output.w
    total_pad = (output_x - 1) * stride_x + c.filter.w - c.input.w
    asym_pad = _c_rem(total_pad, 2)
    if pad_x * 2 + asym_pad != total_pad:
        return d.refuse(f, CONV_1_X_N_PADDING, f"padding {c.padding}",
                        f"width padding {pad_x}, where the 1xN path takes only {_c_div(total_pad, 2)}: half of "
                        f"(out_w {output_x} - 1) * stride_w {stride_x} + kernel_w {c.filter.w} - in_w {c.input.w} "
                        f"= {total_pad}, truncated")
    right_pad_num = max(1, _c_div(pad_x + asym_pad + stride_x - 1, stride_x)) if pad_x + asym_pad != 0 else 0
    left_pad_num = max(1, _c_div(pad_x + stride_x - 1, stride_x)) if pad_x != 0 else 0
    no_pad_num = max(output_x - (right_pad_num + left_pad_num), 0)
    if right_pad_num + no_pad_num + left_pad_num != output_x:  # CONV_1_X_N_FALLBACK
        return convolve_s8(c, backend, d)
    if c.input.n > 0:  # checked in the loop over the batch
        if stride_x * left_pad_num - pad_x < 0:
            return d.refuse(f, CONV_1_X_N_START, f"padding {c.padding}", f"stride_w {stride_x}")
        if output_x - (left_pad_num + no_pad_num) < 0:
            return d.refuse(f, CONV_1_X_N_ROWS, f"padding {c.padding}", f"output width {output_x}")
    return d


def convolve_s8(c: Call, backend: str, d: Decision) -> Decision:
    """arm_convolve_s8, which keeps the channel counts in uint16_t. (Its NO_IMPL return needs a NULL from
    arm_nn_mat_mult_kernel_s8_s16, which returns one only where ARM_MATH_MVEI does not call it.)"""
    d.enter("arm_convolve_s8")
    if not c.buffer:
        return d.refuse("arm_convolve_s8", CONVOLVE_BUFFER, "scratch", "none given (0 B)")
    input_ch, kernel_ch, output_ch = _u16(c.input.c), _u16(c.filter.c), _u16(c.output.c)
    groups = _c_div(input_ch, kernel_ch)
    if _c_rem(input_ch, groups) != 0 or _c_rem(output_ch, groups) != 0:
        return d.refuse("arm_convolve_s8", CONVOLVE_GROUPS, "input, weight, out channels",
                        f"{input_ch} input channels in groups of {kernel_ch} ({groups} groups), {output_ch} outputs")
    return d


# --- depthwise: arm_depthwise_conv_wrapper_s8.c and what it calls ------------------------------------------------

DW_TO_CONV = _check(CONV + "arm_depthwise_conv_wrapper_s8.c", "arm_depthwise_conv_wrapper_s8",
                   "input_dims->c == 1 && output_dims->c > CONVERT_DW_CONV_WITH_ONE_INPUT_CH_AND_OUTPUT_CH_ABOVE_THRESHOLD")
DW_OPT = _check(CONV + "arm_depthwise_conv_wrapper_s8.c", "arm_depthwise_conv_wrapper_s8",
               "1 == dw_conv_params->ch_mult && input_dims->n == 1 && dw_conv_params->dilation.w == 1 && "
               "dw_conv_params->dilation.h == 1")
DW_3X3 = _check(CONV + "arm_depthwise_conv_wrapper_s8.c", "arm_depthwise_conv_wrapper_s8",
               "filter_dims->w == 3 && filter_dims->h == 3 && dw_conv_params->padding.h <= 1 && "
               "dw_conv_params->padding.w <= 1")
DW_3X3_CHANNELS = _check(CONV + "arm_depthwise_conv_3x3_s8.c", "arm_depthwise_conv_3x3_s8", "input_ch != output_ch",
                        ARG_ERROR)
DW_3X3_SHAPE = _check(CONV + "arm_depthwise_conv_3x3_s8.c", "arm_depthwise_conv_3x3_s8",
                     "pad_x > 1 || filter_dims->w != 3 || filter_dims->h != 3", ARG_ERROR)
DW_OPT_CHANNELS = _check(CONV + "arm_depthwise_conv_s8_opt.c", "arm_depthwise_conv_s8_opt", "input_ch != output_ch",
                        ARG_ERROR)
DW_OPT_BUFFER = _check(CONV + "arm_depthwise_conv_s8_opt.c", "arm_depthwise_conv_s8_opt",
                      "ctx->buf == NULL && arm_depthwise_conv_s8_opt_get_buffer_size(input_dims, filter_dims) > 0",
                      ARG_ERROR)


def depthwise_wrapper(c: Call, backend: str, d: Decision) -> Decision:
    d.enter("arm_depthwise_conv_wrapper_s8")
    if backend == "MVE" and c.input.c == 1 and c.output.c > DW_TO_CONV_THRESHOLD:  # DW_TO_CONV
        # arm_depthwise_conv_to_conv_s8: the filter transposed (arm_transpose_s8, 4 dims, a valid
        # permutation: no refusal), then a regular convolution with the same context.
        d.enter("arm_transpose_s8")
        f = c.filter
        return convolve_wrapper(Call(c.input, Dims(f.c, f.h, f.w, f.n), c.output, c.padding, c.stride, c.dilation,
                                     buffer=c.buffer), backend, d)
    if c.ch_mult == 1 and c.input.n == 1 and c.dilation.w == 1 and c.dilation.h == 1:  # DW_OPT
        if backend != "MVE" and c.filter.w == 3 and c.filter.h == 3 and c.padding.h <= 1 and c.padding.w <= 1:
            d.enter("arm_depthwise_conv_3x3_s8")
            if c.input.c != c.output.c:
                return d.refuse("arm_depthwise_conv_3x3_s8", DW_3X3_CHANNELS, "depth_multiplier",
                                f"{c.input.c} input channels, {c.output.c} outputs")
            if c.padding.w > 1 or c.filter.w != 3 or c.filter.h != 3:
                return d.refuse("arm_depthwise_conv_3x3_s8", DW_3X3_SHAPE, "padding", str(c.padding))
            return d
        d.enter("arm_depthwise_conv_s8_opt")
        if c.input.c != c.output.c:
            return d.refuse("arm_depthwise_conv_s8_opt", DW_OPT_CHANNELS, "depth_multiplier",
                            f"{c.input.c} input channels, {c.output.c} outputs")
        if not c.buffer and _dw_opt_buffer_size(c, backend) > 0:
            return d.refuse("arm_depthwise_conv_s8_opt", DW_OPT_BUFFER, "scratch",
                            f"none given (0 B), {backend} needs {_dw_opt_buffer_size(c, backend)} B")
        if backend == "SCALAR":  # the reference code: arm_depthwise_conv_s8
            d.enter("arm_depthwise_conv_s8")
        return d
    d.enter("arm_depthwise_conv_s8")  # no checks
    return d


def _dw_opt_buffer_size(c: Call, backend: str) -> int:
    if backend == "MVE":
        return 4 * CH_IN_BLOCK_MVE * c.filter.w * c.filter.h
    return c.input.c * c.filter.w * c.filter.h * 2 if backend == "DSP" else 0


# --- transposed convolution: arm_transpose_conv_wrapper_s8.c ----------------------------------------------------

TCONV_BUFFER = _check(CONV + "arm_transpose_conv_wrapper_s8.c", "arm_transpose_conv_wrapper_s8", "ctx->buf == NULL",
                     ARG_ERROR)
TCONV_REVERSE = _check(CONV + "arm_transpose_conv_wrapper_s8.c", "arm_transpose_conv_wrapper_s8",
                      "((transpose_conv_params->stride.w <= 2) && (transpose_conv_params->stride.h <= 2))")
TCONV_REVERSE_EFFICIENT = _check(CONV + "arm_transpose_conv_wrapper_s8.c", "arm_transpose_conv_wrapper_s8",
                                "(input_dims->c > REVERSE_TCOL_EFFICIENT_THRESHOLD)")
TCONV_REVERSE_BUFFER = _check(CONV + "arm_transpose_conv_wrapper_s8.c", "arm_transpose_conv_wrapper_s8",
                             "reverse_conv_ctx->buf == NULL", ARG_ERROR)


def transpose_conv_wrapper(c: Call, backend: str, d: Decision) -> Decision:
    f = "arm_transpose_conv_wrapper_s8"
    d.enter(f)
    if not c.buffer:
        return d.refuse(f, TCONV_BUFFER, "scratch", "none given (0 B)")
    if c.stride.w <= 2 and c.stride.h <= 2 and c.input.c > REVERSE_TCOL_EFFICIENT_THRESHOLD:
        if not c.reverse_buffer:
            return d.refuse(f, TCONV_REVERSE_BUFFER, "output_scratch", "none given (0 B)")
        # The reverse convolution: arm_convolve_s8 over the input upscaled by the stride.
        reverse = Call(Dims(c.input.n, c.input.h * c.stride.h, c.input.w * c.stride.w, c.input.c), c.filter, c.output,
                       Pair(c.filter.h - 1 - c.padding.h, c.filter.w - 1 - c.padding.w), Pair(1, 1))
        return convolve_s8(reverse, backend, d)
    d.enter("arm_transpose_conv_s8")  # no checks
    return d


# --- pooling: Source/PoolingFunctions ---------------------------------------------------------------------------

AVGPOOL_BATCH = _check(POOL + "arm_avgpool_s8.c", "arm_avgpool_s8", "batch_cnt < 1", ARG_ERROR)
AVGPOOL_BUFFER = _check(POOL + "arm_avgpool_s8.c", "arm_avgpool_s8",
                       "ctx->buf == NULL && arm_avgpool_s8_get_buffer_size(output_dims->w, input_dims->c)", ARG_ERROR)
AVGPOOL_EMPTY_WINDOW = _check(POOL + "arm_avgpool_s8.c", "arm_avgpool_s8", "count == 0", ARG_ERROR)
MAXPOOL_BATCH = _check(POOL + "arm_max_pool_s8.c", "arm_max_pool_s8", "batch_cnt < 1", ARG_ERROR)


def avgpool(c: Call, backend: str, d: Decision) -> Decision:
    f = "arm_avgpool_s8"
    d.enter(f)
    if c.input.n < 1:
        return d.refuse(f, AVGPOOL_BATCH, "input", f"batch {c.input.n}")
    if backend == "DSP" and not c.buffer and c.input.c * 4 != 0:  # the scalar code needs no buffer, MVE's no check
        return d.refuse(f, AVGPOOL_BUFFER, "scratch", f"none given (0 B), DSP needs {c.input.c * 4} B")
    if c.input.c > 0 or backend == "DSP":  # the MVE and scalar code count per channel, DSP's per window
        for axis, size, out, k, s, p in (("height", c.input.h, c.output.h, c.filter.h, c.stride.h, c.padding.h),
                                         ("width", c.input.w, c.output.w, c.filter.w, c.stride.w, c.padding.w)):
            other = c.output.w if axis == "height" else c.output.h
            empty = [i for i in range(out) if min(i * s - p + k, size) <= max(0, i * s - p)] if other > 0 else []
            if empty:
                i = empty[0]
                return d.refuse(f, AVGPOOL_EMPTY_WINDOW, "kernel_size, stride, padding",
                                f"output {axis} index {i} pools input {'rows' if axis == 'height' else 'columns'} "
                                f"{i * s - p}..{i * s - p + k - 1}, none of "
                                f"0..{size - 1} (kernel {k}, stride {s}, padding {p}, {out} outputs)")
    return d


def maxpool(c: Call, backend: str, d: Decision) -> Decision:
    d.enter("arm_max_pool_s8")
    if c.input.n < 1:
        return d.refuse("arm_max_pool_s8", MAXPOOL_BATCH, "input", f"batch {c.input.n}")
    return d


# --- the cortex_m kernels' mapping (ExecuTorch backends/cortex_m/ops) -------------------------------------------

def _dims(a: CallArguments, name: str, nhwc: bool) -> Dims:
    n, h, w, c = a.nhwc(name, nhwc)
    return Dims(n, h, w, c)


def _pair(a: CallArguments, name: str, minimum: int) -> Pair:
    h, w = a.pair(name, minimum)
    return Pair(h, w)


def _given(a: CallArguments, name: str) -> bool:
    tensor = a.args.get(name)
    return getattr(tensor, "nbytes", 0) > 0


def _conv_call(a: CallArguments, nhwc: bool) -> Call:
    """op_quantized_conv2d.cpp: filter {weight.size(0..3)} (OHWI)."""
    return Call(_dims(a, "input", nhwc), Dims(*a.shape("weight", 4)), _dims(a, "out", nhwc), _pair(a, "padding", 0),
                _pair(a, "stride", 1), _pair(a, "dilation", 1), buffer=_given(a, "scratch"))


def _depthwise_call(a: CallArguments, nhwc: bool) -> Call:
    """op_quantized_depthwise_conv2d.cpp: filter {1, weight.size(1), weight.size(2), out channels}."""
    _, kh, kw, _ = a.shape("weight", 4)
    out = _dims(a, "out", nhwc)
    return Call(_dims(a, "input", nhwc), Dims(1, kh, kw, out.c), out, _pair(a, "padding", 0), _pair(a, "stride", 1),
                _pair(a, "dilation", 1), ch_mult=a.int32("depth_multiplier"), buffer=_given(a, "scratch"))


def _transpose_conv_call(a: CallArguments, nhwc: bool) -> Call:
    return Call(_dims(a, "input", nhwc), Dims(*a.shape("weight", 4)), _dims(a, "out", nhwc), _pair(a, "padding", 0),
                _pair(a, "stride", 1), _pair(a, "dilation", 1), buffer=_given(a, "scratch"),
                reverse_buffer=_given(a, "output_scratch"))


def _pool_call(a: CallArguments, nhwc: bool, scratch: bool) -> Call:
    """cortex_m_ops_common.h prepare_cmsis_pool2d_config: filter {1, kernel_h, kernel_w, 1}."""
    kernel = _pair(a, "kernel_size", 1)
    return Call(_dims(a, "input", nhwc), Dims(1, kernel.h, kernel.w, 1), _dims(a, "out", nhwc), _pair(a, "padding", 0),
                _pair(a, "stride", 1), buffer=scratch and _given(a, "scratch"))


def _avgpool_call(a: CallArguments, nhwc: bool) -> Call:
    return _pool_call(a, nhwc, True)


def _maxpool_call(a: CallArguments, nhwc: bool) -> Call:
    return _pool_call(a, nhwc, False)


Walk = Callable[[Call, str, Decision], Decision]
# operator base name -> (the kernel's mapping of its arguments to a Call, the CMSIS-NN entry it calls);
# the *_nhwc operators (the explicit layout) take NHWC-logical shapes.
_KERNELS: dict[str, tuple[Callable[[CallArguments, bool], Call], Walk]] = {
    "quantized_conv2d": (_conv_call, convolve_wrapper),
    "quantized_depthwise_conv2d": (_depthwise_call, depthwise_wrapper),
    "quantized_transpose_conv2d": (_transpose_conv_call, transpose_conv_wrapper),
    "quantized_avg_pool2d": (_avgpool_call, avgpool),
    "quantized_max_pool2d": (_maxpool_call, maxpool),
}


def _kernel(op_name: str) -> tuple[Callable[[CallArguments, bool], Call], Walk, bool] | None:
    """cortex_m::quantized_conv2d.out, cortex_m::quantized_conv2d_nhwc.out -> (mapping, entry, NHWC?)."""
    namespace, _, rest = op_name.partition("::")
    base = rest.removesuffix(".out")
    nhwc = base.endswith("_nhwc")
    found = _KERNELS.get(base.removesuffix("_nhwc")) if namespace == "cortex_m" and rest.endswith(".out") else None
    return (*found, nhwc) if found else None


def audited(op_name: str) -> bool:
    return _kernel(op_name) is not None


def walk(op_name: str, call: Call, backend: str) -> Decision:
    """The path CMSIS-NN built for `backend` (MVE, DSP, SCALAR) takes for `call`, and its refusal."""
    found = _kernel(op_name)
    assert found is not None, op_name
    return found[1](call, backend, Decision())


def decide(op_name: str, args: dict[str, Any], backend: str) -> Decision:
    """`walk` for a call of the program, its values by argument name (cortexm.checking.scratch.named_args).
    Arguments no kernel could take raise cortexm.checking.scratch.ScratchError (one line naming the argument)."""
    found = _kernel(op_name)
    assert found is not None, op_name
    to_call, entry, nhwc = found
    return entry(to_call(CallArguments(args), nhwc), backend, Decision())




def for_call(plan: ExecutionPlan, index: int, backend: str, exporter: Library | None = None) -> Decision | None:
    """The decision for instruction `index` of `plan` on `backend`; None when it is no call this module
    walks, its argument layout is unknown (`exporter`'s schemas, default the installed executorch's),
    or its arguments are ones no kernel could take (verify names those)."""
    from cortexm.checking import library

    call = plan.instructions[index] if 0 <= index < len(plan.instructions) else None
    if not isinstance(call, KernelCall) or not 0 <= call.op_index < len(plan.operators):
        return None
    op_name = plan.operators[call.op_index].qualified_name
    names = library.arguments_for(op_name, len(call.args), exporter or library.installed()) if audited(op_name) else None
    if names is None:
        return None
    try:
        return decide(op_name, named_args(plan, call, list(names)), backend)
    except ScratchError:
        return None
