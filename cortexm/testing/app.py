"""`cortexm test`: for each case and core, export (cached), compare the dialect golden,
verify, run on the simulator, compare with the reference, and report.

Stages are plain functions of files; the orchestration here only sequences them,
runs exports in parallel, and collects one CaseResult per (case, core).
"""

from __future__ import annotations

import os
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Protocol

from cortexm import cases as case_registry
from cortexm.lowering import dialect
from cortexm.checking.library import Library
from cortexm.cases import defects
from cortexm.base.errors import CortexmError
from cortexm.pte.bundle import Bundle
from cortexm.pte.sidecar import read_sidecar
from cortexm.base.targets import Core
from cortexm.testing import crosscore, shards
from cortexm.testing.crosscore import CrossCore
from cortexm.pte.tensors import compare, digests, reference_outputs
from cortexm.testing.casefiles import _FILE_CASES, IMPORT_TIMEOUT, _registered_by, load_case_file  # noqa: F401
from cortexm.testing.exports import export_all


@dataclass
class SimOutcome:
    """What a simulator run gave: outputs (logical layout), or a failure line."""

    outputs: list  # numpy arrays in the outputs' logical shapes
    instructions: int | None
    log: str
    failure: str | None  # one line naming what went wrong, None on success
    calls: dict = field(default_factory=dict)  # instruction index -> its cost (a run with --calls 1)
    remembered: bool = False  # the same program, inputs, runner and simulator ran before (cortexm.sim.memo)


class Simulator(Protocol):
    name: str

    def run(self, pte: Path, core: Core, inputs: list[Path] | None = None, extra_args: tuple[str, ...] = ()) -> SimOutcome: ...


# Statuses that fail a run: against a baseline, slower (SLOWER), less accurate (DEGRADED) or
# a larger program (LARGER) too.
FAILED = ("FAIL", "XPASS", "ERROR", "SLOWER", "DEGRADED", "LARGER")


@dataclass
class CaseResult:
    case: str
    core: str
    # PASS, FAIL, XFAIL, XPASS, ERROR, NOT RUN (checked, but not simulated); against a baseline
    # (cortexm.testing.perf) a PASS can be SLOWER (a failure) or FASTER.
    status: str = "PASS"
    dialect: str = "-"  # ok, DIFF, - (no golden)
    verify: str = "-"
    lowering: str = "-"  # ok, FAIL (a compute operator left in float), - (not checked)
    # [cortex_m kernel calls, kernel calls], and every call that is not a cortex_m kernel
    # (cortexm.checking.lowering.LeftCall.as_dict).
    lowered: list = field(default_factory=list)
    left: list = field(default_factory=list)
    # The program's constant bytes and those no call reads (cortexm.checking.constants), with the
    # known defect that explains them ("" when none does, or there are none).
    constant_bytes: int | None = None
    dead_bytes: int | None = None
    dead_cause: str = ""
    pte_bytes: int | None = None
    # The program against the float model over inputs drawn like the calibration data
    # (cortexm.semantic.accuracy): the lowest SQNR over its outputs, top-1 agreement ("k/n"),
    # and each activation point's own SQNR in the quantized model (what --baseline blames).
    accuracy_db: float | None = None
    top1: str | None = None
    accuracy_points: list = field(default_factory=list)
    # What the run used of the runner's memory (cortexm.report.fit.parse_memory_line), and
    # whether the case is a deployment (cortexm.cases.tiny): its line is printed.
    memory_use: dict = field(default_factory=dict)
    deployment: bool = False
    sim: str = "-"
    # Its program ran before with this runner and inputs: the run came from cortexm.sim.memo
    # (the program is unchanged by whatever was edited since).
    remembered: bool = False
    # Exported anew since an edit (cortexm.testing.exports.export_all): "unchanged" when the
    # program is byte for byte the one this cache made before, "changed" when the edit reached
    # it, "" when it came from the cache or had no earlier program.
    edit: str = ""
    memory: str = "-"  # the memory oracle: ok, FAIL, - (not run)
    semantic: str = "-"  # the program against the quantized model (cortexm.semantic): ok, FAIL, - (no model)
    semantic_lsb: float | None = None  # the largest departure of a point from the model, in LSB
    drift_lsb: float | None = None  # the whole program against the model without forcing, in output LSB
    sqnr_db: float | None = None  # the program against the float model (lowest over outputs; None: exact)
    # Per point of the semantic check: operator, call, largest difference and its histogram
    # (what bench/tolerances.py measures the tolerance table from).
    semantic_points: list = field(default_factory=list)
    max_lsb: float | None = None
    mismatches: int | None = None
    elements: int | None = None
    instructions: int | None = None
    reason: str = ""  # one line
    details: str = ""  # what to look at: graph diff, worst elements, simulator log tail
    failures: list = field(default_factory=list)  # (stage, line) of every check that failed
    findings: list = field(default_factory=list)  # known findings about upstream's reference this case showed
    stages: list = field(default_factory=list)  # the stages that ran (cortexm.cases.defects.STAGES)
    seconds: dict[str, float] = field(default_factory=dict)
    outputs: list = field(default_factory=list, repr=False)  # the simulator's, for the cross-core check
    # What each kernel call cost: [instruction index, operator, instructions (or ticks)], for
    # the performance gate (cortexm.testing.perf).
    calls: list = field(default_factory=list)
    perf: str = ""  # against a baseline (--baseline): the change in instructions, and the call that made it
    pte: str = ""  # the program that was checked (in the export cache)
    # Digests of the integer reference's outputs without ExecuTorch's Helium loops (M55 only):
    # what the core would give if only that rounding were otherwise.
    without_helium: list | None = field(default=None, repr=False)
    # Per output: [max |diff| LSB, mismatches, elements] against the reference.
    per_output: list = field(default_factory=list, repr=False)
    exhaustive: str = ""  # the operator of an exhaustive case (cortexm.cases.exhaustive)
    pack: str = ""  # the packed program it ran in (cortexm.testing.packs)
    data_targets: dict | None = None  # what solved boundary data met (cortexm.cases.solve)

    @property
    def failed(self) -> bool:
        return self.status in FAILED


