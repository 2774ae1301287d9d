"""`cortexm inspect` and `verify`: what a .pte holds, and whether it can run on a library and a core."""

from __future__ import annotations

from pathlib import Path

import click

from cortexm.base.errors import CortexmError
from cortexm.base.text import json_dumps
from cortexm.cli.options import EXIT_BAD_INPUT, EXIT_PROBLEMS, core_named, targets_option


@click.command(name="inspect")
@click.argument("pte", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def inspect_cmd(pte: str, as_json: bool) -> None:
    """Show a .pte: header, operator calls with their value counts and scratch, memory, I/O."""
    from cortexm.checking.inspect import inspect
    from cortexm.report import print_inspection

    report = inspect(Path(pte))
    if as_json:
        click.echo(json_dumps(report, indent=2))
    else:
        print_inspection(report)


@click.command()
@click.argument("ptes", nargs=-1, required=True, type=click.Path())
@click.option("--library", "library_path", default="installed", show_default=True,
              help="ExecuTorch tree or package, generated-kernels folder, schema .yaml, or 'installed'.")
@targets_option(help_text="Core to audit scratch and layout for (default: the sidecar's target, else every core with a runner).")
def verify(ptes: tuple[str, ...], library_path: str, target: str | None) -> int:
    """Check .pte files against a kernel library and a core; one line per problem."""
    from cortexm.checking import library
    from cortexm.checking.verify import verify_file

    lib = library.load(library_path)
    core = core_named(target) if target else None
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
