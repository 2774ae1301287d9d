"""`cortexm test`, `upstream-tests`, `sweep`, `report merge`: the test app and its reports."""

from __future__ import annotations

import dataclasses
import os
import time
from collections import Counter
from pathlib import Path

import click

from cortexm import __version__
from cortexm.base import children, manifest
from cortexm.base.errors import CortexmError
from cortexm.base.progress import Progress
from cortexm.base.text import json_dumps
from cortexm.cli.options import (
    EXIT_PROBLEMS,
    cases_timeout_option,
    choose_lowering,
    core_named,
    eval_option,
    fetch_missing_trees,
    lowering_option,
    shard_option,
    targets_option,
    timeout_option,
)
from cortexm.report import outputs
from cortexm.report.results import Status
from cortexm.testing import shards

# The DSP core and the MVE core a contributor's change must work on; --all-cores adds the rest.
DEFAULT_TEST_CORES = ("cortex-m7", "cortex-m55")
EXTRA_CORES = ("cortex-m3", "cortex-m4", "cortex-m33")


@click.command(name="test")
@targets_option(multiple=True, help_text="Core(s) to test (repeatable; default cortex-m7 and cortex-m55).")
@click.option("--all-cores", is_flag=True, help="Also cortex-m3, cortex-m4 and cortex-m33.")
@click.option("-k", "pattern", help="Only cases whose name contains PATTERN.")
@click.option("--cases", "case_files", multiple=True, type=click.Path(dir_okay=False),
              help="A Python file registering cases with @cortexm.cases.register (repeatable); runs only those.")
@click.option("--pte", "ptes", multiple=True, type=click.Path(dir_okay=False),
              help="A program exported elsewhere, with its sidecar (repeatable); checked and run on each core as it is.")
@click.option("--sim", type=click.Choice(["qemu", "fvp", "none"]), default="qemu", show_default=True)
@click.option("--grid", type=click.Choice(["none", "default", "full", "exhaustive"]), default="default", show_default=True,
              help="Grid cases: none; default (every parameter class of each operator once); full (every pair of classes); "
                   "exhaustive (the default grid, and every combination within a small scope, packed several to a program).")
@click.option("--scope", "scope", multiple=True, metavar="KEY=VALUES",
              help="With --grid exhaustive: a dimension's values in every scope that has it, e.g. spatial=1..6, "
                   "channels=1..17, data=bounds (repeatable).")
@click.option("--goldens", type=click.Path(file_okay=False),
              help="Dialect goldens folder (default: the checkout's tests/goldens).")
@click.option("--library", "library_path", help="Kernel library to verify against (default: the runner's own registration).")
@click.option("--junit", type=click.Path(dir_okay=False), help="Write a JUnit XML report here.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write a JSON report here.")
@click.option("-j", "--jobs", type=int, default=min(2, os.cpu_count() or 1), show_default=True, help="Parallel exports.")
@click.option("--executorch-src", help="ExecuTorch tree: the runner is built from it and its backends/cortex_m Python lowers.")
@click.option("--cmsis-nn-src", help="CMSIS-NN tree for the runner build.")
@click.option("--offline", is_flag=True, help="Do not download the pinned trees when none is found.")
@click.option("--coverage", "coverage_dir", type=click.Path(file_okay=False),
              help="Build the runners with gcov counters and write, per core, which lines and functions of the "
                   "cortex_m kernels and CMSIS-NN ran: DIR/<core>/cobertura.xml, lcov.info and a table.")
@click.option("--value-counters", is_flag=True,
              help="With --coverage, on a core: also count, per call site, the requantize's roundings (exact half "
                   "steps) and the values each clamp, MAX and MIN changed: DIR/<core>/value-counters.txt. The counting "
                   "changes how CMSIS-NN is optimised, so its branch counts differ from a run without it.")
@click.option("--baseline", type=click.Path(dir_okay=False),
              help="An earlier run's --json report: report every case whose instructions changed beyond "
                   "--max-slowdown, either way, with the call that changed most (slower fails), and runners that grew.")
