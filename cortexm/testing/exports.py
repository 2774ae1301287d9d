"""The export stage of the test app: every (case, core) lowered into the export cache, in
worker processes that live as long as cortexm, the quantization shared by a case's cores.

What enters: (case, core) pairs, the layout, how many workers. What leaves: each pair's cached
.pte, or the one-line error of its export. This module and what it imports are what an export
cache key covers of the test app (cortexm.testing.cache): not the checks, not the reports.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from functools import lru_cache
from pathlib import Path
from typing import Callable

from cortexm.base import children
from cortexm.base.errors import CortexmError, InputsChanged, StorageError, storage_error
from cortexm.base.targets import Core
from cortexm.sources import backend_source
from cortexm.sources.backend_source import quiet_lowering_imports
from cortexm.testing import cache
from cortexm.testing.casefiles import _case_file, load_case_file

# --- export stage (parallel, cached) ---------------------------------------------------

def _export_job(case: str, cores: list[tuple[str, str]], layout: str, case_file: str | None,
                scope: tuple[str, ...] = (), evaluation: tuple[str, str] | None = None) -> dict[str, tuple[bool, str]]:
    """Runs in a worker process: export one case for each (core, entry key) into the cache, the
    quantization done once for all of them (and cached on its own: an edit of a lowering pass
    re-runs only what comes after it), to_edge once too. core -> (True, .pte path), or (False,
    the one-line error of that core's export); `scope`: --scope's words, for an exhaustive case;
    `evaluation`: (path, digest) of the evaluation set to measure accuracy on too."""
    from cortexm.base import targets
    from cortexm.lowering import export, modelsource, quantize, writer

    backend_source.activate_from_environment()
    if case_file:
        load_case_file(Path(case_file))
    if scope:
        from cortexm.cases import exhaustive

        exhaustive.register_all(exhaustive.parse_scope(scope))  # registered before the case is looked up
    measured_on = _evaluation_set(evaluation)
    import torch

    torch.set_num_threads(1)  # the pool already uses every core
    cf = Path(case_file) if case_file else None
    quantized, failure = None, None
    hit = cache.lookup_quantized(case, layout, cf)
    if hit is not None:
        quantized = quantize.load_quantized(hit)
    else:
        # Built before any cache entry is made: a model that cannot be built (its code may read
        # a file, or import what is not installed yet) is never a cached failure.
        bundle = modelsource.load(case)
        try:
            quantized = quantize.quantize(bundle, layout)
        except CortexmError as e:
            failure = e  # every core's export fails the same way: cached as each one's failure
        else:
            cache.store_quantized(case, layout, cf, lambda folder: quantize.save_quantized(quantized, folder))
    edge: list = []

    def write(core, path: Path) -> None:
        if failure is not None:
            raise failure
        if not edge:
            edge.append(export.to_edge_program(quantized))
        writer.write(export.export(quantized, core, layout, edge=edge[0], evaluation=measured_on), path)

    results: dict[str, tuple[bool, str]] = {}
    for core_name, entry_key in cores:
        core = targets.core(core_name)
        # A failure is returned as its message; check() decides whether it was expected.
        try:
            results[core_name] = (True, str(cache.store(case, core_name, layout, cf, lambda path: write(core, path), entry_key,
                                                        evaluation[1] if evaluation else None)))
        except (StorageError, InputsChanged):
            raise  # the disk or an edit, not the case: the run stops
        except CortexmError as e:
            results[core_name] = (False, str(e))
        except Exception as e:  # a crash inside the lowering: keep going, report it
            if storage_error(e):
                raise storage_error(e) from None
            results[core_name] = (False, f"{type(e).__name__}: {e}")
    return results


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
    if jobs == 1:
        backend_source.probe()
        for case, cores in by_case.items():
            _collect(results, case, cores,
                     lambda: _export_job(case, cores, options.layout, _str(_case_file(case)), options.scope, evaluation))
            task.advance(len(cores))
        task.done()
        return results, anew
    from concurrent.futures.process import BrokenProcessPool

    pool = _pool(jobs)
    futures = {}
    try:
        # A tree whose Python cannot run: one line, not N. One probe per worker: each imports torch
        # and the tree's lowering at once, not the second one after the first worker's probe.
        for probe in [pool.submit(backend_source.probe) for _ in range(jobs)]:
            probe.result()
        futures = {pool.submit(_export_job, case, cores, options.layout, _str(_case_file(case)), options.scope,
                               evaluation): (case, cores)
                   for case, cores in by_case.items()}
        for future in as_completed(futures):
            case, cores = futures[future]
            _collect(results, case, cores, future.result)
            task.advance(len(cores))
    except BrokenProcessPool as e:
        _POOLS.clear()
        raise CortexmError(f"an export worker process died ({e}); run again with -j 1 to see where") from None
    except BaseException:
        for future in futures:  # the run stops: no export starts after this
            future.cancel()
        raise
    task.done()
    return results, anew


_POOLS: dict[tuple, ProcessPoolExecutor] = {}


def _pool(jobs: int) -> ProcessPoolExecutor:
    """Export workers that live as long as this process: a sweep's shrinking or a long test
    session pays for importing torch and ExecuTorch once per worker, not once per batch.
    A new choice of lowering source (cortexm.sources.backend_source) gets new workers."""
    import multiprocessing
    import multiprocessing.util

    key = (jobs, os.environ.get(backend_source.ENV))
    if key not in _POOLS:
        for stale in _POOLS.values():
            stale.shutdown(cancel_futures=True)
        _POOLS.clear()
        # Workers are fresh interpreters: silence torch's and torchao's import chatter there too.
        # Workers are cortexm's children: they end with it, whatever ends it (cortexm.base.children).
        _POOLS[key] = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                                          initializer=children.worker_init, initargs=(quiet_lowering_imports,))
        children.track_pool(_POOLS[key])
        # Stopped at exit, before multiprocessing joins its children: also in a process that is
        # itself a multiprocessing worker, which ends without atexit and would wait on them. The
        # priority puts it before multiprocessing's own finalizers (its queues close at 10).
        multiprocessing.util.Finalize(None, _POOLS[key].shutdown, kwargs={"cancel_futures": True}, exitpriority=100)
    return _POOLS[key]


def _collect(results: dict, case: str, cores: list[tuple[str, str]], job: Callable[[], dict]) -> None:
    """Each core's export of `case` from `job()` (an _export_job), or what stopped the job as
    every core's failure (a model that could not be built, say)."""
    from concurrent.futures.process import BrokenProcessPool

    try:
        done = job()
    except (StorageError, InputsChanged, BrokenProcessPool):
        raise  # the disk, an edit or the pool, not the case: the run stops
    except CortexmError as e:
        done = {core: (False, str(e)) for core, _ in cores}
    except Exception as e:  # a crash outside one core's lowering: keep going, report it
        if storage_error(e):
            raise storage_error(e) from None
        done = {core: (False, f"{type(e).__name__}: {e}") for core, _ in cores}
    for core, (ok, text) in done.items():
        results[(case, core)] = Path(text) if ok else text


def _str(p: Path | None) -> str | None:
    return str(p) if p else None
