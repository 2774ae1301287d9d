"""Stage verify: the loader's checks, the kernel library's schemas, the scratch and argument
audits for the core (cortexm.checking.verify), over the program parsed already."""

from __future__ import annotations

import time

from cortexm.report.results import Verify
from cortexm.testing.checks.context import Checking, fail


def stage(c: Checking) -> None:
    from cortexm.checking.verify import verify_file

    result = c.result
    result.stages.append("verify")
    t = time.perf_counter()
    findings = verify_file(c.bundle.pte, c.options.library, c.core, lowering=False, bundle=c.bundle)
    problems = [f for f in findings if f.is_problem]
    result.verify = Verify("ok" if not problems else problems[0].status)
    for f in problems:
        fail(result, "verify", f.line())
    result.seconds["verify"] = time.perf_counter() - t
