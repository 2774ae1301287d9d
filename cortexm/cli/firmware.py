"""`cortexm build`, `run`, `profile`, `size`: the runner firmware, a program on a simulated core (whole, and call by
call), flash and RAM."""

from __future__ import annotations

import os
from pathlib import Path

import click

from cortexm.base.errors import CortexmError
from cortexm.base.text import json_dumps
from cortexm.cli.options import (
    EXIT_PROBLEMS,
    program_path,
    read_with_trees,
    say,
    source_options,
    target_option,
    timeout_option,
)

# In a --keep folder: what the run wrote there (cortexm.base.manifest), so the next run may replace it.
KEEP_MANIFEST = ".cortexm-run.json"
# What a run writes there (cortexm.sim.protocol): the program, its inputs, the runner's outputs.
KEEP_OUTPUTS = ("program.pte", "i*.bin", "out-*.bin", "coverage.bin")


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


@click.command()
@target_option
@source_options
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
    from cortexm.base.targets import core
    from cortexm.firmware import build_runner, model_ops

    selected = None
    if models or ops:
        selected = {op for model in models for op in model_ops(program_path(model))} | set(_ops_list(ops))
    runner = build_runner(core(target), executorch_src=executorch_src, cmsis_nn_src=cmsis_nn_src,
                          ops=sorted(selected) if selected is not None else None, board=board, fresh=fresh,
                          progress=say)
    if as_json:
        click.echo(json_dumps({"core": runner.core.name, "board": runner.board, "elf": str(runner.elf),
                               "key": runner.key, "cached": runner.cached, "seconds": runner.seconds,
                               "ops": list(runner.ops)}, indent=2))
        return
    how = "cached" if runner.cached else f"built in {runner.seconds:.0f} s"
    click.echo(f"{runner.elf}")
    click.echo(f"  {runner.core.name} on {runner.board}, {len(runner.ops)} operators, {how}, key {runner.key}")


@click.command()
@click.argument("pte", type=click.Path())
@click.argument("more_inputs", nargs=-1, type=click.Path(), metavar="[INPUT]...")
@target_option
@click.option("--sim", "sim_name", type=click.Choice(["qemu", "fvp"]), default="qemu", show_default=True)
@click.option("--inputs", "-i", multiple=True, type=click.Path(),
              help="Input file (repeat, or list after it): raw .bin in the program's dim order, .npy, or a C "
                   "header with the array (FILE.h:NAME to pick one); default: the sidecar's.")
@click.option("--fvp", type=click.Path(), help="The Corstone FVP executable (else $CORTEXM_FVP, else PATH).")
@source_options
@click.option("--keep", type=click.Path(file_okay=False), help="Run in this folder and keep it (program, inputs, out-K.bin).")
@click.option("--save", "save", multiple=True, type=click.Path(dir_okay=False),
              help="Write output K (in order, repeatable) as a .npy file in its logical shape.")
@click.option("--labels", type=click.Path(dir_okay=False),
              help="Class names for a classifier's output: a C string array (e.g. kLabels in an .ino) or one per line.")
@click.option("--top", type=click.IntRange(min=0), default=3, show_default=True,
              help="Classes shown for a classifier-shaped output (one dimension of 2 or more); 0: none.")
