"""The ExecuTorch program (.pte) as plain data.

Reads the parts of `schema/program.fbs` that inspection and verification need,
without importing torch or ExecuTorch, so `cortexm inspect` and `verify` start
in a fraction of a second. Damage to the flatbuffer itself fails here with a
message that says where; what the runtime would refuse (a value of unknown type,
a missing field, a bad index) is kept in the result (``BadValue``,
``BadInstruction``, the ``absent`` fields) for ``cortexm.pte.loader`` to report,
one problem per line, as ExecuTorch's loader would meet them. ``cortexm.pte.read``
puts the two together.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from cortexm.base.errors import CortexmError
from cortexm.pte.flatbuffer import FlatbufferError, Table, root

FILE_IDENTIFIER = b"ET12"
EXTENDED_HEADER_MAGIC = b"eh00"

# ScalarType codes the runtime accepts (runtime/core/portable_type/scalar_type.h,
# ET_FORALL_SCALAR_TYPES; isValid() is 0 <= code < Undefined): name (torch's) and element size.
SCALAR_TYPES: dict[int, tuple[str, int]] = {
    0: ("uint8", 1),
    1: ("int8", 1),
    2: ("int16", 2),
    3: ("int32", 4),
    4: ("int64", 8),
    5: ("float16", 2),
    6: ("float32", 4),
    7: ("float64", 8),
    8: ("complex32", 4),
    9: ("complex64", 8),
    10: ("complex128", 16),
    11: ("bool", 1),
    12: ("qint8", 1),
    13: ("quint8", 1),
    14: ("qint32", 4),
    15: ("bfloat16", 2),
    16: ("quint4x2", 1),
    17: ("quint2x4", 1),
    18: ("bits1x8", 1),
    19: ("bits2x4", 1),
    20: ("bits4x2", 1),
    21: ("bits8", 1),
    22: ("bits16", 2),
    23: ("float8_e5m2", 1),
    24: ("float8_e4m3fn", 1),
    25: ("float8_e5m2fnuz", 1),
    26: ("float8_e4m3fnuz", 1),
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
    # What only the loader checks look at (schema/program.fbs, Tensor and ExtraTensorInfo).
    storage_offset: int = 0
    shape_dynamism: int = 0  # 0 STATIC, 1 DYNAMIC_BOUND, 2 DYNAMIC_UNBOUND
    location: int = 0  # 0 SEGMENT, 1 EXTERNAL
    absent: frozenset[str] = frozenset()  # required fields the file leaves out ("sizes", "dim_order")

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
        contiguous = self.dim_order == tuple(range(len(self.sizes)))
        order = "" if contiguous else " channels_last" if self.is_channels_last else f" dim_order={list(self.dim_order)}"
        return f"{self.dtype}[{shape}]{order}"


@dataclass(frozen=True)
class ListValue:
    """IntList / TensorList / OptionalTensorList: indices of other values."""

    kind: str
    items: tuple[int, ...]


@dataclass(frozen=True)
class BadValue:
    """A value the runtime cannot parse, kept so that the indices of the others stay right."""

    reason: str


# A value of the program's value table.
Value = None | bool | int | float | str | TensorValue | ListValue | BadValue | tuple


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
    """Move, jump and free instructions: shown, and their value indices checked."""

    kind: str
    values: tuple[int, ...] = ()  # move: from, to; jump_false: the condition; free: the value
    destination: int | None = None  # jump_false: where it jumps


@dataclass(frozen=True)
class BadInstruction:
    """An instruction the runtime cannot load (unknown type, arguments missing)."""

    reason: str

    @property
    def kind(self) -> str:
        return "invalid"


Instruction = KernelCall | DelegateCall | OtherInstruction | BadInstruction


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
    # Instructions per chain (the flat `instructions` are the chains one after another).
    chain_lengths: tuple[int, ...] = ()
    # Fields the runtime requires that the file leaves out: "values", "chains[0].instructions",
    # "operators[2].name", "delegates[1].id", ... (an absent vector reads as empty above).
    absent: frozenset[str] = frozenset()

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
        """A value with lists of indices expanded into their items (one level: a damaged list
        may name itself)."""
        value = self.values[index]
        if isinstance(value, ListValue):
            return tuple(self.values[i] if i >= 0 else None for i in value.items)
        return value

    def where(self, instruction: int) -> str:
        """'instruction N' (its index in `instructions`), with its chain when there are several."""
        if len(self.chain_lengths) <= 1:
            return f"instruction {instruction}"
        start = 0
        for chain, length in enumerate(self.chain_lengths):
            if instruction < start + length:
                return f"chain {chain} instruction {instruction - start}"
            start += length
        return f"instruction {instruction}"


@dataclass(frozen=True)
class SubsegmentOffsets:
    """Program.constant_segment and the entries of Program.mutable_data_segments."""

    segment_index: int
    offsets: tuple[int, ...] | None  # None: the field is absent


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
    # What only the loader checks look at.
    constant_buffer_sizes: tuple[int, ...] = ()  # bytes of each Program.constant_buffer entry's storage
    constant_segment: SubsegmentOffsets | None = None
    mutable_data_segments: tuple[SubsegmentOffsets, ...] | None = None
    named_data: int | None = None  # entries of Program.named_data, None when absent
    absent: frozenset[str] = frozenset()  # "execution_plan", "segments"

    def plan(self, name: str = "forward") -> ExecutionPlan:
        for p in self.plans:
            if p.name == name:
                return p
        names = ", ".join(p.name for p in self.plans) or "none"
        raise PteError(f"no method {name!r} in the program (methods: {names})")


# ExecuTorch's file header (schema/extended_header.h): the bytes Program::load reads first,
# and the header's length up to segment_base_offset.
HEAD_BYTES = 64
_EXTENDED_HEADER_MIN_LENGTH = 24
# A file larger than this is no program for a microcontroller: refused before it is read.
MAX_FILE_SIZE = 2 << 30


def read(data: bytes, file_size: int | None = None) -> Program:
    """The program in `data` (see cortexm.pte.read.parse), its references unchecked: damage to
    the flatbuffer itself raises PteError, the rest is left for cortexm.pte.loader."""
    file_size = len(data) if file_size is None else file_size
    program_size, segment_base, segment_size = head(data, file_size)
    if len(data) < program_size:
        raise PteError(f"truncated: header says the program is {program_size} bytes, {len(data)} could be read")
    try:
        program = _read_program(data[:program_size], file_size, program_size, segment_base, segment_size)
    except FlatbufferError as e:
        raise PteError(f"damaged program data: {e}") from None
    _check_segments(program)
    _check_unshared(program)
    return program


def _check_unshared(program: Program) -> None:
    """Every reference of the program (a list's item, an instruction's argument, a size) takes
    its own bytes in the file, as ExecuTorch's serializer writes it. A flatbuffer can point many
    fields at one vector: such a file is refused here, so that no reader's work grows past the
    file's size (100,000 values sharing one 100,000-item list are 10^10 references in 1.2 MB)."""
    references = 0
    for plan in program.plans:
        for value in plan.values:
            items = value.items if isinstance(value, ListValue) else value.sizes if isinstance(value, TensorValue) else ()
            references += len(items)
        references += sum(len(getattr(ins, "args", ())) for ins in plan.instructions)
    # A reference takes at least one byte (a size or a dim order byte), most four or eight.
    if references > program.program_size:
        raise PteError(f"its lists, sizes and arguments hold {references} references in a {program.program_size}-byte "
                       "program: they share their items, which ExecuTorch's serializer never does")


