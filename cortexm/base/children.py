"""Child processes that do not outlive cortexm.

    with children.started(["cmake", "--build", work], stdout=PIPE) as process:
        ...                                    # the build, in its own process group
    done = children.run(["qemu-system-arm", ...], timeout=120, stdout=PIPE)

A build or a simulator runs in its own process group, so that the whole of it (cmake, ninja,
every compiler; QEMU) can be stopped at once. Four ways it is stopped:
- cortexm raises (a timeout, an error): the group is stopped before the exception leaves;
- cortexm gets SIGINT, SIGTERM or SIGHUP (`stop_on_signals`): every live group is stopped and
  every export worker killed at once, from the signal handler, before cortexm unwinds
  (simulations run in threads, which an exception in the main thread does not stop), and no new
  child starts;
- cortexm is killed outright (SIGKILL, OOM): a guard, a tiny `sh` polling cortexm once a second,
  stops the group; an export worker (a spawned Python, `worker_init`) polls for its parent and
  ends itself, and multiprocessing's resource tracker ends when they have;
- the child ends by itself: the guard is told to go, nothing else is touched.
A group is stopped with SIGTERM, then SIGKILL a second later: ninja puts every compile in a
process group of its own and stops them on SIGTERM, where SIGKILL of its group would leave
them running. The guard is a shell loop, not PR_SET_PDEATHSIG, because that needs a preexec hook, which is
unsafe with threads (the test app runs simulations from worker threads) and Linux-only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator

from cortexm.base.errors import CortexmError

_LIVE: set[subprocess.Popen] = set()  # the groups started and not yet done with
_POOLS: list = []  # process pools whose workers are cortexm's children (track_pool)
_STOPPING = threading.Event()


class Interrupted(KeyboardInterrupt):
    """cortexm was told to stop by a signal; its children are gone already."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def stop_on_signals() -> None:
    """From now on SIGINT, SIGTERM and SIGHUP stop every child at once and raise Interrupted
    in the main thread (a KeyboardInterrupt: Ctrl-C's path, whatever the signal). A signal
    cortexm was started ignoring (Ctrl-C for a job a script put in the background) stays so."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, _stop)


def _stop(signum, _frame) -> None:
    stop_all()
    raise Interrupted(signum)


def stop_all() -> None:
    """Stops every live child group (SIGTERM now; `started` follows with SIGKILL as the stop
    unwinds, the guard when cortexm is gone) and kills every export worker; children not yet
    started never start."""
    _STOPPING.set()
    for process in list(_LIVE):
        _signal_group(process.pid, signal.SIGTERM)
    for pool in list(_POOLS):
        if hasattr(pool, "kill"):  # cortexm.base.workers.Pool
            with contextlib.suppress(Exception):
                pool.kill()
            continue
        for worker in list((getattr(pool, "_processes", None) or {}).values()):
            with contextlib.suppress(Exception):
                worker.kill()
        with contextlib.suppress(Exception):
            pool.shutdown(wait=False, cancel_futures=True)


def track_pool(pool) -> None:
    """`pool` (a ProcessPoolExecutor or a cortexm.base.workers.Pool) has workers that `stop_all` kills."""
    _POOLS.append(pool)


def worker_init(then: Callable[[], None] | None = None) -> None:
    """In a worker process cortexm started (an export worker): end when cortexm is gone, however
    it ended, then `then()`."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="cortexm-parent-watch", daemon=True).start()
    if then is not None:
        then()

# $1: cortexm's pid, $2: the child's process group. Ctrl-C is cortexm's to handle; USR1: go.
# Then as kill_group: SIGTERM, a second, SIGKILL.
_GUARD = ('trap "" INT; trap "exit 0" USR1; '
          'while kill -0 "$1" 2>/dev/null; do sleep 1; done; '
          'kill -TERM "-$2" 2>/dev/null && sleep 1; kill -KILL "-$2" 2>/dev/null')
# Seconds a group has, after SIGTERM, before SIGKILL: a build tool stops the jobs it started in
# process groups of their own (ninja puts every compile in one), which SIGKILL of its group
# alone would leave running.
GRACE = 1.0


@contextlib.contextmanager
def started(command: list[str], **popen_kwargs) -> Iterator[subprocess.Popen]:
    """`command` started in a process group of its own, killed whole if the block raises or
    cortexm dies; the block is expected to wait for it."""
    if _STOPPING.is_set():
        raise CortexmError(f"not starting {os.path.basename(command[0])}: cortexm is stopping")
    process = subprocess.Popen(command, process_group=0, **popen_kwargs)
    _LIVE.add(process)
    guard = subprocess.Popen(["sh", "-c", _GUARD, "guard", str(os.getpid()), str(process.pid)],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if _STOPPING.is_set():  # a signal came while it started
            kill_group(process)
        yield process
    except BaseException:
        kill_group(process)
        raise
    finally:
        _LIVE.discard(process)
        with contextlib.suppress(ProcessLookupError):
            guard.send_signal(signal.SIGUSR1)  # it exits within a second; Popen reaps it later


def kill_group(process: subprocess.Popen, grace: float = GRACE) -> None:
    """Stops `process`'s group (it leads one: `started`) and reaps `process`: SIGTERM, then
    SIGKILL for what is left after `grace` seconds."""
    if process.returncode is None or alive(process.pid, group=True):
        _signal_group(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and (process.poll() is None or alive(process.pid, group=True)):
            time.sleep(0.02)
        _signal_group(process.pid, signal.SIGKILL)
    process.wait()


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def alive(pid: int, group: bool = False) -> bool:
    """Whether process `pid` (with `group`: any process of group `pid`) still exists; one of
    another user's counts."""
    try:
        (os.killpg if group else os.kill)(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def run(command: list[str], timeout: float | None = None, input: bytes | str | None = None,
        **popen_kwargs) -> subprocess.CompletedProcess:
    """subprocess.run with the group semantics of `started`: on a timeout the whole group is
    killed (not only the direct child) and TimeoutExpired carries what was printed.

    The time limit is the child's: it runs in a group of its own, which a Ctrl-Z of cortexm
    does not stop. A child that ended while cortexm was stopped past its deadline ended in
    time, however long cortexm waited to see it."""
    if input is not None:
        popen_kwargs["stdin"] = subprocess.PIPE
    with started(command, **popen_kwargs) as process:
        try:
            out, err = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            if process.poll() is not None and not alive(process.pid, group=True):
                out, err = process.communicate()
                return subprocess.CompletedProcess(command, process.returncode, out, err)
            kill_group(process)
            out, err = process.communicate()
            raise subprocess.TimeoutExpired(command, timeout or 0.0, output=out, stderr=err) from None
    return subprocess.CompletedProcess(command, process.returncode, out, err)
