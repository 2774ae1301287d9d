"""The ExecuTorch program (.pte) as plain data.

Reads the parts of `schema/program.fbs` that inspection and verification need,
without importing torch or ExecuTorch, so `cortexm inspect` and `verify` start
in a fraction of a second. Every cross-reference (operator index, value index)
is checked, so a damaged file fails here with a message that says where.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

from cortexm.errors import CortexmError
from cortexm.pte.flatbuffer import FlatbufferError, Table, root

FILE_IDENTIFIER = b"ET12"
EXTENDED_HEADER_MAGIC = b"eh00"

# ScalarType codes of schema/scalar_type.fbs: name and element size in bytes.
SCALAR_TYPES: dict[int, tuple[str, int]] = {
    0: ("uint8", 1),
    1: ("int8", 1),
    2: ("int16", 2),
    3: ("int32", 4),
    4: ("int64", 8),
    5: ("float16", 2),
    6: ("float32", 4),
    7: ("float64", 8),
    11: ("bool", 1),
    12: ("qint8", 1),
    13: ("quint8", 1),
    14: ("qint32", 4),
    15: ("bfloat16", 2),
    22: ("bits16", 2),
    27: ("uint16", 2),
    28: ("uint32", 4),
    29: ("uint64", 8),
}


class PteError(CortexmError):
    """The file is not a readable ExecuTorch program."""


@dataclass(frozen=True)
class TensorValue:
    scalar_type: int
    sizes: tuple[int, ...]
    dim_order: tuple[int, ...]
    data_buffer_idx: int
    # (memory_id, offset) when the memory planner placed it, else None.
    allocation: tuple[int, int] | None
    # Set for tensors whose data lives outside the program (e.g. a .ptd file).
    external_name: str | None = None

    @property
    def dtype(self) -> str:
        return SCALAR_TYPES.get(self.scalar_type, (f"scalar_type{self.scalar_type}", 0))[0]

    @property
    def element_size(self) -> int:
        return SCALAR_TYPES.get(self.scalar_type, ("", 0))[1]

    @property
    def numel(self) -> int:
        n = 1
        for s in self.sizes:
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * self.element_size

    @property
    def is_constant(self) -> bool:
        return self.data_buffer_idx > 0 or self.external_name is not None

    @property
    def is_channels_last(self) -> bool:
        return len(self.dim_order) == 4 and self.dim_order == (0, 2, 3, 1)

    def describe(self) -> str:
        shape = ",".join(str(s) for s in self.sizes)
        order = "" if self.dim_order == tuple(range(len(self.sizes))) else " channels_last" if self.is_channels_last else f" dim_order={list(self.dim_order)}"
        return f"{self.dtype}[{shape}]{order}"


@dataclass(frozen=True)
class ListValue:
    """IntList / TensorList / OptionalTensorList: indices of other values."""

    kind: str
    items: tuple[int, ...]


# A value of the program's value table.
Value = Union[None, bool, int, float, str, TensorValue, ListValue, tuple]


@dataclass(frozen=True)
class Operator:
    name: str
    overload: str

    @property
    def qualified_name(self) -> str:
        return f"{self.name}.{self.overload}" if self.overload else self.name

    @property
    def namespace(self) -> str:
        return self.name.split("::", 1)[0] if "::" in self.name else ""


@dataclass(frozen=True)
class KernelCall:
    op_index: int
    args: tuple[int, ...]


@dataclass(frozen=True)
class DelegateCall:
    delegate_index: int
    args: tuple[int, ...]


@dataclass(frozen=True)
class OtherInstruction:
    """Move, jump and free instructions: shown, never checked."""

    kind: str


Instruction = Union[KernelCall, DelegateCall, OtherInstruction]


@dataclass(frozen=True)
class ExecutionPlan:
    name: str
    values: tuple[Value, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    instructions: tuple[Instruction, ...]
    operators: tuple[Operator, ...]
    delegates: tuple[str, ...]
    # Index 0 is reserved by ExecuTorch; the planned buffers are 1..n.
    non_const_buffer_sizes: tuple[int, ...]

    def kernel_calls(self) -> list[tuple[int, Operator, KernelCall]]:
        """(instruction index, operator, call) for every kernel call, in order."""
        return [
            (i, self.operators[ins.op_index], ins)
            for i, ins in enumerate(self.instructions)
            if isinstance(ins, KernelCall)
        ]

    def tensor(self, index: int) -> TensorValue | None:
        value = self.values[index]
        return value if isinstance(value, TensorValue) else None

    def resolve(self, index: int) -> Value:
        """A value with lists of indices expanded into their items."""
        value = self.values[index]
        if isinstance(value, ListValue):
            return tuple(self.resolve(i) if i >= 0 else None for i in value.items)
        return value


@dataclass(frozen=True)
class Program:
    version: int
    plans: tuple[ExecutionPlan, ...]
    file_size: int
    program_size: int
    segment_base_offset: int
    segment_data_size: int
    segments: tuple[tuple[int, int], ...] = field(default=())
    constant_buffers: int = 0

    def plan(self, name: str = "forward") -> ExecutionPlan:
        for p in self.plans:
            if p.name == name:
                return p
        names = ", ".join(p.name for p in self.plans) or "none"
        raise PteError(f"no method {name!r} in the program (methods: {names})")


def load(path: str | Path) -> Program:
    """Read and check a .pte file; raises PteError with a one-line reason."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise PteError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise PteError(f"{path}: is a directory, expected a .pte file") from None
    except OSError as e:
        raise PteError(f"{path}: cannot read ({e.strerror})") from None
    try:
        return parse(data)
    except PteError as e:
        raise PteError(f"{path}: {e}") from None