@click.option("--max-slowdown", default="5%", show_default=True, help="The threshold of --baseline.")
@click.option("--max-accuracy-drop", default=1.0, show_default=True, type=click.FloatRange(0, 100),
              help="With --baseline: a case whose SQNR against the float model fell by more dB than this (or whose "
                   "top-1 agreement fell) is DEGRADED.")
@click.option("--per-mac", is_flag=True, help="Print instructions per MAC of every conv and linear call, per core.")
@click.option("--profile", "show_profile", is_flag=True,
              help="Print every simulated case's run call by call, as `cortexm profile` does (and put it in --json).")
@eval_option
@lowering_option
@cases_timeout_option
@shard_option
def test_cmd(targets, all_cores, pattern, case_files, ptes, sim, grid, scope, goldens, library_path, junit, json_path, jobs,
             executorch_src, cmsis_nn_src, offline, coverage_dir, value_counters, baseline, max_slowdown,
             max_accuracy_drop, per_mac, show_profile, evaluation, lowering, timeout, shard) -> int:
    """Export, check, run and compare every case on each core; print a table per core."""
    from cortexm.checking import library
    from cortexm.firmware import BuildOptions
    from cortexm.report import writers as report_files
    from cortexm.report.coverage import print_coverage
    from cortexm.report.summary import print_changes, print_per_mac, print_summary
    from cortexm.sources import backend_source
    from cortexm.testing import app, crosscore, perf, simulate

    # Before any work: where the reports go, what the given programs are called, the baseline.
    reports = outputs.check({"--json": json_path, "--junit": junit})
    if value_counters and not coverage_dir:
        raise CortexmError("--value-counters applies to --coverage DIR")
    if evaluation and ptes:
        raise CortexmError("--eval is measured when a case is exported; a program given with --pte keeps its export's "
                           "record (export it with `cortexm export --eval`)")
    threshold = perf.parse_threshold(max_slowdown)
    earlier = perf.load_baseline(baseline) if baseline else None
    coverage_out = manifest.OwnedFolder(Path(coverage_dir), ".cortexm-coverage.json", "--coverage folder", False,
                                        "choose another --coverage folder", outputs=("cortex-*/*", "host/*"),
                                        offers_force=False) \
        if coverage_dir else None
    for pte in ptes:
        _given_name(Path(pte))
    chosen = _exhaustive_scope(grid, scope)
    names = list(targets) or list(DEFAULT_TEST_CORES)
    if all_cores:
        names += [c for c in EXTRA_CORES if c not in names]
    cores = [core_named(n) for n in names]
    started = time.perf_counter()
    app.require_trusted_caches()
    with Progress() as progress:
        if sim != "none":
            fetch_missing_trees(executorch_src, cmsis_nn_src, offline, progress)
        build = BuildOptions(coverage=bool(coverage_dir), value_counters=value_counters)

        def runners() -> dict:
            found = simulate.simulators(cores, sim, executorch_src, cmsis_nn_src, progress=progress, build=build,
                                        timeout=timeout)
            if coverage_dir:
                from cortexm.firmware import coverage

                for simulator in found.values():
                    if not isinstance(simulator, str):
                        coverage.reset(simulator.runner)
            return found

        # The runners need no lowering: their build starts first, beside the CMSIS-NN module's
        # (mostly one compile, one core) and then the exports. A case file that fails to import
        # ends the run, and the build with it (cortexm.base.children).
        building = simulate.InBackground(runners)
        choose_lowering(executorch_src, lowering, cmsis_nn_src, progress)
        for path in case_files:
            app.load_case_file(Path(path), timeout)
        options = app.Options(
            cores=cores, pattern=pattern, case_files=[Path(f) for f in case_files], ptes=[Path(p) for p in ptes],
            goldens=Path(goldens) if goldens else app.default_goldens(),
            library=library.load(library_path) if library_path else None,
            jobs=max(1, jobs), grid=grid, shard=shard, scope=tuple(scope),
            evaluation=(evaluation.path, evaluation.digest) if evaluation else None, timeout=timeout,
            profile=show_profile,
        )
        options.building = building
        if coverage_dir and any(core.hosted for core in cores):
            options.sim_jobs = 1  # libgcov merges a hosted run's counters into the files beside the objects
        results = app.run(options, progress=progress)
    checks = crosscore.cross_core(results, {c.name: c for c in app.select_cases(options)})
    elapsed = time.perf_counter() - started
    sizes = perf.runner_sizes(options.simulators)
    changes = _gates(results, sizes, earlier, baseline, threshold, max_accuracy_drop) if earlier else []
    print_summary(results, checks, options, elapsed)
    if per_mac:
        print_per_mac(perf.per_mac(results))
    if show_profile:
        from cortexm.report.profile import print_profiles

        print_profiles(results)
    if earlier:
        print_changes(changes, baseline, threshold)
    if coverage_dir:  # the runners of the cores that have a simulator (else a string says why not)
        built = {core: s.runner for core, s in options.simulators.items() if not isinstance(s, str)}
        covered, valued = print_coverage(built, Path(coverage_dir))
    else:
        covered, valued = {}, {}
    if coverage_out:
        coverage_out.seal({"tool": "cortexm test --coverage"})
    meta = {"cores": names, "sim": sim, "seconds": round(elapsed, 2), "cortexm": __version__,
            "shard": shards.label(shard), "run": _run_identity(options, sim),
            "lowering": backend_source.describe(), "runners": sizes,
            "coverage": {core: [f.__dict__ for f in files] for core, files in covered.items()},
            "value_counters": {core: [dataclasses.asdict(s) for s in sites] for core, sites in valued.items()},
            "programs": options.programs, "boots": {core: getattr(s, "boots", 0) for core, s in options.simulators.items()}}
    if chosen is not None:
        meta["exhaustive"] = _print_exhaustive(results, chosen, options)
    outputs.write(reports["--junit"], report_files.to_junit(results, checks))
    outputs.write(reports["--json"], report_files.to_json(results, checks, meta))
    # A simulation that was asked for and did not happen fails the run (--sim none asks for none).
    unsimulated = sim != "none" and any(r.status == Status.NOT_RUN for r in results)
    failed = any(r.failed for r in results) or any(c.failed for c in checks) or any(c.failed for c in changes)
    return EXIT_PROBLEMS if failed or unsimulated else 0


