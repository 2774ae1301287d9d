"""The firmware subcommands: sources, build, run, size (registered on cortexm.cli.cli).

Kept apart from cli.py so the firmware path can be read, and changed, on its own.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from cortexm.cli import EXIT_PROBLEMS, _targets_option, _timeout_option, cli
from cortexm.errors import CortexmError

_SOURCE_OPTIONS = (
    click.option("--executorch-src", type=click.Path(), help="ExecuTorch tree (else $CORTEXM_EXECUTORCH_SRC, else the default location)."),
    click.option("--cmsis-nn-src", type=click.Path(), help="CMSIS-NN tree (else $CORTEXM_CMSIS_NN_SRC, else the default location)."),
)


def _source_options(fn):
    for option in reversed(_SOURCE_OPTIONS):
        fn = option(fn)
    return fn


_target = _targets_option(required=True)


def _say(message: str) -> None:
    click.echo(message, err=True)


def _ops_list(ops: str | None) -> list[str]:
    """--ops: a comma-separated list, or a file of one operator per line."""
    if not ops:
        return []
    if Path(ops).is_file():
        lines = (line.split("#", 1)[0].strip() for line in Path(ops).read_text().splitlines())
        return [line for line in lines if line]
    if "::" not in ops:
        raise CortexmError(f"--ops {ops}: neither a file nor a list of operators like aten::add.out")
    return [op.strip() for op in ops.split(",") if op.strip()]


def _pte(path: str) -> Path:
    from cortexm import files

    return files.regular(path, "program", files.MAX_PROGRAM)


# --- sources ------------------------------------------------------------------------

@cli.command()
@_source_options
@click.option("--fetch", is_flag=True, help="Download the pinned trees missing from the default location, checking their hash.")
@click.option("--hash", "content", is_flag=True, help="Compute the NAR hash of git checkouts too, to compare content with the pin.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def sources(executorch_src: str | None, cmsis_nn_src: str | None, fetch: bool, content: bool, as_json: bool) -> int:
    """Which ExecuTorch and CMSIS-NN trees builds use, and whether they match pins.toml."""
    from cortexm import pins, trees
    from cortexm import sources as src

    data = pins.load()
    given = {src.EXECUTORCH: executorch_src, src.CMSIS_NN: cmsis_nn_src}
    if fetch:
        from cortexm.progress import Progress

        with Progress() as progress:
            for kind, explicit in given.items():
                if src.locate(kind, explicit).path is None:
                    path, verified = trees.fetch(kind, data, progress)
                    _say(f"fetched {kind.name} into {path}: {verified}")
    found = [trees.status(kind, data, explicit, content) for kind, explicit in given.items()]
    if as_json:
        click.echo(json.dumps([s.as_dict() for s in found], indent=2))
    else:
        for s in found:
            _print_tree(s)
        et = found[0]
        if et.path is not None:
            check = pins.check_cmsis_nn_pin_in_tree(data, et.path)
            click.echo(f"{'':12}{check.what}: {check.detail}")
        from cortexm import backend_source

        click.echo(f"{'lowering':12}{backend_source.describe(et.path)}")
    return 0 if all(s.matches for s in found) else EXIT_PROBLEMS


def _print_tree(s) -> None:
    from cortexm import sources as src

    if s.path is None:
        click.echo(f"{s.kind.name:12}not found: {src.missing_message(s.kind)}")
        return
    where = {"flag": s.kind.flag, "env": f"${s.kind.env}", "default": "default location"}[s.origin]
    click.echo(f"{s.kind.name:12}{s.path} ({where})")
    if s.rev:
        state = f", uncommitted changes {s.changes}" if s.changes else ", clean"
        click.echo(f"{'':12}git {s.rev}{state}")
    if s.nar_hash:
        click.echo(f"{'':12}content {s.nar_hash}")
    verdict = {True: "matches the pin", False: "differs from the pin", None: "cannot be compared with the pin"}[s.matches]
    pin = s.pin_rev + (f", {s.pin_nar_hash}" if s.pin_nar_hash else "")
    click.echo(f"{'':12}{verdict} ({pin})")


# --- build --------------------------------------------------------------------------

@cli.command()
@_target
@_source_options
@click.option("--model", "models", multiple=True, type=click.Path(),
              help="Register the operators this .pte calls (repeatable: the union of the programs').")
@click.option("--ops", help="Register these operators: a comma-separated list (aten::add.out,cortex_m::softmax.out) "
                            "or a file with one per line ('#' comments).")
@click.option("--board", help="Board support folder under fvp/boards (default: the core's QEMU board).")
@click.option("--fresh", is_flag=True, help="Rebuild from scratch, ignoring the cache.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def build(target: str, executorch_src: str | None, cmsis_nn_src: str | None, models: tuple[str, ...], ops: str | None,
          board: str | None, fresh: bool, as_json: bool) -> None:
    """Build (or take from the cache) the runner firmware for one core.

    It registers the suite's operators, or exactly those of --model programs and --ops."""
    from cortexm.firmware import build_runner, model_ops
    from cortexm.targets import core

    selected = None
    if models or ops:
        selected = {op for model in models for op in model_ops(_pte(model))} | set(_ops_list(ops))
    runner = build_runner(core(target), executorch_src=executorch_src, cmsis_nn_src=cmsis_nn_src,
                          ops=sorted(selected) if selected is not None else None, board=board, fresh=fresh,
                          progress=_say)
    if as_json:
        click.echo(json.dumps({"core": runner.core.name, "board": runner.board, "elf": str(runner.elf),
                               "key": runner.key, "cached": runner.cached, "seconds": runner.seconds,
                               "ops": list(runner.ops)}, indent=2))
        return
    how = f"cached (built in {runner.seconds:.0f} s)" if runner.cached else f"built in {runner.seconds:.0f} s"
    click.echo(f"{runner.elf}")
    click.echo(f"  {runner.core.name} on {runner.board}, {len(runner.ops)} operators, {how}, key {runner.key}")


