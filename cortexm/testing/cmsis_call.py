"""One failing kernel call as a C program that calls CMSIS-NN directly: the reproducer a
CMSIS-NN maintainer can run without ExecuTorch.

What enters: a program (.pte), its input, the CMSIS-NN variant of the core, and the index of
the call (a convolution, depthwise or transposed convolution, average or max pool). The call is
evaluated in cortexm's integer reference up to that instruction (cortexm.oracle), which gives
its arguments as the kernel receives them (the input that reached it, the program's weights,
bias, multipliers, shifts, scratch sizes) and the output CMSIS-NN is tested to compute.

What leaves: a C file that fills CMSIS-NN's dims and parameter structs as the cortex_m kernel
does (backends/cortex_m/ops/op_quantized_*.cpp at cff6f4dd), calls the same CMSIS-NN entry, and
prints one line per finding: the status, bytes written past the output or a scratch buffer
(each followed by a guard), a scratch size other than CMSIS-NN's own `*_get_buffer_size` (the
kernel's CORTEX_M_ENABLE_RUNTIME_CHECKS refuses the call then), outputs that differ from the
reference. It ends with `PASS` or `FAIL` and exits 0 or 1. `run` builds it for a core
(cortexm.firmware.cmsis_call) and runs it on the core's simulator; any C compiler with
CMSIS-NN's Include and Source builds it for a host.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cortexm.base.errors import CortexmError

GUARD = 64  # bytes after each buffer the call writes, filled with FILL and checked after it
FILL = 0xA5


@dataclass
class Captured:
    op: str  # "cortex_m::quantized_conv2d"
    args: dict[str, Any]  # cortexm.oracle's form: Tensors and Python values, by schema name
    expected: np.ndarray  # the reference's output, in memory order (what the C compares bytes with)
    out_shape: tuple[int, ...]


def _entry(op: str) -> str | None:
    name = op.split("::")[-1].split(".")[0]
    return {"quantized_conv2d": "conv", "quantized_depthwise_conv2d": "depthwise",
            "quantized_transpose_conv2d": "transpose_conv", "quantized_avg_pool2d": "avgpool",
            "quantized_max_pool2d": "maxpool"}.get(name.removesuffix("_nhwc"))


def supports(op: str) -> bool:
    """Whether `op`'s kernel is one CMSIS-NN call this module writes as C."""
    return _entry(op) is not None


def capture(pte: Path, inputs: list[np.ndarray], backend: str, instruction: int) -> Captured:
    """Call `instruction` of `pte` run on `inputs` (logical layout) in the integer reference of
    `backend` ("DSP", "MVE", "SCALAR"): its arguments and the output the reference gives."""
    from cortexm.oracle.backends import kernels_for
    from cortexm.oracle.reference import evaluate
    from cortexm.oracle.tensor import memory

    seen: dict[str, Any] = {}
    found: list[Captured] = []

    def observe(name, args, out, result):
        seen.update(name=name, args=copy.deepcopy(args), out=copy.deepcopy(out), result=np.array(result, copy=True))

    def trace(n, name, index, value):
        if n == instruction and seen.get("name") == name and not found:
            out = seen["out"]
            out.data = np.asarray(seen["result"]).astype(out.data.dtype)
            found.append(Captured(name, seen["args"], memory(out), tuple(out.shape)))

    evaluate(pte, inputs, kernels=kernels_for(backend), observe=observe, trace=trace)
    if not found:
        raise CortexmError(f"{Path(pte).name}: instruction {instruction} is no call of the integer reference")
    return found[0]


_GUARDS = {"MVE": "defined(ARM_MATH_MVEI)", "DSP": "defined(ARM_MATH_DSP)"}  # MVE first: the M55 has both


def _literal(values) -> str:
    numbers = [int(v) for v in np.asarray(values).reshape(-1)]
    rows = [", ".join(str(v) for v in numbers[i:i + 16]) for i in range(0, len(numbers), 16)]
    return "{\n    " + ",\n    ".join(rows) + "\n}"