def _gates(results, sizes, earlier: dict, baseline: str, threshold: float, max_drop_db: float) -> list:
    """Every comparison with the baseline: instructions, runner sizes, program sizes, accuracy.
    A baseline with no result for any case and core of this run compared nothing: a failure."""
    from cortexm.semantic import accuracy
    from cortexm.testing import perf

    if not perf.compared(results, earlier) and results:
        return [perf.Change(f"NOTHING COMPARED: {baseline} has no result for any case and core of this run", True)]
    # A gate that compared nothing says so and fails: "no case lost accuracy" would claim a measurement.
    unmeasured = ([perf.Change(f"NOTHING COMPARED: {baseline} has no accuracy figure for any case and core of this run "
                               "that has one (the accuracy gate needs a baseline made with accuracy figures)", True)]
                  if any(r.accuracy and r.accuracy.db is not None for r in results)
                  and not accuracy.compared(results, earlier) else [])
    return (perf.gate(results, earlier, threshold) + perf.size_gate(sizes, earlier, threshold)
            + perf.program_gate(results, earlier) + unmeasured
            + [perf.Change(line, True) for line in accuracy.gate(results, earlier, max_drop_db)])


def _exhaustive_scope(grid: str, scope: tuple[str, ...]) -> dict | None:
    """--scope's values (None without --grid exhaustive)."""
    from cortexm.cases import exhaustive

    if scope and grid != "exhaustive":
        raise CortexmError("--scope applies to --grid exhaustive")
    if grid != "exhaustive":
        return None
    return exhaustive.parse_scope(scope)


