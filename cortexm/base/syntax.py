"""Python's syntax trees, one parse at a time in a process.

CPython 3.11 and 3.12 count the AST constructor's recursion depth per interpreter, not per
thread: a thread switch in the middle of `ast.parse` (the garbage collector running a
finalizer's Python code is enough) lets another thread's parse change the count, and one of
them fails with "SystemError: AST constructor recursion depth mismatch" (python/cpython#106905).
cortexm parses in its check threads (a known defect is recognised by the syntax tree of the
code it lives in), so every parse goes through this lock.
"""

from __future__ import annotations

import ast
import threading

_ONE_AT_A_TIME = threading.Lock()


def parse(source: str | bytes, filename: str = "<unknown>") -> ast.Module:
    """ast.parse(source, filename), never at the same time as another thread's."""
    with _ONE_AT_A_TIME:
        return ast.parse(source, filename)
