"""What a lowered program must compute, for its sidecar: the integer reference's outputs for the
core's CMSIS-NN variant (cortexm.oracle), ExecuTorch's Python reference where that cannot run,
the outputs without ExecuTorch's Helium loops, and the program judged against the quantized
model it was lowered from (cortexm.semantic). `lowered` is a cortexm.lowering.export.Lowered.
"""

from __future__ import annotations

import numpy as np

from cortexm.base.errors import CortexmError
from cortexm.base.targets import Core
from cortexm.lowering.modelsource import ModelBundle
from cortexm.lowering.stage import stage
from cortexm.pte.sidecar import Output


def reference(pte: bytes, bundle: ModelBundle, core: Core, lowered,
               trace: list) -> tuple[list, str, list | None]:
    """The program's outputs for the example inputs as cortexm's integer reference computes
    them for the core's CMSIS-NN variant (cortexm.oracle), which reference that is, and how
    ExecuTorch's Python reference differs from it call by call; `trace` gets every call's
    (instruction, operator, value index, returned value). Where the integer reference
    cannot evaluate the program, ExecuTorch's Python reference of the whole graph stands in
    and the kind says why."""
    from cortexm.oracle.reference import integer_reference

    def record(*call):
        trace.append(call)

    try:
        outputs, calls = integer_reference(pte, [t.detach().numpy() for t in bundle.example_inputs], core.backend,
                                           compare_upstream=True, trace=record)
    except CortexmError as e:
        trace.clear()
        upstream, kind = upstream_reference(bundle, core, lowered)
        return upstream, f"{kind}; the integer reference could not evaluate the program: {e}", None
    return outputs, f"cortexm integer reference (CMSIS-NN {core.backend})", calls


def without_helium(pte: bytes, bundle: ModelBundle, core: Core) -> list[str] | None:
    """Digests of the integer reference's outputs with the scalar loops in place of
    ExecuTorch's Helium ones (cortexm.oracle.helium), for a core that runs them."""
    from cortexm.oracle.backends import kernels_for
    from cortexm.oracle.reference import integer_reference
    from cortexm.pte.tensors import digests

    if kernels_for(core.backend) == kernels_for(core.backend, helium=False):
        return None
    outputs, _ = integer_reference(pte, [t.detach().numpy() for t in bundle.example_inputs], core.backend, helium=False)
    return digests(outputs)


def upstream_reference(bundle: ModelBundle, core: Core, lowered) -> tuple[list, str]:
    """Outputs of ExecuTorch's Python reference for the example inputs, and which one gave them.

    That is the lowered graph itself, whose cortex_m operators have Python
    implementations (ops/operators.py). Where one of those cannot run on the host
    (torch has no integer dilated convolution), the PT2E quantized model (float
    arithmetic between quantize/dequantize) stands in.
    """
    import torch

    try:
        with torch.no_grad():
            outputs = lowered.edge.exported_program().module()(*bundle.example_inputs)
        kind = "ExecuTorch's cortex_m Python reference (ops/operators.py)"
    except Exception as first:
        try:
            with torch.no_grad():
                outputs = lowered.quantized(*bundle.example_inputs)
        except Exception:
            with stage(bundle, core, "the Python reference"):
                raise first from None
        reason = (str(first).strip().splitlines() or [""])[0][:120]
        kind = f"pt2e quantized model (the cortex_m dialect reference failed: {type(first).__name__}: {reason})"
    outputs = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
    return outputs, kind


def semantic(bundle: ModelBundle, core: Core, lowered, plan, calls: list, reference: list,
              outputs_meta: list[Output], provenance: list[dict]):
    """The program against the model it was lowered from (cortexm.semantic), its points mapped
    to the calls by `provenance` (the sidecar's `calls`): the sidecar's `semantic` record, and
    the quantized model's outputs as the runner lays them out."""
    from cortexm.semantic.model import judge_trace

    record, model_outputs = judge_trace(
        lowered.quantized, lowered.float_module, bundle.example_inputs, calls,
        [np.asarray(r.detach().numpy() if hasattr(r, "detach") else r) for r in reference],
        plan.outputs, [e.quant.scale if e.quant else None for e in outputs_meta], core.backend, provenance)
    _call_arguments(record["points"], plan)
    record["program_outputs"] = [{"shape": list(e.shape), "dtype": e.dtype, "dim_order": list(e.dim_order)}
                                 for e in outputs_meta]
    record["model_outputs"] = lowered.signature
    raw = [laid_out(m, e.dim_order) if tuple(m.shape) == e.shape else b""
           for m, e in zip(model_outputs, outputs_meta, strict=False)]
    record["models"] = {kind: f"{bundle.name}.{kind}.pt2" for kind in lowered.models}
    record["outputs"] = [f"{bundle.name}.model-{k}.bin" if data else None for k, data in enumerate(raw)]
    return record, raw


def _call_arguments(points: list[dict], plan) -> None:
    """Each point's call's scalar arguments by name (zero points, multipliers, shifts): a
    departure names the one that differs from the model's quantization."""
    from cortexm.checking import library

    calls = {n: (op, call) for n, op, call in plan.kernel_calls()}
    for point in points:
        op, call = calls.get(point.get("call"), (None, None))
        names = library.arguments_for(op.qualified_name, len(call.args), library.installed()) if call else None
        if names:
            point["call_args"] = {name: plan.values[index] for name, index in zip(names, call.args, strict=False)
                                  if isinstance(plan.values[index], (int, float)) and not isinstance(plan.values[index], bool)}


def laid_out(tensor, dim_order) -> bytes:
    """The tensor's (or array's) bytes laid out in `dim_order`, as the runtime reads and writes them."""
    from cortexm.pte.tensors import to_raw

    values = tensor.detach().contiguous().numpy() if hasattr(tensor, "detach") else np.asarray(tensor)
    return to_raw(values, dim_order)
