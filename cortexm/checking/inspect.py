"""What a .pte contains, as plain data: header, calls, scratch, planned memory, I/O."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cortexm.checking import library, scratch
from cortexm.pte import load
from cortexm.pte.program import DelegateCall, KernelCall, TensorValue
from cortexm.pte.sidecar import read_sidecar


def inspect(path: Path) -> dict[str, Any]:
    from cortexm.checking import constants, lowering

    program = load(path)
    sidecar = read_sidecar(path)
    data = Path(path).read_bytes() if program.file_size <= 64 * 1024 * 1024 else None
    report: dict[str, Any] = {
        "file": str(path),
        "file_size": program.file_size,
        "program_size": program.program_size,
        "schema_version": program.version,
        "segment_data_size": program.file_size - program.segment_base_offset if program.segment_base_offset else 0,
        "exported": None,
        "methods": [],
    }
    if sidecar:
        report["exported"] = {
            "name": sidecar.name,
            "target": sidecar.target,
            "backend": sidecar.backend,
            "executorch": sidecar.executorch.json(),
        }
    for plan in program.plans:
        calls = []
        for index, ins in enumerate(plan.instructions):
            if isinstance(ins, KernelCall):
                op = plan.operators[ins.op_index]
                scratch_bytes = _scratch_bytes(plan, op.qualified_name, ins)
                calls.append({"index": index, "operator": op.qualified_name, "values": len(ins.args),
                              "scratch_bytes": scratch_bytes})
            elif isinstance(ins, DelegateCall):
                calls.append({"index": index, "delegate": plan.delegates[ins.delegate_index], "values": len(ins.args)})
            else:
                calls.append({"index": index, "instruction": ins.kind})
        note = lowering.float_program(plan, sidecar)
        report["methods"].append({
            "name": plan.name,
            "inputs": [_io(plan.values[i]) for i in plan.inputs],
            "outputs": [_io(plan.values[i]) for i in plan.outputs],
            "operators": sorted({op.qualified_name for op in plan.operators}),
            "calls": calls,
            # Buffer 0 is reserved by ExecuTorch; planned memory is buffers 1..n.
            "planned_buffers": list(plan.non_const_buffer_sizes[1:]),
            "constant_bytes": sum(v.nbytes for v in plan.values if isinstance(v, TensorValue) and v.is_constant),
            # Calls that are not cortex_m kernels, and why (cortexm.checking.lowering); constant
            # bytes no call reads (cortexm.checking.constants).
            "lowering": lowering.record(plan, sidecar),
            # A float program is noted, not failed.
            "lowering_failure": None if note else lowering.failure_line(lowering.survey(plan, sidecar)[2]),
            "lowering_note": note,
            "constants": constants.survey(program, plan, data, sidecar.constants if sidecar else None).as_dict(),
        })
    return report


def _scratch_bytes(plan, op_name: str, call: KernelCall) -> list[int] | None:
    """Bytes of each scratch argument of a cortex_m call ([] if it has none, None if unknown)."""
    if not scratch.has_scratch(op_name):
        return []
    names = library.arguments_for(op_name, len(call.args), library.installed())
    if names is None:
        return None
    args = scratch.named_args(plan, call, list(names))
    return [args[n].nbytes for n in ("scratch", "output_scratch") if isinstance(args.get(n), TensorValue)]


def _io(value) -> dict[str, Any]:
    if isinstance(value, TensorValue):
        return {"kind": "tensor", "dtype": value.dtype, "shape": list(value.sizes), "dim_order": list(value.dim_order),
                "text": value.describe()}
    return {"kind": type(value).__name__, "value": value, "text": repr(value)}
