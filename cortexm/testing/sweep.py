"""Seeded sweeps of an operator's parameter space, with shrinking to a small reproducer.

`cortexm sweep conv2d --target cortex-m7 --seed 7 --count 40` draws 40 parameter
sets for conv2d from a generator seeded with 7, within what the cortex_m backend
lowers, and runs them through the test app on every requested core (reference
comparison and the cross-core check), a batch at a time: samples are drawn as they are
run, and a batch's outputs are dropped once checked, so memory does not grow with --count.
Samples pass as data, (operator, parameters): registered as cases in this process and in
each export worker (cortexm.cases.space.register_data), their exports keyed by that data, so
a sample's export is reused whatever batch or --count it came in. Ctrl-C keeps the batches
that finished, reported as such. A failing sample is shrunk, one parameter at a time, to the
smallest one that still fails the same way, and written as a ready-to-run case file, the
reproducer (the only case file a sweep writes; a failure past --shrink, or after Ctrl-C, as
drawn):

    cortexm test --cases sweep-repro-conv2d-7-13.py
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cortexm.base import writes
from cortexm.cases.space import Params, case_file, samples, smaller
from cortexm.report.results import Status
from cortexm.testing import shards

BATCH = 16  # samples exported and run at once

Sample = tuple[str, str, Params]  # (case name, operator, parameters)


@dataclass
class Finding:
    sample: str
    params: Params
    failure: str  # one line: what failed, on which cores
    kind: str = ""  # what kind of failure (_kind): shrinking keeps to it
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
    same draw on every shard), a batch at a time; shrink the first `shrink_limit` failures and
    write each failure's reproducer into `out_dir`. Interrupted (Ctrl-C, a signal), it returns
    what the finished batches found, their failures written as drawn."""
    import time

    started = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    results, checks, findings, ran, interrupted = [], [], [], 0, 0
    drawn = zip(itertools.count(), itertools.islice(samples(op, seed), count))
    try:
        for batch in iter(lambda: list(itertools.islice(drawn, BATCH)), []):
            entries = tuple((f"sweep_{op}_{seed}_{i}", op, params) for i, params in batch)
            batch_results, batch_checks = _run(entries, cores, simulators, jobs, shard, progress)
            for result in batch_results:
                if result.compare:
                    result.compare.outputs = []  # checked across cores: not kept
            results += batch_results
            checks += batch_checks
            for name, _op, params in entries:
                failure = _failure(name, batch_results, batch_checks) if shards.belongs(name, shard) else ""
                if failure:
                    findings.append(Finding(name, params, failure, _kind(name, batch_results, batch_checks)))
            ran += sum(shards.belongs(name, shard) for name, _op, _params in entries)
            progress(f"sweep {op} seed {seed}: {ran} samples run, {len(findings)} new failures")
    except KeyboardInterrupt as e:
        interrupted = getattr(e, "signum", 2)
    seconds = time.perf_counter() - started
    expected = sum(r.status == Status.XFAIL for r in results)
    for number, finding in enumerate(findings):
        if number < shrink_limit and not interrupted:
            progress(f"shrinking {finding.sample}: {finding.failure}")
            finding.shrunk = shrink(op, finding.params, finding.kind, cores, simulators, jobs, progress)
        finding.repro = out_dir / f"sweep-repro-{op}-{finding.sample.removeprefix(f'sweep_{op}_').replace('_', '-')}.py"
        writes.atomic(finding.repro, case_file(
            [(f"repro_{finding.sample}", op, finding.shrunk or finding.params)],
            f"Reproducer from `cortexm sweep {op} --seed {seed} --count {count}`, sample {finding.sample}"
            f"{'' if finding.shrunk else ' (not shrunk)'}.\n"
            f"Failure: {finding.failure}\nOriginal parameters: {finding.params!r}\n"
            f"Run it: cortexm test --cases {finding.repro.name} " + " ".join(f"-t {c.name}" for c in cores)))
    return SweepReport(op, seed, ran, [c.name for c in cores], seconds, results, checks, findings, expected, interrupted)


def _run(entries: tuple[Sample, ...], cores, simulators: dict, jobs: int, shard: tuple[int, int] | None,
         progress: Callable[[str], None] = lambda _: None) -> tuple[list, list]:
    """The test app's results and cross-core checks of samples given as data."""
    from cortexm.testing import app, crosscore

    options = app.Options(cores=list(cores), samples=entries, simulators=simulators, jobs=jobs, shard=shard)
    results = app.run(options, progress)
    return results, crosscore.cross_core(results, {c.name: c for c in app.select_cases(options)})


def _failure(name: str, results, checks) -> str:
    """One line saying how sample `name` failed ('' when it did not)."""
    failed = [r for r in results if r.case == name and r.failed]
    cross = [c for c in checks if c.case == name and c.failed]
    if failed:
        return f"{failed[0].status} on {', '.join(r.core for r in failed)}: {failed[0].reason}"
    if cross:
        return cross[0].line()
    return ""


def _kind(name: str, results, checks) -> str:
    """What kind of failure sample `name` had, to keep shrinking on the same one: its status, the
    cores and the checks that failed (a smaller sample failing another check, say a scratch
    overrun where the sample's outputs differed, is another bug), or a cross-core difference."""
    failed = [r for r in results if r.case == name and r.failed]
    if failed:
        checks_failed = sorted({stage for r in failed for stage, _ in r.failures})
        return f"{failed[0].status} on {', '.join(r.core for r in failed)} at {', '.join(checks_failed) or '-'}"
    return "cross-core" if any(c.case == name and c.failed for c in checks) else ""


def shrink(op: str, params: Params, kind: str, cores, simulators: dict, jobs: int,
           progress: Callable[[str], None]) -> Params:
    """The smallest parameters (greedily, one at a time) that still fail as `kind` (_kind) says."""
    current = params
    while True:
        for candidate in smaller(op, current):
            # Named by content (not hash(), which varies per process) so a rerun hits the export cache.
            name = f"shrink_{op}_{zlib.crc32(repr(sorted(candidate.items())).encode()):08x}"
            results, checks = _run(((name, op, candidate),), cores, simulators, jobs, None)
            if _kind(name, results, checks) == kind:
                progress(f"  smaller and still failing: {candidate}")
                current = candidate
                break
        else:
            return current
