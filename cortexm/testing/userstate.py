"""The process state the user's code may change, kept apart between cases in an export
worker: each case starts from the state the worker had right after importing its case file,
and the worker is put back as it was before, whatever the case's code set.

    with userstate.isolated(case_file, import_it) as what_the_import_read:
        ...                          # one case's export

What is kept: torch's default dtype, grad mode, deterministic flag and random state, Python's
and NumPy's random state, the environment, the working folder, sys.path and the warning
filters. A case thus never fails (or passes) because of the case exported before it in the
same worker, and its cached result is its own.
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any, cast

_PRISTINE: dict[str, Any] | None = None
_AFTER_IMPORT: dict[str | None, tuple[dict[str, Any], Any]] = {}


@contextlib.contextmanager
def isolated(case_file: str | None, import_it: Callable[[], Any]) -> Iterator[Any]:
    """The block runs from the state after `case_file`'s import (`import_it()`, once per
    worker; its result is what the block gets), and leaves the state as before any case."""
    global _PRISTINE
    if _PRISTINE is None:
        _PRISTINE = _capture()
    try:
        if case_file not in _AFTER_IMPORT:
            _restore(_PRISTINE)
            read = import_it()
            _AFTER_IMPORT[case_file] = (_capture(), read)
        state, read = _AFTER_IMPORT[case_file]
        _restore(state)
        yield read
    finally:
        _restore(_PRISTINE)


def _capture() -> dict[str, Any]:
    import torch

    state: dict[str, Any] = {
        "dtype": torch.get_default_dtype(), "grad": torch.is_grad_enabled(),
        "deterministic": torch.are_deterministic_algorithms_enabled(), "torch_rng": torch.get_rng_state(),
        "random": random.getstate(), "environ": dict(os.environ), "cwd": os.getcwd(), "path": list(sys.path),
        "warnings": list(warnings.filters),
    }
    if "numpy" in sys.modules:
        state["numpy_rng"] = sys.modules["numpy"].random.get_state()
    return state


def _restore(state: dict[str, Any]) -> None:
    import torch

    torch.set_default_dtype(state["dtype"])
    torch.set_grad_enabled(state["grad"])
    torch.use_deterministic_algorithms(state["deterministic"])
    torch.set_rng_state(state["torch_rng"])
    random.setstate(state["random"])
    if "numpy_rng" in state and "numpy" in sys.modules:
        sys.modules["numpy"].random.set_state(state["numpy_rng"])
    if dict(os.environ) != state["environ"]:
        os.environ.clear()
        os.environ.update(state["environ"])
    with contextlib.suppress(OSError):
        os.chdir(state["cwd"])
    sys.path[:] = state["path"]
    cast("list[object]", warnings.filters)[:] = state["warnings"]  # a list, typed as a Sequence
