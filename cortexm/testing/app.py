"""`cortexm test`: for each case and core, export (cached), compare the dialect golden,
verify, run on the simulator, compare with the reference, and report.

Stages are plain functions of files; the orchestration here only sequences them: the
export stage (exports.py, in parallel), the checks of each case on its core (checks/, stage by
stage over one opened bundle), packed programs split per case (packs.py); one CaseResult per
(case, core) (cortexm.report.results).
The cross-core check is crosscore.py's; what a run found, its summary and its report files
are cortexm.report's (results, summary, writers).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from cortexm import cases as case_registry
from cortexm.base.errors import CortexmError
from cortexm.base.targets import Core
from cortexm.report.results import CaseResult
from cortexm.testing import shards
from cortexm.testing.casefiles import _registered_by, load_case_file
from cortexm.testing.checks import check, given_program
from cortexm.testing.exports import export_all
from cortexm.testing.results import Options


def select_cases(options: Options) -> list[case_registry.Case]:
    if options.ptes and not options.case_files and not options.pattern and not options.samples:
        return []
    for path in options.case_files:
        load_case_file(path)
    if options.samples:
        from cortexm.cases import space

        for name, op, params in options.samples:
            space.register_data(name, op, params)
        selected = [case_registry.get(name) for name, _, _ in options.samples]
    elif options.case_files:
        names = _registered_by(options.case_files)
        selected = [c for c in case_registry.all_cases() if c.name in names]
    else:
        from cortexm.cases import exhaustive

        selected = case_registry.all_cases(options.grid, exhaustive.parse_scope(options.scope))
    if options.pattern:  # a packed program is selected by its name or any of its cases'
        selected = [c for c in selected if options.pattern in c.name or any(options.pattern in p for p in c.parts)]
    if not selected:
        raise CortexmError("no case matches" + (f" -k {options.pattern!r}" if options.pattern else ""))
    return [c for c in selected if shards.belongs(c.name, options.shard)]


# --- running everything ----------------------------------------------------------------

def require_trusted_caches() -> None:
    """The folders whose content becomes verdicts (exports, the run store): one that others can
    write stops the run now, in one line (cortexm.base.trust), before anything is built."""
    from cortexm.sim import memo
    from cortexm.testing import cache

    cache.root()
    memo.root()


def run(options: Options, progress: Callable[[str], None] = lambda _: None) -> list[CaseResult]:
    require_trusted_caches()
    selected = select_cases(options)
    pairs = [(c.name, core) for core in options.cores for c in selected]
    t = time.perf_counter()
    edits: dict[tuple[str, str], str] = {}
    exported = export_all(pairs, options, progress, edits) if pairs else {}
    export_seconds = time.perf_counter() - t
    if options.building is not None:  # the runners, built while the exports ran
        options.simulators, options.building = options.building.result(), None
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
    for r, (_, _, pack) in zip(rerun, alone, strict=True):
        r.pack = pack
    return done + rerun


def default_goldens() -> Path | None:
    """The repository's goldens when running from a checkout."""
    here = Path(__file__).resolve().parent.parent.parent / "tests" / "goldens"
    env = os.environ.get("CORTEXM_GOLDENS")
    return Path(env) if env else (here if here.is_dir() else None)
