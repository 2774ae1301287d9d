"""The export stage of the test app: every (case, core) lowered into the export cache, in
worker processes that live as long as cortexm, the quantization shared by a case's cores.

What enters: (case, core) pairs, the layout, how many workers. What leaves: each pair's cached
.pte, or the one-line error of its export. This module and what it imports are what an export
cache key covers of the test app (cortexm.testing.cache): not the checks, not the reports.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path

from cortexm.base import workers
from cortexm.base.errors import CortexmError, InputsChanged, StorageError, storage_error
from cortexm.base.targets import Core
from cortexm.sources import backend_source
from cortexm.sources.backend_source import quiet_lowering_imports
from cortexm.testing import cache, casefiles, reads, userstate
from cortexm.testing.casefiles import IMPORT_TIMEOUT, _case_file

# --- export stage (parallel, cached) ---------------------------------------------------

def _export_job(case: str, cores: list[tuple[str, str]], layout: str, case_file: str | None,
                scope: tuple[str, ...] = (), evaluation: tuple[str, str] | None = None,
                timeout: float = IMPORT_TIMEOUT, source: bytes | None = None,
                sample: tuple[str, dict] | None = None) -> dict[str, tuple[bool, str]]:
    """Runs in a worker process: export one case for each (core, entry key) into the cache, the
    quantization done once for all of them (and cached on its own: an edit of a lowering pass
    re-runs only what comes after it), to_edge once too. core -> (True, .pte path), or (False,
    the one-line error of that core's export); `scope`: --scope's words, for an exhaustive case;
    `evaluation`: (path, digest) of the evaluation set to measure accuracy on too; `timeout`:
    seconds each step of the case's own code may take; `source`: the case file's bytes as the
    run read them (what is keyed is what runs, whatever the file holds by now); `sample`: the
    (operator, parameters) of a sweep sample, registered here as the sweep's process did.

    Each job starts from the state the worker had after importing the case file, and leaves
    the worker as it found it (cortexm.testing.userstate): what one case's code set (a default
    dtype, a seed, a variable) never reaches another case's export, nor its cached failure."""
    with userstate.isolated(case_file, lambda: _case_file_reads(case_file, source) if case_file else {}) as read:
        return _export_case(case, cores, layout, case_file, scope, evaluation, timeout, read, sample)


def _export_case(case, cores, layout, case_file, scope, evaluation, timeout, read: dict,
                 sample: tuple[str, dict] | None = None) -> dict[str, tuple[bool, str]]:
    from cortexm.base import targets
    from cortexm.lowering import export, modelsource, quantize, writer

    backend_source.activate_from_environment()
    if scope:
        from cortexm.cases import exhaustive

        exhaustive.register_all(exhaustive.parse_scope(scope))  # registered before the case is looked up
    if sample:
        from cortexm.cases import space

        space.register_data(case, *sample)  # before the case is looked up, and keyed (its spec)
    measured_on = _evaluation_set(evaluation)
    import torch

    torch.set_num_threads(1)  # the pool already uses every core
    cf = Path(case_file) if case_file else None
    quantized: quantize.Quantized | None = None
    failure: CortexmError | None = None
    hit = cache.lookup_quantized(case, layout, cf)
    if hit is not None:
        quantized = quantize.load_quantized(hit)
        facts = cache.reads_of(hit)
    else:
        # Built before any cache entry is made: a model that cannot be built (its code may read
        # a file, or import what is not installed yet) is never a cached failure.
        with reads.recording(skip=_keyed_apart()) as record, _limited(timeout, "building its model"):
            bundle = modelsource.load(case)
        facts = reads.merged(read, record.facts())
        try:
            with _limited(timeout, "quantizing its model (its forward runs on the calibration inputs)"):
                quantized = quantize.quantize(bundle, layout)
        except workers.OutOfTime:
            raise  # the time of this run, not what the case is: never a cached failure
        except CortexmError as e:
            failure = e  # every core's export fails the same way: cached as each one's failure
        else:
            cache.store_quantized(case, layout, cf, lambda folder: quantize.save_quantized(quantized, folder), facts)
    edge: list = []

    def write(core, path: Path) -> None:
        if failure is not None:
            raise failure
        assert quantized is not None  # loaded from the cache or quantized above
        if not edge:
            edge.append(export.to_edge_program(quantized))
        writer.write(export.export(quantized, core, layout, edge=edge[0], evaluation=measured_on), path)

    results: dict[str, tuple[bool, str]] = {}
    for core_name, entry_key in cores:
        core = targets.core(core_name)
        # A failure is returned as its message; check() decides whether it was expected.
        try:
            results[core_name] = (True, str(cache.store(case, core_name, layout, cf,
                                                        lambda path, core=core: write(core, path), entry_key,
                                                        evaluation[1] if evaluation else None, facts)))
        except (StorageError, InputsChanged):
            raise  # the disk or an edit, not the case: the run stops
        except CortexmError as e:
            results[core_name] = (False, str(e))
        except Exception as e:  # a crash inside the lowering: keep going, report it
            stored = storage_error(e)
            if stored:
                raise stored from None
            results[core_name] = (False, f"{type(e).__name__}: {e}")
    return results


