"""`cortexm arduino-lib`: the ExecuTorch Arduino library."""

from __future__ import annotations

import click

from cortexm.base.text import json_dumps
from cortexm.cli.options import say, source_options


@click.command("arduino-lib")
@source_options
@click.option("--output", "-o", required=True, type=click.Path(file_okay=False),
              help="The library folder to write (replaced when cortexm generated it before).")
@click.option("--force", is_flag=True, help="Replace the folder even when it holds files cortexm did not write.")
@click.option("--executorch-rev", help="The ExecuTorch tree's commit when it is not a git checkout (e.g. a Nix store path).")
@click.option("--cmsis-nn-rev", help="The CMSIS-NN tree's commit when it is not a git checkout.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def arduino_lib(executorch_src: str | None, cmsis_nn_src: str | None, output: str, executorch_rev: str | None,
                cmsis_nn_rev: str | None, force: bool, as_json: bool) -> None:
    """Generate the installable ExecuTorch Arduino library from the pinned trees."""
    from cortexm.arduino.generate import generate

    result = generate(output, executorch_src=executorch_src, cmsis_nn_src=cmsis_nn_src,
                      executorch_rev=executorch_rev, cmsis_nn_rev=cmsis_nn_rev, force=force, progress=say)
    if as_json:
        click.echo(json_dumps({"folder": str(result.folder), "seconds": round(result.seconds, 1),
                               "examples": [f.line() for f in result.findings],
                               "lint": [p.line() for p in result.lint], "provenance": result.provenance}, indent=2))
        return
    et = result.provenance["executorch"]
    click.echo(f"{result.folder}: ExecuTorch library {result.provenance['generator']['library_version']}, "
               f"{len(result.ops)} operators registered, in {result.seconds:.1f} s")
    click.echo(f"  executorch {et['rev'] or et['nar_hash']}, cmsis-nn "
               f"{result.provenance['cmsis-nn']['rev'] or result.provenance['cmsis-nn']['nar_hash']}, "
               f"{result.provenance['flatbuffers']['flatc']}")
    for finding in result.findings:
        click.echo(f"  {finding.line()}")
    for problem in result.lint:
        click.echo(f"  lint: {problem.line()}")
