"""The `cortexm` command line: one subcommand per stage, each usable alone.

Every subcommand turns bad input into a one-line `error: ...` and exit status 2;
checks that find problems exit 1; success is 0.
"""

from __future__ import annotations

import json
import os
from collections import Counter
import sys
import time
from pathlib import Path

import click

from cortexm import __version__
from cortexm.errors import CortexmError
from cortexm.progress import Progress

EXIT_PROBLEMS = 1
EXIT_BAD_INPUT = 2


def main(argv: list[str] | None = None) -> None:
    try:
        code = cli.main(args=argv, prog_name="cortexm", standalone_mode=False)
    except click.exceptions.Exit as e:
        code = e.exit_code
    except click.exceptions.Abort:
        click.echo("error: aborted", err=True)
        code = 130
    except click.ClickException as e:
        click.echo(f"error: {e.format_message()}", err=True)
        code = EXIT_BAD_INPUT
    except CortexmError as e:
        click.echo(f"error: {e}", err=True)
        code = EXIT_BAD_INPUT
    except KeyboardInterrupt:
        click.echo("error: interrupted", err=True)
        code = 130
    except Exception as e:  # a bug: still one line, with a way to get details
        if os.environ.get("CORTEXM_DEBUG"):
            raise
        click.echo(f"error: internal error {type(e).__name__}: {e} (set CORTEXM_DEBUG=1 for the traceback)", err=True)
        code = 3
    sys.exit(code or 0)


def _targets_option(multiple: bool = False, required: bool = False, help_text: str = "Cortex-M core, e.g. cortex-m7."):
    return click.option("--target", "-t", "targets" if multiple else "target", multiple=multiple,
                        required=required, help=help_text)


LOWERING_TREE_HELP = ("ExecuTorch tree whose backends/cortex_m Python lowers (on the installed wheel); "
                      "else $CORTEXM_EXECUTORCH_SRC, else the default location, else the wheel's own.")


def _timeout_option(fn):
    from cortexm.sim.protocol import DEFAULT_TIMEOUT

    return click.option("--timeout", type=click.FloatRange(min=1), default=DEFAULT_TIMEOUT, show_default=True,
                        help="Seconds one simulator run may take before it is stopped (a hung kernel).")(fn)


def _shard_option(fn):
    def parse(ctx, param, value):
        from cortexm.testing import shards

        return shards.parse(value) if value else None

    return click.option("--shard", callback=parse, metavar="K/N",
                        help="Run only shard K of N (cases split by a hash of their name, each with all its "
                             "cores); `cortexm report merge` joins the shards' --json reports.")(fn)


def _lowering_option(fn):
    return click.option("--lowering", type=click.Choice(["tree", "installed"]), default="tree", show_default=True,
                        help="tree: the backends/cortex_m Python of the ExecuTorch tree in use (the runner's), "
                             "the installed wheel's when there is none; installed: the wheel's, whatever tree is "
                             "around (the pinned lowering the goldens record).")(fn)


def _choose_lowering(executorch_src: str | None, lowering: str = "tree", cmsis_nn_src: str | None = None,
                     progress=None) -> None:
    """Lower with the trees the runner is built from, or the installed wheel's own Python."""
    from cortexm import backend_source

    if lowering == "installed":
        backend_source.activate(None)
        return
    note = backend_source.choose(executorch_src, cmsis_nn_src, progress)
    if note:
        click.echo(f"warning: {note}", err=True)


def _coverage(options, out_dir: Path) -> dict:
    """core -> per-file coverage, collected and printed (cortexm.coverage)."""
    from cortexm import coverage
    from cortexm.report import table

    covered, rows = {}, []
    for core, simulator in options.simulators.items():
        if isinstance(simulator, str):
            continue
        try:
            files = covered[core] = coverage.collect(simulator.runner, out_dir / core)
        except CortexmError as e:
            click.echo(f"warning: {e}", err=True)
            continue
        for label, prefix in (("cortex_m kernels", "executorch/backends/cortex_m/ops/"), ("CMSIS-NN", "cmsis-nn/Source/")):
            lines_run, lines, functions_run, functions = coverage.totals(files, prefix)
            rows.append([core, label, f"{lines_run}/{lines} ({100 * lines_run / max(lines, 1):.0f} %)",
                         f"{functions_run}/{functions} ({100 * functions_run / max(functions, 1):.0f} %)"])
    if rows:
        table(["core", "code", "lines executed", "functions executed"], rows,
              title=f"coverage (per file: {out_dir}/<core>/cobertura.xml, lcov.info)")
        kernels = sorted({f.path for files in covered.values() for f in files
                          if f.path.startswith("executorch/backends/cortex_m/ops/")})
        table(["cortex_m kernel file", *covered],
              [[path.rsplit("/", 1)[1], *(next((f"{f.lines_executed}/{f.lines}" for f in files if f.path == path), "-")
                                           for files in covered.values())] for path in kernels],
              title="lines executed per file")
    return covered


