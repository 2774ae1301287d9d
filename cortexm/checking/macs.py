"""How many multiply-accumulates each convolution and linear call of a program does: what the
performance gate and the summary divide instructions by."""

from __future__ import annotations

from pathlib import Path

# Instructions per int8 MAC at the core's best multiply-accumulate instruction: two MACs per SMLAD
# (DSP), sixteen per VMLADAVA (MVE). No kernel does better; how near a call gets is its efficiency.
MAC_LIMIT = {"cortex-m4": 1 / 2, "cortex-m7": 1 / 2, "cortex-m33": 1 / 2, "cortex-m55": 1 / 16}


def call_macs(pte: Path) -> dict[int, int]:
    """Instruction index -> multiply-accumulates, for the program's conv, depthwise,
    transposed-conv and linear calls."""
    from cortexm.pte import load

    return plan_macs(load(pte).plan())


def plan_macs(plan) -> dict[int, int]:
    """call_macs of a parsed plan (cortexm.pte.program.ExecutionPlan)."""
    from cortexm.checking import library, scratch

    found: dict[int, int] = {}
    for n, op, call in plan.kernel_calls():
        name = op.qualified_name
        names = library.arguments_for(name, len(call.args), library.installed())
        if names is None:
            continue
        a = scratch.named_args(plan, call, list(names))
        if name == "cortex_m::quantized_conv2d.out":
            _, kh, kw, cin = a["weight"].sizes
            found[n] = a["out"].numel * kh * kw * cin
        elif name == "cortex_m::quantized_depthwise_conv2d.out":
            _, kh, kw, _ = a["weight"].sizes
            found[n] = a["out"].numel * kh * kw
        elif name == "cortex_m::quantized_transpose_conv2d.out":
            cout, kh, kw, _ = a["weight"].sizes
            found[n] = a["input"].numel * cout * kh * kw
        elif name == "cortex_m::quantized_linear.out":
            _, fin = a["weights"].sizes
            found[n] = a["out"].numel * fin
    return found
