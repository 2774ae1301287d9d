"""`cortexm test`: for each case and core, export (cached), compare the dialect golden,
verify, run on the simulator, compare with the reference, and report.

Stages are plain functions of files; the orchestration here only sequences them,
runs exports in parallel, and collects one CaseResult per (case, core).
"""

from __future__ import annotations

import json
import os
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Protocol

from cortexm import cases as case_registry
from cortexm import dialect
from cortexm.library import Library
from cortexm.defects import installed_identities
from cortexm.errors import CortexmError
from cortexm.export import read_sidecar
from cortexm.targets import Core
from cortexm.testing import cache, crosscore
from cortexm.testing.crosscore import CrossCore
from cortexm.testing.compare import compare, reference_outputs


@dataclass
class SimOutcome:
    """What a simulator run gave: outputs (logical layout), or a failure line."""

    outputs: list  # numpy arrays in the outputs' logical shapes
    instructions: int | None
    log: str
    failure: str | None  # one line naming what went wrong, None on success


class Simulator(Protocol):
    name: str

    def run(self, pte: Path, core: Core) -> SimOutcome: ...


@dataclass
class CaseResult:
    case: str
    core: str
    status: str = "PASS"  # PASS, FAIL, XFAIL, XPASS, ERROR
    dialect: str = "-"  # ok, DIFF, - (no golden)
    verify: str = "-"
    sim: str = "-"
    max_lsb: float | None = None
    mismatches: int | None = None
    elements: int | None = None
    instructions: int | None = None
    reason: str = ""  # one line
    details: str = ""  # what to look at: graph diff, worst elements, simulator log tail
    seconds: dict[str, float] = field(default_factory=dict)
    outputs: list = field(default_factory=list, repr=False)  # the simulator's, for the cross-core check

    @property
    def failed(self) -> bool:
        return self.status in ("FAIL", "XPASS", "ERROR")


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


def select_cases(options: Options) -> list[case_registry.Case]:
    if options.ptes and not options.case_files and not options.pattern:
        return []
    for path in options.case_files:
        load_case_file(path)
    selected = case_registry.all_cases()
    if options.case_files:
        names = _registered_by(options.case_files)
        selected = [c for c in selected if c.name in names]
    if options.pattern:
        selected = [c for c in selected if options.pattern in c.name]
    if not selected:
        raise CortexmError("no case matches" + (f" -k {options.pattern!r}" if options.pattern else ""))
    return selected


_FILE_CASES: dict[Path, set[str]] = {}


def load_case_file(path: Path) -> None:
    """Import a user file whose `@register(...)` functions add cases."""
    import importlib.util
    import zlib

    path = path.resolve()
    if path in _FILE_CASES:
        return
    if not path.is_file():
        raise CortexmError(f"{path}: no such case file")
    before = {c.name for c in case_registry.all_cases()}
    spec = importlib.util.spec_from_file_location(f"cortexm_user_cases_{zlib.crc32(str(path).encode()):08x}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise CortexmError(f"{path}: importing it raised {type(e).__name__}: {e}") from e
    _FILE_CASES[path] = {c.name for c in case_registry.all_cases()} - before
    if not _FILE_CASES[path]:
        raise CortexmError(f"{path}: registers no case (use @cortexm.cases.register)")


def _registered_by(files: list[Path]) -> set[str]:
    return set().union(*(_FILE_CASES[f.resolve()] for f in files))


def _case_file(case: str) -> Path | None:
    return next((p for p, names in _FILE_CASES.items() if case in names), None)


# --- export stage (parallel, cached) ---------------------------------------------------

def _export_job(case: str, core_name: str, layout: str, case_file: str | None) -> str:
    """Runs in a worker process: export one case into the cache, return the .pte path."""
    from cortexm import export, modelsource, targets

    if case_file:
        load_case_file(Path(case_file))
    import torch

    torch.set_num_threads(1)  # the pool already uses every core
    core = targets.core(core_name)
    cf = Path(case_file) if case_file else None

    def write(path: Path) -> None:
        export.write(export.export(modelsource.load(case), core, layout), path)

    # A failure is returned as its message by the caller; check() decides whether it was expected.
    return str(cache.store(case, core_name, layout, cf, write))


def export_all(pairs: list[tuple[str, Core]], options: Options, progress: Callable[[str], None]) -> dict[tuple[str, str], Path | str]:
    """(case, core) -> cached .pte path, or the one-line error of its export."""
    results: dict[tuple[str, str], Path | str] = {}
    todo = []
    for case, core in pairs:
        hit = cache.lookup(case, core.name, options.layout, _case_file(case))
        if hit:
            results[(case, core.name)] = hit
        else:
            todo.append((case, core))
    if not todo:
        return results
    progress(f"exporting {len(todo)} of {len(pairs)} (the rest are cached)")
    jobs = max(1, min(options.jobs, len(todo)))
    if jobs == 1:
        for case, core in todo:
            results[(case, core.name)] = _run_export(case, core, options)
            progress(f"exported {case} for {core.name}")
        return results
    import multiprocessing

    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(_export_job, case, core.name, options.layout, _str(_case_file(case))): (case, core) for case, core in todo}
        for future in as_completed(futures):
            case, core = futures[future]
            try:
                results[(case, core.name)] = Path(future.result())
            except CortexmError as e:
                results[(case, core.name)] = str(e)
            except Exception as e:  # a crash inside the lowering: keep going, report it
                results[(case, core.name)] = f"{type(e).__name__}: {e}"
            progress(f"exported {case} for {core.name}")
    return results


