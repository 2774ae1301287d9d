"""What `cortexm test --coverage` prints: each core's coverage collected from its runner
(cortexm.firmware.coverage), as tables of lines, functions and branches, the branches never
taken, those only the exhaustive scope took, and the value counters."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from cortexm.base.errors import CortexmError

if TYPE_CHECKING:
    from cortexm.firmware.build import Runner
    from cortexm.firmware.coverage import FileCoverage, ValueSite


def print_coverage(runners: dict[str, Runner], out_dir: Path) -> tuple[dict[str, list[FileCoverage]],
                                                                        dict[str, list[ValueSite]]]:
    """core -> per-file coverage and core -> value counters per call site, collected from each
    core's runner into out_dir/<core> and printed."""
    from cortexm.firmware import coverage
    from cortexm.report import table

    covered: dict[str, list[FileCoverage]] = {}
    valued: dict[str, list[ValueSite]] = {}
    rows = []
    for core, runner in runners.items():
        try:
            files = covered[core] = coverage.collect(runner, out_dir / core)
        except CortexmError as e:
            click.echo(f"warning: {e}", err=True)
            continue
        for label, prefix in (("cortex_m kernels", "executorch/backends/cortex_m/ops/"), ("CMSIS-NN", "cmsis-nn/")):
            lines_run, lines, functions_run, functions, taken, arcs = coverage.totals(files, prefix)
            rows.append([core, label, _share(lines_run, lines), _share(functions_run, functions), _share(taken, arcs)])
    if rows:
        table(["core", "code", "lines executed", "functions executed", "branches taken"], rows,
              title=f"coverage (per file: {out_dir}/<core>/cobertura.xml, lcov.info; branches never taken: "
                    f"{coverage.NEVER})")
        paths = sorted({f.path for files in covered.values() for f in files if f.lines_executed})
        table(["file (that ran)", *(f"{core} lines, branches" for core in covered)],
              [[path.split("/", 1)[1], *(next((f"{f.lines_executed}/{f.lines}, {f.branches_taken}/{f.branches}"
                                               for f in files if f.path == path), "-") for files in covered.values())]
               for path in paths], title="lines and branches executed per file")
        for core in covered:
            never = coverage.never_taken(out_dir / core)
            if never:
                click.echo(f"{core}: {len(never)} branches never taken in lines that ran; the first:")
                click.echo("\n".join(f"  {line}" for line in never[:10]))
            runner = runners[core]
            scope_only = coverage.attribute(runner, out_dir / core, _in_scope)
            if scope_only:
                click.echo(f"{core}: {len(scope_only)} branches only the exhaustive scope took, each with the smallest "
                           f"program that took it ({coverage.SCOPE_ONLY}); the first:")
                click.echo("\n".join(f"  {line}" for line in scope_only[:10]))
            sites = valued[core] = coverage.values(runner, out_dir / core)
            _print_values(core, sites, out_dir / core / coverage.VALUE_SITES)
    return covered, valued


def _print_values(core: str, sites: list[ValueSite], listed: Path) -> None:
    """A core's value counters in a few lines: the roundings that met a half step, the clamps
    that changed a value in every lane, and the first sites that never did."""
    from cortexm.firmware.coverage import CHOICES

    rounding = [s for s in sites if s.kind == "requantize"]
    choices = [s for s in sites if s.kind in CHOICES]
    clamps = [s for s in sites if s.kind != "requantize" and s.kind not in CHOICES]
    if not sites:
        return
    click.echo(f"{core}: value counters: {len(rounding)} requantize call sites ran, "
               f"{sum(1 for s in rounding if s.counts[2])} met a positive half step, "
               f"{sum(1 for s in rounding if s.counts[3])} a negative one; {len(clamps)} MVE clamp sites ran, "
               f"{sum(1 for s in clamps if not s.never())} changed a value in every lane; {len(choices)} MAX and MIN "
               f"sites ran, {sum(1 for s in choices if not s.never())} changed a value (per site: {listed})")
    never = [s for s in sites if s.never()]
    if never:
        click.echo("\n".join(f"  {s.path}:{s.line} {s.kind}: {s.never()}" for s in never[:10]))


def _in_scope(program: str) -> bool:
    """Whether a program is one of the exhaustive scope's (a pack, or a part run alone)."""
    from cortexm.cases.registry import REGISTRY

    case = REGISTRY.get(program)
    return bool(case and case.grid and case.grid.level.startswith("exhaustive"))


def _share(done: int, total: int) -> str:
    return f"{done}/{total} ({100 * done / max(total, 1):.0f} %)"