def parse(data: bytes) -> Program:
    if len(data) < 8 or data[4:8] != FILE_IDENTIFIER:
        raise PteError(
            "not an ExecuTorch program (no 'ET12' identifier at offset 4)"
        )
    program_size, segment_base, segment_size = _extended_header(data)
    try:
        program = _read_program(data[:program_size], len(data), program_size, segment_base, segment_size)
    except FlatbufferError as e:
        raise PteError(f"damaged program data: {e}") from None
    _check_segments(program)
    for plan in program.plans:
        _check_references(plan)
    return program


def _extended_header(data: bytes) -> tuple[int, int, int]:
    """(program size, segment base offset, segment data size) of the file."""
    if data[8:12] != EXTENDED_HEADER_MAGIC:
        return len(data), 0, 0
    if len(data) < 32:
        raise PteError("truncated inside the extended header")
    length, program_size, segment_base = struct.unpack_from("<IQQ", data, 12)
    segment_size = struct.unpack_from("<Q", data, 32)[0] if length >= 32 and len(data) >= 40 else 0
    if program_size > len(data) or program_size < 16:
        raise PteError(
            f"truncated: header says the program is {program_size} bytes, file has {len(data)}"
        )
    if segment_base and segment_base + segment_size > len(data):
        raise PteError(
            f"truncated: segments end at byte {segment_base + segment_size}, file has {len(data)}"
        )
    return program_size, segment_base, segment_size


def _read_program(buf: bytes, file_size: int, program_size: int, segment_base: int, segment_size: int) -> Program:
    t = root(buf, FILE_IDENTIFIER)
    return Program(
        version=t.scalar(0, "I", 0),
        plans=tuple(t.tables(1, _read_plan)),
        file_size=file_size,
        program_size=program_size,
        segment_base_offset=segment_base,
        segment_data_size=segment_size,
        segments=tuple(t.tables(4, lambda s: (s.scalar(0, "Q", 0), s.scalar(1, "Q", 0)))),
        constant_buffers=len(t.tables(2, lambda b: None)),
    )


def _read_plan(t: Table) -> ExecutionPlan:
    chains = t.tables(5, lambda c: c.tables(2, _read_instruction))
    return ExecutionPlan(
        name=t.string(0) or "",
        values=tuple(t.tables(2, _read_value)),
        inputs=tuple(t.scalars(3, "i")),
        outputs=tuple(t.scalars(4, "i")),
        instructions=tuple(ins for chain in chains for ins in chain),
        operators=tuple(t.tables(6, lambda o: Operator(o.string(0) or "", o.string(1) or ""))),
        delegates=tuple(t.tables(7, lambda d: d.string(0) or "")),
        non_const_buffer_sizes=tuple(t.scalars(8, "q")),
    )


_INSTRUCTION_KINDS = {3: "move", 4: "jump_false", 5: "free"}