@click.option("--force", is_flag=True, help="Write over files at --keep and --save that cortexm did not write.")
@click.option("--no-audit", is_flag=True, help="Run even when `cortexm verify` finds the program cannot run on this core.")
@timeout_option
@click.option("--log", "show_log", is_flag=True, help="Print the simulator's output.")
@click.option("--profile", "show_profile", is_flag=True,
              help="Also show the run call by call, as `cortexm profile` does.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def run(pte: str, more_inputs: tuple[str, ...], target: str, sim_name: str, inputs: tuple[str, ...], fvp: str | None,
        executorch_src: str | None, cmsis_nn_src: str | None, keep: str | None, save: tuple[str, ...],
        labels: str | None, top: int, force: bool, no_audit: bool, timeout: float, show_log: bool,
        show_profile: bool, as_json: bool) -> int:
    """Run PTE on a simulated core; compare with the sidecar's reference when there is one."""
    from cortexm.base import manifest
    from cortexm.base.targets import core
    from cortexm.pte.bundle import Bundle
    from cortexm.sim.inputs import read_labels
    from cortexm.sim.run import RunError, core_mismatch, run_pte

    program = program_path(pte)
    # Read once: the audit, the references and the run all judge these bytes, whatever happens
    # to the file meanwhile.
    bundle = Bundle.open(program)
    target_core = core(target)
    read_with_trees(executorch_src, cmsis_nn_src)
    if more_inputs and not inputs:
        raise click.UsageError("input files follow --inputs, e.g. --inputs a.bin b.bin")
    given: list[str | Path] | None = [*inputs, *more_inputs] or None
    names = read_labels(labels) if labels else None
    # Every refusal comes before the runner is built: each costs nothing.
    outputs = len(bundle.program().plan().outputs)
    if len(save) > outputs:
        raise CortexmError(f"{len(save)} --save files for {outputs} outputs")
    for path in save:
        manifest.check_writable(Path(path), "--save")
        if os.path.lexists(path) and (Path(path).is_symlink() or not Path(path).is_file()):
            raise CortexmError(f"{path} exists and is not a regular file; choose another --save file")
        if os.path.lexists(path) and not force:
            raise CortexmError(f"{path} exists; choose another --save file, or pass --force to replace it")
    kept = None
    if keep:
        # The folder's files are the last run's (replaced) or the user's (refused, or with --force
        # written over where a run writes and otherwise left alone, and never listed as the run's).
        kept = manifest.OwnedFolder(Path(keep), KEEP_MANIFEST, "--keep folder", force, "choose another --keep folder",
                                    outputs=KEEP_OUTPUTS)
        kept.clear()
    if not no_audit:
        _audit(bundle, target_core)
    warning = core_mismatch(bundle, target_core)
    if warning:
        say(f"warning: {warning}")
    try:
        result = run_pte(bundle, target_core, sim_name, given, executorch_src=executorch_src, cmsis_nn_src=cmsis_nn_src,
                         fvp=fvp, workdir=keep, timeout=timeout, progress=say)
    except RunError as e:
        if show_log:
            click.echo(e.result.log, nl=False)
        click.echo(f"error: {e}", err=True)
        return EXIT_PROBLEMS
    finally:
        if kept is not None and kept.folder.is_dir():
            kept.seal({"tool": "cortexm run"})
    for path, out in zip(save, result.outputs, strict=False):
        _save_npy(Path(path), out)
    if show_log:
        click.echo(result.log, nl=False)
    rows = [_describe_output(k, out, result.diffs[k] if k < len(result.diffs) else None, top, names)
            for k, out in enumerate(result.outputs)]
    called = _profile_of(bundle, result) if show_profile else None
    if as_json:
        click.echo(json_dumps({"pte": str(program), "target": target_core.name, "sim": sim_name,
                               "elf": str(result.runner.elf), "instructions": result.instructions,
                               "ticks": result.sim_result.ticks, "outputs": rows, "qtol": result.qtol,
                               "within_tolerance": result.within_tolerance,
                               "semantic": _semantic_summary(result),
                               **({"profile": called.as_dict()} if called else {})}, indent=2))
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
            click.echo(f"  {verdict} the tolerance of {result.qtol} LSB of the integer reference")
        semantic = _semantic_summary(result)
        if semantic["means_the_model"] is not None:
            largest = f" (largest departure {semantic['largest_lsb']:g} LSB)" if semantic["largest_lsb"] else ""
            click.echo(f"  {'means' if semantic['means_the_model'] else 'DEPARTS from'} the quantized model{largest}"
                       + (f", float model SQNR {semantic['sqnr_db']:g} dB" if semantic["sqnr_db"] is not None else ""))
            for line in semantic["departures"]:
                click.echo(f"    {line}")
        count = (f"{result.instructions} instructions" if result.instructions is not None
                 else f"{result.sim_result.ticks} SysTick ticks")
        click.echo(f"  execute(): {count}")
        if called:
            from cortexm.report.profile import print_profile

            click.echo()
            print_profile(called, target_core.backend)
    return EXIT_PROBLEMS if result.within_tolerance is False or result.means_the_model is False else 0


def _profile_of(bundle, result, depth: int = 1):
    from cortexm.report.profile import profile

    return profile(bundle, result.core, result.sim_result, result.runner.board, result.simulator, depth)


@click.command("profile")
@click.argument("pte", type=click.Path())
@target_option
@click.option("--sim", "sim_name", type=click.Choice(["qemu", "fvp"]), default="qemu", show_default=True)
@click.option("--inputs", "-i", multiple=True, type=click.Path(),
              help="Input file (repeat): as `cortexm run` reads them; default: the sidecar's.")
@click.option("--fvp", type=click.Path(), help="The Corstone FVP executable (else $CORTEXM_FVP, else PATH).")
@click.option("--depth", type=click.IntRange(min=1), default=1, show_default=True,
              help="Levels of the module path the per-module sums keep (stacks.0.body.3 at 1: stacks.0).")