@contextlib.contextmanager
def _limited(seconds: float, what: str) -> Iterator[None]:
    """The user's code in the block stopped after `seconds`, as one line (not cached)."""
    from cortexm.base import limits

    try:
        with limits.time_limit(seconds):
            yield
    except limits.Expired:
        raise workers.OutOfTime(f"{what} took longer than {seconds:g} s (an endless loop?); --timeout sets the limit") from None


def _keyed_apart() -> tuple[Path, ...]:
    """What an export reads that its key covers already (the lowering's tree and CMSIS-NN
    module, cortexm's caches): not recorded as the case's own reads."""
    from cortexm.sources import cache_dir

    tree = backend_source.active_tree()
    helper = backend_source.active_helper()
    return (cache.root(), cache_dir(), *((tree,) if tree else ()), *((Path(helper).parent,) if helper else ()))


def _case_file_reads(case_file: str, source: bytes | None) -> dict:
    """Import a case file in this worker (once: userstate keeps what it left), and what its
    import read (cortexm.testing.reads)."""
    with reads.recording(skip=_keyed_apart()) as record:
        casefiles.load_case_file(Path(case_file), source=source)
    return record.facts()


@lru_cache(maxsize=1)
def _evaluation_set(evaluation: tuple[str, str] | None):
    """The evaluation set (cortexm.semantic.evalset) at the path, when it is still what the
    run read there (the digest its exports are keyed on); read once per worker."""
    if evaluation is None:
        return None
    from cortexm.semantic import evalset

    path, digest = evaluation
    found = evalset.read(path)
    if found.digest != digest:
        raise InputsChanged(f"the evaluation set {path} changed while it was measured on: no verdict is given on "
                            "either content; run again")
    return found


def export_all(pairs: list[tuple[str, Core]], options, progress: Callable[[str], None],
               edits: dict[tuple[str, str], str] | None = None) -> dict[tuple[str, str], Path | str]:
    """(case, core) -> cached .pte path, or the one-line error of its export. `edits`, when
    given, gets (case, core) -> "unchanged" or "changed" for each program exported anew that
    this cache had made before: whether an edit since (of a pass, of the quantizer) reached it."""
    results, anew = _export_all(pairs, options, progress)
    for (case, core), exported in results.items():
        if isinstance(exported, Path):
            case_file = _case_file(case)
            previous = cache.last_program(case, core, options.layout, case_file)
            now = cache.remember_program(case, core, options.layout, case_file, exported, previous)
            if edits is not None and previous is not None and (case, core) in anew:
                edits[(case, core)] = "unchanged" if now == previous else "changed"
    return results