def _run_export(case: str, core: Core, options: Options) -> Path | str:
    try:
        return Path(_export_job(case, core.name, options.layout, _str(_case_file(case))))
    except CortexmError as e:
        return str(e)


def _str(p: Path | None) -> str | None:
    return str(p) if p else None


# --- the per-case checks --------------------------------------------------------------

def check(case: case_registry.Case, core: Core, exported: Path | str, options: Options) -> CaseResult:
    result = CaseResult(case.name, core.name)
    try:
        _check(case, core, exported, options, result)
    except CortexmError as e:
        result.status, result.reason = "FAIL", str(e)
    except Exception as e:  # a bug in cortexm: the run goes on, the report shows it
        result.status, result.reason = "ERROR", f"internal error {type(e).__name__}: {e}"
        result.details = traceback.format_exc()
    simulator = options.simulators.get(core.name)
    identities = {**installed_identities(), **getattr(simulator, "identities", {})}
    known = case.known_failure(core.name, identities, ran=result.sim in ("ok", "FAIL"))
    if known:
        if result.status == "FAIL":
            result.status, result.reason = "XFAIL", known
        elif result.status == "PASS":
            result.status = "XPASS"
            result.reason = f"expected to fail ({known}) but passed: the defect looks fixed, update the case"
    return result


def _check(case, core: Core, exported: Path | str, options: Options, result: CaseResult) -> None:
    if isinstance(exported, str):
        raise CortexmError(f"export failed: {exported}")
    pte, sidecar = exported, read_sidecar(exported)

    t = time.perf_counter()
    from cortexm.verify import verify_file

    findings = verify_file(pte, options.library, core)
    problems = [f for f in findings if f.is_problem]
    result.verify = "ok" if not problems else problems[0].status
    for f in problems:
        _fail(result, f.line())
    result.seconds["verify"] = time.perf_counter() - t

    t = time.perf_counter()
    # Goldens belong to built-in cases; a given program only shares the name.
    if options.goldens is not None and case.program is None:
        golden = dialect.golden_path(options.goldens, core.name, case.name)
        if golden.is_file():
            diff = dialect.compare((pte.parent / sidecar["dialect"]).read_text(), golden)
            result.dialect = "ok" if diff is None else "DIFF"
            if diff is not None:
                _fail(result, f"lowered graph differs from {golden}", diff)
    result.seconds["dialect"] = time.perf_counter() - t

    simulator = options.simulators.get(core.name)
    if simulator is None or isinstance(simulator, str):
        result.sim = "skipped"
        if not result.reason and simulator:
            result.details = f"not run: {simulator}"
        return
    t = time.perf_counter()
    outcome = simulator.run(pte, core)
    result.seconds["run"] = time.perf_counter() - t
    result.instructions = outcome.instructions
    if outcome.failure:
        result.sim = "FAIL"
        _fail(result, f"{simulator.name}: {outcome.failure}", _tail(outcome.log))
        return
    result.sim = "ok"
    result.outputs = outcome.outputs
    references = reference_outputs(pte, sidecar)
    worst_lines = []
    result.max_lsb, result.mismatches, result.elements = 0.0, 0, 0
    for k, (actual, ref, entry) in enumerate(zip(outcome.outputs, references, sidecar["outputs"])):
        diff = compare(actual, ref, entry, k)
        result.max_lsb = max(result.max_lsb, diff.max_lsb)
        result.mismatches += diff.mismatches
        result.elements += diff.elements
        worst_lines += [f"output {k}{list(i)}: got {a:.6g}, reference {r:.6g} ({d:g} LSB)" for i, a, r, d in diff.worst]
    if result.max_lsb > case.qtol:
        _fail(result, f"max |diff| {result.max_lsb:g} LSB > tolerance {case.qtol} LSB "
                      f"({result.mismatches}/{result.elements} elements differ)", "\n".join(worst_lines))


def _fail(result: CaseResult, reason: str, details: str = "") -> None:
    result.status = "FAIL"
    if not result.reason:
        result.reason = reason
    if details:
        result.details = (result.details + "\n" + details).strip()


