"""Child processes that do not outlive cortexm.

    with children.started(["cmake", "--build", work], stdout=PIPE) as process:
        ...                                    # the build, in its own process group
    done = children.run(["qemu-system-arm", ...], timeout=120, stdout=PIPE)

A build or a simulator runs in its own process group, so that the whole of it (cmake, ninja,
every compiler; QEMU) can be stopped at once. Three ways it is stopped:
- cortexm raises (a timeout, Ctrl-C, an error): the group is killed before the exception leaves;
- cortexm is killed outright (SIGKILL, OOM): a guard, a tiny `sh` polling cortexm once a second,
  kills the group;
- the child ends by itself: the guard is told to go, nothing else is touched.
The guard is a shell loop, not PR_SET_PDEATHSIG, because that needs a preexec hook, which is
unsafe with threads (the test app runs simulations from worker threads) and Linux-only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator

# $1: cortexm's pid, $2: the child's process group. Ctrl-C is cortexm's to handle; USR1: go.
_GUARD = ('trap "" INT; trap "exit 0" USR1; '
          'while kill -0 "$1" 2>/dev/null; do sleep 1; done; kill -9 "-$2" 2>/dev/null')


@contextlib.contextmanager
def started(command: list[str], **popen_kwargs) -> Iterator[subprocess.Popen]:
    """`command` started in a process group of its own, killed whole if the block raises or
    cortexm dies; the block is expected to wait for it."""
    process = subprocess.Popen(command, process_group=0, **popen_kwargs)
    guard = subprocess.Popen(["sh", "-c", _GUARD, "guard", str(os.getpid()), str(process.pid)],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield process
    except BaseException:
        kill_group(process)
        raise
    finally:
        with contextlib.suppress(ProcessLookupError):
            guard.send_signal(signal.SIGUSR1)  # it exits within a second; Popen reaps it later


def kill_group(process: subprocess.Popen) -> None:
    """Kills `process`'s group (it leads one: `started`) and reaps `process`."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def run(command: list[str], timeout: float | None = None, input: bytes | str | None = None,
        **popen_kwargs) -> subprocess.CompletedProcess:
    """subprocess.run with the group semantics of `started`: on a timeout the whole group is
    killed (not only the direct child) and TimeoutExpired carries what was printed."""
    if input is not None:
        popen_kwargs["stdin"] = subprocess.PIPE
    with started(command, **popen_kwargs) as process:
        try:
            out, err = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(process)
            out, err = process.communicate()
            raise subprocess.TimeoutExpired(command, timeout, output=out, stderr=err) from None
    return subprocess.CompletedProcess(command, process.returncode, out, err)
