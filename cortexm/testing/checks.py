"""The checks of one case on one core, in order: its export, verify, what the lowering left in
float, constants no call reads, the dialect golden, the semantic and accuracy judges, the
simulator run and the comparison with the integer reference, the memory oracle; then which
known defects explain a failure (XFAIL) or should have caused one (XPASS).
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path

from cortexm import cases as case_registry
from cortexm.base.errors import CortexmError
from cortexm.base.targets import Core
from cortexm.cases import defects
from cortexm.lowering import dialect
from cortexm.pte.bundle import Bundle
from cortexm.pte.sidecar import Sidecar, program_name, read_sidecar
from cortexm.pte.tensors import compare, reference_outputs
from cortexm.report.results import CaseResult, Status
from cortexm.testing.exports import Stopped
from cortexm.testing.results import Options

# --- the per-case checks --------------------------------------------------------------

def check(case: case_registry.Case, core: Core, exported: Path | str, options: Options) -> CaseResult:
    result = CaseResult(case.name, core.name, exhaustive=case.grid.op if case.grid and
                        case.grid.level.startswith("exhaustive") else "", deployment=case.deployment)
    try:
        if isinstance(exported, Stopped):  # the case's code ended or outlived its worker: no verdict on it
            result.stages.append("export")
            result.status, result.reason = Status.ERROR, str(exported)
        else:
            _check(case, core, exported, options, result)
    except CortexmError as e:
        _fail(result, result.stages[-1] if result.stages else "export", str(e))
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
    if result.status == Status.ERROR or result.status not in (Status.FAIL, Status.PASS, Status.NOT_RUN):
        return
    judged = defects.judge(known, result.failures if result.status == Status.FAIL else [], set(result.stages))
    if judged is None:
        return
    if judged.status != "FAIL":
        result.status = Status(judged.status)
    result.reason = judged.reason


def _check(case, core: Core, exported: Path | str, options: Options, result: CaseResult) -> None:
    result.stages.append("export")
    if isinstance(exported, str):
        raise CortexmError(f"export failed: {exported}")
    bundle = Bundle.open(exported)
    pte, sidecar = exported, bundle.sidecar
    if sidecar is None:
        raise CortexmError(f"{pte}: no sidecar beside it")
    result.pte = str(pte)
    result.data_targets = sidecar.data_targets

    result.stages.append("verify")
    t = time.perf_counter()
    from cortexm.checking.verify import verify_file

    findings = verify_file(pte, options.library, core, lowering=False, bundle=bundle)
    problems = [f for f in findings if f.is_problem]
    result.verify = "ok" if not problems else problems[0].status
    for f in problems:
        _fail(result, "verify", f.line())
    result.seconds["verify"] = time.perf_counter() - t
    _check_lowering(case, bundle, result)
    _check_constants(bundle, core, result)

    t = time.perf_counter()
    # Goldens belong to built-in cases; a given program only shares the name.
    if options.goldens is not None and case.program is None:
        golden = dialect.golden_path(options.goldens, core.name, case.name)
        if golden.is_file():
            diff = dialect.compare(bundle.read(sidecar.dialect).decode(errors="replace"), golden)
            result.stages.append("dialect")
            result.dialect = "ok" if diff is None else "DIFF"
            if diff is not None:
                _fail(result, "dialect", f"lowered graph differs from {golden}", diff)
    result.seconds["dialect"] = time.perf_counter() - t
    _check_semantic(sidecar, result)
    _check_accuracy(case, sidecar, result, bundle)

    simulator = options.simulators.get(core.name)
    if simulator is None or isinstance(simulator, str):
        # What was never simulated is never a pass: it has its own status.
        result.sim = "not run"
        why = f"not simulated: {simulator or 'no simulator'}"
        if result.status == Status.PASS:
            result.status, result.reason = Status.NOT_RUN, why
        else:
            result.details = (result.details + "\n" + why).strip()
        return
    t = time.perf_counter()
    result.stages.append("run")
    outcome = simulator.run(pte, core)
    result.seconds["run"] = time.perf_counter() - t
    result.instructions, result.remembered = outcome.instructions, outcome.remembered
    result.calls = call_costs(bundle.program().plan(), outcome.calls)
    if options.profile and not outcome.failure:
        result.profile = _profile(bundle, core, simulator, outcome.log)
    result.memory_use = _memory_use(outcome.log)
    if outcome.failure:
        result.sim = "FAIL"
        _fail(result, "run", f"{simulator.name}: {outcome.failure}", _tail(outcome.log))
        return
    result.sim = "ok"
    result.stages.append("compare")
    result.outputs = outcome.outputs
    result.without_helium = sidecar.reference_without_helium
    references = reference_outputs(bundle)
    worst_lines = []
    result.max_lsb, result.mismatches, result.elements = 0.0, 0, 0
    for k, (actual, ref, entry) in enumerate(zip(outcome.outputs, references, sidecar.outputs, strict=False)):
        diff = compare(actual, ref, entry, k)
        result.per_output.append([diff.max_lsb, diff.mismatches, diff.elements])
        result.max_lsb = max(result.max_lsb, diff.max_lsb)
        result.mismatches += diff.mismatches
        result.elements += diff.elements
        worst_lines += [f"output {k}{list(i)}: got {a:.6g}, reference {r:.6g} ({d:g} LSB)" for i, a, r, d in diff.worst]
    if result.max_lsb > case.qtol:
        _fail(result, "compare", f"max |diff| {result.max_lsb:g} LSB > tolerance {case.qtol} LSB "
                                 f"({result.mismatches}/{result.elements} elements differ)", "\n".join(worst_lines))
    _check_upstream_reference(sidecar, result)
    if options.memory and bundle.has(sidecar.isolated):
        _check_memory(bundle, simulator, core, options, result)


def _check_lowering(case, bundle: Bundle, result: CaseResult) -> None:
    """Every call that is not a cortex_m kernel, and a compute operator left in float as a
    failure of its own unless the case expects it (cortexm.checking.lowering)."""
    from cortexm.checking import lowering

    result.stages.append("lowering")
    total, lowered, left = lowering.survey(bundle.program().plan(), bundle.sidecar)
    result.lowered, result.left = [lowered, total], [c.as_dict() for c in left]
    line = lowering.failure_line(left, dict(case.float_ops))
    result.lowering = "ok" if line is None else "FAIL"
    if line is not None:
        _fail(result, "lowering", line, "\n".join(f"instruction {c.instruction} {c.op} ({c.where()}"
                                                  f"{', ' + c.source if c.source else ''}): {c.reason}"
                                                  for c in left if c.fails))


def _check_constants(bundle: Bundle, core: Core, result: CaseResult) -> None:
    """Constant bytes no call reads (cortexm.checking.constants): those a known defect leaves
    are noted with it; any other fails stage `constants`."""
    from cortexm.checking import constants

    data, program = bundle.data, bundle.program()
    found = constants.survey(program, program.plan(), data, bundle.sidecar.constants)
    result.pte_bytes, result.constant_bytes, result.dead_bytes = len(data), found.total, found.dead_bytes
    # Whether the program could show the known defect at all: what a claim that it is fixed needs.
    result.dead_pattern = defects.shows_dead_weights({op.qualified_name for _, op, _ in program.plan().kernel_calls()},
                                                     core.backend)
    if not found.dead:
        return
    result.stages.append("constants")
    known = defects.EXECUTORCH_DEAD_WEIGHTS
    applies = known.applies(core.name, defects.default_locators())
    unexplained = [d for d in found.dead if not (applies and (not d.name or known.explains("constants", d.name)))]
    if not unexplained:
        result.dead_cause = known.name
        return
    _fail(result, "constants", constants.Constants(found.total, tuple(unexplained)).line(),
          "\n".join(f"buffer {d.buffer} {d.tensor} {d.name}: {d.nbytes} B" for d in unexplained))


def _check_accuracy(case, sidecar: Sidecar, result: CaseResult, bundle: Bundle) -> None:
    """The program against the float model (cortexm.semantic.accuracy, .realinputs): shown, and
    failed below the floor or where a calibrated range does not cover the real inputs (the
    example inputs where the case's data stays in the calibrated range, an evaluation set).
    Below the floor the line names the point that lost the most, its module, and its SQNR and
    that of the points it reads."""
    from cortexm.semantic import accuracy, realinputs

    record = sidecar.accuracy
    if not record:
        return
    result.stages.append("accuracy")
    result.accuracy_db, result.top1 = accuracy.summary(record)
    calls = {p.get("node"): (p.get("call"), p.get("op")) for p in (sidecar.semantic or {}).get("points", [])}
    points = [{**p, "call": calls.get(p["node"], (None, None))[0], "op": calls.get(p["node"], (None, None))[1]}
              for p in record.get("points", [])]
    modules = {c.get("instruction"): str(c.get("module") or "") for c in sidecar.calls or [] if isinstance(c, dict)}
    try:
        result.accuracy_points = accuracy.with_inputs(points, bundle.program().plan(), modules)
    except CortexmError:  # a program the reader refuses fails in its own stage; the points stay as recorded
        result.accuracy_points = points
    result.accuracy_real = realinputs.summary(record, calls)
    floor = accuracy.below_floor(record, sidecar.data)
    for line in realinputs.failures(record, sidecar.data, calls):
        _fail(result, "accuracy", line + (accuracy.lost_line(result.accuracy_points) if line == floor else ""))


def _check_semantic(sidecar: Sidecar, result: CaseResult) -> None:
    """The program against the model it was lowered from (cortexm.semantic), as the export
    recorded it: the outputs' shapes, dtypes and layouts, and every point within its
    operator's tolerance. Independent of the simulator: a wrong lowering fails here even
    when the runner and the integer reference agree on it."""
    from cortexm.semantic import judge

    semantic = sidecar.semantic
    if not semantic:
        return
    result.stages.append("semantic")
    points = semantic.get("points", [])
    result.semantic_lsb = max((p["max_lsb"] for p in points), default=None)
    result.drift_lsb = max((d["max_lsb"] for d in semantic.get("drift", []) if d.get("max_lsb") is not None), default=None)
    result.sqnr_db = min((f["sqnr_db"] for f in semantic.get("float", []) if f.get("sqnr_db") is not None), default=None)
    result.semantic_points = [{k: p.get(k) for k in ("op", "call", "node", "max_lsb", "histogram")} for p in points]
    departures = judge.departures(semantic)
    for line, details in departures:
        _fail(result, "semantic", line, details)
    result.semantic = "FAIL" if departures else "ok"


def _memory_use(log: str) -> dict:
    """The runner's memory line of a run, or {} (a host run, an older runner)."""
    from cortexm.report.fit import parse_memory_line

    try:
        return parse_memory_line(log)
    except CortexmError:
        return {}


def _profile(bundle: Bundle, core: Core, simulator, log: str) -> dict:
    """The run call by call (`test --profile`), or why it cannot be shown."""
    from cortexm.report.profile import profile
    from cortexm.sim.protocol import SimResult

    try:
        return profile(bundle, core, SimResult(0, log), simulator.runner.board, simulator.name.split()[0]).as_dict()
    except CortexmError as e:
        return {"error": str(e)}


def call_costs(plan, costs: dict[int, int]) -> list[list]:
    """[instruction, operator, cost] of every kernel call of `plan` a run timed (cortexm.sim.protocol)."""
    return [[n, op.name, costs[n]] for n, op, _ in plan.kernel_calls() if n in costs] if costs else []


def _check_memory(bundle: Bundle, simulator, core: Core, options: Options, result: CaseResult) -> None:
    """The memory oracle: the program planned one tensor per buffer (cortexm.checking.memory_plan),
    run with a guard around every buffer checked after each kernel call, twice, with the
    buffers filled differently. A write outside a buffer names the call and the argument;
    outputs that change with the fill read memory nothing wrote; outputs that differ from
    the normal plan's depend on where the plan puts things."""
    import numpy as np

    from cortexm.checking.memory_plan import guard_failures

    t = time.perf_counter()
    result.stages.append("memory")
    isolated = bundle.path(bundle.sidecar.isolated)
    inputs = [bundle.path(name) for name in bundle.names("inputs")]
    runs = []
    for fill in options.fills:
        outcome = simulator.run(isolated, core, inputs, simulator.memory_args(fill))
        if outcome.failure:
            overruns = guard_failures(outcome.log, isolated)
            sanitizer = outcome.failure.startswith(("AddressSanitizer", "UBSan"))
            _fail(result, "memory", overruns[0] if overruns else outcome.failure if sanitizer else
                  f"{simulator.name} (isolated plan, fill {fill:#04x}): {outcome.failure}",
                  "\n".join(overruns[1:]) or _tail(outcome.log))
            result.memory = "FAIL"
            return
        runs.append(outcome.outputs)
    result.seconds["memory"] = time.perf_counter() - t
    same = lambda a, b: all(np.array_equal(x, y) for x, y in zip(a, b, strict=False))  # noqa: E731
    if not same(runs[0], runs[1]):
        _fail(result, "memory", f"the outputs change with what fills the planned buffers ({options.fills[0]:#04x} and "
                                f"{options.fills[1]:#04x}): a kernel reads memory nothing wrote")
    elif result.outputs and not same(runs[0], result.outputs):
        _fail(result, "memory", "the outputs with one buffer per tensor differ from the normal plan's: a kernel "
                                "reads or writes outside its buffers")
    result.memory = "ok" if "memory" not in {s for s, _ in result.failures} else "FAIL"


def _check_upstream_reference(sidecar: Sidecar, result: CaseResult) -> None:
    """ExecuTorch's Python reference against the integer one, call by call, as recorded at
    export: differences a named finding allows are noted (cortexm.oracle.upstream), any
    other fails the case."""
    calls = (sidecar.upstream_reference or {}).get("calls") or []
    if not calls:
        return
    result.stages.append("upstream-reference")
    for call in calls:
        result.findings += [f for f in call["findings"] if f not in result.findings]
    unexplained = [c for c in calls if c["unexplained"]]
    if unexplained:
        c = unexplained[0]
        what = c["note"] or f"{c['unexplained']} of {c['elements']} elements differ (up to {c['max_lsb']:g} LSB)"
        _fail(result, "upstream-reference",
              f"ExecuTorch's Python reference of {c['op']} (call {c['call']}) departs from the integer reference "
              f"as no known finding does: {what}",
              "\n".join(f"call {c['call']} {c['op']}: {c['differ']} of {c['elements']} differ, up to {c['max_lsb']:g} LSB; "
                        f"{c['unexplained']} unexplained; {c['note']}" for c in unexplained))


def _fail(result: CaseResult, stage: str, reason: str, details: str = "") -> None:
    result.status = Status.FAIL
    result.failures.append((stage, reason))
    if not result.reason:
        result.reason = reason
    if details:
        result.details = (result.details + "\n" + details).strip()


def _tail(log: str, lines: int = 15) -> str:
    """What to look at in a simulator log: a sanitizer's report from its start, else the end."""
    report = log.find("==ERROR: ")
    if report >= 0:
        return "\n".join(log[report:].splitlines()[:lines + 10])
    return "\n".join(log.rstrip().splitlines()[-lines:])


def given_program(pte: Path) -> case_registry.Case:
    """A program exported elsewhere, as a case: its sidecar gives name and tolerance."""
    from cortexm.pte import load

    load(pte)  # a clear error now for a missing or damaged file
    sidecar = read_sidecar(pte)
    if sidecar is None:
        raise CortexmError(f"{pte}: no sidecar {pte.with_suffix('.json').name} beside it (export it with cortexm export)")

    def not_buildable():
        raise CortexmError(f"{pte} is a given program, not a buildable case")

    return case_registry.Case(program_name(pte, sidecar), f"given program {pte}", not_buildable, qtol=sidecar.qtol or 0,
                              program=pte)
