"""Seeded sweeps of an operator's parameter space, with shrinking to a small reproducer.

`cortexm sweep conv2d --target cortex-m7 --seed 7 --count 40` draws 40 parameter
sets for conv2d from a generator seeded with 7, within what the cortex_m backend
lowers, and runs them through the test app on every requested core (reference
comparison and the cross-core check), a batch at a time: samples are drawn as they are
run, and a batch's outputs are dropped once checked, so memory does not grow with --count.
The samples run so far are a case file (sweep-OP-SEED.py) at every moment; Ctrl-C keeps
the batches that finished, reported as such. A failing sample is shrunk, one parameter at a
time, to the smallest one that still fails the same way, and written as a ready-to-run case
file:

    cortexm test --cases sweep-repro-conv2d-7-13.py
"""

from __future__ import annotations

import contextlib
import itertools
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cortexm.base import writes
from cortexm.cases.space import Params, case_file, registrations, samples, smaller
from cortexm.report.results import Status
from cortexm.testing import shards

BATCH = 16  # samples exported and run at once


@dataclass
class Finding:
    sample: str
    params: Params
    failure: str  # one line: what failed, on which cores
    repro: Path | None = None
    shrunk: Params | None = None


@dataclass
class SweepReport:
    op: str
    seed: int
    samples: int
    cores: list[str]
    seconds: float
    results: list  # CaseResult
    checks: list  # CrossCore
    findings: list[Finding]
    expected: int  # samples in a known-defect region that failed as expected
    interrupted: int = 0  # the signal that stopped it (Ctrl-C: 2) before every sample ran; 0: it did not stop

    @property
    def per_minute(self) -> float:
        return self.samples * 60 / self.seconds if self.seconds else 0.0


def run_sweep(op: str, cores, seed: int, count: int, out_dir: Path, simulators: dict, jobs: int = 2,
              shrink_limit: int = 3, progress: Callable[[str], None] = lambda _: None,
              shard: tuple[int, int] | None = None) -> SweepReport:
    """Draw, export, run and check `count` samples of `op` (those of `shard`, when given: the
    same draw on every shard), a batch at a time; shrink and write reproducers. Interrupted
    (Ctrl-C, a signal), it returns what the finished batches found."""
    import time

    from cortexm.testing import app, crosscore

    started = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    title = f"cortexm sweep {op} --seed {seed} --count {count}: the drawn samples"
    whole = out_dir / f"sweep-{op}-{seed}.py"
    writes.atomic(whole, case_file([], title))
    results, checks, findings, ran, interrupted = [], [], [], 0, 0
    drawn = zip(itertools.count(), itertools.islice(samples(op, seed), count))
    try:
        for number, batch in enumerate(iter(lambda: list(itertools.islice(drawn, BATCH)), [])):
            entries = [(f"sweep_{op}_{seed}_{i}", op, params) for i, params in batch]
            # Each batch a case file of its own: its content, and so its exports' cache keys, depend
            # on the batch alone, not on --count.
            part = out_dir / ".batches" / f"sweep-{op}-{seed}-{number}.py"
            part.parent.mkdir(exist_ok=True)
            writes.atomic(part, case_file(entries, f"{title}, batch {number}"))
            options = app.Options(cores=list(cores), case_files=[part], simulators=simulators, jobs=jobs, shard=shard)
            batch_results = app.run(options, progress)
            batch_checks = crosscore.cross_core(batch_results, {c.name: c for c in app.select_cases(options)})
            writes.remove(part)
            for result in batch_results:
                if result.compare:
                    result.compare.outputs = []  # checked across cores: not kept
            results += batch_results
            checks += batch_checks
            for name, _op, params in entries:
                failure = _failure(name, batch_results, batch_checks) if shards.belongs(name, shard) else ""
                if failure:
                    findings.append(Finding(name, params, failure))
            ran += sum(shards.belongs(name, shard) for name, _op, _params in entries)
            with writes.stream(whole, "a") as f:  # the samples run so far, as one case file
                f.write(registrations(entries))
    except KeyboardInterrupt as e:
        interrupted = getattr(e, "signum", 2)
    with contextlib.suppress(OSError):
        writes.remove_folder(out_dir / ".batches")  # empty once every batch ran
    seconds = time.perf_counter() - started
    expected = sum(r.status == Status.XFAIL for r in results)
    for finding in findings[:0 if interrupted else shrink_limit]:
        progress(f"shrinking {finding.sample}: {finding.failure}")
        finding.shrunk = shrink(op, finding.params, finding.failure, cores, simulators, out_dir, jobs, progress)
        finding.repro = out_dir / f"sweep-repro-{op}-{finding.sample.rsplit('_', 2)[-2]}-{finding.sample.rsplit('_', 1)[-1]}.py"
        writes.atomic(finding.repro, case_file(
            [(f"repro_{finding.sample}", op, finding.shrunk)],
            f"Reproducer from `cortexm sweep {op} --seed {seed} --count {count}`, sample {finding.sample}.\n"
            f"Failure: {finding.failure}\nOriginal parameters: {finding.params!r}\n"
            f"Run it: cortexm test --cases {finding.repro.name} " + " ".join(f"-t {c.name}" for c in cores)))
    return SweepReport(op, seed, ran, [c.name for c in cores], seconds, results, checks, findings, expected, interrupted)


def _failure(name: str, results, checks) -> str:
    """One line saying how sample `name` failed ('' when it did not)."""
    failed = [r for r in results if r.case == name and r.failed]
    cross = [c for c in checks if c.case == name and c.failed]
    if failed:
        return f"{failed[0].status} on {', '.join(r.core for r in failed)}: {failed[0].reason}"
    if cross:
        return cross[0].line()
    return ""


def _kind(failure: str) -> str:
    """What kind of failure, to keep shrinking on the same one."""
    if failure.startswith("FAIL ") and "cores disagree" in failure:
        return "cross-core"
    return failure.split(":", 2)[0]  # e.g. "FAIL on cortex-m7"


def shrink(op: str, params: Params, failure: str, cores, simulators: dict, out_dir: Path, jobs: int,
           progress: Callable[[str], None]) -> Params:
    """The smallest parameters (greedily, one at a time) that still fail the same way."""
    from cortexm.testing import app, crosscore

    kind, current = _kind(failure), params
    while True:
        for candidate in smaller(op, current):
            # Named by content (not hash(), which varies per process) so a rerun hits the export cache.
            name = f"shrink_{op}_{zlib.crc32(repr(sorted(candidate.items())).encode()):08x}"
            path = out_dir / ".shrink" / f"{name}.py"
            path.parent.mkdir(exist_ok=True)
            writes.atomic(path, case_file([(name, op, candidate)], "shrinking candidate"))
            options = app.Options(cores=list(cores), case_files=[path], simulators=simulators, jobs=jobs)
            results = app.run(options)
            checks = crosscore.cross_core(results, {c.name: c for c in app.select_cases(options)})
            again = _failure(name, results, checks)
            if again and _kind(again) == kind:
                progress(f"  smaller and still failing: {candidate}")
                current = candidate
                break
        else:
            return current