@dataclass
class Options:
    cores: list[Core]
    pattern: str | None = None
    case_files: list[Path] = field(default_factory=list)
    goldens: Path | None = None
    library: Library | None = None
    simulators: dict[str, Simulator | str] = field(default_factory=dict)  # core -> simulator, or why there is none
    jobs: int = 2
    layout: str = "legacy"
    # Programs exported elsewhere (with their sidecar): checked and run as they are, per core.
    ptes: list[Path] = field(default_factory=list)
    grid: str = "default"  # which grid cases run: none, default, full (cortexm.cases.grid)
    # The memory oracle (guards around every planned buffer on a core, sanitizers on the
    # host), and the two fills whose outputs must agree.
    memory: bool = True
    fills: tuple[int, int] = (0x00, 0xFF)
    sim_jobs: int | None = None  # simulator runs at once (default: jobs)
    shard: tuple[int, int] | None = None  # (K, N): only the cases of shard K of N (cortexm.testing.shards)
    # Filled by run(): core -> programs simulated (a packed program counts once).
    programs: dict[str, int] = field(default_factory=dict)


def select_cases(options: Options) -> list[case_registry.Case]:
    if options.ptes and not options.case_files and not options.pattern:
        return []
    for path in options.case_files:
        load_case_file(path)
    if options.case_files:
        names = _registered_by(options.case_files)
        selected = [c for c in case_registry.all_cases() if c.name in names]
    else:
        selected = case_registry.all_cases(options.grid)
    if options.pattern:  # a packed program is selected by its name or any of its cases'
        selected = [c for c in selected if options.pattern in c.name or any(options.pattern in p for p in c.parts)]
    if not selected:
        raise CortexmError("no case matches" + (f" -k {options.pattern!r}" if options.pattern else ""))
    return [c for c in selected if shards.belongs(c.name, options.shard)]


# --- the per-case checks --------------------------------------------------------------

def check(case: case_registry.Case, core: Core, exported: Path | str, options: Options) -> CaseResult:
    result = CaseResult(case.name, core.name, exhaustive=case.grid[0] if case.grid and
                        case.grid[1].startswith("exhaustive") else "", deployment=case.deployment)
    try:
        _check(case, core, exported, options, result)
    except CortexmError as e:
        _fail(result, result.stages[-1] if result.stages else "export", str(e))
    except Exception as e:  # a bug in cortexm: the run goes on, the report shows it
        result.status, result.reason = "ERROR", f"internal error {type(e).__name__}: {e}"
        result.details = traceback.format_exc()
    simulator = options.simulators.get(core.name)
    locate = {**defects.default_locators(), **getattr(simulator, "locators", {})}
    expect(result, case.defects_here(core.name, locate))
    return result