# --- run ----------------------------------------------------------------------------

@cli.command()
@click.argument("pte", type=click.Path())
@click.argument("more_inputs", nargs=-1, type=click.Path(), metavar="[INPUT]...")
@_target
@click.option("--sim", "sim_name", type=click.Choice(["qemu", "fvp"]), default="qemu", show_default=True)
@click.option("--inputs", "-i", multiple=True, type=click.Path(),
              help="Input file (repeat, or list after it): raw .bin in the program's dim order, .npy, or a C "
                   "header with the array (FILE.h:NAME to pick one); default: the sidecar's.")
@click.option("--fvp", type=click.Path(), help="The Corstone FVP executable (else $CORTEXM_FVP, else PATH).")
@_source_options
@click.option("--keep", type=click.Path(file_okay=False), help="Run in this folder and keep it (program, inputs, out-K.bin).")
@click.option("--save", "save", multiple=True, type=click.Path(dir_okay=False),
              help="Write output K (in order, repeatable) as a .npy file in its logical shape.")
@click.option("--labels", type=click.Path(dir_okay=False),
              help="Class names for a classifier's output: a C string array (e.g. kLabels in an .ino) or one per line.")
@click.option("--top", type=click.IntRange(min=0), default=3, show_default=True,
              help="Classes shown for a classifier-shaped output (one dimension of 2 or more); 0: none.")
@click.option("--force", is_flag=True, help="Write over files at --keep and --save that cortexm did not write.")
@click.option("--no-audit", is_flag=True, help="Run even when `cortexm verify` finds the program cannot run on this core.")
@_timeout_option
@click.option("--log", "show_log", is_flag=True, help="Print the simulator's output.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def run(pte: str, more_inputs: tuple[str, ...], target: str, sim_name: str, inputs: tuple[str, ...], fvp: str | None,
        executorch_src: str | None, cmsis_nn_src: str | None, keep: str | None, save: tuple[str, ...],
        labels: str | None, top: int, force: bool, no_audit: bool, timeout: float, show_log: bool,
        as_json: bool) -> int:
    """Run PTE on a simulated core; compare with the sidecar's reference when there is one."""
    from cortexm import manifest
    from cortexm.inputs import read_labels
    from cortexm.pte import load
    from cortexm.run import RunError, core_mismatch, prepare_keep, run_pte, seal_keep
    from cortexm.targets import core

    program = _pte(pte)
    target_core = core(target)
    if more_inputs and not inputs:
        raise click.UsageError("input files follow --inputs, e.g. --inputs a.bin b.bin")
    given = [*inputs, *more_inputs] or None
    names = read_labels(labels) if labels else None
    # Every refusal comes before the runner is built: each costs nothing.
    outputs = len(load(program).plan().outputs)
    if len(save) > outputs:
        raise CortexmError(f"{len(save)} --save files for {outputs} outputs")
    for path in save:
        manifest.check_writable(Path(path), "--save")
        if Path(path).exists() and not force:
            raise CortexmError(f"{path} exists; choose another --save file, or pass --force to replace it")
    if keep:
        prepare_keep(Path(keep), force)
    if not no_audit:
        _audit(program, target_core)
    warning = core_mismatch(program, target_core)
    if warning:
        _say(f"warning: {warning}")
    try:
        result = run_pte(program, target_core, sim_name, given, executorch_src=executorch_src, cmsis_nn_src=cmsis_nn_src,
                         fvp=fvp, workdir=keep, timeout=timeout, progress=_say)
    except RunError as e:
        if show_log:
            click.echo(e.result.log, nl=False)
        click.echo(f"error: {e}", err=True)
        return EXIT_PROBLEMS
    finally:
        if keep and Path(keep).is_dir():
            seal_keep(Path(keep))
    for path, out in zip(save, result.outputs):
        _save_npy(Path(path), out)
    if show_log:
        click.echo(result.log, nl=False)
    rows = [_describe_output(k, out, result.diffs[k] if k < len(result.diffs) else None, top, names)
            for k, out in enumerate(result.outputs)]
    if as_json:
        click.echo(json.dumps({"pte": str(program), "target": target_core.name, "sim": sim_name,
                               "elf": str(result.runner.elf), "instructions": result.instructions,
                               "ticks": result.sim_result.ticks, "outputs": rows, "qtol": result.qtol,
                               "within_tolerance": result.within_tolerance}, indent=2))
    else:
        click.echo(f"{program.name} on {target_core.name} ({sim_name} {result.runner.board})")
        for row in rows:
            diff = "" if row["max_diff_lsb"] is None else (
                f"  max |diff| {row['max_diff_lsb']:g} LSB ({row['mismatches']}/{row['elements']} elements differ)")
            click.echo(f"  output {row['index']}: {row['dtype']}{row['shape']}  min {row['min']:g} max {row['max']:g}{diff}")
            if row["top"]:
                ranked = ", ".join(f"{c['index']}" + (f" {c['label']}" if "label" in c else "") + f" {c['score']:g}"
                                   for c in row["top"])
                click.echo(f"    top {len(row['top'])}: {ranked}")
        if result.qtol is not None and result.within_tolerance is not None:
            verdict = "within" if result.within_tolerance else "OUTSIDE"
            click.echo(f"  {verdict} the tolerance of {result.qtol} LSB")
        count = f"{result.instructions} instructions" if result.instructions is not None else f"{result.sim_result.ticks} SysTick ticks"
        click.echo(f"  execute(): {count}")
    return EXIT_PROBLEMS if result.within_tolerance is False else 0