def _read_instruction(t: Table) -> Instruction:
    tag, args = t.union(0, 1)
    if tag == 1 and args is not None:
        return KernelCall(args.scalar(0, "i", 0), tuple(args.scalars(1, "i")))
    if tag == 2 and args is not None:
        return DelegateCall(args.scalar(0, "i", 0), tuple(args.scalars(1, "i")))
    if tag in _INSTRUCTION_KINDS:
        return OtherInstruction(_INSTRUCTION_KINDS[tag])
    raise FlatbufferError(f"unknown instruction type {tag}")


def _read_value(t: Table) -> Value:
    tag, v = t.union(0, 1)
    if tag in (0, 1) or v is None:
        return None
    if tag == 2:
        return v.scalar(0, "q", 0)
    if tag == 3:
        return bool(v.scalar(0, "B", 0))
    if tag == 4:
        return v.scalar(0, "d", 0.0)
    if tag == 5:
        return _read_tensor(v)
    if tag == 6:
        return v.string(0) or ""
    if tag == 7:
        return ListValue("int_list", tuple(v.scalars(0, "q")))
    if tag == 8:
        return tuple(v.scalars(0, "d"))
    if tag == 9:
        return tuple(bool(b) for b in v.scalars(0, "B"))
    if tag == 10:
        return ListValue("tensor_list", tuple(v.scalars(0, "i")))
    if tag == 11:
        return ListValue("optional_tensor_list", tuple(v.scalars(0, "i")))
    raise FlatbufferError(f"unknown value type {tag}")


def _read_tensor(t: Table) -> TensorValue:
    alloc = t.table(6)
    allocation = None
    if alloc is not None:
        offset = alloc.scalar(1, "I", 0) | (alloc.scalar(2, "I", 0) << 32)
        allocation = (alloc.scalar(0, "I", 0), offset)
    extra = t.table(9)
    return TensorValue(
        scalar_type=t.scalar(0, "b", 0),
        sizes=tuple(t.scalars(2, "i")),
        dim_order=tuple(t.scalars(3, "B")),
        data_buffer_idx=t.scalar(5, "I", 0),
        allocation=allocation,
        external_name=extra.string(1) if extra is not None else None,
    )


def _check_segments(program: Program) -> None:
    for i, (offset, size) in enumerate(program.segments):
        end = program.segment_base_offset + offset + size
        if end > program.file_size:
            raise PteError(
                f"truncated: data segment {i} ends at byte {end}, file has {program.file_size}"
            )


def _check_references(plan: ExecutionPlan) -> None:
    n_values = len(plan.values)

    def check_index(i: int, what: str) -> None:
        if not 0 <= i < n_values:
            raise PteError(f"method {plan.name!r}: {what} refers to value {i}, the program has {n_values}")

    for where, indices in (("input", plan.inputs), ("output", plan.outputs)):
        for i in indices:
            check_index(i, where)
    for value in plan.values:
        if isinstance(value, ListValue):
            for i in value.items:
                if i != -1:
                    check_index(i, f"a {value.kind}")
        elif isinstance(value, TensorValue):
            if any(s < 0 for s in value.sizes):
                raise PteError(f"method {plan.name!r}: tensor with negative size {list(value.sizes)}")
            if value.allocation is not None:
                mem_id, offset = value.allocation
                if mem_id >= len(plan.non_const_buffer_sizes):
                    raise PteError(f"method {plan.name!r}: tensor placed in memory buffer {mem_id}, the program plans {len(plan.non_const_buffer_sizes)}")
                if offset + value.nbytes > plan.non_const_buffer_sizes[mem_id]:
                    raise PteError(f"method {plan.name!r}: tensor at offset {offset} (+{value.nbytes} B) overruns planned buffer {mem_id} of {plan.non_const_buffer_sizes[mem_id]} B")
    for n, ins in enumerate(plan.instructions):
        if isinstance(ins, KernelCall):
            if not 0 <= ins.op_index < len(plan.operators):
                raise PteError(f"method {plan.name!r}: instruction {n} calls operator {ins.op_index}, the program lists {len(plan.operators)}")
            for a in ins.args:
                check_index(a, f"instruction {n}")
        elif isinstance(ins, DelegateCall):
            if not 0 <= ins.delegate_index < len(plan.delegates):
                raise PteError(f"method {plan.name!r}: instruction {n} calls delegate {ins.delegate_index}, the program lists {len(plan.delegates)}")
            for a in ins.args:
                check_index(a, f"instruction {n}")
