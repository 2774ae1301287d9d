"""A memory plan for catching kernels that write where they must not.

What enters: a lowered program (ExecuTorch's EdgeProgramManager). What leaves: the same
program with every planned tensor in a memory buffer of its own (`isolated`), and where
each one is (`layout`), for the runner's guard mode and the host build's exact-size
allocations.

ExecuTorch's default plan packs tensors into one arena and reuses it, so a kernel that
writes past its output or its scratch lands in whatever the plan put next: the outputs
come out wrong, or right, depending on the plan. With one buffer per tensor the runner
can put a guard region around each buffer and check it after every kernel call (naming
the call and the buffer), and a host build can allocate each buffer at its exact size
for AddressSanitizer. A tensor that aliases another (a view) stays in its base's buffer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path


def isolated(alignment, specs, graph_module, graph_signature, extra_padding):
    """A memory planning algorithm (MemoryPlanningAlgorithmSuite's interface): buffer k >= 1 holds one
    tensor at offset 0; buffer 0, reserved by ExecuTorch, stays empty."""
    from executorch.exir.memory_planning import MemoryAlgoResult, SpecAllocResult

    result = MemoryAlgoResult({}, [0])
    bases = [s for s in specs if s.storage_base is None]
    # In program order, so a plan is the same every time.
    bases.sort(key=lambda s: (tuple(s.lifetime), s.allocated_memory, tuple(s.shape)))
    for spec in bases:
        # The exact size, not rounded up to the alignment: a write one byte past the tensor
        # must reach the guard. Each buffer starts aligned on its own (the runner's arena).
        result.spec_dict[spec] = SpecAllocResult(mem_id=len(result.bufsizes), mem_obj_id=len(result.bufsizes),
                                                 mem_offset=0)
        result.bufsizes.append(spec.nbytes())
    for spec in (s for s in specs if s.storage_base is not None):
        base, offset = spec, 0
        while base.storage_base is not None:
            offset += base.storage_base_offset
            base = base.storage_base
        placed = result.spec_dict[base]
        result.spec_dict[spec] = SpecAllocResult(mem_id=placed.mem_id, mem_obj_id=placed.mem_obj_id,
                                                 mem_offset=placed.mem_offset + offset)
    return result


def to_executorch_isolated(edge):
    """`edge.to_executorch()` with the isolated plan."""
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.memory_planning import MemoryPlanningAlgorithmSuite
    from executorch.exir.passes import MemoryPlanningPass

    algo = MemoryPlanningAlgorithmSuite(algo_list=[isolated])
    return edge.to_executorch(ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(memory_planning_algo=algo)))


@dataclass(frozen=True)
class Placement:
    buffer: int  # planned buffer (memory id)
    offset: int
    nbytes: int
    value: int  # value index in the program


def layout(plan) -> dict[int, list[Placement]]:
    """Planned buffer -> the tensors placed in it (cortexm.pte's ExecutionPlan)."""
    from cortexm.pte.program import TensorValue

    buffers: dict[int, list[Placement]] = {}
    for index, value in enumerate(plan.values):
        if isinstance(value, TensorValue) and value.allocation is not None:
            buffer, offset = value.allocation
            buffers.setdefault(buffer, []).append(Placement(buffer, offset, value.nbytes, index))
    return buffers


_GUARD = re.compile(r"^E guard: instruction (\d+) wrote (past the end|before the start) of planned buffer (\d+) "
                    r"\((\d+) B\): bytes (-?\d+) to (-?\d+) (?:after|before) it", re.MULTILINE)


def guard_failures(log: str, pte: Path) -> list[str]:
    """The runner's guard lines (`--guard`), each as one line naming the kernel call, the
    argument whose buffer it overran and by how many bytes."""
    lines = []
    for m in _GUARD.finditer(log):
        instruction, where, buffer, size = int(m.group(1)), m.group(2), int(m.group(3)), int(m.group(4))
        extent = max(abs(int(m.group(5))), abs(int(m.group(6)))) + (1 if where == "past the end" else 0)
        call, whose = describe(pte, instruction, buffer)
        lines.append(f"{call} wrote {extent} bytes {where} of {whose} ({size} B)")
    return lines


def describe(pte: Path, instruction: int, buffer: int | None) -> tuple[str, str]:
    """('call N op (instruction K)', 'its scratch') for an access by instruction K to the
    runner's planned buffer `buffer` (counted from 0, as the runner does; memory id 0 is
    reserved, so it is memory id buffer + 1)."""
    from cortexm.checking import library
    from cortexm.pte import load
    from cortexm.pte.program import KernelCall

    plan = load(pte).plan()
    call = plan.instructions[instruction] if instruction < len(plan.instructions) else None
    unknown = f"planned buffer {buffer}" if buffer is not None else "a buffer"
    if not isinstance(call, KernelCall):
        return f"instruction {instruction}", unknown
    op = plan.operators[call.op_index].qualified_name
    number = sum(1 for i in plan.instructions[:instruction + 1] if hasattr(i, "op_index"))
    values = {p.value for p in layout(plan).get(buffer + 1, [])} if buffer is not None else set()
    names = library.arguments_for(op, len(call.args), library.installed()) or ()
    args = [names[k] if k < len(names) else "out" for k, index in enumerate(call.args) if index in values]
    whose = f"its {' / '.join(dict.fromkeys(args))}" if args else f"{unknown}, not one of its arguments"
    return f"call {number} {op} (instruction {instruction})", whose if buffer is not None else unknown
