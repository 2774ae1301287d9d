"""The `cortexm` command line: one subcommand per stage, each usable alone.

Every subcommand turns bad input into a one-line `error: ...` and exit status 2;
checks that find problems exit 1; success is 0.

One module per command group (sources, lowering, checking, firmware, testing, arduino),
each depending on the stages; `options` holds what they share. This module puts the
groups on the root command and turns every error into one line.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading

import click

from cortexm import __version__
from cortexm.base import children, text
from cortexm.base.errors import CortexmError, storage_error
from cortexm.cli import arduino, checking, firmware, lowering, reduce, sources, testing
from cortexm.cli.options import EXIT_BAD_INPUT


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cortexm")
def cli() -> None:
    """Export, check, build and run ExecuTorch Cortex-M (CMSIS-NN) models."""
    from cortexm.lowering import source
    from cortexm.sources import backend_source

    # A command that lowers or reads the backend without choosing (verify, run, fit, size,
    # targets) uses the default trees' Python and their CMSIS-NN module, built when first needed.
    backend_source.choose_by_default(source.choose)


cli.add_command(sources.pins)
cli.add_command(sources.targets)
cli.add_command(sources.sources)
cli.add_command(lowering.export)
cli.add_command(lowering.dialect)
cli.add_command(checking.inspect_cmd)
cli.add_command(checking.verify)
cli.add_command(firmware.build)
cli.add_command(firmware.run)
cli.add_command(firmware.profile_cmd)
cli.add_command(firmware.size)
cli.add_command(firmware.fit)
cli.add_command(testing.test_cmd)
cli.add_command(testing.upstream_tests)
cli.add_command(testing.sweep)
cli.add_command(reduce.reduce_cmd)
cli.add_command(testing.report)
cli.add_command(arduino.arduino_lib)


def main(argv: list[str] | None = None) -> None:
    children.stop_on_signals()  # Ctrl-C, SIGTERM, SIGHUP: every child dies with cortexm
    ours = set(threading.enumerate())
    # What reaches the terminal shows its control characters instead of obeying them.
    sys.stdout, sys.stderr = text.EscapingStream(sys.stdout), text.EscapingStream(sys.stderr)
    try:
        code = cli.main(args=argv, prog_name="cortexm", standalone_mode=False)
    except click.exceptions.Exit as e:
        code = e.exit_code
    except click.exceptions.Abort as e:  # click's for Ctrl-C, and for the signals cortexm stops on
        code = _interrupted(e.__cause__)
    except click.ClickException as e:
        click.echo(f"error: {e.format_message()}", err=True)
        code = EXIT_BAD_INPUT
    except CortexmError as e:
        click.echo(f"error: {_one_line(str(e))}", err=True)
        code = EXIT_BAD_INPUT
    except KeyboardInterrupt as e:
        code = _interrupted(e)
    except OSError as e:
        storage = storage_error(e)  # a full or read-only disk: the place, in one line
        if storage is None:
            code = _internal(e)
        else:
            click.echo(f"error: {_one_line(str(storage))}", err=True)
            code = EXIT_BAD_INPUT
    except Exception as e:
        code = _internal(e)
    _leave(code or 0, ours)


def _leave(code: int, ours: set[threading.Thread]) -> None:
    """Exit with `code`. A thread the user's code started (a case file's import, a factory
    `export` ran) and left running never keeps cortexm alive after its verdict."""
    left = [t for t in threading.enumerate() if t not in ours and t.is_alive() and not t.daemon]
    if left:  # what exit would do, but for waiting on them
        with contextlib.suppress(Exception):
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def _interrupted(cause: BaseException | None) -> int:
    """Ctrl-C or a signal (children.Interrupted): one line, exit status 128 + the signal."""
    signum = getattr(cause, "signum", signal.SIGINT)
    click.echo("error: interrupted" if signum == signal.SIGINT else f"error: stopped by {signal.Signals(signum).name}",
               err=True)
    return 128 + signum


def _internal(error: Exception) -> int:
    """A bug: still one line, with a way to get details; exit status 3."""
    if os.environ.get("CORTEXM_DEBUG"):
        raise error
    click.echo(f"error: internal error {type(error).__name__}: {_one_line(str(error))} "
               "(set CORTEXM_DEBUG=1 for the traceback)", err=True)
    return 3


def _one_line(text: str) -> str:
    """An error is one line whatever text it carries (a name with a newline in it)."""
    return " ".join(text.split("\n")).replace("\r", " ")