def _print_exhaustive(results, chosen: dict, options) -> dict:
    """The exhaustive scope's coverage (combinations, pruned, cases, simulated) per operator
    and scope, and cases, programs and simulator boots per core."""
    from cortexm.cases import exhaustive
    from cortexm.report import table

    simulated = {r.case for r in results if r.run and r.run.sim == "ok"}
    rows = exhaustive.coverage(chosen, simulated)
    table(["operator", "scope", "combinations", "refused by PyTorch", "in a defect's region (alone)", "cases", "simulated"],
          [[r["operator"], r["scope"], r["combinations"], r["refused by PyTorch"], r["in a known defect's region"],
            r["cases"], r["simulated"]] for r in rows],
          title="exhaustive scope" + (f" ({'; '.join(f'{k}={v}' for k, v in chosen.items())})" if chosen else " (default)"))
    per_core = {}
    for core in dict.fromkeys(r.core for r in results):
        mine = [r for r in results if r.core == core and r.exhaustive]
        per_core[core] = {"cases": len(mine), "passed": sum(r.status == Status.PASS for r in mine),
                          "programs": options.programs.get(core, 0),
                          "boots": getattr(options.simulators.get(core), "boots", 0)}
    table(["core", "exhaustive cases", "passed", "programs simulated (all cases)", "simulator boots (all cases)"],
          [[core, c["cases"], c["passed"], c["programs"], c["boots"]] for core, c in per_core.items()])
    return {"scope": chosen, "coverage": rows, "per_core": per_core}


def _given_name(pte: Path) -> None:
    """A given program's name (its sidecar's) names its rows: one line, not a forged row."""
    from cortexm.base import files
    from cortexm.pte.sidecar import read_sidecar

    sidecar = read_sidecar(files.regular(pte, "program", files.MAX_PROGRAM))
    if sidecar is not None:
        files.check_name(sidecar.name, f"{pte}: its sidecar's name")


def _run_identity(options, sim: str) -> str:
    """What makes the shards of this run one run (cortexm.testing.shards.identity): the cases
    the unsharded run runs, their case files and programs, and how they are lowered and run."""
    import dataclasses
    import hashlib

    from cortexm.sources import backend_source
    from cortexm.testing import app, cache

    whole = app.select_cases(dataclasses.replace(options, shard=None))
    return shards.identity(
        cases=sorted(c.name for c in whole), case_files=[cache.case_file_digest(f.resolve()) for f in options.case_files],
        programs=[hashlib.sha256(p.read_bytes()).hexdigest() for p in options.ptes],
        cores=[c.name for c in options.cores], sim=sim, layout=options.layout, memory=options.memory,
        evaluation=options.evaluation[1] if options.evaluation else None,
        lowering=backend_source.describe(), code=cache.fingerprint(), cortexm=__version__)


@click.command(name="upstream-tests")
@targets_option(multiple=True, help_text="Core(s) to run on (repeatable; default cortex-m7 and cortex-m55).")
@click.option("-k", "pattern", help="Only tests matching this pytest -k expression.")
@click.option("--sim", type=click.Choice(["qemu", "fvp"]), default="qemu", show_default=True)
@click.option("--executorch-src", help="ExecuTorch tree: its backends/cortex_m/test and Python, its runtime.")
@click.option("--cmsis-nn-src", help="CMSIS-NN tree for the runner build.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="upstream-tests", show_default=True,
              help="Where each core's JUnit report, session log and statistics go.")
