"""Files shaped to make a reader work harder than their size: shared vectors, deep nesting,
long lines. Used by tests/base/test_readers.py and bench/attacks.py (which measures them).

    shared_list_program(values=100_000, items=100_000) -> bytes   # a .pte, about 3 MB
    deep_json(depth=100_000) -> str                               # [[[...]]]
    long_line_schema(length=1_000_000) -> str                     # a schema .yaml
"""

from __future__ import annotations

import flatbuffers
import numpy as np

# Slots of schema/program.fbs the reader reads (cortexm.pte.program).
_PROGRAM_PLANS, _PLAN_NAME, _PLAN_VALUES = 1, 0, 2
_EVALUE_TYPE, _EVALUE_VAL, _INT_LIST = 0, 1, 7


def shared_list_program(values: int = 100_000, items: int = 100_000) -> bytes:
    """A program whose `values` IntList values all point at one vector of `items` items: a few
    MB of flatbuffer that a reader expanding every list would turn into values x items."""
    b = flatbuffers.Builder(1 << 20)
    shared = b.CreateNumpyVector(np.zeros(items, dtype=np.int64))
    evalues = []
    for _ in range(values):
        b.StartObject(1)  # IntList { items }
        b.PrependUOffsetTRelativeSlot(0, shared, 0)
        int_list = b.EndObject()
        b.StartObject(2)  # EValue { val_type, val }
        b.PrependUint8Slot(_EVALUE_TYPE, _INT_LIST, 0)
        b.PrependUOffsetTRelativeSlot(_EVALUE_VAL, int_list, 0)
        evalues.append(b.EndObject())
    b.StartVector(4, len(evalues), 4)
    for offset in reversed(evalues):
        b.PrependUOffsetTRelative(offset)
    value_vector = b.EndVector()
    name = b.CreateString("forward")
    b.StartObject(9)  # ExecutionPlan
    b.PrependUOffsetTRelativeSlot(_PLAN_NAME, name, 0)
    b.PrependUOffsetTRelativeSlot(_PLAN_VALUES, value_vector, 0)
    plan = b.EndObject()
    b.StartVector(4, 1, 4)
    b.PrependUOffsetTRelative(plan)
    plans = b.EndVector()
    b.StartObject(8)  # Program
    b.PrependUOffsetTRelativeSlot(_PROGRAM_PLANS, plans, 0)
    b.Finish(b.EndObject(), file_identifier=b"ET12")
    return bytes(b.Output())


def deep_json(depth: int = 100_000) -> str:
    return "[" * depth + "]" * depth


def long_line_schema(length: int = 1_000_000) -> str:
    """A schema .yaml whose one entry is `a`, `length` spaces and `b`: a backtracking pattern
    (`\\s*(.+?)\\s*$`) takes time quadratic in the line."""
    return "- func: a" + " " * length + "b\n"