def _by_variant(definitions: dict[str, str]) -> str:
    """One definition, or one per CMSIS-NN variant where the cores' programs differ: MVE and DSP
    by CMSIS-NN's own macros, the rest (scalar, a host) in #else."""
    texts = list(dict.fromkeys(definitions.values()))
    if len(texts) == 1:
        return texts[0]
    branches = [(guard, definitions[b]) for b, guard in _GUARDS.items() if b in definitions]
    fallback = definitions.get("SCALAR") or next(iter(definitions.values()))
    out = "".join(f"#{'if' if k == 0 else 'elif'} {guard}\n{text}" for k, (guard, text) in enumerate(branches))
    return out + f"#else\n{fallback}#endif\n"


def _const_array(ctype: str, name: str, per_variant: dict[str, np.ndarray], const: bool = True) -> str:
    keyword = "static const" if const else "static"
    return _by_variant({b: f"{keyword} {ctype} {name}[{max(np.asarray(v).size, 1)}] = {_literal(v)};\n"
                        for b, v in per_variant.items()})


def _pair(values) -> tuple[int, int]:
    values = list(values)
    return int(values[0]), int(values[1])


def _bytes(call: Captured, name: str) -> int | None:
    value = call.args.get(name)
    return None if value is None else int(value.numel)