@click.option("--junit", type=click.Path(dir_okay=False), help="One JUnit report with a suite per core.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write a JSON report here.")
@click.option("--offline", is_flag=True, help="Do not download the pinned trees when none is found.")
@lowering_option
def upstream_tests(targets, pattern, sim, executorch_src, cmsis_nn_src, out_dir, junit, json_path, offline, lowering) -> int:
    """ExecuTorch's own backends/cortex_m tests on this project's runners, one session per core.

    Upstream's implementation tests run on a Corstone-300 FVP; here each run goes to the
    core's cortexm runner on QEMU (the operators upstream's build_test_runner.sh registers,
    and whatever else a program calls). The tests and the lowering are the tree's when one
    is in use (--executorch-src), else the installed executorch's.
    """
    from cortexm import sources
    from cortexm.report import upstream as upstream_report
    from cortexm.sources import backend_source
    from cortexm.testing import upstream

    reports = outputs.check({"--json": json_path, "--junit": junit}, kind="upstream")
    out = manifest.OwnedFolder(Path(out_dir), ".cortexm-upstream.json", "--out folder", False, "choose another --out folder",
                               outputs=("*.xml", "*.json", "*.log", "*.progress"), offers_force=False)
    cores = [core_named(t).name for t in (targets or DEFAULT_TEST_CORES)]
    with Progress() as progress:
        fetch_missing_trees(executorch_src, cmsis_nn_src, offline, progress)
        choose_lowering(executorch_src, lowering, cmsis_nn_src, progress)
        tree = backend_source.active_tree()
        folder = upstream.test_folder(tree)
        if sources.locate(sources.EXECUTORCH, executorch_src).path is None:
            raise CortexmError(sources.missing_message(sources.EXECUTORCH) + " (the runners are built from it)")
        for name, value in (("CORTEXM_EXECUTORCH_SRC", executorch_src), ("CORTEXM_CMSIS_NN_SRC", cmsis_nn_src)):
            if value:
                os.environ[name] = str(Path(value).resolve())  # the sessions build from the same trees
        click.echo(f"tests: {folder}\nlowered by {backend_source.describe()}", err=True)
        try:
            runs = upstream.run_suite(folder, cores, sim, pattern, Path(out_dir), progress)
        finally:
            out.seal({"tool": "cortexm upstream-tests"})
    report, rows, failures = upstream.summarize(runs, folder, backend_source.describe())
    upstream_report.print_runs(runs, rows, f"ExecuTorch's cortex_m tests ({folder}) on cortexm runners ({sim})")
    lines, unexplained = upstream.judge_failures(failures, report)
    for line in lines:
        click.echo(line)
    outputs.write(reports["--junit"], upstream.merge_junit({core: run["junit"] for core, run in runs.items()}))
    outputs.write(reports["--json"], json_dumps(report, indent=1, default=str) + "\n")
    return EXIT_PROBLEMS if unexplained else 0


@click.command()
@click.argument("op")
@targets_option(multiple=True, help_text="Core(s) to run on (repeatable; default cortex-m7 and cortex-m55).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--count", type=int, default=20, show_default=True, help="Samples to draw.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="sweep-out", show_default=True,
              help="Where the reproducers of failures go (case files).")
@click.option("--sim", type=click.Choice(["qemu", "fvp"]), default="qemu", show_default=True)
@click.option("--shrink", "shrink_limit", type=int, default=3, show_default=True, help="Failures to shrink.")
@click.option("-j", "--jobs", type=int, default=min(2, os.cpu_count() or 1), show_default=True)
@click.option("--executorch-src")
@click.option("--cmsis-nn-src")
@timeout_option
@shard_option
@click.option("--json", "json_path", type=click.Path(dir_okay=False),
              help="Write the samples' results as a `test --json` report.")
