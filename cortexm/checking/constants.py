"""Dead constants: bytes of a program's constant data that no instruction reads.

On a microcontroller a program's constants are flash. A lowering pass that replaces a
weight with a copy of its own (a permuted one, say) and leaves the original in the graph
leaves it in the program: the emitter writes every constant the graph still lists, read or
not. This finds, from the program alone, each constant buffer no instruction, input or
output refers to, and its bytes in the constant segment (alignment included: what the
flash holds). Where the sidecar records the names of the program's constants (`constants`,
by content), each is named: the model's `_frozen_param3` is the weight convert_pt2e folded.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from cortexm.pte.program import ExecutionPlan, ListValue, Program, TensorValue


@dataclass(frozen=True)
class DeadConstant:
    buffer: int  # the constant buffer (data_buffer_idx)
    nbytes: int  # its bytes in the program (its slot in the constant segment)
    tensor: str  # e.g. int8[16,3,3,3]
    name: str = ""  # the program constant's name, where the sidecar records it

    def as_dict(self) -> dict:
        return {"buffer": self.buffer, "bytes": self.nbytes, "tensor": self.tensor, "name": self.name}


@dataclass(frozen=True)
class Constants:
    total: int  # bytes of constant data in the program
    dead: tuple[DeadConstant, ...]

    @property
    def dead_bytes(self) -> int:
        return sum(d.nbytes for d in self.dead)

    @property
    def share(self) -> float:
        return self.dead_bytes / self.total if self.total else 0.0

    def as_dict(self) -> dict:
        return {"bytes": self.total, "dead_bytes": self.dead_bytes, "dead": [d.as_dict() for d in self.dead]}

    def line(self) -> str:
        """What a report says of them, one line."""
        if not self.dead:
            return f"every one of {self.total:,} constant bytes is read"
        names = [d.name or d.tensor for d in self.dead]
        shown = ", ".join(names[:4]) + (f", ... ({len(names)} in all)" if len(names) > 4 else "")
        return (f"{self.dead_bytes:,} of {self.total:,} constant bytes ({100 * self.share:.0f} %) are read by no call: "
                f"{shown}")


def referenced(plan: ExecutionPlan) -> set[int]:
    """The value indices the method refers to: arguments of every instruction, its inputs and
    outputs, and the items of every list among them."""
    used = set(plan.inputs) | set(plan.outputs)
    for ins in plan.instructions:
        used.update(getattr(ins, "args", None) or getattr(ins, "values", None) or ())
    todo = [i for i in used if 0 <= i < len(plan.values) and isinstance(plan.values[i], ListValue)]
    seen: set[int] = set()
    while todo:
        index = todo.pop()
        listed = plan.values[index]
        if index in seen or not isinstance(listed, ListValue):  # todo holds list values only
            continue
        seen.add(index)
        for item in listed.items:
            used.add(item)
            if 0 <= item < len(plan.values) and isinstance(plan.values[item], ListValue):
                todo.append(item)
    return used


def survey(program: Program, plan: ExecutionPlan, data: bytes | None = None, names: dict | None = None) -> Constants:
    """The program's constants and the dead ones. `data`: the file's bytes (to name a dead
    constant by its content's hash in `names`, the sidecar's `constants`)."""
    used = referenced(plan)
    buffers: dict[int, list[tuple[int, TensorValue]]] = {}
    for index, value in enumerate(plan.values):
        if isinstance(value, TensorValue) and value.data_buffer_idx > 0 and value.external_name is None:
            buffers.setdefault(value.data_buffer_idx, []).append((index, value))
    slots = _slots(program)
    total = sum(slots.values()) if slots else sum(max(v.nbytes for _, v in ts) for ts in buffers.values())
    dead = []
    for buffer, tensors in sorted(buffers.items()):
        if any(index in used for index, _ in tensors):
            continue
        value = max((v for _, v in tensors), key=lambda v: v.nbytes)
        name = _name(program, buffer, value, data, names or {})
        dead.append(DeadConstant(buffer, slots.get(buffer, value.nbytes), value.describe(), name))
    return Constants(total, tuple(dead))


def _slots(program: Program) -> dict[int, int]:
    """Bytes of each constant buffer's slot in the constant segment (buffer 0 is reserved)."""
    segment = program.constant_segment
    if segment is None or not segment.offsets or not (0 <= segment.segment_index < len(program.segments)):
        return {}
    offsets = list(segment.offsets) + [program.segments[segment.segment_index][1]]
    return {k: max(offsets[k + 1] - offsets[k], 0) for k in range(1, len(offsets) - 1)}


def _name(program: Program, buffer: int, value: TensorValue, data: bytes | None, names: dict) -> str:
    raw = constant_bytes(program, buffer, value.nbytes, data)
    return str(names.get(content_key(raw), "")) if raw is not None else ""


def constant_bytes(program: Program, buffer: int, nbytes: int, data: bytes | None) -> bytes | None:
    segment = program.constant_segment
    if data is None or segment is None or not segment.offsets or buffer >= len(segment.offsets) \
            or not (0 <= segment.segment_index < len(program.segments)):
        return None
    start = program.segment_base_offset + program.segments[segment.segment_index][0] + segment.offsets[buffer]
    return data[start:start + nbytes] if start + nbytes <= len(data) else None


def content_key(raw: bytes) -> str:
    """How the sidecar's `constants` key a constant: the sha256 of its bytes, shortened."""
    return hashlib.sha256(raw).hexdigest()[:16]


def names_of(exported_program) -> dict[str, str]:
    """{content_key: name} of every constant an exported program holds (its parameters,
    buffers and lifted constants), for the sidecar. Needs torch."""
    tensors = {**exported_program.state_dict, **exported_program.constants}
    found: dict[str, str] = {}
    for name, tensor in tensors.items():
        if hasattr(tensor, "detach"):
            tensor = tensor.detach().cpu()
            # In memory order (what the emitter writes) and in logical order.
            for layout in ((tensor.permute(*tensor.dim_order()) if tensor.dim() else tensor), tensor):
                found.setdefault(content_key(layout.contiguous().numpy().tobytes()), name)
    return found
