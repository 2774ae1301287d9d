"""Stage memory, the memory oracle: the program planned one tensor per buffer
(cortexm.checking.memory_plan), run with a guard around every buffer checked after each kernel
call, twice, with the buffers filled differently. A write outside a buffer names the call and
the argument; outputs that change with the fill read memory nothing wrote; outputs that differ
from the normal plan's depend on where the plan puts things."""

from __future__ import annotations

import time

import numpy as np

from cortexm.report.results import Memory
from cortexm.testing.checks.context import Checking, fail, tail


def stage(c: Checking) -> None:
    from cortexm.checking.memory_plan import guard_failures

    result, options, simulator, bundle = c.result, c.options, c.simulator, c.bundle
    if not options.memory or not bundle.has(c.sidecar.isolated):
        return
    assert simulator is not None  # stage run ended the case otherwise
    t = time.perf_counter()
    result.stages.append("memory")
    # A program of its own, read (as the manifest records it) and parsed once for both fills.
    isolated = bundle.part(c.sidecar.isolated)
    inputs = [bundle.path(name) for name in bundle.names("inputs")]
    runs = []
    for fill in options.fills:
        outcome = simulator.run(isolated, c.core, inputs, simulator.memory_args(fill))
        if outcome.failure:
            overruns = guard_failures(outcome.log, isolated.pte)
            sanitizer = outcome.failure.startswith(("AddressSanitizer", "UBSan"))
            fail(result, "memory", overruns[0] if overruns else outcome.failure if sanitizer else
                 f"{simulator.name} (isolated plan, fill {fill:#04x}): {outcome.failure}",
                 "\n".join(overruns[1:]) or tail(outcome.log))
            result.memory = Memory("FAIL")
            return
        runs.append(outcome.outputs)
    result.seconds["memory"] = time.perf_counter() - t
    same = lambda a, b: all(np.array_equal(x, y) for x, y in zip(a, b, strict=False))  # noqa: E731
    if not same(runs[0], runs[1]):
        fail(result, "memory", f"the outputs change with what fills the planned buffers ({options.fills[0]:#04x} and "
                               f"{options.fills[1]:#04x}): a kernel reads memory nothing wrote")
    elif result.compare and result.compare.outputs and not same(runs[0], result.compare.outputs):
        fail(result, "memory", "the outputs with one buffer per tensor differ from the normal plan's: a kernel "
                               "reads or writes outside its buffers")
    result.memory = Memory("ok" if "memory" not in {s for s, _ in result.failures} else "FAIL")