@source_options
@timeout_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def profile_cmd(pte: str, target: str, sim_name: str, inputs: tuple[str, ...], fvp: str | None, depth: int,
                executorch_src: str | None, cmsis_nn_src: str | None, timeout: float, as_json: bool) -> int:
    """Run PTE once and show it call by call: each call's operator, the model's module, its share of
    execute()'s instructions, MACs and instructions per MAC against the core's limit, the tensor
    bytes it reads, writes, reads from constants and takes as scratch; the same per module.
    Simulator instructions, not cycles: no time is estimated."""
    from cortexm.base.targets import core
    from cortexm.pte.bundle import Bundle
    from cortexm.report.profile import print_profile
    from cortexm.sim.run import RunError, core_mismatch, run_pte

    program = program_path(pte)
    bundle = Bundle.open(program)
    target_core = core(target)
    read_with_trees(executorch_src, cmsis_nn_src)
    warning = core_mismatch(bundle, target_core)
    if warning:
        say(f"warning: {warning}")
    try:
        result = run_pte(bundle, target_core, sim_name, list(inputs) or None, executorch_src=executorch_src,
                         cmsis_nn_src=cmsis_nn_src, fvp=fvp, timeout=timeout, progress=say)
    except RunError as e:
        click.echo(f"error: {e}", err=True)
        return EXIT_PROBLEMS
    called = _profile_of(bundle, result, depth)
    if as_json:
        click.echo(json_dumps(called.as_dict(), indent=2))
    else:
        print_profile(called, target_core.backend)
    if result.within_tolerance is False:
        say(f"warning: the outputs are OUTSIDE the tolerance of {result.qtol} LSB of the integer reference "
            f"(max |diff| {result.max_diff_lsb:g} LSB); `cortexm run` shows them")
    return 0


def _semantic_summary(result) -> dict:
    """The semantic verdict of a run (cortexm.semantic): what `run` prints and --json gives."""
    record = result.semantic or {}
    return {"means_the_model": result.means_the_model, "departures": [line for line, _ in result.departures],
            "largest_lsb": max((p["max_lsb"] for p in record.get("points", [])), default=None),
            "sqnr_db": min((f["sqnr_db"] for f in record.get("float", []) if f.get("sqnr_db") is not None), default=None)}


def _audit(bundle, target_core) -> None:
    """`cortexm verify`'s checks for this core, before a runner is built (seconds, not minutes)."""
    from cortexm.checking.verify import verify_file

    problems = [f for f in verify_file(bundle.pte, None, target_core, lowering=False, bundle=bundle) if f.is_problem]
    if problems:
        more = f" (and {len(problems) - 1} more problems, see `cortexm verify`)" if len(problems) > 1 else ""
        raise CortexmError(f"{problems[0].line()}{more}; not run (--no-audit runs it anyway)")


def _save_npy(path: Path, values) -> None:
    from cortexm.base import writes

    path.parent.mkdir(parents=True, exist_ok=True)  # checked before the run: it can be made
    writes.save_npy(path, values)


def _describe_output(index: int, out, diff, top: int = 0, labels: list[str] | None = None) -> dict:
    from cortexm.sim.inputs import top_classes

    values = out.astype("float64")
    ranked = top_classes(out, top) or []
    return {"index": index, "dtype": str(out.dtype), "shape": list(out.shape),
            "min": float(values.min()) if values.size else 0.0, "max": float(values.max()) if values.size else 0.0,
            "max_diff_lsb": diff.max_lsb if diff else None, "mismatches": diff.mismatches if diff else None,
            "elements": diff.elements if diff else None,
            "top": [{"index": i, "score": score, **({"label": labels[i]} if labels and i < len(labels) else {})}
                    for i, score in ranked]}


@click.command()
@target_option
@source_options
@click.option("--model", type=click.Path(), help="Size the runner built for this .pte alone, and show the model's share.")
@click.option("--board", help="Board support folder under fvp/boards (default: the core's QEMU board).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def size(target: str, executorch_src: str | None, cmsis_nn_src: str | None, model: str | None, board: str | None,
         as_json: bool) -> None:
    """Flash and RAM of a core's runner, by component."""
    from cortexm.base.targets import core
    from cortexm.firmware import build_runner
    from cortexm.firmware.size import footprint
    from cortexm.report import table

    program = program_path(model) if model else None
    runner = build_runner(core(target), executorch_src=executorch_src, cmsis_nn_src=cmsis_nn_src, model=program,
                          board=board, progress=say)
    result = footprint(runner.elf, runner.map_file, program)
    if as_json:
        click.echo(json_dumps({"core": runner.core.name, "board": runner.board, **result.as_dict()}, indent=2))
        return
    what = (f"registering the {len(runner.ops)} operators of {program.name}" if program
            else f"suite runner, {len(runner.ops)} operators")
    click.echo(f"{runner.core.name} runner on {runner.board} ({what}): {runner.elf}")
    rows = [[c.name, c.flash, c.ram] for c in result.components]
    rows.append(["total", result.flash, result.ram])
    if result.model:
        rows.append(["model (run time)", result.model.flash, result.model.ram])
    table(["component", "flash B", "RAM B"], rows)
    click.echo(f"arena for models at run time: {result.arena} B")
    for note in result.notes:
        click.echo(f"note: {note}")