def expect(result: CaseResult, known: tuple) -> None:
    """Turn a failure that known defects explain into XFAIL, a pass they should have
    prevented into XPASS, and any other failure of such a case into a FAIL that says so."""
    if not known or result.status == "ERROR":
        return
    if result.status == "FAIL":
        unexplained = [(stage, line) for stage, line in result.failures
                       if not any(d.explains(stage, line) for d in known)]
        if unexplained:
            stage, line = unexplained[0]
            result.reason = f"fails differently from {known[0].name} ({stage}): {line}"
        else:
            explaining = next(d for d in known if d.explains(*result.failures[0]))
            result.status = "XFAIL"
            result.reason = explaining.reason if explaining.name == explaining.reason else f"{explaining.name}: {explaining.reason}"
    elif result.status in ("PASS", "NOT RUN") and any(d.observable(set(result.stages)) for d in known):
        result.status = "XPASS"
        result.reason = (f"expected to fail ({known[0].name}) but passed: the defect looks fixed "
                         "here, update its record in cortexm/cases/defects.py or the case")


def _check(case, core: Core, exported: Path | str, options: Options, result: CaseResult) -> None:
    result.stages.append("export")
    if isinstance(exported, str):
        raise CortexmError(f"export failed: {exported}")
    bundle = Bundle.open(exported)
    pte, sidecar = exported, bundle.sidecar
    if sidecar is None:
        raise CortexmError(f"{pte}: no sidecar beside it")
    result.pte = str(pte)
    result.data_targets = sidecar.get("data_targets")

    result.stages.append("verify")
    t = time.perf_counter()
    from cortexm.checking.verify import verify_file

    findings = verify_file(pte, options.library, core, lowering=False)
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
            diff = dialect.compare(bundle.read(sidecar.get("dialect")).decode(errors="replace"), golden)
            result.stages.append("dialect")
            result.dialect = "ok" if diff is None else "DIFF"
            if diff is not None:
                _fail(result, "dialect", f"lowered graph differs from {golden}", diff)
    result.seconds["dialect"] = time.perf_counter() - t
    _check_semantic(sidecar, result)
    _check_accuracy(case, sidecar, result)

    simulator = options.simulators.get(core.name)
    if simulator is None or isinstance(simulator, str):
        # What was never simulated is never a pass: it has its own status.
        result.sim = "not run"
        why = f"not simulated: {simulator or 'no simulator'}"
        if result.status == "PASS":
            result.status, result.reason = "NOT RUN", why
        else:
            result.details = (result.details + "\n" + why).strip()
        return
    t = time.perf_counter()
    result.stages.append("run")
    outcome = simulator.run(pte, core, extra_args=CALLS)
    result.seconds["run"] = time.perf_counter() - t
    result.instructions, result.remembered = outcome.instructions, outcome.remembered
    result.calls = call_costs(pte, outcome.calls)
    result.memory_use = _memory_use(outcome.log)
    if outcome.failure:
        result.sim = "FAIL"
        _fail(result, "run", f"{simulator.name}: {outcome.failure}", _tail(outcome.log))
        return
    result.sim = "ok"
    result.stages.append("compare")
    result.outputs = outcome.outputs
    result.without_helium = sidecar.get("reference_without_helium")
    references = reference_outputs(bundle)
    worst_lines = []
    result.max_lsb, result.mismatches, result.elements = 0.0, 0, 0
    for k, (actual, ref, entry) in enumerate(zip(outcome.outputs, references, sidecar["outputs"])):
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
    if options.memory and bundle.has(sidecar.get("isolated")):
        _check_memory(bundle, simulator, core, options, result)