def c_source(calls: dict[str, Captured], header: str) -> str:
    """The C program of a call (see the module's docstring), from the call as each CMSIS-NN
    variant's program makes it (`calls`: backend -> Captured, the failing core's first). The
    variants may differ in the scratch the lowering planned and in the values that reach the
    call; the call itself (operator, shapes, parameters) must be the same."""
    from cortexm.oracle.tensor import flat
    from cortexm.oracle.window import dims

    first = next(iter(calls.values()))
    entry = _entry(first.op)
    size: str | None
    if entry is None:
        raise CortexmError(f"{first.op} is not one CMSIS-NN call: no C reproducer is written for it")
    shapes = {b: (c.op, c.out_shape, {k: (v.shape if hasattr(v, "shape") and k not in ("scratch", "output_scratch")
                                          else None if hasattr(v, "shape") else v) for k, v in c.args.items()})
              for b, c in calls.items()}
    if len({repr(v) for v in shapes.values()}) > 1:
        calls = {next(iter(calls)): first}  # the cores' calls differ beyond their values: the failing core's alone
    nhwc = first.op.endswith("_nhwc")
    a = first.args
    x = a["input"]
    n, h, w, c = dims(x, nhwc)
    out_dims = (first.out_shape if nhwc else (first.out_shape[0], first.out_shape[2], first.out_shape[3], first.out_shape[1]))
    on, oh, ow, oc = (int(v) for v in out_dims)
    out_bytes = int(np.prod(first.out_shape))
    has_scratch = "scratch" in a and a["scratch"] is not None
    reverse = entry == "transpose_conv"
    def each(argument: str) -> dict[str, np.ndarray]:
        """The argument's values as each variant's program passes them."""
        return {b: flat(k.args[argument]) for b, k in calls.items()}

    data = [_const_array("int8_t", "input_data", each("input")),
            _const_array("int8_t", "expected", {b: k.expected for b, k in calls.items()}),
            f"static int8_t output[{out_bytes + GUARD}] __attribute__((aligned(16)));\n"]
    comment = ("/* The scratch bytes each core's program passes (the lowering plans them per CMSIS-NN variant); "
               "-1: no program\n * was lowered for this variant: what CMSIS-NN's own buffer-size function asks. */\n")
    sizes = {b: f"#define SCRATCH_BYTES {_bytes(k, 'scratch') or 0}\n" for b, k in calls.items()}
    if reverse:
        sizes = {b: v + f"#define OUTPUT_SCRATCH_BYTES {_bytes(calls[b], 'output_scratch') or 0}\n" for b, v in sizes.items()}
    if has_scratch:
        unknown = "#define SCRATCH_BYTES -1\n" + ("#define OUTPUT_SCRATCH_BYTES -1\n" if reverse else "")
        sizes.setdefault("SCALAR", unknown)
        data.append(comment + _by_variant(sizes))
    lines: list[str] = []
    say = lines.append
    say(f"    const cmsis_nn_dims input_dims = {{{n}, {h}, {w}, {c}}};")
    say(f"    const cmsis_nn_dims output_dims = {{{on}, {oh}, {ow}, {oc}}};")
    if entry in ("conv", "depthwise", "transpose_conv"):
        weight = a["weight"]
        data.append(_const_array("int8_t", "filter_data", each("weight")))
        bias = a.get("bias")
        if bias is not None:
            data.append(_const_array("int32_t", "bias_data", each("bias")))
        data.append(_const_array("int32_t", "multipliers", each("requantize_multipliers"), const=False))
        data.append(_const_array("int32_t", "shifts", each("requantize_shifts"), const=False))
        fo, fh, fw, fi = (int(v) for v in weight.shape)
        if entry == "depthwise":
            say(f"    const cmsis_nn_dims filter_dims = {{1, {fh}, {fw}, {oc}}};")
        else:
            say(f"    const cmsis_nn_dims filter_dims = {{{fo}, {fh}, {fw}, {fi}}};")
        say(f"    const cmsis_nn_dims bias_dims = {{1, 1, 1, {oc}}};")
        say("    cmsis_nn_per_channel_quant_params quant_params = {multipliers, shifts};")
        params = {"conv": "cmsis_nn_conv_params", "depthwise": "cmsis_nn_dw_conv_params",
                  "transpose_conv": "cmsis_nn_transpose_conv_params"}[entry]
        say(f"    {params} params;")
        say("    memset(&params, 0, sizeof params);")
        say(f"    params.input_offset = {int(a['input_offset'])};")
        say(f"    params.output_offset = {int(a['output_offset'])};")
        if entry == "depthwise":
            say(f"    params.ch_mult = {int(a['depth_multiplier'])};")
        for field, key in (("stride", "stride"), ("padding", "padding"), ("dilation", "dilation")):
            vh, vw = _pair(a[key])
            say(f"    params.{field}.h = {vh};")
            say(f"    params.{field}.w = {vw};")
        if reverse:
            ph, pw = _pair(a["output_padding"])
            say(f"    params.padding_offsets.h = {ph};")
            say(f"    params.padding_offsets.w = {pw};")
        say(f"    params.activation.min = {int(a['activation_min'])};")
        say(f"    params.activation.max = {int(a['activation_max'])};")
        bias_arg = "bias_data" if bias is not None else "NULL"
        tail = f"&quant_params, &input_dims, input_data, &filter_dims, filter_data, &bias_dims, {bias_arg}, &output_dims, output"
        if entry == "conv":
            size = "arm_convolve_wrapper_s8_get_buffer_size(&params, &input_dims, &filter_dims, &output_dims)"
            function, call_args = "arm_convolve_wrapper_s8", f"&ctx, &params, {tail}"
        elif entry == "depthwise":
            size = "arm_depthwise_conv_wrapper_s8_get_buffer_size(&params, &input_dims, &filter_dims, &output_dims)"
            function, call_args = "arm_depthwise_conv_wrapper_s8", f"&ctx, &params, {tail}"
        else:
            size = "arm_transpose_conv_s8_get_buffer_size(&params, &input_dims, &filter_dims, &output_dims)"
            function, call_args = "arm_transpose_conv_wrapper_s8", f"&ctx, &reverse_ctx, &params, {tail}"
    else:
        kh, kw = _pair(a["kernel_size"])
        sh, sw = _pair(a["stride"])
        ph, pw = _pair(a["padding"])
        low, high = ((-128, 127) if entry == "avgpool" else (int(a["activation_min"]), int(a["activation_max"])))
        say(f"    const cmsis_nn_dims filter_dims = {{1, {kh}, {kw}, 1}};")
        say("    cmsis_nn_pool_params params;")
        say("    memset(&params, 0, sizeof params);")
        for field, (vh, vw) in (("stride", (sh, sw)), ("padding", (ph, pw))):
            say(f"    params.{field}.h = {vh};")
            say(f"    params.{field}.w = {vw};")
        say(f"    params.activation.min = {low};")
        say(f"    params.activation.max = {high};")
        tail = "&ctx, &params, &input_dims, input_data, &filter_dims, &output_dims, output"
        size = f"arm_avgpool_s8_get_buffer_size({ow}, {c})" if entry == "avgpool" else None  # max pool: no buffer
        function, call_args = ("arm_avgpool_s8" if entry == "avgpool" else "arm_max_pool_s8"), tail
    say("")
    say(f"    memset(output, {FILL:#x}, sizeof output);")
    buffers = []
    if has_scratch and size is not None:
        say(f"    const int32_t needed = {size};")
        say("    const int32_t given = SCRATCH_BYTES < 0 ? needed : SCRATCH_BYTES;")
        say("    if (needed != given) {")
        say(f'        printf("FAIL scratch: the program gives %ld B, {size.split("(")[0]} asks %ld B '
            '(the kernel\'s runtime check refuses the call)\\n", (long)given, (long)needed);')
        say("        failed = 1;")
        say("    }")
        say("    int8_t *scratch = guarded(given);")
        say("    cmsis_nn_context ctx = {given > 0 ? scratch : NULL, given};")
        buffers.append(("scratch", "given", "the scratch buffer"))
    else:
        say("    cmsis_nn_context ctx = {NULL, 0};")
    if reverse:
        say("    const int32_t reverse_needed = arm_transpose_conv_s8_get_reverse_conv_buffer_size("
            "&params, &input_dims, &filter_dims);")
        say("    const int32_t reverse_given = OUTPUT_SCRATCH_BYTES < 0 ? reverse_needed : OUTPUT_SCRATCH_BYTES;")
        say("    if (reverse_needed != reverse_given) {")
        say('        printf("FAIL output scratch: the program gives %ld B, '
            'arm_transpose_conv_s8_get_reverse_conv_buffer_size asks %ld B\\n", (long)reverse_given, (long)reverse_needed);')
        say("        failed = 1;")
        say("    }")
        say("    int8_t *output_scratch = guarded(reverse_given);")
        say("    cmsis_nn_context reverse_ctx = {reverse_given > 0 ? output_scratch : NULL, reverse_given};")
        buffers.append(("output_scratch", "reverse_given", "the output scratch buffer"))
    say(f"    const arm_cmsis_nn_status status = {function}({call_args});")
    say("    if (status != ARM_CMSIS_NN_SUCCESS) {")
    say(f'        printf("FAIL {function} returned status %d\\n", (int)status);')
    say("        failed = 1;")
    say("    }")
    say(f'    failed |= overrun(output, {out_bytes}, "the output");')
    for buffer, length, what in buffers:
        say(f'    failed |= overrun({buffer}, {length}, "{what}");')
    say("    if (status == ARM_CMSIS_NN_SUCCESS) {")
    say(f"        failed |= compare({on}, {oh}, {ow}, {oc});")
    say("    }")
    body = "\n".join(lines)
    comment = "\n".join(f" * {line}".rstrip() for line in header.replace("*/", "* /").splitlines())
    return f"""/*
{comment}
 *
 * {function} called as the cortex_m kernel calls it, with the arguments the program gives.
 * `expected` is cortexm's integer reference of the call (the integer semantics CMSIS-NN is
 * tested against); every buffer the call writes is followed by {GUARD} guard bytes.
 * Prints a line per finding, then PASS or FAIL; exits 0 or 1. With a CMSIS-NN tree, for the host
 * (CMSIS-NN's scalar code):
 *   cc -O2 -I CMSIS-NN/Include THIS.c \\
 *     $(find CMSIS-NN/Source -name '*.c' ! -name '*_f16.c' ! -name '*_f32.c') -lm
 * or, for a core, `cortexm reduce` builds and runs it on the simulator.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arm_nnfunctions.h"

#define GUARD {GUARD}

{"".join(data)}
/* `size` bytes and the guard after them, filled. */
static int8_t *guarded(int32_t size)
{{
    int8_t *buffer = malloc((size_t)(size > 0 ? size : 0) + GUARD + 16);
    if (buffer == NULL) {{
        printf("FAIL no memory for %ld bytes\\n", (long)size);
        exit(1);
    }}
    memset(buffer, {FILL:#x}, (size_t)(size > 0 ? size : 0) + GUARD);
    return buffer;
}}

/* Bytes written past `size`: the last guard byte that changed. */
static int overrun(const int8_t *buffer, int size, const char *what)
{{
    int last = -1;
    for (int i = 0; i < GUARD; i++) {{
        if ((uint8_t)buffer[size + i] != {FILL:#x}) {{
            last = i;
        }}
    }}
    if (last < 0) {{
        return 0;
    }}
    printf("FAIL wrote %d bytes past the end of %s (%d B)\\n", last + 1, what, size);
    return 1;
}}

/* The output against the reference, NHWC. */
static int compare(int n, int h, int w, int c)
{{
    int count = 0, unwritten = 0, largest = 0, first = -1;
    for (int i = 0; i < n * h * w * c; i++) {{
        const int difference = abs((int)output[i] - (int)expected[i]);
        if (difference != 0) {{
            count++;
            unwritten += (uint8_t)output[i] == {FILL:#x};
            largest = difference > largest ? difference : largest;
            first = first < 0 ? i : first;
        }}
    }}
    if (count == 0) {{
        return 0;
    }}
    printf("FAIL %d of %d outputs differ from the reference, by up to %d LSB (%d of them still hold the fill "
           "{FILL:#x}: never written); first at NHWC [%d, %d, %d, %d]: %d, expected %d\\n", count, n * h * w * c,
           largest, unwritten, first / (h * w * c), first / (w * c) % h, first / c % w, first % c, output[first],
           expected[first]);
    return 1;
}}

int main(void)
{{
    int failed = 0;
{body}
    printf(failed ? "FAIL\\n" : "PASS\\n");
    return failed;
}}
"""


