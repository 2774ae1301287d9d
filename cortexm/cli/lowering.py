"""`cortexm export` and `dialect`: lowering a model for a core, and its graph as text."""

from __future__ import annotations

from pathlib import Path

import click

from cortexm.cli.options import (
    EXIT_PROBLEMS,
    LOWERING_TREE_HELP,
    choose_lowering,
    core_named,
    eval_option,
    lowering_option,
    targets_option,
)


@click.command()
@click.argument("model", required=False)
@targets_option()
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Output .pte (default NAME-CORE.pte).")
@click.option("--layout", type=click.Choice(["legacy", "explicit"]), default="legacy", show_default=True,
              help="explicit: ExecuTorch's experimental explicit-NHWC lowering (*_nhwc operators).")
@click.option("--list", "list_cases", is_flag=True, help="Print the built-in case names, one per line.")
@click.option("--executorch-src", type=click.Path(), help=LOWERING_TREE_HELP)
@click.option("--force", is_flag=True, help="Replace files at the output that cortexm did not write.")
@eval_option
@lowering_option
def export(model: str | None, target: str | None, output: str | None, layout: str, list_cases: bool,
           executorch_src: str | None, force: bool, evaluation, lowering: str) -> int:
    """Lower MODEL (a built-in case or FILE.py:FACTORY) for one core.

    Writes the .pte and beside it NAME.json (sidecar), NAME.dialect.txt, the
    example inputs and the Python reference outputs as raw .bin files.
    """
    if list_cases:
        from cortexm.cases import all_cases

        for case in all_cases():
            click.echo(case.name)
        return 0
    if not model:
        raise click.UsageError("missing MODEL (a built-in case, see --list, or FILE.py:FACTORY)")
    if not target:
        raise click.UsageError("missing --target (e.g. --target cortex-m7); there is no default core")
    from cortexm.base import files
    from cortexm.base.progress import Progress
    from cortexm.lowering import export as exporter
    from cortexm.lowering import modelsource, stage, writer
    from cortexm.pte.sidecar import sidecar_path

    core = core_named(target)
    if output:
        out = Path(output)
    else:  # the model's name becomes the file's: a name, not a path (`model.py:../x`)
        out = Path(f"{files.check_name(modelsource.name_of(model), 'model name')}-{core.short}.pte")
    writer.check_target(out, force)  # before the lowering: a refusal costs nothing
    modelsource.check_spec(model)  # an unknown case too
    with Progress() as progress:
        # From the first second: importing torch, building CMSIS-NN's module, each stage.
        progress(f"exporting {model} for {core.name}: importing torch and ExecuTorch")
        choose_lowering(executorch_src, lowering, progress=progress)
        stage.STAGE_LISTENERS.append(progress)
        try:
            bundle = modelsource.load(model)
            result = exporter.export(bundle, core, layout, evaluation=evaluation)
        finally:
            stage.STAGE_LISTENERS.remove(progress)
    writer.write(result, out, force)
    click.echo(f"wrote {out} ({len(result.pte)} B) for {core.name} (CMSIS-NN {core.backend}) and its sidecar {sidecar_path(out)}")
    failure = _say_deployment(result, core)
    _say_semantic(result.sidecar.semantic)  # the export's own record, before it is read back
    if failure:
        known = _known_defect(result, core, failure)
        click.echo(f"FAIL {result.name} lowering: {failure}"
                   + (f" ({known.name}: a known defect of the code that lowered it, cortexm/cases/defects.py)" if known else ""))
    inaccurate = _accuracy_failures(result)
    for line in inaccurate:
        click.echo(f"FAIL {result.name} accuracy: {line}")
    return EXIT_PROBLEMS if failure or inaccurate else 0


def _accuracy_failures(result) -> list[str]:
    """What `cortexm test` fails stage `accuracy` with (cortexm.semantic.realinputs), from the
    export's record."""
    from cortexm.semantic import realinputs

    sidecar = result.sidecar
    calls = realinputs.calls_of(sidecar.semantic)
    return realinputs.failures(sidecar.accuracy, sidecar.data, calls)


def _known_defect(result, core, failure: str):
    """The known defect of a built-in case that explains its lowering failure here, or None."""
    from cortexm import cases

    name = result.sidecar.source.case if result.sidecar.source else None
    case = cases.get(name) if name else None
    return next((d for d in case.defects_here(core.name) if d.explains("lowering", failure)), None) if case else None


