"""The host CMSIS-NN the oracle is checked against: CMSIS-NN's C (scalar) and harness.c,
built once into a shared library, and each cortex_m kernel called through it with the
oracle's calling convention: `run(name, args, out) -> values in out's logical shape`.

The build is cached under the directory the caller gives, keyed by the CMSIS-NN tree's
path and git rev, this harness's source and the compiler flags.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from cortexm.oracle.tensor import Tensor, from_memory, memory

HARNESS = Path(__file__).with_name("harness.c")
CFLAGS = ["-O1", "-fPIC", "-std=c11", "-w"]  # scalar CMSIS-NN: neither ARM_MATH_DSP nor ARM_MATH_MVEI
FIXED_REV = "4a8f5b5d"  # CMSIS-NN's fix of arm_transpose_conv_s8 (#233)
FIXED_FILE = "Source/ConvolutionFunctions/arm_transpose_conv_s8.c"


def missing() -> str | None:
    """Why the host library cannot be built here, or None."""
    from cortexm import sources

    if sources.locate(sources.CMSIS_NN).path is None:
        return sources.missing_message(sources.CMSIS_NN)
    if shutil.which("gcc") is None:
        return "gcc not found (apt install gcc): the host CMSIS-NN build needs a C compiler"
    return None


def _fixed_source(tree: Path) -> str | None:
    """4a8f5b5d's arm_transpose_conv_s8.c, when the tree's git history has it."""
    out = subprocess.run(["git", "-C", str(tree), "show", f"{FIXED_REV}:{FIXED_FILE}"], capture_output=True, text=True)
    return out.stdout if out.returncode == 0 else None


def build(cache: Path) -> tuple[Path, bool]:
    """(the shared library, whether it holds 4a8f5b5d's arm_transpose_conv_s8), built on first use."""
    from cortexm import sources

    tree = sources.locate(sources.CMSIS_NN).path
    fixed = _fixed_source(tree)
    key = hashlib.sha256("\0".join([str(tree), sources.git_rev(tree) or "no-git", HARNESS.read_text(),
                                    " ".join(CFLAGS), fixed or ""]).encode()).hexdigest()[:16]
    library = cache / f"cmsis-nn-host-{key}.so"
    if library.exists():
        return library, fixed is not None
    work = cache / f"build-{key}"
    work.mkdir(parents=True, exist_ok=True)
    includes = ["-I", str(tree / "Include")]
    units = [(p, []) for p in sorted((tree / "Source").rglob("*.c")) if not any(s in p.name for s in ("_f16", "_f32", "flt"))]
    units.append((HARNESS, ["-DHAVE_TRANSPOSE_CONV_FIXED"] if fixed else []))
    if fixed:
        copy = work / "arm_transpose_conv_s8_fixed233.c"
        copy.write_text(fixed)
        units.append((copy, ["-Darm_transpose_conv_s8=arm_transpose_conv_s8_fixed233"]))

    def compile_one(unit):
        source, extra = unit
        obj = work / (hashlib.sha256(str(source).encode()).hexdigest()[:12] + ".o")
        subprocess.run(["gcc", *CFLAGS, *includes, *extra, "-c", str(source), "-o", str(obj)], check=True,
                       capture_output=True, text=True)
        return obj

    with ThreadPoolExecutor(max_workers=2) as pool:
        objects = list(pool.map(compile_one, units))
    partial = work / "lib.so"
    subprocess.run(["gcc", "-shared", "-o", str(partial), *map(str, objects), "-lm"], check=True, capture_output=True)
    os.replace(partial, library)
    shutil.rmtree(work, ignore_errors=True)
    return library, fixed is not None


class HostError(RuntimeError):
    """The C++ kernel would fail (returned status)."""


def _i64(values) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(values, dtype=np.int64).reshape(-1))


def _mem(t: Tensor | None, dtype=None):
    if t is None:
        return None
    m = memory(t)
    return np.ascontiguousarray(m if dtype is None else m.astype(dtype))


def _vector(value, dtype) -> np.ndarray:
    return np.ascontiguousarray((memory(value) if isinstance(value, Tensor) else np.asarray(value)).astype(dtype).reshape(-1))


