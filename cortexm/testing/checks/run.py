"""Stage run: the program, as the bundle holds it, on the runner built for the core
(cortexm.testing.simulate), each kernel call timed. It only runs: the outputs are judged by
stage compare. With no simulator the case is NOT RUN, never a pass."""

from __future__ import annotations

import time
from typing import Any

from cortexm.base.errors import CortexmError
from cortexm.base.targets import Core
from cortexm.pte.bundle import Bundle
from cortexm.pte.program import ExecutionPlan
from cortexm.pte.tensors import reference_outputs
from cortexm.report.results import Run, Status
from cortexm.testing.checks.context import Checking, fail, tail


def stage(c: Checking) -> None:
    result = c.result
    simulator = c.options.simulators.get(c.core.name)
    if simulator is None or isinstance(simulator, str):
        # What was never simulated is never a pass: it has its own status.
        result.run = Run(sim="not run")
        why = f"not simulated: {simulator or 'no simulator'}"
        if result.status == Status.PASS:
            result.status, result.reason = Status.NOT_RUN, why
        else:
            result.details = (result.details + "\n" + why).strip()
        c.done = True
        return
    c.simulator = simulator
    t = time.perf_counter()
    result.stages.append("run")
    # What the outputs must be, read before the simulation: a damaged bundle costs no run.
    c.references = reference_outputs(c.bundle)
    outcome = c.outcome = simulator.run(c.bundle, c.core)
    result.seconds["run"] = time.perf_counter() - t
    record = result.run = Run(instructions=outcome.instructions, remembered=outcome.remembered)
    record.calls = call_costs(c.bundle.program().plan(), outcome.calls)
    if c.options.profile and not outcome.failure:
        record.profile = _profile(c.bundle, c.core, simulator, outcome.log)
    record.memory_use = _memory_use(outcome.log)
    if outcome.failure:
        record.sim = "FAIL"
        fail(result, "run", f"{simulator.name}: {outcome.failure}", tail(outcome.log))
        c.done = True
        return
    record.sim = "ok"


def call_costs(plan: ExecutionPlan, costs: dict[int, int]) -> list[list]:
    """[instruction, operator, cost] of every kernel call of `plan` a run timed (cortexm.sim.protocol)."""
    return [[n, op.name, costs[n]] for n, op, _ in plan.kernel_calls() if n in costs] if costs else []


def _memory_use(log: str) -> dict:
    """The runner's memory line of a run, or {} (a host run, an older runner)."""
    from cortexm.report.fit import parse_memory_line

    try:
        return parse_memory_line(log)
    except CortexmError:
        return {}


def _profile(bundle: Bundle, core: Core, simulator: Any, log: str) -> dict:
    """The run call by call (`test --profile`), or why it cannot be shown. `simulator`: a
    cortexm.testing.simulate.RunnerSimulator (its runner's board)."""
    from cortexm.report.profile import profile
    from cortexm.sim.protocol import SimResult

    try:
        return profile(bundle, core, SimResult(0, log), simulator.runner.board, simulator.name.split()[0]).as_dict()
    except CortexmError as e:
        return {"error": str(e)}
