"""The stages of one case's checks, in order, as upstream ExecuTorch's pass manager lists its
passes: each a function of the case's opened bundle and what earlier stages found
(context.Checking), each leaving its record and verdict in the case's result. Then which known defects
explain a failure (XFAIL) or should have caused one (XPASS)."""

from __future__ import annotations

import traceback
from pathlib import Path

from cortexm import cases as case_registry
from cortexm.base.errors import CortexmError
from cortexm.base.targets import Core
from cortexm.cases import defects
from cortexm.report.results import CaseResult, Status
from cortexm.testing.checks import (
    accuracy,
    compare,
    constants,
    dialect,
    export,
    lowering,
    memory,
    run,
    semantic,
    upstream_reference,
    verify,
)
from cortexm.testing.checks.context import Checking, Stage, fail
from cortexm.testing.exports import Stopped
from cortexm.testing.results import Options

# After stage export has opened the bundle. Stage run ends the case when there is no simulator
# or the run failed: the stages after it judge its outputs.
STAGES: tuple[Stage, ...] = (
    verify.stage,               # the loader's checks, schemas, audits for the core
    lowering.stage,             # calls left in float and why
    constants.stage,            # constant bytes no call reads
    dialect.stage,              # the lowered graph against its golden
    semantic.stage,             # every point within its operator's tolerance of the quantized model
    accuracy.stage,             # against the float model, held to a floor
    run.stage,                  # the program on the core's runner
    compare.stage,              # its outputs against the integer reference
    upstream_reference.stage,   # ExecuTorch's Python reference against the integer one
    memory.stage,               # the isolated plan, guarded, with two fills
)


def check(case: case_registry.Case, core: Core, exported: Path | str, options: Options) -> CaseResult:
    """Every stage of `case` on `core` over the bundle at `exported` (a str: why its export
    failed; Stopped: its code ended or outlived its worker), then its known defects."""
    result = CaseResult(case.name, core.name, exhaustive=case.grid.op if case.grid and
                        case.grid.level.startswith("exhaustive") else "", deployment=case.deployment)
    try:
        if isinstance(exported, Stopped):  # the case's code ended or outlived its worker: no verdict on it
            result.stages.append("export")
            result.status, result.reason = Status.ERROR, str(exported)
        else:
            checking = Checking(case, core, options, export.opened(exported, result), result)
            for stage in STAGES:
                stage(checking)
                if checking.done:
                    break
    except CortexmError as e:
        fail(result, result.stages[-1] if result.stages else "export", str(e))
    except Exception as e:  # a bug in cortexm: the run goes on, the report shows it
        result.status, result.reason = Status.ERROR, f"internal error {type(e).__name__}: {e}"
        result.details = traceback.format_exc()
    simulator = options.simulators.get(core.name)
    locate = {**defects.default_locators(), **getattr(simulator, "locators", {})}
    expect(result, case.defects_here(core.name, locate))
    return result


def expect(result: CaseResult, known: tuple) -> None:
    """Turn a failure that known defects explain into XFAIL, a pass they should have
    prevented into XPASS, and any other failure of such a case into a FAIL that says so
    (cortexm.cases.defects.judge)."""
    if result.status not in (Status.FAIL, Status.PASS, Status.NOT_RUN):  # an ERROR, or judged already
        return
    judged = defects.judge(known, result.failures if result.status == Status.FAIL else [], set(result.stages))
    if judged is None:
        return
    if judged.status != "FAIL":
        result.status = Status(judged.status)
    result.reason = judged.reason