def _export_all(pairs: list[tuple[str, Core]], options,
                progress: Callable[[str], None]) -> tuple[dict[tuple[str, str], Path | str], set[tuple[str, str]]]:
    """export_all's results, and the pairs exported now (not found in the cache)."""
    results: dict[tuple[str, str], Path | str] = {}
    todo = []
    evaluation = getattr(options, "evaluation", None)
    digest = evaluation[1] if evaluation else None
    for case, core in pairs:
        hit = cache.lookup(case, core.name, options.layout, _case_file(case), note=progress, evaluation=digest)
        if hit:
            results[(case, core.name)] = hit
        else:
            todo.append((case, core))
    anew = {(case, core.name) for case, core in todo}
    if not todo:
        return results, anew
    cache.check_writable()  # a full or read-only cache: one line now, not a failure per case
    from cortexm.base import progress as progress_mod

    task = progress_mod.task(progress, f"exporting ({len(pairs) - len(todo)} of {len(pairs)} cached)", total=len(todo))
    # One job per case, for all its cores: the quantization is the cores' to share.
    by_case: dict[str, list[tuple[str, str]]] = {}
    for case, core in todo:
        by_case.setdefault(case, []).append((core.name, cache.key(case, core.name, options.layout, _case_file(case), digest)))
    jobs = max(1, min(options.jobs, len(by_case)))
    # The user's code runs in worker processes, even with -j 1: one that ends its process, hangs
    # or leaves threads is that case's outcome (cortexm.base.workers), not the run's end.
    pool = _pool(jobs)
    # A tree whose Python cannot run: one line, not N. One probe per worker: each imports torch
    # and the tree's lowering at once, not the second one after the first worker's probe.
    for _, probed in pool.run({i: (backend_source.probe, ()) for i in range(jobs)}):
        probed.value()
    timeout = getattr(options, "timeout", None) or IMPORT_TIMEOUT
    sources = {str(f): casefiles.source_of(f) for f in {_case_file(c) for c in by_case} if f}
    samples = {name: (op, params) for name, op, params in getattr(options, "samples", ())}
    work = {case: (_export_job, (case, cores, options.layout, _str(_case_file(case)), options.scope, evaluation,
                                 timeout, sources.get(_str(_case_file(case)) or ""), samples.get(case)))
            for case, cores in by_case.items()}
    # The limit of a whole job: each step of the user's code has `timeout` inside it (limits);
    # this one stops what no signal reaches (a loop in C), with room for every core's lowering.
    for case, outcome in pool.run(work, limit=timeout * (10 + 2 * max(len(c) for c in by_case.values()))):
        _collect(results, case, by_case[case], outcome.value)
        task.advance(len(by_case[case]))
    task.done()
    return results, anew


class Stopped(str):
    """An export's outcome that is no verdict on the case: its code ended its worker process, or
    ran past --timeout (cortexm.base.workers). The case is an ERROR, and nothing is cached."""


_POOLS: dict[tuple, workers.Pool] = {}


def _pool(jobs: int) -> workers.Pool:
    """Export workers that live as long as this process: a sweep's shrinking or a long test
    session pays for importing torch and ExecuTorch once per worker, not once per batch.
    A new choice of lowering source (cortexm.sources.backend_source) gets new workers."""
    import multiprocessing.util

    key = (jobs, os.environ.get(backend_source.ENV))
    if key not in _POOLS:
        for stale in _POOLS.values():
            stale.shutdown()
        _POOLS.clear()
        # Workers are fresh interpreters: silence torch's and torchao's import chatter there too.
        _POOLS[key] = workers.Pool(jobs, initializer=quiet_lowering_imports)
        # Stopped at exit, before multiprocessing joins its children: also in a process that is
        # itself a multiprocessing worker, which ends without atexit and would wait on them. The
        # priority puts it before multiprocessing's own finalizers (its queues close at 10).
        multiprocessing.util.Finalize(None, _POOLS[key].shutdown, exitpriority=100)
    return _POOLS[key]


def _collect(results: dict, case: str, cores: list[tuple[str, str]], job: Callable[[], dict]) -> None:
    """Each core's export of `case` from `job()` (an _export_job), or what stopped the job as
    every core's failure (a model that could not be built, say)."""
    try:
        done = job()
    except (StorageError, InputsChanged):
        raise  # the disk or an edit, not the case: the run stops
    except (workers.Ended, workers.OutOfTime) as e:  # what the case's code did to its worker: its outcome
        for core, _ in cores:
            results[(case, core)] = Stopped(f"{case}: {e}")
        return
    except CortexmError as e:
        done = {core: (False, str(e)) for core, _ in cores}
    except Exception as e:  # a crash outside one core's lowering: keep going, report it
        stored = storage_error(e)
        if stored:
            raise stored from None
        done = {core: (False, f"{type(e).__name__}: {e}") for core, _ in cores}
    for core, (ok, text) in done.items():
        results[(case, core)] = Path(text) if ok else text


def _str(p: Path | None) -> str | None:
    return str(p) if p else None