def head(data: bytes, file_size: int) -> tuple[int, int, int]:
    """(program size, segment base offset, segment data size) of a `file_size`-byte file, from its
    first bytes `data`; PteError when they are not a program's."""
    if len(data) < 8 or data[4:8] != FILE_IDENTIFIER:
        raise PteError(
            "not an ExecuTorch program (no 'ET12' identifier at offset 4)"
        )
    if file_size < HEAD_BYTES:
        raise PteError(f"truncated: {file_size} bytes, the runtime reads a {HEAD_BYTES}-byte header")
    return _extended_header(data, file_size)


def _extended_header(data: bytes, file_size: int) -> tuple[int, int, int]:
    """(program size, segment base offset, segment data size) of the file."""
    if data[8:12] != EXTENDED_HEADER_MAGIC:
        return file_size, 0, 0
    length, program_size, segment_base = struct.unpack_from("<IQQ", data, 12)
    # schema/extended_header.cpp: a shorter header is refused; segment_data_size only when present.
    if length < _EXTENDED_HEADER_MIN_LENGTH:
        raise PteError(f"damaged extended header: length {length} < {_EXTENDED_HEADER_MIN_LENGTH}")
    segment_size = struct.unpack_from("<Q", data, 32)[0] if length >= 32 else 0
    if program_size > file_size or program_size < 16:
        raise PteError(
            f"truncated: header says the program is {program_size} bytes, file has {file_size}"
        )
    if segment_base and segment_base + segment_size > file_size:
        raise PteError(
            f"truncated: segments end at byte {segment_base + segment_size}, file has {file_size}"
        )
    return program_size, segment_base, segment_size


def _read_program(buf: bytes, file_size: int, program_size: int, segment_base: int, segment_size: int) -> Program:
    t = root(buf, FILE_IDENTIFIER)
    constant_segment = t.table(5)
    return Program(
        version=t.scalar(0, "I", 0),
        plans=tuple(t.tables(1, _read_plan)),
        file_size=file_size,
        program_size=program_size,
        segment_base_offset=segment_base,
        segment_data_size=segment_size,
        segments=tuple(t.tables(4, lambda s: (s.scalar(0, "Q", 0), s.scalar(1, "Q", 0)))),
        constant_buffers=len(t.tables(2, lambda b: None)),
        constant_buffer_sizes=tuple(t.tables(2, lambda b: len(b.bytes(0)))),
        constant_segment=_read_subsegments(constant_segment) if constant_segment is not None else None,
        mutable_data_segments=tuple(t.tables(6, _read_subsegments)) if t.has(6) else None,
        named_data=len(t.tables(7, lambda d: None)) if t.has(7) else None,
        absent=frozenset(name for slot, name in ((1, "execution_plan"), (4, "segments")) if not t.has(slot)),
    )