def _say_deployment(result, core) -> str | None:
    """What the program is on the device: the calls lowered, the constants no call reads, its
    accuracy against the float model; the lowering's failure line, if a compute operator was
    left in float (cortexm.checking.lowering)."""
    from collections import Counter

    from cortexm.cases import defects
    from cortexm.checking import constants, lowering
    from cortexm.pte import parse
    from cortexm.report.accuracy import record_lines

    program, sidecar = parse(result.pte), result.sidecar
    total, lowered, left = lowering.survey(program.plan(), sidecar)
    ops = Counter(c.op for c in left)
    click.echo(f"lowered: {lowered} of {total} calls are cortex_m kernels"
               + ("" if not ops else "; not lowered: " + ", ".join(f"{n} {op}" for op, n in ops.most_common())))
    found = constants.survey(program, program.plan(), result.pte, sidecar.constants)
    known = defects.EXECUTORCH_DEAD_WEIGHTS
    cause = (f" ({known.name}, a known defect: cortexm test shows it per case)"
             if found.dead and known.applies(core.name, defects.default_locators()) else "")
    click.echo(f"constants: {found.line()}{cause}")
    for line in record_lines(sidecar.accuracy):
        click.echo(line)
    return lowering.failure_line(left)


def _say_semantic(semantic: dict | None) -> None:
    """What the program means against the quantized model it was lowered from (cortexm.semantic)."""
    from cortexm.semantic import judge

    if not semantic:
        return
    departures = judge.departures(semantic)
    largest = max((p["max_lsb"] for p in semantic.get("points", [])), default=0)
    sqnr = [f["sqnr_db"] for f in semantic.get("float", []) if f.get("sqnr_db") is not None]
    drift = f"; against the float model {min(sqnr):g} dB SQNR" if sqnr else ""
    if not departures:
        click.echo(f"the program means the quantized model: every call within its tolerance (largest departure "
                   f"{largest:g} LSB){drift}")
    for line, _ in departures:
        click.echo(f"warning: {line}", err=True)


@click.command()
@click.argument("models", nargs=-1)
@targets_option(multiple=True, help_text="Core(s) to lower for (repeatable).")
@click.option("--all", "all_cases", is_flag=True,
              help="Every case `cortexm test` runs by default (built-in and the default grid).")
@click.option("--goldens", type=click.Path(file_okay=False), help="Compare with DIR/<core>/<case>.txt.")
@click.option("--update-goldens", is_flag=True, help="Write the goldens instead of comparing.")
@click.option("--executorch-src", type=click.Path(), help=LOWERING_TREE_HELP)
@lowering_option
def dialect(models: tuple[str, ...], targets: tuple[str, ...], all_cases: bool, goldens: str | None, update_goldens: bool,
            executorch_src: str | None, lowering: str) -> int:
    """Print the lowered graph of MODEL(s) in canonical text, or compare it with golden files."""
    from cortexm.cases import all_cases as every_case
    from cortexm.lowering import dialect as dia
    from cortexm.lowering import export, modelsource

    if not targets:
        raise click.UsageError("missing --target (repeatable)")
    if update_goldens and not goldens:
        raise click.UsageError("--update-goldens needs --goldens DIR")
    names = [c.name for c in every_case(grid="default")] if all_cases else list(models)
    if not names:
        raise click.UsageError("give MODEL(s) or --all")
    cores = [core_named(t) for t in targets]
    choose_lowering(executorch_src, lowering)
    problems = 0
    for name in names:
        texts = export.lowered_texts(modelsource.load(name), cores)  # quantized once for every core
        for core in cores:
            text = texts[core.name]
            if isinstance(text, export.KnownFailure):
                click.echo(f"XFAIL {name} {core.name}: {text}")
                continue
            if not goldens:
                click.echo(text, nl=False)
                continue
            path = dia.golden_path(Path(goldens), core.name, name)
            if update_goldens:
                click.echo(f"wrote {dia.write_golden(Path(goldens), core.name, name, text)}")
                continue
            diff = dia.compare(text, path)
            if diff is None:
                click.echo(f"OK {name} {core.name}")
            else:
                problems += 1
                click.echo(f"FAIL {name} {core.name}: lowered graph differs from {path}")
                click.echo(diff, nl=False)
    return EXIT_PROBLEMS if problems else 0