def _fetch_missing_trees(executorch_src: str | None, cmsis_nn_src: str | None, offline: bool, progress) -> None:
    """The main job needs the pinned source trees: fetch what is missing, or say in one line
    why it cannot be had (the run goes on and reports what it could not simulate)."""
    from cortexm import pins, sources, trees

    data = pins.load()
    for kind, explicit in ((sources.EXECUTORCH, executorch_src), (sources.CMSIS_NN, cmsis_nn_src)):
        _path, note = trees.ensure(kind, data, explicit, offline, progress)
        if note:
            click.echo(("" if note.startswith("fetched") else "warning: ") + note, err=True)


def _core(name: str):
    from cortexm.targets import core

    return core(name)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cortexm")
def cli() -> None:
    """Export, check, build and run ExecuTorch Cortex-M (CMSIS-NN) models."""


# --- pins and targets ---------------------------------------------------------------

@cli.command()
@click.option("--executorch-src", help="ExecuTorch tree whose CMSIS_NN_VERSION to compare with the pin.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def pins(executorch_src: str | None, as_json: bool) -> int:
    """Show the pin file and check what can be checked here."""
    from cortexm import pins as pinmod
    from cortexm import sources

    data = pinmod.load()
    checks = [pinmod.check_installed_executorch(data), *pinmod.check_installed_wheel_versions(data),
              *pinmod.check_wheel_files(data)]
    tree = sources.locate(sources.EXECUTORCH, executorch_src)
    if tree.path is not None:
        checks.append(pinmod.check_cmsis_nn_pin_in_tree(data, tree.path))
    else:
        checks.append(pinmod.Check("CMSIS_NN_VERSION in executorch tree", None, "no ExecuTorch tree given or found"))
    if as_json:
        click.echo(json.dumps({"file": str(pinmod.pins_path()), "pins": data,
                               "checks": [c.__dict__ for c in checks]}, indent=2))
    else:
        et, nn = data["executorch"], data["cmsis-nn"]
        tc, fvp = data["toolchain"], data["fvp"]["corstone-300"]
        click.echo(f"pin file    {pinmod.pins_path()}")
        click.echo(f"executorch  {et['version']} at {et['rev']}  nar {et['nar_hash'] or '(not established here, see its provenance)'}")
        click.echo(f"cmsis-nn    {nn['rev']}  nar {nn['nar_hash']}")
        click.echo(f"toolchain   {tc['name']} {tc['version']} for {', '.join(sorted(tc['files']))}")
        click.echo(f"fvp         corstone-300 {fvp['version']} for {', '.join(sorted(fvp['files']))} (sha256 {'pinned' if all(f['sha256'] for f in fvp['files'].values()) else 'not established, md5 only'})")
        click.echo("wheels      " + ", ".join(f"{n} {w['version']} ({len(w['files'])} files)" for n, w in data["wheels"].items()))
        click.echo("checks:")
        for c in checks:
            mark = {True: "ok  ", False: "FAIL", None: "--  "}[c.ok]
            click.echo(f"  {mark}  {c.what}: {c.detail}")
    return EXIT_PROBLEMS if any(c.ok is False for c in checks) else 0


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def targets(as_json: bool) -> None:
    """List the cores, their CMSIS-NN backend (as ExecuTorch resolves it) and simulators."""
    from cortexm.backend_source import upstream_backend
    from cortexm.targets import CORES

    rows = []
    for c in CORES:
        try:
            upstream = upstream_backend(c)
        except Exception:  # executorch not installed: show what this project expects
            upstream = None
        rows.append({"target": c.name, "backend": upstream or c.backend, "backend_expected": c.backend,
                     "gcc_flags": " ".join(c.gcc_flags), "qemu_machine": c.qemu_machine, "fvp_model": c.fvp_model})
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    from cortexm.report import table

    table(["target", "CMSIS-NN", "GCC flags", "QEMU -M", "FVP"],
          [[r["target"], r["backend"] + ("" if r["backend"] == r["backend_expected"] else f" (expected {r['backend_expected']})"),
            r["gcc_flags"], r["qemu_machine"] or "-", r["fvp_model"] or "-"] for r in rows])


# --- export, inspect, verify, dialect ------------------------------------------------

@cli.command()
@click.argument("model", required=False)
@_targets_option()
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Output .pte (default NAME-CORE.pte).")
@click.option("--layout", type=click.Choice(["legacy", "explicit"]), default="legacy", show_default=True,
              help="explicit: ExecuTorch's experimental explicit-NHWC lowering (*_nhwc operators).")
@click.option("--list", "list_cases", is_flag=True, help="Print the built-in case names, one per line.")
@click.option("--executorch-src", type=click.Path(), help=LOWERING_TREE_HELP)
@click.option("--force", is_flag=True, help="Replace files at the output that cortexm did not write.")
@_lowering_option
def export(model: str | None, target: str | None, output: str | None, layout: str, list_cases: bool,
           executorch_src: str | None, force: bool, lowering: str) -> None:
    """Lower MODEL (a built-in case or FILE.py:FACTORY) for one core.

    Writes the .pte and beside it NAME.json (sidecar), NAME.dialect.txt, the
    example inputs and the Python reference outputs as raw .bin files.
    """
    if list_cases:
        from cortexm.cases import all_cases

        for case in all_cases():
            click.echo(case.name)
        return
    if not model:
        raise click.UsageError("missing MODEL (a built-in case, see --list, or FILE.py:FACTORY)")
    if not target:
        raise click.UsageError("missing --target (e.g. --target cortex-m7); there is no default core")
    from cortexm import export as exporter
    from cortexm import modelsource

    core = _core(target)
    out = Path(output) if output else Path(f"{modelsource.name_of(model)}-{core.short}.pte")
    exporter.check_target(out, force)  # before the lowering: a refusal costs nothing
    _choose_lowering(executorch_src, lowering)
    bundle = modelsource.load(model)
    result = exporter.export(bundle, core, layout)
    exporter.write(result, out, force)
    click.echo(f"wrote {out} ({len(result.pte)} B) for {core.name} (CMSIS-NN {core.backend}) and its sidecar {exporter.sidecar_path(out)}")


@cli.command(name="inspect")
@click.argument("pte", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def inspect_cmd(pte: str, as_json: bool) -> None:
    """Show a .pte: header, operator calls with their value counts and scratch, memory, I/O."""
    from cortexm.inspect import inspect
    from cortexm.report import print_inspection

    report = inspect(Path(pte))
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        print_inspection(report)


@cli.command()
@click.argument("ptes", nargs=-1, required=True, type=click.Path())
@click.option("--library", "library_path", default="installed", show_default=True,
              help="ExecuTorch tree or package, generated-kernels folder, schema .yaml, or 'installed'.")
@_targets_option(help_text="Core to audit scratch and layout for (default: the sidecar's target, else every core with a runner).")
def verify(ptes: tuple[str, ...], library_path: str, target: str | None) -> int:
    """Check .pte files against a kernel library and a core; one line per problem."""
    from cortexm import library
    from cortexm.verify import verify_file

    lib = library.load(library_path)
    core = _core(target) if target else None
    click.echo(f"library: {lib.description}", err=True)
    problems = errors = 0
    for pte in ptes:
        try:
            findings = verify_file(Path(pte), lib, core)
        except CortexmError as e:
            click.echo(f"error: {e}", err=True)
            errors += 1
            continue
        for f in findings:
            click.echo(f.line())
        problems += sum(f.is_problem for f in findings)
    if errors:
        return EXIT_BAD_INPUT
    return EXIT_PROBLEMS if problems else 0


@cli.command()
@click.argument("models", nargs=-1)
@_targets_option(multiple=True, help_text="Core(s) to lower for (repeatable).")
@click.option("--all", "all_cases", is_flag=True, help="Every case `cortexm test` runs by default (built-in and the default grid).")
@click.option("--goldens", type=click.Path(file_okay=False), help="Compare with DIR/<core>/<case>.txt.")
@click.option("--update-goldens", is_flag=True, help="Write the goldens instead of comparing.")
@click.option("--executorch-src", type=click.Path(), help=LOWERING_TREE_HELP)
@_lowering_option
def dialect(models: tuple[str, ...], targets: tuple[str, ...], all_cases: bool, goldens: str | None, update_goldens: bool,
            executorch_src: str | None, lowering: str) -> int:
    """Print the lowered graph of MODEL(s) in canonical text, or compare it with golden files."""
    from cortexm import dialect as dia
    from cortexm import export, modelsource
    from cortexm.cases import all_cases as every_case

    if not targets:
        raise click.UsageError("missing --target (repeatable)")
    if update_goldens and not goldens:
        raise click.UsageError("--update-goldens needs --goldens DIR")
    names = [c.name for c in every_case(grid="default")] if all_cases else list(models)
    if not names:
        raise click.UsageError("give MODEL(s) or --all")
    cores = [_core(t) for t in targets]
    _choose_lowering(executorch_src, lowering)
    problems = 0
    for name in names:
        for core in cores:
            try:
                text = export.lowered_text(modelsource.load(name), core)
            except export.KnownFailure as e:
                click.echo(f"XFAIL {name} {core.name}: {e}")
                continue
            if not goldens:
                click.echo(text, nl=False)
                continue
            path = dia.golden_path(Path(goldens), core.name, name)
            if update_goldens:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
                click.echo(f"wrote {path}")
                continue
            diff = dia.compare(text, path)
            if diff is None:
                click.echo(f"OK {name} {core.name}")
            else:
                problems += 1
                click.echo(f"FAIL {name} {core.name}: lowered graph differs from {path}")
                click.echo(diff, nl=False)
    return EXIT_PROBLEMS if problems else 0


# --- the test app ----------------------------------------------------------------------

DEFAULT_TEST_CORES = ("cortex-m7", "cortex-m55")
EXTRA_CORES = ("cortex-m3", "cortex-m4", "cortex-m33")


@cli.command(name="test")
@_targets_option(multiple=True, help_text="Core(s) to test (repeatable; default cortex-m7 and cortex-m55).")
@click.option("--all-cores", is_flag=True, help="Also cortex-m3, cortex-m4 and cortex-m33.")
@click.option("-k", "pattern", help="Only cases whose name contains PATTERN.")
@click.option("--cases", "case_files", multiple=True, type=click.Path(dir_okay=False),
              help="A Python file registering cases with @cortexm.cases.register (repeatable); runs only those.")
@click.option("--pte", "ptes", multiple=True, type=click.Path(dir_okay=False),
              help="A program exported elsewhere, with its sidecar (repeatable); checked and run on each core as it is.")
@click.option("--sim", type=click.Choice(["qemu", "fvp", "none"]), default="qemu", show_default=True)
@click.option("--grid", type=click.Choice(["none", "default", "full"]), default="default", show_default=True,
              help="Grid cases: none; default (every parameter class of each operator once); full (every pair of classes).")
@click.option("--goldens", type=click.Path(file_okay=False), help="Dialect goldens folder (default: the checkout's tests/goldens).")
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
@_lowering_option
@_timeout_option
@_shard_option
def test_cmd(targets, all_cores, pattern, case_files, ptes, sim, grid, goldens, library_path, junit, json_path, jobs,
             executorch_src, cmsis_nn_src, offline, coverage_dir, lowering, timeout, shard) -> int:
    """Export, check, run and compare every case on each core; print a table per core."""
    from cortexm import backend_source, library
    from cortexm.testing import app, simulate
    from cortexm.testing.summary import print_summary

    names = list(targets) or list(DEFAULT_TEST_CORES)
    if all_cores:
        names += [c for c in EXTRA_CORES if c not in names]
    cores = [_core(n) for n in names]
    started = time.perf_counter()
    with Progress() as progress:
        if sim != "none":
            _fetch_missing_trees(executorch_src, cmsis_nn_src, offline, progress)
        _choose_lowering(executorch_src, lowering, cmsis_nn_src, progress)
        options = app.Options(
            cores=cores, pattern=pattern, case_files=[Path(f) for f in case_files], ptes=[Path(p) for p in ptes],
            goldens=Path(goldens) if goldens else app.default_goldens(),
            library=library.load(library_path) if library_path else None,
            jobs=max(1, jobs), grid=grid, shard=shard,
        )
        options.simulators = simulate.simulators(cores, sim, executorch_src, cmsis_nn_src, progress=progress,
                                                 coverage=bool(coverage_dir), timeout=timeout)
        if coverage_dir:
            from cortexm import coverage

            for simulator in options.simulators.values():
                if not isinstance(simulator, str):
                    coverage.reset(simulator.runner)
            options.sim_jobs = 1  # a core's runs must not write its counters at once
        results = app.run(options, progress=progress)
    checks = app.cross_core(results, {c.name: c for c in app.select_cases(options)})
    elapsed = time.perf_counter() - started
    print_summary(results, checks, options, elapsed)
    covered = _coverage(options, Path(coverage_dir)) if coverage_dir else {}
    meta = {"cores": names, "sim": sim, "seconds": round(elapsed, 2), "cortexm": __version__,
            "shard": f"{shard[0]}/{shard[1]}" if shard else None,
            "lowering": backend_source.describe(),
            "coverage": {core: [f.__dict__ for f in files] for core, files in covered.items()}}
    if junit:
        Path(junit).write_text(app.to_junit(results, checks))
    if json_path:
        Path(json_path).write_text(app.to_json(results, checks, meta))
    # A simulation that was asked for and did not happen fails the run (--sim none asks for none).
    unsimulated = sim != "none" and any(r.status == "NOT RUN" for r in results)
    return EXIT_PROBLEMS if any(r.failed for r in results) or any(c.failed for c in checks) or unsimulated else 0


@cli.command(name="upstream-tests")
@_targets_option(multiple=True, help_text="Core(s) to run on (repeatable; default cortex-m7 and cortex-m55).")
@click.option("-k", "pattern", help="Only tests matching this pytest -k expression.")
@click.option("--sim", type=click.Choice(["qemu", "fvp"]), default="qemu", show_default=True)
@click.option("--executorch-src", help="ExecuTorch tree: its backends/cortex_m/test and Python, its runtime.")
@click.option("--cmsis-nn-src", help="CMSIS-NN tree for the runner build.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="upstream-tests", show_default=True,
              help="Where each core's JUnit report, session log and statistics go.")
@click.option("--junit", type=click.Path(dir_okay=False), help="One JUnit report with a suite per core.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write a JSON report here.")
@click.option("--offline", is_flag=True, help="Do not download the pinned trees when none is found.")
@_lowering_option
def upstream_tests(targets, pattern, sim, executorch_src, cmsis_nn_src, out_dir, junit, json_path, offline, lowering) -> int:
    """ExecuTorch's own backends/cortex_m tests on this project's runners, one session per core.

    Upstream's implementation tests run on a Corstone-300 FVP; here each run goes to the
    core's cortexm runner on QEMU (the operators upstream's build_test_runner.sh registers,
    and whatever else a program calls). The tests and the lowering are the tree's when one
    is in use (--executorch-src), else the installed executorch's.
    """
    from cortexm import backend_source, sources
    from cortexm.report import table
    from cortexm.testing import upstream

    cores = [_core(t).name for t in (targets or DEFAULT_TEST_CORES)]
    with Progress() as progress:
        _fetch_missing_trees(executorch_src, cmsis_nn_src, offline, progress)
        _choose_lowering(executorch_src, lowering, cmsis_nn_src, progress)
        tree = backend_source.active_tree()
        folder = upstream.test_folder(tree)
        if sources.locate(sources.EXECUTORCH, executorch_src).path is None:
            raise CortexmError(sources.missing_message(sources.EXECUTORCH) + " (the runners are built from it)")
        for name, value in (("CORTEXM_EXECUTORCH_SRC", executorch_src), ("CORTEXM_CMSIS_NN_SRC", cmsis_nn_src)):
            if value:
                os.environ[name] = str(Path(value).resolve())  # the sessions build from the same trees
        click.echo(f"tests: {folder}\nlowered by {backend_source.describe()}", err=True)
        runs = upstream.run_suite(folder, cores, sim, pattern, Path(out_dir), progress)
    rows, failures, report = [], [], {"tests": str(folder), "lowering": backend_source.describe(), "cores": {}}
    for core, run in runs.items():
        counts, problems = upstream.verdicts(run["junit"])
        stats = run["stats"]
        seconds = stats.get("seconds", {})
        sim_s, build_s = seconds.get("simulation", 0.0), seconds.get("runner builds", 0.0)
        rows.append([core, counts["passed"], counts["failed"], counts["errors"], counts["xfailed"], counts.get("xpassed", 0),
                     counts["skipped"],
                     stats.get("programs", "-"), f"{run['seconds']:.0f} s",
                     f"{max(run['seconds'] - sim_s - build_s, 0):.0f} / {sim_s:.0f} / {build_s:.0f} s"])
        failures += [(core, *p) for p in problems]
        report["cores"][core] = {**counts, "wall": run["seconds"], "stats": stats, "problems": problems,
                                 "junit": str(run["junit"]), "log": str(run["log"])}
    table(["core", "passed", "failed", "errors", "xfailed", "xpassed", "skipped", "programs run", "wall",
           "lowering+python / simulation / runner builds"], rows,
          title=f"ExecuTorch's cortex_m tests ({folder}) on cortexm runners ({sim})")
    for core, run in runs.items():
        stats = run["stats"]
        if stats.get("runner"):
            click.echo(f"{core} runner: {stats['runner']} ({len(stats.get('ops', []))} operators)")
        xfails = stats.get("xfail", [])
        if xfails:
            # Upstream's xfail marks, as they hold here: the ones that pass are stale on this core.
            passing = [x for x in xfails if x["outcome"] == "xpassed"]
            click.echo(f"{core}: {len(xfails)} tests marked xfail upstream: {len(xfails) - len(passing)} fail here "
                       f"as marked, {len(passing)} pass here" + (" (each in the JSON report with why)" if xfails else ""))
            for x in passing:
                click.echo(f"  passes here: {x['test']} (upstream's reason: {x['reason']})")
    from cortexm import defects

    locate = defects.default_locators()
    unexplained = []
    for core, test, kind, line in failures:
        known = next((d for d in defects.UPSTREAM_TEST_DEFECTS
                      if d.applies(core, locate) and d.explains("upstream-test", f"{test}: {line}")), None)
        if known:
            click.echo(f"XFAIL {core} {test}: {known.name}: {line}")
            report["cores"][core].setdefault("known", []).append({"test": test, "defect": known.name})
        else:
            click.echo(f"{kind.upper().rstrip('S')} {core} {test}: {line}")
            unexplained.append(test)
    if junit:
        Path(junit).write_text(upstream.merge_junit({core: run["junit"] for core, run in runs.items()}))
    if json_path:
        Path(json_path).write_text(json.dumps(report, indent=1, default=str) + "\n")
    return EXIT_PROBLEMS if unexplained else 0


@cli.command()
@click.argument("op")
@_targets_option(multiple=True, help_text="Core(s) to run on (repeatable; default cortex-m7 and cortex-m55).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--count", type=int, default=20, show_default=True, help="Samples to draw.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="sweep-out", show_default=True,
              help="Where the sample and reproducer case files go.")
@click.option("--sim", type=click.Choice(["qemu", "fvp"]), default="qemu", show_default=True)
@click.option("--shrink", "shrink_limit", type=int, default=3, show_default=True, help="Failures to shrink.")
@click.option("-j", "--jobs", type=int, default=min(2, os.cpu_count() or 1), show_default=True)
@click.option("--executorch-src")
@click.option("--cmsis-nn-src")
@_timeout_option
@_shard_option
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the samples' results as a `test --json` report.")
def sweep(op, targets, seed, count, out_dir, sim, shrink_limit, jobs, executorch_src, cmsis_nn_src, timeout, shard,
          json_path) -> int:
    """Seeded random samples of OP's parameters, checked against the reference and across cores.

    OP is one of: conv2d, depthwise_conv2d, transpose_conv2d, linear, avg_pool2d,
    max_pool2d, add, mul, softmax. Failures are shrunk and written as case files
    that `cortexm test --cases FILE` runs.
    """
    from cortexm.cases.space import space
    from cortexm.testing import simulate
    from cortexm.testing import sweep as sweeps

    space(op)  # an unknown operator fails before anything is built
    if count < 1:
        raise click.UsageError("--count must be at least 1")
    cores = [_core(t) for t in (targets or DEFAULT_TEST_CORES)]
    _choose_lowering(executorch_src, cmsis_nn_src=cmsis_nn_src)
    with Progress() as progress:
        simulators = simulate.simulators(cores, sim, executorch_src, cmsis_nn_src, progress=progress, timeout=timeout)
        missing = {name: why for name, why in simulators.items() if isinstance(why, str)}
        if missing:
            raise CortexmError(f"a sweep runs on simulators: {'; '.join(f'{k}: {v}' for k, v in missing.items())}")
        report = sweeps.run_sweep(op, cores, seed, count, Path(out_dir), simulators, jobs=max(1, jobs),
                                  shrink_limit=shrink_limit, progress=progress, shard=shard)
    if json_path:
        from cortexm import backend_source
        from cortexm.testing import app

        Path(json_path).write_text(app.to_json(report.results, report.checks, {
            "cores": [c.name for c in cores], "sim": sim, "seconds": round(report.seconds, 2), "cortexm": __version__,
            "shard": f"{shard[0]}/{shard[1]}" if shard else None, "lowering": backend_source.describe(),
            "sweep": {"op": op, "seed": seed, "count": count}}))
    agree = sum(c.agree for c in report.checks)
    click.echo(f"{op} seed {seed}: {report.samples} samples on {', '.join(report.cores)} in {report.seconds:.0f} s "
               f"({report.per_minute:.1f} samples/min); {agree}/{len(report.checks)} bit-identical across cores; "
               f"{report.expected} expected failures (known defects); {len(report.findings)} new failures")
    for f in report.findings:
        click.echo(f"FAIL {f.sample}: {f.failure}")
        if f.repro:
            click.echo(f"     shrunk to {f.shrunk}")
            click.echo(f"     reproducer: {f.repro}")
    return EXIT_PROBLEMS if report.findings else 0


@cli.group()
def report() -> None:
    """Work with `cortexm test --json` reports."""


@report.command(name="merge")
@click.argument("reports", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the merged JSON report here.")
@click.option("--junit", type=click.Path(dir_okay=False), help="Write the merged JUnit XML report here.")
def report_merge(reports: tuple[str, ...], json_path: str | None, junit: str | None) -> int:
    """Join the --json reports of the shards of one run (`test --shard K/N`) into one, as if
    unsharded; exit 1 when any case or cross-core check failed, as `test` does."""
    from cortexm import files
    from cortexm.testing import app
    from cortexm.testing.merge import merge_reports

    loaded = []
    for path in reports:
        try:
            loaded.append(json.loads(files.regular(path, "report", 1 << 30).read_text()))
        except (ValueError, UnicodeDecodeError) as e:
            raise CortexmError(f"{path}: not a JSON report ({e})") from None
    results, checks, meta = merge_reports(loaded, list(reports))
    if json_path:
        Path(json_path).write_text(app.to_json(results, checks, meta))
    if junit:
        Path(junit).write_text(app.to_junit(results, checks))
    failed = [r for r in results if r.failed] + [c for c in checks if c.failed]
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(Counter(r.status for r in results).items()))
    click.echo(f"merged {len(reports)} reports: {len(results)} results ({statuses}); "
               f"{sum(c.failed for c in checks)} of {len(checks)} cross-core checks failed")
    for r in results:
        if r.failed:
            click.echo(f"{r.status} {r.case} {r.core}: {r.reason}")
    return EXIT_PROBLEMS if failed else 0


# The firmware subcommands (sources, build, run, size) register themselves on `cli`.
import cortexm.cli_firmware  # noqa: E402,F401
import cortexm.cli_arduino  # noqa: E402,F401

if __name__ == "__main__":
    main()