def _tail(log: str, lines: int = 15) -> str:
    return "\n".join(log.rstrip().splitlines()[-lines:])


# --- running everything ----------------------------------------------------------------

def run(options: Options, progress: Callable[[str], None] = lambda _: None) -> list[CaseResult]:
    selected = select_cases(options)
    pairs = [(c.name, core) for core in options.cores for c in selected]
    t = time.perf_counter()
    exported = export_all(pairs, options, progress) if pairs else {}
    export_seconds = time.perf_counter() - t
    by_name = {c.name: c for c in selected}
    # Simulator runs are subprocesses: threads run them in parallel.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
        futures = [pool.submit(check, by_name[name], core, exported[(name, core.name)], options) for name, core in pairs]
        results = []
        for future in futures:
            result = future.result()
            result.seconds["export"] = export_seconds / len(pairs)
            results.append(result)
            progress(f"{result.status:5} {result.case} {result.core}")
    for pte in options.ptes:
        case = given_program(pte)
        for core in options.cores:
            results.append(check(case, core, pte, options))
            progress(f"{results[-1].status:5} {case.name} {core.name}")
    return results


def given_program(pte: Path) -> case_registry.Case:
    """A program exported elsewhere, as a case: its sidecar gives name and tolerance."""
    from cortexm.pte import load

    load(pte)  # a clear error now for a missing or damaged file
    sidecar = read_sidecar(pte)
    if sidecar is None:
        raise CortexmError(f"{pte}: no sidecar {pte.with_suffix('.json').name} beside it (export it with cortexm export)")

    def not_buildable():
        raise CortexmError(f"{pte} is a given program, not a buildable case")

    return case_registry.Case(sidecar["name"], f"given program {pte}", not_buildable, qtol=int(sidecar.get("qtol", 1)), program=pte)


def cross_core(results: list[CaseResult], cases: dict[str, case_registry.Case]) -> list[CrossCore]:
    """The cross-core check of every case that ran on two or more cores."""
    checks = []
    for name in dict.fromkeys(r.case for r in results):
        ran = {r.core: r.outputs for r in results if r.case == name and r.outputs}
        if len(ran) >= 2:
            case = cases.get(name)
            checks.append(crosscore.check(name, ran, case.cross_core if case else ""))
    return checks


def to_json(results: list[CaseResult], checks: list[CrossCore], meta: dict) -> str:
    rows = [{k: v for k, v in asdict(r).items() if k != "outputs"} for r in results]
    return json.dumps({"meta": meta, "results": rows,
                       "cross_core": [dict(asdict(c), agree=c.agree, failed=c.failed) for c in checks]}, indent=1)


def to_junit(results: list[CaseResult], checks: list[CrossCore] = ()) -> str:
    """JUnit XML: one testsuite per core, one testcase per case."""
    import xml.etree.ElementTree as ET

    suites = ET.Element("testsuites", name="cortexm")
    for core in dict.fromkeys(r.core for r in results):
        rs = [r for r in results if r.core == core]
        suite = ET.SubElement(suites, "testsuite", name=core, tests=str(len(rs)),
                              failures=str(sum(r.status in ("FAIL", "XPASS") for r in rs)),
                              errors=str(sum(r.status == "ERROR" for r in rs)),
                              skipped=str(sum(r.status == "XFAIL" for r in rs)),
                              time=f"{sum(sum(r.seconds.values()) for r in rs):.3f}")
        for r in rs:
            tc = ET.SubElement(suite, "testcase", classname=f"cortexm.{core}", name=r.case,
                               time=f"{sum(r.seconds.values()):.3f}")
            if r.status in ("FAIL", "XPASS"):
                ET.SubElement(tc, "failure", message=r.reason).text = r.details
            elif r.status == "ERROR":
                ET.SubElement(tc, "error", message=r.reason).text = r.details
            elif r.status == "XFAIL":
                ET.SubElement(tc, "skipped", message=f"expected failure: {r.reason}")
            props = ET.SubElement(tc, "properties")
            for name in ("dialect", "verify", "sim", "max_lsb", "mismatches", "instructions"):
                ET.SubElement(props, "property", name=name, value=str(getattr(r, name)))
    if checks:
        suite = ET.SubElement(suites, "testsuite", name="cross-core", tests=str(len(checks)),
                              failures=str(sum(c.failed for c in checks)), errors="0", skipped="0")
        for c in checks:
            tc = ET.SubElement(suite, "testcase", classname="cortexm.cross-core", name=c.case)
            if c.failed:
                ET.SubElement(tc, "failure", message=c.line())
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def default_goldens() -> Path | None:
    """The repository's goldens when running from a checkout."""
    here = Path(__file__).resolve().parent.parent.parent / "tests" / "goldens"
    env = os.environ.get("CORTEXM_GOLDENS")
    return Path(env) if env else (here if here.is_dir() else None)
