"""A bounds-checked reader for FlatBuffers tables.

The .pte reader needs only a handful of primitives (tables, vectors, strings,
unions). Every offset is checked against the buffer, so a truncated or
bit-flipped file raises ``FlatbufferError`` instead of returning garbage or an
arbitrary Python exception.

The checks are those of flatbuffers' own ``Verifier`` (what ExecuTorch runs at
``Program::Verification::InternalConsistency``): offsets non-zero and positive,
every table, vtable, field, vector and string inside the buffer and aligned,
vtable sizes even, strings NUL-terminated. Beyond the Verifier, vector elements
must be aligned to their own size: the runtime reads them through typed
pointers (a misaligned int64 is a fault on a Cortex-M's LDRD, and UBSan stops
the host build on any misaligned load).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# A vector longer than this is certainly corrupt for a microcontroller model,
# and iterating it would only burn time before failing.
MAX_VECTOR_LENGTH = 1 << 24
# Offsets (uoffset_t) are unsigned 32-bit, but the Verifier rejects any that is
# negative as a signed 32-bit number.
_MAX_OFFSET = (1 << 31) - 1


class FlatbufferError(ValueError):
    """The buffer is not a well-formed flatbuffer of the expected shape."""


class Table:
    """One flatbuffer table: field access by vtable slot number."""

    __slots__ = ("buf", "pos", "_vtable", "_vtable_len", "memo")

    def __init__(self, buf: bytes, pos: int, memo: dict | None = None) -> None:
        self.buf = buf
        self.pos = pos
        # What was read already, by position, shared by every table of one buffer: a vector or a
        # table many fields point at is read once and shared, so reading costs what the buffer
        # holds, not what its references multiply it to (a crafted file shares one vector of
        # 100,000 items among 100,000 values).
        self.memo = {} if memo is None else memo
        _check(buf, pos, 4, "table")
        _aligned(pos, 4, "table")
        vtable = pos - _unpack(buf, "<i", pos)
        _check(buf, vtable, 2, "vtable")
        _aligned(vtable, 2, "vtable")
        # As the Verifier: any even length; one under 4 + 2 * slot leaves the field absent.
        vtable_len = _unpack(buf, "<H", vtable)
        if vtable_len % 2:
            raise FlatbufferError(f"bad vtable length {vtable_len} at {vtable}")
        _check(buf, vtable, vtable_len, "vtable")
        self._vtable = vtable
        self._vtable_len = vtable_len

    def _field(self, slot: int, size: int = 4) -> int:
        """Absolute position of field `slot` (`size` bytes, aligned to it), or 0 if it is absent."""
        entry = 4 + 2 * slot
        if entry >= self._vtable_len:
            return 0
        offset = _unpack(self.buf, "<H", self._vtable + entry)
        if not offset:
            return 0
        pos = self.pos + offset
        _check(self.buf, pos, size, f"field {slot} of the table at {self.pos}")
        _aligned(pos, size, f"field {slot} of the table at {self.pos}")
        return pos

    def has(self, slot: int) -> bool:
        """Whether field `slot` is present (the runtime tells an absent vector from an empty one)."""
        entry = 4 + 2 * slot
        return entry < self._vtable_len and _unpack(self.buf, "<H", self._vtable + entry) != 0

    def scalar(self, slot: int, fmt: str, default: T) -> T:
        size = struct.calcsize("<" + fmt)
        pos = self._field(slot, size)
        if not pos:
            return default
        return _unpack(self.buf, "<" + fmt, pos)

    def _indirect(self, pos: int) -> int:
        offset = _unpack(self.buf, "<I", pos)
        if offset == 0 or offset > _MAX_OFFSET:
            raise FlatbufferError(f"offset {offset} at {pos} is {'zero' if offset == 0 else 'negative'}")
        target = pos + offset
        _check(self.buf, target, 1, "offset target")
        return target

    def table(self, slot: int) -> Table | None:
        pos = self._field(slot)
        return Table(self.buf, self._indirect(pos), self.memo) if pos else None

    def string(self, slot: int) -> str | None:
        """A string, NUL bytes kept (see `has_nul`); bytes that are not UTF-8 are shown escaped."""
        pos = self._field(slot)
        if not pos:
            return None
        start, length = self._vector_header(self._indirect(pos), 1)
        _check(self.buf, start + length, 1, "string terminator")
        if self.buf[start + length] != 0:
            raise FlatbufferError(f"string at {start} ({length} bytes) is not NUL-terminated")
        return bytes(self.buf[start : start + length]).decode("utf-8", errors="backslashreplace")

    def _vector_header(self, pos: int, elem_size: int) -> tuple[int, int]:
        _aligned(pos, 4, "vector")
        length = _unpack(self.buf, "<I", pos)
        if length > MAX_VECTOR_LENGTH:
            raise FlatbufferError(f"vector at {pos} claims {length} elements")
        _check(self.buf, pos + 4, length * elem_size, "vector")
        if length:
            _aligned(pos + 4, elem_size, "vector data")
        return pos + 4, length

    def scalars(self, slot: int, fmt: str) -> tuple:
        """A vector of scalars (fmt is a struct code such as 'i' or 'q'); () when absent. The
        same vector read twice is the same tuple."""
        pos = self._field(slot)
        if not pos:
            return ()
        target = self._indirect(pos)
        key = ("scalars", target, fmt)
        if key not in self.memo:
            size = struct.calcsize("<" + fmt)
            start, length = self._vector_header(target, size)
            self.memo[key] = struct.unpack_from(f"<{length}{fmt}", self.buf, start)
        return self.memo[key]

    def bytes(self, slot: int) -> memoryview:
        pos = self._field(slot)
        if not pos:
            return memoryview(b"")
        start, length = self._vector_header(self._indirect(pos), 1)
        return memoryview(self.buf)[start : start + length]

    def tables(self, slot: int, build: Callable[[Table], T]) -> list[T]:
        """A vector of tables, each turned into a value by `build`; [] when absent."""
        pos = self._field(slot)
        if not pos:
            return []
        start, length = self._vector_header(self._indirect(pos), 4)
        built = []
        for i in range(length):
            target = self._indirect(start + 4 * i)
            key = ("table", target, build)
            if key not in self.memo:
                self.memo[key] = build(Table(self.buf, target, self.memo))
            built.append(self.memo[key])
        return built

    def union(self, type_slot: int, value_slot: int) -> tuple[int, Table | None]:
        """A union field: its type tag and its table (None when absent), whatever the tag."""
        return self.scalar(type_slot, "B", 0), self.table(value_slot)


def root(buf: bytes, identifier: bytes) -> Table:
    """The root table of `buf`, after checking its 4-byte file identifier."""
    if len(buf) < 8:
        raise FlatbufferError(f"{len(buf)} bytes is too short for a flatbuffer")
    found = bytes(buf[4:8])
    if found != identifier:
        raise FlatbufferError(
            f"file identifier is {found!r}, expected {identifier!r}"
        )
    offset = _unpack(buf, "<I", 0)
    # ExecuTorch's Program::load: the root table must lie past the 8-byte header, with room
    # for its vtable offset.
    if offset < 8 or offset > len(buf) - 4:
        raise FlatbufferError(f"root table offset {offset} is invalid for a {len(buf)}-byte program")
    return Table(buf, offset)


def _check(buf: bytes, pos: int, size: int, what: str) -> None:
    if pos < 0 or size < 0 or pos + size > len(buf):
        raise FlatbufferError(
            f"{what} at offset {pos} (+{size} bytes) is outside the {len(buf)}-byte buffer"
        )


def _aligned(pos: int, size: int, what: str) -> None:
    if pos % size:
        raise FlatbufferError(f"{what} at offset {pos} is not aligned to {size} bytes")


def _unpack(buf: bytes, fmt: str, pos: int):
    _check(buf, pos, struct.calcsize(fmt), "field")
    return struct.unpack_from(fmt, buf, pos)[0]
