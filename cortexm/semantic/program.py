"""Both references of an exported program for inputs other than its example ones.

What enters: a .pte with its sidecar (whose `semantic.models` name the quantized and the
float model the export saved), inputs in logical layout, the core's CMSIS-NN variant. What
leaves: the integer reference's outputs for those inputs, and the `semantic` record of the
program against the quantized model on them (cortexm.semantic.model), as an export
records it for its example inputs. Needs torch.
"""

from __future__ import annotations

import numpy as np

from cortexm.base.errors import CortexmError
from cortexm.pte.sidecar import Sidecar


def references(bundle, plan, inputs: list[np.ndarray], backend: str) -> tuple[list[np.ndarray], dict | None]:
    """(integer reference outputs, semantic record or None when the export saved no model) of
    the program of `bundle` (cortexm.pte.bundle.Bundle). The saved models are read as data
    (cortexm.pte.pt2), each checked against the bundle's manifest first."""
    from cortexm.oracle.reference import integer_reference
    from cortexm.semantic.model import judge_trace

    sidecar = bundle.sidecar
    models = (sidecar.semantic or {}).get("models") or {}
    if not isinstance(models, dict):
        raise CortexmError(f"{bundle.pte.with_suffix('.json').name}: its semantic.models is not a table of files")
    quantized = _load(bundle, models["quantized"]) if "quantized" in models else None
    floating = _load(bundle, models["float"]) if "float" in models and quantized is not None else None
    trace: list[tuple] = []
    outputs, _ = integer_reference(bundle.pte, inputs, backend, trace=lambda *call: trace.append(call))
    if quantized is None:
        return outputs, None
    record, _ = judge_trace(quantized, floating, _model_inputs(inputs, sidecar), trace, outputs, plan.outputs,
                            [e.quant.scale if e.quant else None for e in sidecar.outputs], backend,
                            sidecar.calls if isinstance(sidecar.calls, list) else None)
    for key in ("program_outputs", "model_outputs", "eager_dim_orders"):  # what the outputs must be does not depend on the inputs
        record[key] = (sidecar.semantic or {}).get(key, [])
    return outputs, record


def _load(bundle, name: str):
    """A model the export saved (torch.export), as a module to run: its bytes checked against
    the bundle's manifest, then as data, then given to torch."""
    from cortexm.pte import pt2
    from cortexm.sources.backend_source import quiet_lowering_imports

    data = bundle.read(name)
    pt2.check(data, name)
    quiet_lowering_imports()
    try:
        return pt2.load(data).module()
    except Exception as e:  # torch raises whatever its deserializer meets
        raise CortexmError(f"{name}: not a model torch can load ({type(e).__name__}); export the model again") from None


def _model_inputs(inputs: list[np.ndarray], sidecar: Sidecar) -> tuple:
    """The inputs as the model was exported with them: channels_last where the program's input is."""
    import torch

    tensors = []
    for x, entry in zip(inputs, sidecar.inputs, strict=False):
        t = torch.from_numpy(np.ascontiguousarray(x))
        if t.dim() == 4 and entry.dim_order == (0, 2, 3, 1):
            t = t.to(memory_format=torch.channels_last)
        tensors.append(t)
    return tuple(tensors)