@dataclass
class Outcome:
    core: str
    passed: bool
    lines: list[str]  # the program's FAIL lines

    def line(self) -> str:
        return "PASS" if self.passed else "FAIL " + "; ".join(x.removeprefix("FAIL ") for x in self.lines)


def outcome(core: str, log: str, exit_code: int | None) -> Outcome:
    """What the program printed, as a verdict; a program that ended without its last line failed."""
    printed = [line.strip() for line in log.splitlines()]
    finished = any(line in ("PASS", "FAIL") for line in printed)
    found = [line for line in printed if line.startswith("FAIL ")]
    if not finished:
        found.append(f"FAIL it did not finish (exit {exit_code}): {printed[-1] if printed else 'no output'}")
    return Outcome(core, finished and exit_code == 0 and not found, found)


def run(c_file: Path, core, cmsis_nn: Path, folder: Path, sim: str = "qemu", fvp: str | None = None,
        timeout: float = 300) -> Outcome:
    """`c_file` built for `core` (cortexm.firmware.cmsis_call) and run on its simulator in `folder`."""
    from cortexm import sim as simulators
    from cortexm.firmware import cmsis_call as building

    simulator = simulators.for_core(core, sim, fvp)
    elf = building.build(c_file, core, simulator.board(core), cmsis_nn)
    folder.mkdir(parents=True, exist_ok=True)
    result = simulator.run(elf, core, folder, ["cmsis_call"], timeout=timeout)
    return outcome(core.name, result.log, result.exit_code)
