"""A failed run's line, naming the call as verify names it.

When a kernel fails, ExecuTorch's runtime logs `KernelCall failed at instruction C:N in
operator OP` and a type id for each of the call's arguments; the cortex_m kernel's own line
before it says only `arm_convolve_wrapper_s8 failed with status -3`. This adds what neither
says: the call (`cortex_m::quantized_conv2d.out#2`), the model's module it came from (the
sidecar's provenance), and, for a call CMSIS-NN refuses on this core, the argument audit's
reason (cortexm.checking.arguments), the line `cortexm verify` gives for it.
"""

from __future__ import annotations

import re

from cortexm.base.targets import Core
from cortexm.pte.program import ExecutionPlan
from cortexm.pte.sidecar import Sidecar
from cortexm.sim.protocol import SimResult

# runtime/executor/method.cpp, Method::execute_instruction
_KERNEL_CALL = re.compile(r"KernelCall failed at instruction (\d+):(\d+) in operator ")
# The cortex_m kernels' line for a CMSIS-NN error: `... failed with status -3` (avg pool: `[-3]`).
_STATUS = re.compile(r"^E .* failed with status \[?(-?\d+)\]?\s*$", re.MULTILINE)


def failed_instruction(log: str, plan: ExecutionPlan) -> int | None:
    """The index in `plan.instructions` of the kernel call the log says failed, or None."""
    found = _KERNEL_CALL.search(log)
    if found is None:
        return None
    chain, step = int(found.group(1)), int(found.group(2))
    lengths = plan.chain_lengths or (len(plan.instructions),)
    if chain >= len(lengths) or step >= lengths[chain]:
        return None
    return sum(lengths[:chain]) + step


def named(log: str, plan: ExecutionPlan, sidecar: Sidecar | None, core: Core) -> str | None:
    """`OP#N (module)`, with the audit's reason when the log shows the status the audit says CMSIS-NN
    returns for the call on `core` (a kernel's own check, e.g. of the scratch size, may have stopped
    it first); None when the log names no failed kernel call."""
    from cortexm.checking.arguments import for_call
    from cortexm.checking.verify import call_subject

    index = failed_instruction(log, plan)
    if index is None:
        return None
    subject = call_subject(plan, index, sidecar)
    decision = for_call(plan, index, core.backend)
    refusal = decision.refusal if decision else None
    status = _STATUS.search(log)
    if refusal is None or status is None or int(status.group(1)) != refusal.status:
        return subject
    return f"{subject}: {refusal.text(f'{core.name} ({core.backend})')}"


def failure_line(result: SimResult, plan: ExecutionPlan, sidecar: Sidecar | None, core: Core) -> str | None:
    """The run's failure line (SimResult.failure_line), followed by the failed call it names."""
    line = result.failure_line
    if line is None or result.timed_out:
        return line
    call = named(result.log, plan, sidecar, core)
    return f"{line}, at {call}" if call else line
