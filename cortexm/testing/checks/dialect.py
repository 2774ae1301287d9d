"""Stage dialect: the lowered graph against its golden (cortexm.lowering.dialect), for built-in
cases that have one: a change detector, not a verdict of right or wrong."""

from __future__ import annotations

import time

from cortexm.lowering import dialect
from cortexm.report.results import Dialect
from cortexm.testing.checks.context import Checking, fail


def stage(c: Checking) -> None:
    result = c.result
    t = time.perf_counter()
    # Goldens belong to built-in cases; a given program only shares the name.
    if c.options.goldens is not None and c.case.program is None:
        golden = dialect.golden_path(c.options.goldens, c.core.name, c.case.name)
        if golden.is_file():
            diff = dialect.compare(c.bundle.read(c.sidecar.dialect).decode(errors="replace"), golden)
            result.stages.append("dialect")
            result.dialect = Dialect("ok" if diff is None else "DIFF")
            if diff is not None:
                fail(result, "dialect", f"lowered graph differs from {golden}", diff)
    result.seconds["dialect"] = time.perf_counter() - t