class Host:
    """The harness library, and one method per cortex_m kernel (by the oracle's names)."""

    def __init__(self, library: Path, has_fixed: bool):
        self.lib = ctypes.CDLL(str(library))
        self.has_fixed = has_fixed

    # -- calling ---------------------------------------------------------------------------
    def _call(self, fn: str, *params) -> None:
        converted = []
        for p in params:
            if p is None:
                converted.append(ctypes.c_void_p(None))
            elif isinstance(p, np.ndarray):
                if not p.flags.c_contiguous:
                    raise ValueError("buffers must be contiguous")
                converted.append(ctypes.c_void_p(p.ctypes.data))
            elif isinstance(p, float):
                converted.append(ctypes.c_double(p))
            else:
                converted.append(ctypes.c_int64(int(p)))
        function = getattr(self.lib, fn)
        function.restype = ctypes.c_int
        status = function(*converted)
        if status != 0:
            raise HostError(f"{fn} returned {status}")

    def run(self, name: str, args: dict, out: Tensor) -> np.ndarray:
        """The values the kernel writes into `out` (starting from out's values), logical shape."""
        op = name.split("::")[-1]
        buffer = np.ascontiguousarray(memory(out).copy())
        getattr(self, "_" + op.removesuffix("_nhwc"))(args, buffer, out, op.endswith("_nhwc"))
        return from_memory(buffer, out)

    # -- kernels ---------------------------------------------------------------------------
    def _quantize_per_tensor(self, a, buf, out, nhwc):
        bits = 8 if str(a["dtype"]).endswith("int8") else 16
        x = _mem(a["input"], np.float32)
        self._call("h_quantize_per_tensor", x, x.size, float(a["scale"]), a["zero_point"], a["quant_min"],
                   a["quant_max"], bits, buf)

    def _dequantize_per_tensor(self, a, buf, out, nhwc):
        x = _mem(a["input"])
        self._call("h_dequantize_per_tensor", x, x.size, float(a["scale"]), a["zero_point"], 8 * x.itemsize, buf)

    def _quantized_add(self, a, buf, out, nhwc):
        s, o = a["self"], a["other"]
        self._call("h_quantized_add", _mem(s), _i64(s.shape), s.data.ndim, a["self_zero_point"], a["self_multiplier"],
                   a["self_shift"], _mem(o), _i64(o.shape), o.data.ndim, a["other_zero_point"], a["other_multiplier"],
                   a["other_shift"], a["output_zero_point"], a["output_multiplier"], a["output_shift"],
                   a["activation_min"], a["activation_max"], buf, _i64(out.shape), out.data.ndim)

    def _quantized_mul(self, a, buf, out, nhwc):
        s, o = a["self"], a["other"]
        self._call("h_quantized_mul", _mem(s), _i64(s.shape), s.data.ndim, a["self_zero_point"], _mem(o),
                   _i64(o.shape), o.data.ndim, a["other_zero_point"], a["output_zero_point"], a["output_multiplier"],
                   a["output_shift"], buf, _i64(out.shape), out.data.ndim)

    def _quantized_div(self, a, buf, out, nhwc):
        s = _mem(a["self"])
        self._call("h_quantized_div", s, a["self_zero_point"], _mem(a["other"]), a["other_zero_point"],
                   a["output_zero_point"], float(a["output_scale"]), 8 * s.itemsize, s.size, buf)

    def _quantized_activation(self, a, buf, out, nhwc):
        x = _mem(a["input"])
        self._call("h_quantized_activation", x, _mem(a["lut"]), x.size, buf)

    def _min_max(self, is_max, a, buf, out):
        s, o = a["self"], a["other"]
        self._call("h_min_max", is_max, _mem(s), _i64(s.shape), s.data.ndim, _mem(o), _i64(o.shape), o.data.ndim,
                   buf, _i64(out.shape), out.data.ndim)

    def _minimum(self, a, buf, out, nhwc):
        self._min_max(0, a, buf, out)

    def _maximum(self, a, buf, out, nhwc):
        self._min_max(1, a, buf, out)

    def _quantized_linear(self, a, buf, out, nhwc):
        x = a["input"]
        self._call("h_quantized_linear", _mem(x), _i64(x.shape), x.data.ndim, _mem(a["weights"]), _mem(a["bias"]),
                   _mem(a["kernel_sum"]), a["input_offset"], a["filter_offset"], a["output_offset"],
                   int(_vector(a["requantize_multipliers"], np.int64)[0]), int(_vector(a["requantize_shifts"], np.int64)[0]),
                   a["activation_max"], a["activation_min"], buf, out.shape[-1])

    def vector_sum(self, weights: np.ndarray, lhs_offset: int, rhs_offset: int, bias: np.ndarray | None) -> np.ndarray:
        """arm_vector_sum_s8 of weights [rows, cols]: the kernel_sum an MVE program carries."""
        rows, cols = weights.shape
        sums = np.zeros(rows, np.int32)
        self._call("h_vector_sum", sums, cols, rows, np.ascontiguousarray(weights), lhs_offset, rhs_offset,
                   None if bias is None else np.ascontiguousarray(bias, dtype=np.int32))
        return sums

    def _quantized_batch_matmul(self, a, buf, out, nhwc):
        lhs, rhs = a["lhs"], a["rhs_transposed"]
        self._call("h_quantized_batch_matmul", _mem(lhs), _i64(lhs.shape), a["lhs_zero_point"], _mem(rhs),
                   _i64(rhs.shape), a["rhs_zero_point"], a["output_zero_point"], a["output_multiplier"],
                   a["output_shift"], buf)

    def _softmax(self, a, buf, out, nhwc):
        x = a["input"]
        self._call("h_softmax", _mem(x), _i64(x.shape), x.data.ndim, a["dim"], a["output_zero_point"],
                   a["input_multiplier"], a["input_shift"], a["diff_min"], buf)

    def _transpose(self, a, buf, out, nhwc):
        x = a["input"]
        self._call("h_transpose", _mem(x), _i64(x.shape), _i64(out.shape), x.data.ndim, _i64(a["perm"]), buf)

    def _pad(self, a, buf, out, nhwc):
        x = a["input"]
        self._call("h_pad", _mem(x), _i64(x.shape), _i64(x.dim_order), x.data.ndim, _i64(a["pre_pad"]),
                   _i64(a["post_pad"]), a["pad_value"], buf)

    def _conv_common(self, a, out):
        x, w = a["input"], a["weight"]
        return (_mem(x), _i64(x.shape), _mem(w), _i64(w.shape), _mem(a["bias"], np.int32), _i64(out.shape),
                _i64(a["stride"]), _i64(a["padding"]))

    def _conv_tail(self, a):
        return (a["input_offset"], a["output_offset"], _vector(a["requantize_multipliers"], np.int32),
                _vector(a["requantize_shifts"], np.int32), a["activation_min"], a["activation_max"])

    def _quantized_conv2d(self, a, buf, out, nhwc):
        self._call("h_quantized_conv2d", int(nhwc), *self._conv_common(a, out), _i64(a["dilation"]),
                   *self._conv_tail(a), buf)

    def _quantized_depthwise_conv2d(self, a, buf, out, nhwc):
        self._call("h_quantized_depthwise_conv2d", int(nhwc), *self._conv_common(a, out), _i64(a["dilation"]),
                   a["depth_multiplier"], *self._conv_tail(a), buf)

    def transpose_conv(self, variant: int, a: dict, out: Tensor, nhwc: bool = False) -> np.ndarray:
        """variant 0: the wrapper (pinned CMSIS-NN); 1: 4a8f5b5d's arm_transpose_conv_s8."""
        buf = np.ascontiguousarray(memory(out).copy())
        self._call("h_quantized_transpose_conv2d", variant, int(nhwc), *self._conv_common(a, out),
                   _i64(a["output_padding"]), _i64(a["dilation"]), *self._conv_tail(a), buf)
        return from_memory(buf, out)

    def _quantized_transpose_conv2d(self, a, buf, out, nhwc):
        buf[:] = memory(Tensor(self.transpose_conv(0, a, out, nhwc), out.dim_order))

    def _quantized_avg_pool2d(self, a, buf, out, nhwc):
        x = a["input"]
        self._call("h_quantized_avg_pool2d", int(nhwc), _mem(x), _i64(x.shape), _i64(a["kernel_size"]),
                   _i64(a["stride"]), _i64(a["padding"]), _i64(out.shape), buf)

    def _quantized_max_pool2d(self, a, buf, out, nhwc):
        x = a["input"]
        self._call("h_quantized_max_pool2d", int(nhwc), _mem(x), _i64(x.shape), _i64(a["kernel_size"]),
                   _i64(a["stride"]), _i64(a["padding"]), a["activation_min"], a["activation_max"], _i64(out.shape), buf)
