"""How many multiply-accumulates each convolution and linear call of a program does: what the
performance gate and the summary divide instructions by."""

from __future__ import annotations

from pathlib import Path


def call_macs(pte: Path) -> dict[int, int]:
    """Instruction index -> multiply-accumulates, for the program's conv, depthwise,
    transposed-conv and linear calls."""
    from cortexm.checking import library, scratch
    from cortexm.pte import load

    plan, found = load(pte).plan(), {}
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