def _check_lowering(case, bundle: Bundle, result: CaseResult) -> None:
    """Every call that is not a cortex_m kernel, and a compute operator left in float as a
    failure of its own unless the case expects it (cortexm.checking.lowering)."""
    from cortexm.checking import lowering
    from cortexm.pte import load

    result.stages.append("lowering")
    total, lowered, left = lowering.survey(load(bundle.pte).plan(), bundle.sidecar)
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
    from cortexm.pte import parse

    data = bundle.pte.read_bytes()
    program = parse(data)
    found = constants.survey(program, program.plan(), data, bundle.sidecar.get("constants"))
    result.pte_bytes, result.constant_bytes, result.dead_bytes = len(data), found.total, found.dead_bytes
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


def _check_accuracy(case, sidecar: dict, result: CaseResult) -> None:
    """The program against the float model (cortexm.semantic.accuracy): shown, and failed below
    the floor where the case's data stays in the calibrated range."""
    from cortexm.semantic import accuracy

    record = sidecar.get("accuracy")
    if not record:
        return
    result.stages.append("accuracy")
    result.accuracy_db, result.top1 = accuracy.summary(record)
    calls = {p.get("node"): (p.get("call"), p.get("op")) for p in (sidecar.get("semantic") or {}).get("points", [])}
    result.accuracy_points = [{**p, "call": calls.get(p["node"], (None, None))[0], "op": calls.get(p["node"], (None, None))[1]}
                              for p in record.get("points", [])]
    line = accuracy.below_floor(record, sidecar.get("data", "uniform"))
    if line:
        _fail(result, "accuracy", line)


def _check_semantic(sidecar: dict, result: CaseResult) -> None:
    """The program against the model it was lowered from (cortexm.semantic), as the export
    recorded it: the outputs' shapes, dtypes and layouts, and every point within its
    operator's tolerance. Independent of the simulator: a wrong lowering fails here even
    when the runner and the integer reference agree on it."""
    from cortexm.semantic import judge

    semantic = sidecar.get("semantic")
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


# The main run times every instruction on its own (the runner's --calls): per-call costs for
# the performance gate, at no cost to the total.
CALLS = ("--calls", "1")


def _memory_use(log: str) -> dict:
    """The runner's memory line of a run, or {} (a host run, an older runner)."""
    from cortexm.report.fit import parse_memory_line

    try:
        return parse_memory_line(log)
    except CortexmError:
        return {}


def call_costs(pte: Path, costs: dict[int, int]) -> list[list]:
    """[instruction, operator, cost] of every kernel call a run timed (cortexm.sim.protocol)."""
    if not costs:
        return []
    from cortexm.pte import load

    return [[n, op.name, costs[n]] for n, op, _ in load(pte).plan().kernel_calls() if n in costs]


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
    isolated = bundle.path(bundle.sidecar["isolated"])
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
    same = lambda a, b: all(np.array_equal(x, y) for x, y in zip(a, b))  # noqa: E731
    if not same(runs[0], runs[1]):
        _fail(result, "memory", f"the outputs change with what fills the planned buffers ({options.fills[0]:#04x} and "
                                f"{options.fills[1]:#04x}): a kernel reads memory nothing wrote")
    elif result.outputs and not same(runs[0], result.outputs):
        _fail(result, "memory", "the outputs with one buffer per tensor differ from the normal plan's: a kernel "
                                "reads or writes outside its buffers")
    result.memory = "ok" if "memory" not in {s for s, _ in result.failures} else "FAIL"


def _check_upstream_reference(sidecar: dict, result: CaseResult) -> None:
    """ExecuTorch's Python reference against the integer one, call by call, as recorded at
    export: differences a named finding allows are noted (cortexm.oracle.upstream), any
    other fails the case."""
    calls = (sidecar.get("upstream_reference") or {}).get("calls") or []
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
    result.status = "FAIL"
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


# --- running everything ----------------------------------------------------------------

def run(options: Options, progress: Callable[[str], None] = lambda _: None) -> list[CaseResult]:
    selected = select_cases(options)
    pairs = [(c.name, core) for core in options.cores for c in selected]
    t = time.perf_counter()
    edits: dict[tuple[str, str], str] = {}
    exported = export_all(pairs, options, progress, edits) if pairs else {}
    export_seconds = time.perf_counter() - t
    by_name = {c.name: c for c in selected}
    from cortexm.base import progress as progress_mod

    task = progress_mod.task(progress, "verifying, running, comparing", total=len(pairs))
    results = _check_all([(by_name[name], core) for name, core in pairs], exported, options, task.advance)
    for result in results:
        result.seconds["export"] = export_seconds / len(pairs)
        result.edit = edits.get((result.case, result.core), "")
    task.done()
    _count_programs(results, options)
    if any(c.parts for c in selected):
        results = _unpack(results, by_name, options, progress)
    for pte in options.ptes:
        case = given_program(pte)
        if not shards.belongs(case.name, options.shard):
            continue
        for core in options.cores:
            results.append(check(case, core, pte, options))
            progress(f"{results[-1].status:5} {case.name} {core.name}")
    return results


