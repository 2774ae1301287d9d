"""Options and helpers the command groups share: targets, lowering, trees, timeouts, shards, the
evaluation set."""

from __future__ import annotations

from pathlib import Path

import click

# Exit statuses: 0 success, 1 a check found problems, 2 bad input (one `error:` line).
EXIT_PROBLEMS = 1
EXIT_BAD_INPUT = 2


def targets_option(multiple: bool = False, required: bool = False, help_text: str = "Cortex-M core, e.g. cortex-m7."):
    return click.option("--target", "-t", "targets" if multiple else "target", multiple=multiple,
                        required=required, help=help_text)


LOWERING_TREE_HELP = ("ExecuTorch tree whose backends/cortex_m Python lowers (on the installed wheel); "
                      "else $CORTEXM_EXECUTORCH_SRC, else the default location, else the wheel's own.")


class Seconds(click.ParamType):
    """A number of seconds from 1 to a million: nan and inf are no limit anyone means."""

    name = "seconds"

    def convert(self, value, param, ctx):
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not 1 <= seconds <= 1e6:  # false for nan too
            self.fail(f"{value!r} is not a number of seconds from 1 to 1000000", param, ctx)
        return seconds


def timeout_option(fn, what: str = "one simulator run (a hung kernel)"):
    from cortexm.sim.protocol import DEFAULT_TIMEOUT

    return click.option("--timeout", type=Seconds(), default=DEFAULT_TIMEOUT, show_default=True,
                        help=f"Seconds {what} may take before it is stopped.")(fn)


def cases_timeout_option(fn):
    return timeout_option(fn, "one simulator run (a hung kernel), importing a --cases file, or each step of a "
                              "case's own code (building its model, quantizing it: an endless loop),")


def shard_option(fn):
    def parse(ctx, param, value):
        from cortexm.testing import shards

        return shards.parse(value) if value else None

    return click.option("--shard", callback=parse, metavar="K/N",
                        help="Run only shard K of N (cases split by a hash of their name, each with all its "
                             "cores); `cortexm report merge` joins the shards' --json reports.")(fn)


def lowering_option(fn):
    return click.option("--lowering", type=click.Choice(["tree", "installed"]), default="tree", show_default=True,
                        help="tree: the backends/cortex_m Python of the ExecuTorch tree in use (the runner's), "
                             "the installed wheel's when there is none; installed: the wheel's, whatever tree is "
                             "around (the pinned lowering the goldens record).")(fn)


def eval_option(fn):
    def read(ctx, param, value):
        from cortexm.semantic import evalset

        return evalset.read(value) if value else None  # before any work: a bad set is one line now

    return click.option("--eval", "evaluation", callback=read, metavar="PATH",
                        help="An evaluation set: a folder of .npy files (and labels.npy), one .npz (x, or x0, x1, ...; "
                             "y for labels) or one .npy. Accuracy against the float model is measured on it too, with the "
                             "saturation of every quantization point, and judged (docs/deployment.md).")(fn)


def choose_lowering(executorch_src: str | None, lowering: str = "tree", cmsis_nn_src: str | None = None,
                     progress=None) -> None:
    """Lower with the trees the runner is built from, or the installed wheel's own Python."""
    from cortexm.lowering import source
    from cortexm.sources import backend_source

    if lowering == "installed":
        backend_source.activate(None)
        return
    source.choose(executorch_src, cmsis_nn_src, progress)


def read_with_trees(executorch_src: str | None, cmsis_nn_src: str | None) -> None:
    """A command that builds from the given trees and reads the backend only when it must
    (`run -i` computes the references again) reads it from those trees too, chosen when first
    needed, not the default trees' (the root command's default choice)."""
    from cortexm.lowering import source
    from cortexm.sources import backend_source

    if executorch_src or cmsis_nn_src:
        backend_source.choose_by_default(lambda: source.choose(executorch_src, cmsis_nn_src))
        backend_source.forget_inherited()  # the flags decide, also under another cortexm or a test


def fetch_missing_trees(executorch_src: str | None, cmsis_nn_src: str | None, offline: bool, progress) -> None:
    """The main job needs the pinned source trees: fetch what is missing, or say in one line
    why it cannot be had (the run goes on and reports what it could not simulate)."""
    from cortexm import sources
    from cortexm.sources import pins, trees

    data = pins.load()
    for kind, explicit in ((sources.EXECUTORCH, executorch_src), (sources.CMSIS_NN, cmsis_nn_src)):
        _path, note = trees.ensure(kind, data, explicit, offline, progress)
        if note:
            click.echo(("" if note.startswith("fetched") else "warning: ") + note, err=True)


def core_named(name: str):
    from cortexm.base.targets import core

    return core(name)


SOURCE_OPTIONS = (
    click.option("--executorch-src", type=click.Path(),
                 help="ExecuTorch tree (else $CORTEXM_EXECUTORCH_SRC, else the default location)."),
    click.option("--cmsis-nn-src", type=click.Path(),
                 help="CMSIS-NN tree (else $CORTEXM_CMSIS_NN_SRC, else the default location)."),
)


def source_options(fn):
    for option in reversed(SOURCE_OPTIONS):
        fn = option(fn)
    return fn


target_option = targets_option(required=True)


def say(message: str) -> None:
    click.echo(message, err=True)


def program_path(path: str) -> Path:
    from cortexm.base import files

    return files.regular(path, "program", files.MAX_PROGRAM)