def sweep(op, targets, seed, count, out_dir, sim, shrink_limit, jobs, executorch_src, cmsis_nn_src, timeout, shard,
          json_path) -> int:
    """Seeded random samples of OP's parameters, checked against the reference and across cores.

    OP is one of: conv2d, depthwise_conv2d, transpose_conv2d, linear, avg_pool2d,
    max_pool2d, add, mul, softmax. Failures are shrunk and written as case files
    that `cortexm test --cases FILE` runs.
    """
    from cortexm.cases.space import space
    from cortexm.report import writers as report_files
    from cortexm.sources import backend_source
    from cortexm.testing import cache, simulate
    from cortexm.testing import sweep as sweeps

    space(op)  # an unknown operator fails before anything is built
    if count < 1:
        raise click.UsageError("--count must be at least 1")
    reports = outputs.check({"--json": json_path})
    out = manifest.OwnedFolder(Path(out_dir), ".cortexm-sweep.json", "--out folder", False, "choose another --out folder",
                               outputs=("sweep-repro-*.py",), offers_force=False)
    cores = [core_named(t) for t in (targets or DEFAULT_TEST_CORES)]
    choose_lowering(executorch_src, cmsis_nn_src=cmsis_nn_src)
    with Progress() as progress:
        simulators = simulate.simulators(cores, sim, executorch_src, cmsis_nn_src, progress=progress, timeout=timeout)
        missing = {name: why for name, why in simulators.items() if isinstance(why, str)}
        if missing:
            raise CortexmError(f"a sweep runs on simulators: {'; '.join(f'{k}: {v}' for k, v in missing.items())}")
        try:
            report = sweeps.run_sweep(op, cores, seed, count, Path(out_dir), simulators, jobs=max(1, jobs),
                                      shrink_limit=shrink_limit, progress=progress, shard=shard)
        finally:
            out.seal({"tool": "cortexm sweep"})
    if report.interrupted and not report.results:
        raise children.Interrupted(report.interrupted)  # nothing finished: nothing to report
    settings = {"op": op, "seed": seed, "count": count}
    outputs.write(reports["--json"], report_files.to_json(report.results, report.checks, {
        "cores": [c.name for c in cores], "sim": sim, "seconds": round(report.seconds, 2), "cortexm": __version__,
        "shard": shards.label(shard), "lowering": backend_source.describe(),
        "run": shards.identity(sweep=settings, cores=[c.name for c in cores], sim=sim, lowering=backend_source.describe(),
                               code=cache.fingerprint(), cortexm=__version__),
        "sweep": settings, "interrupted": bool(report.interrupted)}))
    agree = sum(c.agree for c in report.checks)
    stopped = " (interrupted: the samples before it)" if report.interrupted else ""
    click.echo(f"{op} seed {seed}: {report.samples} samples{stopped} on {', '.join(report.cores)} in "
               f"{report.seconds:.0f} s ({report.per_minute:.1f} samples/min); {agree}/{len(report.checks)} "
               f"bit-identical across cores; {report.expected} expected failures (known defects); "
               f"{len(report.findings)} new failures")
    for f in report.findings:
        click.echo(f"FAIL {f.sample}: {f.failure}")
        if f.shrunk:
            click.echo(f"     shrunk to {f.shrunk}")
        if f.repro:
            click.echo(f"     reproducer: {f.repro}")
    if report.interrupted:
        raise children.Interrupted(report.interrupted)
    return EXIT_PROBLEMS if report.findings else 0


@click.group()
def report() -> None:
    """Work with `cortexm test --json` reports."""


@report.command(name="merge")
@click.argument("reports", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the merged JSON report here.")
@click.option("--junit", type=click.Path(dir_okay=False), help="Write the merged JUnit XML report here.")
def report_merge(reports: tuple[str, ...], json_path: str | None, junit: str | None) -> int:
    """Join the --json reports of the shards of one run (`test --shard K/N`) into one, as if
    unsharded; exit 1 when any case or cross-core check failed, as `test` does."""
    from cortexm.base import files
    from cortexm.report import writers as report_files
    from cortexm.report.merge import merge_reports

    written = outputs.check({"--json": json_path, "--junit": junit})
    loaded = []
    for path in reports:
        loaded.append(files.read_json(path, "JSON report"))
    results, checks, meta = merge_reports(loaded, list(reports))
    outputs.write(written["--json"], report_files.to_json(results, checks, meta))
    outputs.write(written["--junit"], report_files.to_junit(results, checks))
    failed = [r for r in results if r.failed] + [c for c in checks if c.failed]
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(Counter(r.status for r in results).items()))
    click.echo(f"merged {len(reports)} reports: {len(results)} results ({statuses}); "
               f"{sum(c.failed for c in checks)} of {len(checks)} cross-core checks failed")
    for r in results:
        if r.failed:
            click.echo(f"{r.status} {r.case} {r.core}: {r.reason}")
    return EXIT_PROBLEMS if failed else 0