def _read_subsegments(t: Table) -> SubsegmentOffsets:
    return SubsegmentOffsets(t.scalar(0, "I", 0), tuple(t.scalars(1, "Q")) if t.has(1) else None)


# ExecutionPlan fields the runtime requires (Program::method_meta, Method::init).
_PLAN_FIELDS = ((0, "name"), (2, "values"), (3, "inputs"), (4, "outputs"), (5, "chains"), (6, "operators"),
                (7, "delegates"), (8, "non_const_buffer_sizes"))


def _read_plan(t: Table) -> ExecutionPlan:
    absent = {name for slot, name in _PLAN_FIELDS if not t.has(slot)}
    chains = t.tables(5, lambda c: (c.has(2), c.tables(2, _read_instruction)))
    absent |= {f"chains[{i}].instructions" for i, (present, _) in enumerate(chains) if not present}
    operators = t.tables(6, lambda o: (o.has(0), Operator(o.string(0) or "", o.string(1) or "")))
    absent |= {f"operators[{i}].name" for i, (present, _) in enumerate(operators) if not present}
    delegates = t.tables(7, lambda d: d.string(0))
    absent |= {f"delegates[{i}].id" for i, name in enumerate(delegates) if name is None}
    return ExecutionPlan(
        name=t.string(0) or "",
        values=tuple(t.tables(2, _read_value)),
        inputs=tuple(t.scalars(3, "i")),
        outputs=tuple(t.scalars(4, "i")),
        instructions=tuple(ins for _, chain in chains for ins in chain),
        operators=tuple(op for _, op in operators),
        delegates=tuple(name or "" for name in delegates),
        non_const_buffer_sizes=tuple(t.scalars(8, "q")),
        chain_lengths=tuple(len(chain) for _, chain in chains),
        absent=frozenset(absent),
    )


# InstructionArguments of schema/program.fbs (0 is flatbuffers' NONE).
_KERNEL_CALL, _DELEGATE_CALL, _MOVE_CALL, _JUMP_FALSE_CALL, _FREE_CALL = 1, 2, 3, 4, 5


def _read_instruction(t: Table) -> Instruction:
    tag, args = t.union(0, 1)
    if args is None:
        return BadInstruction("has no arguments")
    if tag in (_KERNEL_CALL, _DELEGATE_CALL):
        kind = "kernel call" if tag == _KERNEL_CALL else "delegate call"
        if not args.has(1):
            return BadInstruction(f"{kind} without its argument list")
        values = tuple(args.scalars(1, "i"))
        return KernelCall(args.scalar(0, "i", 0), values) if tag == _KERNEL_CALL else DelegateCall(args.scalar(0, "i", 0), values)
    if tag == _MOVE_CALL:
        return OtherInstruction("move", (args.scalar(0, "i", 0), args.scalar(1, "i", 0)))
    if tag == _JUMP_FALSE_CALL:
        return OtherInstruction("jump_false", (args.scalar(0, "i", 0),), args.scalar(1, "i", 0))
    if tag == _FREE_CALL:
        return OtherInstruction("free", (args.scalar(0, "i", 0),))
    return BadInstruction(f"unknown instruction type {tag}")


# KernelTypes of schema/program.fbs (0 is flatbuffers' NONE), for messages.
VALUE_TYPES = {1: "Null", 2: "Int", 3: "Bool", 4: "Double", 5: "Tensor", 6: "String", 7: "IntList", 8: "DoubleList",
               9: "BoolList", 10: "TensorList", 11: "OptionalTensorList"}


def _read_value(t: Table) -> Value:
    tag, v = t.union(0, 1)
    if tag == 1:
        return None
    if tag not in VALUE_TYPES:
        return BadValue(f"unknown value type {tag}" if tag else "no value type (NONE)")
    if v is None:
        return BadValue(f"{VALUE_TYPES[tag]} without its table")
    if tag == 2:
        return v.scalar(0, "q", 0)
    if tag == 3:
        return bool(v.scalar(0, "B", 0))
    if tag == 4:
        return v.scalar(0, "d", 0.0)
    if tag == 5:
        return _read_tensor(v)
    if not v.has(0):
        return BadValue(f"{VALUE_TYPES[tag]} without its {'string' if tag == 6 else 'items'}")
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
    return ListValue("optional_tensor_list", tuple(v.scalars(0, "i")))


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
        storage_offset=t.scalar(1, "i", 0),
        shape_dynamism=t.scalar(8, "b", 0),
        location=extra.scalar(2, "b", 0) if extra is not None else 0,
        absent=frozenset(name for slot, name in ((2, "sizes"), (3, "dim_order")) if not t.has(slot)),
    )


def _check_segments(program: Program) -> None:
    for i, (offset, size) in enumerate(program.segments):
        end = program.segment_base_offset + offset + size
        if end > program.file_size:
            raise PteError(
                f"truncated: data segment {i} ends at byte {end}, file has {program.file_size}"
            )
