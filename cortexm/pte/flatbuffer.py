"""A bounds-checked reader for FlatBuffers tables.

The .pte reader needs only a handful of primitives (tables, vectors, strings,
unions). Every offset is checked against the buffer, so a truncated or
bit-flipped file raises ``FlatbufferError`` instead of returning garbage or an
arbitrary Python exception.
"""

from __future__ import annotations

import struct
from typing import Callable, TypeVar

T = TypeVar("T")

# A vector longer than this is certainly corrupt for a microcontroller model,
# and iterating it would only burn time before failing.
MAX_VECTOR_LENGTH = 1 << 24


class FlatbufferError(ValueError):
    """The buffer is not a well-formed flatbuffer of the expected shape."""


class Table:
    """One flatbuffer table: field access by vtable slot number."""

    __slots__ = ("buf", "pos", "_vtable", "_vtable_len")

    def __init__(self, buf: bytes, pos: int) -> None:
        self.buf = buf
        self.pos = pos
        _check(buf, pos, 4, "table")
        vtable = pos - _unpack(buf, "<i", pos)
        _check(buf, vtable, 4, "vtable")
        vtable_len = _unpack(buf, "<H", vtable)
        if vtable_len < 4 or vtable_len % 2:
            raise FlatbufferError(f"bad vtable length {vtable_len} at {vtable}")
        _check(buf, vtable, vtable_len, "vtable")
        self._vtable = vtable
        self._vtable_len = vtable_len

    def _field(self, slot: int) -> int:
        """Absolute position of field `slot`, or 0 if it is absent."""
        entry = 4 + 2 * slot
        if entry >= self._vtable_len:
            return 0
        offset = _unpack(self.buf, "<H", self._vtable + entry)
        return self.pos + offset if offset else 0

    def scalar(self, slot: int, fmt: str, default: T) -> T:
        pos = self._field(slot)
        if not pos:
            return default
        return _unpack(self.buf, "<" + fmt, pos)

    def _indirect(self, pos: int) -> int:
        target = pos + _unpack(self.buf, "<I", pos)
        _check(self.buf, target, 1, "offset target")
        return target

    def table(self, slot: int) -> Table | None:
        pos = self._field(slot)
        return Table(self.buf, self._indirect(pos)) if pos else None

    def string(self, slot: int) -> str | None:
        pos = self._field(slot)
        if not pos:
            return None
        start, length = self._vector_header(self._indirect(pos), 1)
        try:
            return self.buf[start : start + length].decode("utf-8")
        except UnicodeDecodeError as e:
            raise FlatbufferError(f"string at {start} is not UTF-8") from e

    def _vector_header(self, pos: int, elem_size: int) -> tuple[int, int]:
        length = _unpack(self.buf, "<I", pos)
        if length > MAX_VECTOR_LENGTH:
            raise FlatbufferError(f"vector at {pos} claims {length} elements")
        _check(self.buf, pos + 4, length * elem_size, "vector")
        return pos + 4, length

    def scalars(self, slot: int, fmt: str) -> list:
        """A vector of scalars (fmt is a struct code such as 'i' or 'q')."""
        pos = self._field(slot)
        if not pos:
            return []
        size = struct.calcsize("<" + fmt)
        start, length = self._vector_header(self._indirect(pos), size)
        return list(struct.unpack_from(f"<{length}{fmt}", self.buf, start))

    def bytes(self, slot: int) -> memoryview:
        pos = self._field(slot)
        if not pos:
            return memoryview(b"")
        start, length = self._vector_header(self._indirect(pos), 1)
        return memoryview(self.buf)[start : start + length]

    def tables(self, slot: int, build: Callable[[Table], T]) -> list[T]:
        """A vector of tables, each turned into a value by `build`."""
        pos = self._field(slot)
        if not pos:
            return []
        start, length = self._vector_header(self._indirect(pos), 4)
        return [build(Table(self.buf, self._indirect(start + 4 * i))) for i in range(length)]

    def union(self, type_slot: int, value_slot: int) -> tuple[int, Table | None]:
        """A union field: its type tag and its table (None for NONE)."""
        tag = self.scalar(type_slot, "B", 0)
        return tag, (self.table(value_slot) if tag else None)


def root(buf: bytes, identifier: bytes) -> Table:
    """The root table of `buf`, after checking its 4-byte file identifier."""
    if len(buf) < 8:
        raise FlatbufferError(f"{len(buf)} bytes is too short for a flatbuffer")
    found = bytes(buf[4:8])
    if found != identifier:
        raise FlatbufferError(
            f"file identifier is {found!r}, expected {identifier!r}"
        )
    return Table(buf, _unpack(buf, "<I", 0))


def _check(buf: bytes, pos: int, size: int, what: str) -> None:
    if pos < 0 or size < 0 or pos + size > len(buf):
        raise FlatbufferError(
            f"{what} at offset {pos} (+{size} bytes) is outside the {len(buf)}-byte buffer"
        )


def _unpack(buf: bytes, fmt: str, pos: int):
    _check(buf, pos, struct.calcsize(fmt), "field")
    return struct.unpack_from(fmt, buf, pos)[0]
