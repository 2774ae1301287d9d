"""The scratch buffer each cortex_m operator call needs on a given CMSIS-NN backend.

ExecuTorch sizes scratch buffers ahead of time (passes/scratch_buffer_sizes.py)
for the backend it lowers for, and stores them in the .pte as planned tensors.
This module recomputes the need from what the .pte itself records (shapes,
stride, padding, offsets), so a program can be audited for a core it was not
lowered for. The sizes come from CMSIS-NN's own *_get_buffer_size functions
through the `cmsis_nn` Python module ExecuTorch ships.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cortexm.base.errors import CortexmError
from cortexm.pte.program import ExecutionPlan, KernelCall, TensorValue


@dataclass(frozen=True)
class ScratchNeed:
    argument: str  # "scratch" or "output_scratch"
    planned: int  # bytes of the tensor the program passes
    needed: int  # bytes CMSIS-NN needs on the audited backend


def cmsis_nn_module():
    """CMSIS-NN's buffer-size helpers: ExecuTorch's bundled build, else the `cmsis_nn` package."""
    import importlib

    from cortexm.sources import backend_source

    backend_source.activate_from_environment()

    for name in ("executorch.backends.cortex_m.library._cmsis_nn.cmsis_nn", "cmsis_nn"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise CortexmError(
        "the scratch audit needs CMSIS-NN's buffer-size helpers: install the executorch wheel (it bundles them)"
    )


class ScratchError(CortexmError):
    """A call whose arguments CMSIS-NN's buffer-size function cannot take, said in one line
    that names the argument or the function (a damaged program, or a lowering this audit
    does not know)."""


_INT32 = (-(1 << 31), (1 << 31) - 1)


def _shown(value: Any) -> str:
    """A value as a one-line message shows it: a tensor by its type and shape."""
    if isinstance(value, TensorValue):
        return f"a tensor {value.describe()}"
    if isinstance(value, tuple):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    return repr(value)


class CallArguments:
    """A call's arguments by name, each checked before it goes to CMSIS-NN: pybind11 would
    refuse a value outside int32 with a page of text, and CMSIS-NN divides by strides."""

    def __init__(self, args: dict[str, Any]) -> None:
        self.args = args

    def _get(self, name: str) -> Any:
        if name not in self.args:
            raise ScratchError(f"argument {name} is missing")
        return self.args[name]

    def shape(self, name: str, rank: int) -> list[int]:
        v = self._get(name)
        if not isinstance(v, TensorValue):
            raise ScratchError(f"argument {name} is {_shown(v)}, not a tensor")
        if len(v.sizes) != rank:
            raise ScratchError(f"argument {name} is {v.describe()}, expected rank {rank}")
        if any(not 0 <= s <= _INT32[1] for s in v.sizes):
            raise ScratchError(f"argument {name} has sizes {list(v.sizes)} outside 0..2^31-1")
        return list(v.sizes)

    def nhwc(self, name: str, nhwc: bool) -> list[int]:
        n, a, b, c = self.shape(name, 4)
        return [n, a, b, c] if nhwc else [n, b, c, a]

    def int32(self, name: str) -> int:
        v = self._get(name)
        if type(v) is not int or not _INT32[0] <= v <= _INT32[1]:
            raise ScratchError(f"argument {name} is {_shown(v)}, expected an int32")
        return v

    def pair(self, name: str, minimum: int) -> list[int]:
        v = self._get(name)
        if not isinstance(v, tuple) or len(v) != 2 or any(type(x) is not int for x in v):
            raise ScratchError(f"argument {name} is {_shown(v)}, expected two ints")
        if any(not minimum <= x <= _INT32[1] for x in v):
            raise ScratchError(f"argument {name} is {list(v)}, expected two ints from {minimum} to 2^31-1")
        return list(v)

    def conv_params(self) -> dict[str, Any]:
        return dict(
            padding_hw=self.pair("padding", 0), stride_hw=self.pair("stride", 1), dilation_hw=self.pair("dilation", 1),
            input_offset=self.int32("input_offset"), output_offset=self.int32("output_offset"),
            activation_min=self.int32("activation_min"), activation_max=self.int32("activation_max"),
        )


def _call(cm, function: str, backend, **kwargs) -> int:
    """cmsis_nn.`function`, A8W8, on `backend`: its size, or ScratchError in one line."""
    try:
        size = getattr(cm, function)(backend, cm.DataType.A8W8, **kwargs)
    except Exception as e:  # pybind11's TypeError lists every overload over many lines: its first sentence
        first = (str(e).strip().splitlines() or [type(e).__name__])[0].split(". ")[0]
        shown = ", ".join(f"{k}={_shown(v)}" for k, v in kwargs.items())
        raise ScratchError(f"cmsis_nn.{function} refused the arguments ({first}): {shown}") from None
    if not isinstance(size, int) or size < 0:
        shown = ", ".join(f"{k}={_shown(v)}" for k, v in kwargs.items())
        raise ScratchError(f"cmsis_nn.{function}({shown}) returned {size!r} B (an int32 overflow in CMSIS-NN)")
    return size


def _conv(cm, backend, a: CallArguments, nhwc: bool) -> list[int]:
    return [_call(
        cm, "convolve_wrapper_buffer_size", backend,
        input_nhwc=a.nhwc("input", nhwc), filter_nhwc=a.shape("weight", 4), output_nhwc=a.nhwc("out", nhwc),
        **a.conv_params(),
    )]


def _depthwise(cm, backend, a: CallArguments, nhwc: bool) -> list[int]:
    _, kh, kw, c_out = a.shape("weight", 4)  # IHWO after the backend's conversion
    return [_call(
        cm, "depthwise_conv_wrapper_buffer_size", backend,
        input_nhwc=a.nhwc("input", nhwc), filter_nhwc=[c_out, kh, kw, 1], output_nhwc=a.nhwc("out", nhwc),
        ch_mult=a.int32("depth_multiplier"), **a.conv_params(),
    )]


def _transpose_conv(cm, backend, a: CallArguments, nhwc: bool) -> list[int]:
    common = dict(input_nhwc=a.nhwc("input", nhwc), filter_nhwc=a.shape("weight", 4),
                  padding_offsets_hw=a.pair("output_padding", 0), **a.conv_params())
    return [
        _call(cm, "transpose_conv_buffer_size", backend, output_nhwc=a.nhwc("out", nhwc), **common),
        _call(cm, "transpose_conv_reverse_conv_buffer_size", backend, **common),
    ]


def _avg_pool(cm, backend, a: CallArguments, nhwc: bool) -> list[int]:
    return [_call(cm, "avgpool_buffer_size", backend, dim_dst_width=a.nhwc("out", nhwc)[2], ch_src=a.nhwc("input", nhwc)[3])]


def _batch_matmul(cm, backend, a: CallArguments, nhwc: bool) -> list[int]:
    _, rhs_cols, inner = a.shape("rhs_transposed", 3)
    return [_call(cm, "fully_connected_buffer_size", backend, filter_nhwc=[inner, -1, -1, rhs_cols])]


# operator -> (size function, NHWC-logical shapes?, the scratch arguments in order)
_SIZERS: dict[str, tuple[Callable, bool, tuple[str, ...]]] = {
    "cortex_m::quantized_conv2d.out": (_conv, False, ("scratch",)),
    "cortex_m::quantized_conv2d_nhwc.out": (_conv, True, ("scratch",)),
    "cortex_m::quantized_depthwise_conv2d.out": (_depthwise, False, ("scratch",)),
    "cortex_m::quantized_depthwise_conv2d_nhwc.out": (_depthwise, True, ("scratch",)),
    "cortex_m::quantized_transpose_conv2d.out": (_transpose_conv, False, ("scratch", "output_scratch")),
    "cortex_m::quantized_transpose_conv2d_nhwc.out": (_transpose_conv, True, ("scratch", "output_scratch")),
    "cortex_m::quantized_avg_pool2d.out": (_avg_pool, False, ("scratch",)),
    "cortex_m::quantized_avg_pool2d_nhwc.out": (_avg_pool, True, ("scratch",)),
    "cortex_m::quantized_batch_matmul.out": (_batch_matmul, False, ("scratch",)),
}


def has_scratch(op_name: str) -> bool:
    return op_name in _SIZERS


def named_args(plan: ExecutionPlan, call: KernelCall, arg_names: list[str]) -> dict[str, Any]:
    """The call's values by schema argument name (lists resolved)."""
    return {name: plan.resolve(index) for name, index in zip(arg_names, call.args, strict=False)}


def needs(op_name: str, args: dict[str, Any], backend_name: str) -> list[ScratchNeed]:
    """Planned vs needed scratch of one call, on backend `backend_name` (SCALAR/DSP/MVE).
    Arguments CMSIS-NN cannot take raise ScratchError, one line naming the argument or call."""
    sizer, nhwc, scratch_args = _SIZERS[op_name]
    cm = cmsis_nn_module()
    backend = getattr(cm.Backend, backend_name)
    sizes = sizer(cm, backend, CallArguments(args), nhwc)
    result = []
    for arg, needed in zip(scratch_args, sizes, strict=True):
        tensor = args.get(arg)
        planned = tensor.nbytes if isinstance(tensor, TensorValue) else 0
        result.append(ScratchNeed(arg, planned, int(needed)))
    return result