def _check_all(work: list[tuple[case_registry.Case, Core]], exported: dict, options: Options,
               advance: Callable[[], None] = lambda: None) -> list[CaseResult]:
    """Each case checked on its core, in order; simulator runs are subprocesses, so threads
    run them in parallel."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, options.sim_jobs or options.jobs)) as pool:
        futures = [pool.submit(check, case, core, exported[(case.name, core.name)], options) for case, core in work]
        results = []
        for future in futures:
            results.append(future.result())
            advance()
    return results


def _count_programs(results: list[CaseResult], options: Options) -> None:
    for r in results:
        if "run" in r.stages:
            options.programs[r.core] = options.programs.get(r.core, 0) + 1


def _unpack(results: list[CaseResult], by_name: dict, options: Options, progress) -> list[CaseResult]:
    """One result per case of each packed program (cortexm.testing.packs): split where the
    program passed, else its cases exported and checked alone."""
    from cortexm.testing import packs

    done: list[CaseResult] = []
    alone: list[tuple[str, Core, str]] = []  # (case, core, its pack)
    cores = {c.name: c for c in options.cores}
    for r in results:
        case = by_name.get(r.case)
        if case is None or not case.parts:
            done.append(r)
        elif packs.passed(r):
            done += packs.split(r, case)
        else:
            alone += [(part, cores[r.core], case.name) for part in case.parts]
    if not alone:
        return done
    progress(f"{len({p for _, _, p in alone})} packed programs failed a check: running their {len(alone)} cases alone")
    exported = export_all([(name, core) for name, core, _ in alone], options, progress)
    rerun = _check_all([(case_registry.get(name), core) for name, core, _ in alone], exported, options)
    _count_programs(rerun, options)
    for r, (_, _, pack) in zip(rerun, alone):
        r.pack = pack
    return done + rerun


def given_program(pte: Path) -> case_registry.Case:
    """A program exported elsewhere, as a case: its sidecar gives name and tolerance."""
    from cortexm.pte import load

    load(pte)  # a clear error now for a missing or damaged file
    sidecar = read_sidecar(pte)
    if sidecar is None:
        raise CortexmError(f"{pte}: no sidecar {pte.with_suffix('.json').name} beside it (export it with cortexm export)")

    def not_buildable():
        raise CortexmError(f"{pte} is a given program, not a buildable case")

    return case_registry.Case(sidecar["name"], f"given program {pte}", not_buildable, qtol=int(sidecar.get("qtol", 0)), program=pte)


def cross_core(results: list[CaseResult], cases: dict[str, case_registry.Case]) -> list[CrossCore]:
    """The cross-core check of every case that ran on two or more cores."""
    checks = []
    for name in dict.fromkeys(r.case for r in results):
        rows = [r for r in results if r.case == name and r.outputs]
        if len(rows) >= 2:
            case = cases.get(name)
            check = crosscore.check(name, {r.core: r.outputs for r in rows}, case.cross_core if case else "")
            if not check.agree and not check.expected:
                _explain_cross_core(check, rows, case)
            checks.append(check)
    return checks


def _explain_cross_core(check: CrossCore, rows: list[CaseResult], case) -> None:
    """Cores that disagree while each computes what its own integer reference predicts (the
    reference models each variant) differ by a known defect or by one not yet recorded;
    cores whose deviation from their reference is an expected failure are explained by it."""
    off = [r for r in rows if r.max_lsb]
    if not off:
        check.predicted = True
        # A known defect excuses only its own mechanism: the cores must agree once the M55's
        # Helium quantize loop rounds as the scalar one does.
        agreed = {r.core: r.without_helium or digests(r.outputs) for r in rows}
        check.mechanism = ("the cores agree without ExecuTorch's Helium loops" if len({tuple(d) for d in agreed.values()}) == 1
                           else "they disagree without ExecuTorch's Helium loops too")
        line = check.line()
        locate = defects.default_locators()
        known = [d for d in defects.CROSS_CORE_FINDINGS
                 if any(d.applies(r.core, locate) for r in rows) and d.explains("cross-core", line)]
        if known:
            check.expected = f"{known[0].name}: {known[0].reason}"
    elif all(r.status == "XFAIL" for r in off):
        check.expected = "the expected failures of " + ", ".join(f"{r.core} ({r.reason.split(':')[0]})" for r in off)


def grid_coverage(results: list[CaseResult]) -> dict[str, dict[str, dict[str, bool]]]:
    """Per grid operator: dimension -> parameter class -> whether a case that was simulated
    (on some core) exercised it."""
    from cortexm.cases import grid

    simulated = {r.case for r in results if r.sim == "ok"}
    ops = {c.grid[0] for c in case_registry.all_cases() if c.grid and c.name in {r.case for r in results}}
    return {op: grid.coverage(op, simulated) for op in sorted(ops)}


def to_json(results: list[CaseResult], checks: list[CrossCore], meta: dict) -> str:
    from cortexm.base.text import json_dumps

    rows = [{k: v for k, v in asdict(r).items() if k != "outputs"} for r in results]
    return json_dumps({"meta": meta, "results": rows,
                       "cross_core": [dict(asdict(c), agree=c.agree, failed=c.failed) for c in checks],
                       "grid_coverage": grid_coverage(results)}, indent=1, default=str)


def to_junit(results: list[CaseResult], checks: list[CrossCore] = ()) -> str:
    """JUnit XML: one testsuite per core, one testcase per case."""
    import xml.etree.ElementTree as ET

    from cortexm.base.text import xml_safe as x

    suites = ET.Element("testsuites", name="cortexm")
    for core in dict.fromkeys(r.core for r in results):
        rs = sorted((r for r in results if r.core == core), key=lambda r: r.case)  # shards merge to the same file
        suite = ET.SubElement(suites, "testsuite", name=x(core), tests=str(len(rs)),
                              failures=str(sum(r.status in FAILED and r.status != "ERROR" for r in rs)),
                              errors=str(sum(r.status == "ERROR" for r in rs)),
                              skipped=str(sum(r.status in ("XFAIL", "NOT RUN") for r in rs)),
                              time=f"{sum(sum(r.seconds.values()) for r in rs):.3f}")
        for r in rs:
            tc = ET.SubElement(suite, "testcase", classname=x(f"cortexm.{core}"), name=x(r.case),
                               time=f"{sum(r.seconds.values()):.3f}")
            if r.status in FAILED and r.status != "ERROR":
                ET.SubElement(tc, "failure", message=x(r.reason)).text = x(r.details)
            elif r.status == "ERROR":
                ET.SubElement(tc, "error", message=x(r.reason)).text = x(r.details)
            elif r.status == "XFAIL":
                ET.SubElement(tc, "skipped", message=x(f"expected failure: {r.reason}"))
            elif r.status == "NOT RUN":
                ET.SubElement(tc, "skipped", message=x(r.reason))
            props = ET.SubElement(tc, "properties")
            for name in ("dialect", "verify", "sim", "memory", "semantic", "semantic_lsb", "max_lsb", "mismatches",
                         "instructions", "perf"):
                ET.SubElement(props, "property", name=name, value=x(str(getattr(r, name))))
    if checks:
        suite = ET.SubElement(suites, "testsuite", name="cross-core", tests=str(len(checks)),
                              failures=str(sum(c.failed for c in checks)), errors="0", skipped="0")
        for c in sorted(checks, key=lambda c: c.case):
            tc = ET.SubElement(suite, "testcase", classname="cortexm.cross-core", name=x(c.case))
            if c.failed:
                ET.SubElement(tc, "failure", message=x(c.line()))
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def default_goldens() -> Path | None:
    """The repository's goldens when running from a checkout."""
    here = Path(__file__).resolve().parent.parent.parent / "tests" / "goldens"
    env = os.environ.get("CORTEXM_GOLDENS")
    return Path(env) if env else (here if here.is_dir() else None)