def _audit(program: Path, target_core) -> None:
    """`cortexm verify`'s checks for this core, before a runner is built (seconds, not minutes)."""
    from cortexm.verify import verify_file

    problems = [f for f in verify_file(program, None, target_core) if f.is_problem]
    if problems:
        more = f" (and {len(problems) - 1} more problems, see `cortexm verify`)" if len(problems) > 1 else ""
        raise CortexmError(f"{problems[0].line()}{more}; not run (--no-audit runs it anyway)")


def _save_npy(path: Path, values) -> None:
    import numpy as np

    partial = path.with_name(f".{path.name}.partial")
    with open(partial, "wb") as f:
        np.save(f, values, allow_pickle=False)
    partial.replace(path)


def _describe_output(index: int, out, diff, top: int = 0, labels: list[str] | None = None) -> dict:
    from cortexm.inputs import top_classes

    values = out.astype("float64")
    ranked = top_classes(out, top) or []
    return {"index": index, "dtype": str(out.dtype), "shape": list(out.shape),
            "min": float(values.min()) if values.size else 0.0, "max": float(values.max()) if values.size else 0.0,
            "max_diff_lsb": diff.max_lsb if diff else None, "mismatches": diff.mismatches if diff else None,
            "elements": diff.elements if diff else None,
            "top": [{"index": i, "score": score, **({"label": labels[i]} if labels and i < len(labels) else {})}
                    for i, score in ranked]}


# --- size ---------------------------------------------------------------------------

@cli.command()
@_target
@_source_options
@click.option("--model", type=click.Path(), help="Size the runner built for this .pte alone, and show the model's share.")
@click.option("--board", help="Board support folder under fvp/boards (default: the core's QEMU board).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def size(target: str, executorch_src: str | None, cmsis_nn_src: str | None, model: str | None, board: str | None,
         as_json: bool) -> None:
    """Flash and RAM of a core's runner, by component."""
    from cortexm.firmware import build_runner
    from cortexm.report import table
    from cortexm.size import footprint
    from cortexm.targets import core

    program = _pte(model) if model else None
    runner = build_runner(core(target), executorch_src=executorch_src, cmsis_nn_src=cmsis_nn_src, model=program,
                          board=board, progress=_say)
    result = footprint(runner.elf, runner.map_file, program)
    if as_json:
        click.echo(json.dumps({"core": runner.core.name, "board": runner.board, **result.as_dict()}, indent=2))
        return
    what = f"registering the {len(runner.ops)} operators of {program.name}" if program else f"suite runner, {len(runner.ops)} operators"
    click.echo(f"{runner.core.name} runner on {runner.board} ({what}): {runner.elf}")
    rows = [[c.name, c.flash, c.ram] for c in result.components]
    rows.append(["total", result.flash, result.ram])
    if result.model:
        rows.append(["model (run time)", result.model.flash, result.model.ram])
    table(["component", "flash B", "RAM B"], rows)
    click.echo(f"arena for models at run time: {result.arena} B")
    for note in result.notes:
        click.echo(f"note: {note}")
