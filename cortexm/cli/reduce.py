"""`cortexm reduce`: a failing case's first failing call as a reproducer of its own."""

from __future__ import annotations

from pathlib import Path

import click

from cortexm.base import manifest
from cortexm.base.errors import CortexmError
from cortexm.base.progress import Progress
from cortexm.cli.options import EXIT_PROBLEMS, cases_timeout_option, choose_lowering, core_named, lowering_option, targets_option


@click.command(name="reduce")
@click.argument("spec", metavar="CASE")
@targets_option(multiple=True, required=True,
                help_text="The core it fails on, then cores to compare with (repeatable): the reproducer must fail "
                          "where the original fails and pass where it passes.")
@click.option("--cases", "case_files", multiple=True, type=click.Path(dir_okay=False),
              help="A case file that registers CASE (repeatable).")
@click.option("-o", "--out", "out_dir", type=click.Path(file_okay=False), default="reduced", show_default=True,
              help="Where the reproducer goes: a new folder, or one cortexm reduce wrote before.")
@click.option("--shrink", "shrink_steps", type=int, default=12, show_default=True,
              help="Shrinking steps at most (channels, spatial size); 0 keeps the call's own sizes.")
@click.option("--no-upstream-test", is_flag=True, help="Do not write the test in upstream's style.")
@click.option("--no-c", "no_c", is_flag=True, help="Do not write, build and run the failing call as a C program calling "
                                                     "CMSIS-NN.")
@click.option("--sim", type=click.Choice(["qemu", "fvp"]), default="qemu", show_default=True)
@click.option("--executorch-src")
@click.option("--cmsis-nn-src")
@lowering_option
@cases_timeout_option
def reduce_cmd(spec, targets, case_files, out_dir, shrink_steps, no_upstream_test, no_c, sim, executorch_src, cmsis_nn_src,
               lowering, timeout) -> int:
    """Cut CASE (a case name, or FILE.py:FACTORY) down to its first failing call on the first -t core.

    Writes OUT/reduced_CASE_OP.py (a case file: the call's operator with its parameters and
    weights, fed with the input that reached it, calibrated to the original's quantization),
    its arrays as .npy beside it, OUT/test_reduced_CASE_OP.py in the style of ExecuTorch's
    backends/cortex_m/test/ops, and, for a call that is one CMSIS-NN call (convolutions, pools)
    failing in the kernel, OUT/reduced_CASE_OP.c: that call made on CMSIS-NN directly with the
    recorded arguments, checking its status, its buffers and its output against the reference,
    built and run on every core. Exit 0 when the reproducer fails the same way (same stage, a
    call of the same operator) and passes on the cores where the original passes; 1 otherwise.
    """
    from cortexm import sources
    from cortexm.lowering import modelsource
    from cortexm.testing import app, simulate
    from cortexm.testing import reduce as reducing
    from cortexm.testing.results import Options

    if shrink_steps < 0:
        raise click.UsageError("--shrink must be 0 or more")
    cores = [core_named(t) for t in dict.fromkeys(targets)]
    choose_lowering(executorch_src, lowering, cmsis_nn_src)  # before a case file imports the backend
    for path in case_files:  # before anything is made: an unknown case is one line, and no folder
        app.load_case_file(Path(path), timeout)
    modelsource.check_spec(spec)
    out = manifest.OwnedFolder(Path(out_dir), ".cortexm-reduce.json", "--out folder", False, "choose another --out folder",
                               outputs=("reduced_*", "test_reduced_*", f"{reducing.SCRATCH}/*"), offers_force=False)
    app.require_trusted_caches()
    with Progress() as progress:
        simulators = simulate.simulators(cores, sim, executorch_src, cmsis_nn_src, progress=progress, timeout=timeout)
        missing = {name: why for name, why in simulators.items() if isinstance(why, str)}
        if missing:
            raise CortexmError(f"reduce runs on simulators: {'; '.join(f'{k}: {v}' for k, v in missing.items())}")
        options = Options(cores=cores, case_files=[Path(p) for p in case_files], simulators=dict(simulators), jobs=1,
                          goldens=None, timeout=timeout)
        try:
            c_call = None
            tree = sources.locate(sources.CMSIS_NN, cmsis_nn_src).path
            if not no_c and tree is not None:
                c_call = reducing.CCall(tree, sim)
            r = reducing.reduce(spec, cores, Path(out_dir), reducing.Runner(options), shrink_steps, progress,
                                upstream_test=not no_upstream_test, c_call=c_call)
        finally:
            out.seal({"tool": "cortexm reduce"})
    assert r.piece is not None
    where = f"node {r.node}, where the export stops" if r.node else f"call {r.failure.instruction}"
    click.echo(f"{r.case} {where} ({r.failure.op}) on {r.core}, reduced to {r.piece.describe()}"
               + (f" with {r.levels} producing call level(s)" if r.levels else "")
               + (f"; shrunk: {'; '.join(r.steps)}" if r.steps else "; not shrunk"))
    case_file = next((p for p in r.files if p.name.startswith("reduced_") and p.suffix == ".py"), None)
    size = "no program (its export fails)" if r.node else f"{r.calls} calls"
    click.echo(f"reproducer: {size}, {r.lines} lines: {case_file or '-'}")
    for core, original in r.original.items():
        reduced = r.reduced.get(core)
        click.echo(f"{core} original: {original.line()}")
        click.echo(f"{core} reduced:  {reduced.line() if reduced else '-'}")
    for path in r.files:
        if path.suffix == ".py":
            click.echo(f"wrote {path}")
    if r.note:
        click.echo(f"note: {r.note}")
    if r.c_file is not None:
        click.echo(f"C program: {r.c_file} ({r.c_file.read_text().count(chr(10))} lines)")
        for core, outcome in r.c_outcomes.items():
            click.echo(f"{core} C:        {outcome.line()}")
    if r.c_note:
        click.echo(f"C program: {r.c_note}")
    click.echo("same failure, same cores" if r.same else "the reproducer does NOT fail as the original does")
    return 0 if r.same else EXIT_PROBLEMS