@click.command()
@click.argument("pte", type=click.Path())
@target_option
@click.option("--board", "boards", multiple=True,
              help="A board profile (repeatable; default: every profile of the core). `cortexm fit --list` names them.")
@click.option("--memory", "memory", multiple=True, metavar="NAME=SIZE[:ROLES]",
              help="A board of your own, a region per option: flash=1M ram=320K, or sram=256K:arena with roles "
                   "code, program, data, heap, stack, arena (repeatable).")
@click.option("--inputs", "-i", multiple=True, type=click.Path(), help="Inputs to run it on (default: the sidecar's).")
@source_options
@timeout_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def fit(pte: str, target: str, boards: tuple[str, ...], memory: tuple[str, ...], inputs: tuple[str, ...],
        executorch_src: str | None, cmsis_nn_src: str | None, timeout: float, as_json: bool) -> int:
    """Does PTE fit a board? Flash and RAM of the program and the runner built for its operators
    alone, measured by one run on the simulated core (cortexm.report.fit)."""
    from cortexm import sim
    from cortexm.base.targets import core
    from cortexm.firmware import build_runner
    from cortexm.firmware.ops import program_ops
    from cortexm.pte.bundle import Bundle
    from cortexm.report import fit as fitting
    from cortexm.report import table
    from cortexm.sim.run import RunError, run_pte

    program = program_path(pte)
    bundle = Bundle.open(program)  # read once: what is built for, run and measured are these bytes
    target_core = core(target)
    read_with_trees(executorch_src, cmsis_nn_src)
    known = fitting.profiles()
    unknown = [b for b in boards if b not in known]
    if unknown:
        raise CortexmError(f"--board {unknown[0]}: no such profile (profiles: {', '.join(known)})")
    chosen = [known[b] for b in boards] or [p for p in known.values() if p.core == target_core.name]
    if memory:
        chosen.append(fitting.given_profile(list(memory)))
    simulator = sim.for_core(target_core, "qemu")
    simulator.require(target_core)
    runner = build_runner(target_core, executorch_src=executorch_src, cmsis_nn_src=cmsis_nn_src,
                          ops=program_ops(bundle.program()), board=simulator.board(target_core), progress=say)
    try:
        result = run_pte(bundle, target_core, "qemu", list(inputs) or None, runner=runner, timeout=timeout)
    except RunError as e:
        raise CortexmError(f"it does not run, so nothing was measured: {e}") from None
    needs = fitting.needs(bundle.program(), runner.elf, result.log)
    verdicts = [fitting.place(needs, profile) for profile in chosen]
    if as_json:
        click.echo(json_dumps({"pte": str(program), "target": target_core.name, "runner": str(runner.elf),
                               "needs": [dataclasses_asdict(n) for n in needs],
                               "boards": [{"board": v.profile.name, "fits": v.fits, "line": v.line(),
                                           "regions": [{"name": r.name, "bytes": r.nbytes, "used": r.used}
                                                       for r in v.regions],
                                           "unplaced": [dataclasses_asdict(n) for n in v.unplaced]} for v in verdicts]},
                          indent=2))
    else:
        click.echo(f"{program.name} on {target_core.name}: runner for its {len(runner.ops)} operators, "
                   f"measured on qemu {runner.board}")
        table(["need", "kind", "bytes"], [[n.what, n.role, f"{n.nbytes:,}"] for n in needs])
        flash = sum(n.nbytes for n in needs if n.role in ("code", "program"))
        click.echo(f"flash {flash:,} B (code and program), RAM {sum(n.nbytes for n in needs) - flash:,} B")
        for verdict in verdicts:
            click.echo(verdict.line())
    return EXIT_PROBLEMS if (boards or memory) and not all(v.fits for v in verdicts) else 0


def dataclasses_asdict(value) -> dict:
    import dataclasses

    return dataclasses.asdict(value)
