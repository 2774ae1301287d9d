"""The scratch buffer each cortex_m operator call needs on a given CMSIS-NN backend.

ExecuTorch sizes scratch buffers ahead of time (passes/scratch_buffer_sizes.py)
for the backend it lowers for, and stores them in the .pte as planned tensors.
This module recomputes the need from what the .pte itself records (shapes,
stride, padding, offsets), so a program can be audited for a core it was not
lowered for. The sizes come from CMSIS-NN's own *_get_buffer_size functions
through the `cmsis_nn` Python module ExecuTorch ships.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from cortexm.errors import CortexmError
from cortexm.pte.program import ExecutionPlan, KernelCall, TensorValue


@dataclass(frozen=True)
class ScratchNeed:
    argument: str  # "scratch" or "output_scratch"
    planned: int  # bytes of the tensor the program passes
    needed: int  # bytes CMSIS-NN needs on the audited backend


def cmsis_nn_module():
    """CMSIS-NN's buffer-size helpers: ExecuTorch's bundled build, else the `cmsis_nn` package."""
    import importlib

    from cortexm import backend_source

    backend_source.activate_from_environment()

    for name in ("executorch.backends.cortex_m.library._cmsis_nn.cmsis_nn", "cmsis_nn"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise CortexmError(
        "the scratch audit needs CMSIS-NN's buffer-size helpers: install the executorch wheel (it bundles them)"
    )


def _shape(v: Any) -> list[int]:
    if not isinstance(v, TensorValue):
        raise ValueError("expected a tensor")
    return list(v.sizes)


def _nhwc(v: Any, nhwc: bool) -> list[int]:
    n, a, b, c = _shape(v)
    return [n, a, b, c] if nhwc else [n, b, c, a]


def _conv(cm, backend, a: dict, nhwc: bool) -> list[int]:
    return [cm.convolve_wrapper_buffer_size(
        backend, cm.DataType.A8W8,
        input_nhwc=_nhwc(a["input"], nhwc), filter_nhwc=_shape(a["weight"]), output_nhwc=_nhwc(a["out"], nhwc),
        padding_hw=list(a["padding"]), stride_hw=list(a["stride"]), dilation_hw=list(a["dilation"]),
        input_offset=a["input_offset"], output_offset=a["output_offset"],
        activation_min=a["activation_min"], activation_max=a["activation_max"],
    )]


def _depthwise(cm, backend, a: dict, nhwc: bool) -> list[int]:
    _, kh, kw, c_out = _shape(a["weight"])  # IHWO after the backend's conversion
    return [cm.depthwise_conv_wrapper_buffer_size(
        backend, cm.DataType.A8W8,
        input_nhwc=_nhwc(a["input"], nhwc), filter_nhwc=[c_out, kh, kw, 1], output_nhwc=_nhwc(a["out"], nhwc),
        padding_hw=list(a["padding"]), stride_hw=list(a["stride"]), dilation_hw=list(a["dilation"]),
        ch_mult=a["depth_multiplier"], input_offset=a["input_offset"], output_offset=a["output_offset"],
        activation_min=a["activation_min"], activation_max=a["activation_max"],
    )]


def _transpose_conv(cm, backend, a: dict, nhwc: bool) -> list[int]:
    common = dict(
        input_nhwc=_nhwc(a["input"], nhwc), filter_nhwc=_shape(a["weight"]),
        padding_hw=list(a["padding"]), stride_hw=list(a["stride"]), dilation_hw=list(a["dilation"]),
        padding_offsets_hw=list(a["output_padding"]), input_offset=a["input_offset"],
        output_offset=a["output_offset"], activation_min=a["activation_min"], activation_max=a["activation_max"],
    )
    return [
        cm.transpose_conv_buffer_size(backend, cm.DataType.A8W8, output_nhwc=_nhwc(a["out"], nhwc), **common),
        cm.transpose_conv_reverse_conv_buffer_size(backend, cm.DataType.A8W8, **common),
    ]


def _avg_pool(cm, backend, a: dict, nhwc: bool) -> list[int]:
    return [cm.avgpool_buffer_size(
        backend, cm.DataType.A8W8, dim_dst_width=_nhwc(a["out"], nhwc)[2], ch_src=_nhwc(a["input"], nhwc)[3],
    )]


def _batch_matmul(cm, backend, a: dict, nhwc: bool) -> list[int]:
    _, rhs_cols, inner = _shape(a["rhs_transposed"])
    return [cm.fully_connected_buffer_size(backend, cm.DataType.A8W8, filter_nhwc=[inner, -1, -1, rhs_cols])]


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
    return {name: plan.resolve(index) for name, index in zip(arg_names, call.args)}


def needs(op_name: str, args: dict[str, Any], backend_name: str) -> list[ScratchNeed]:
    """Planned vs needed scratch of one call, on backend `backend_name` (SCALAR/DSP/MVE)."""
    sizer, nhwc, scratch_args = _SIZERS[op_name]
    cm = cmsis_nn_module()
    backend = getattr(cm.Backend, backend_name)
    try:
        sizes = sizer(cm, backend, args, nhwc)
    except (KeyError, ValueError, TypeError) as e:
        raise CortexmError(f"{op_name}: cannot compute scratch from the program's arguments ({e})") from None
    result = []
    for arg, needed in zip(scratch_args, sizes):
        tensor = args.get(arg)
        planned = tensor.nbytes if isinstance(tensor, TensorValue) else 0
        result.append(ScratchNeed(arg, planned, int(needed)))
    return result
