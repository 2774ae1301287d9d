"""Worker processes for the user's code: each runs one job at a time, so that whatever a job
does to its process is that job's outcome, named, and not the end of the run.

    pool = workers.Pool(2, initializer=quiet)
    for key, outcome in pool.run({"conv": (export_job, args), ...}, limit=1200):
        outcome.value()      # the job's result, or raises what it raised, Ended, or OutOfTime

A job whose process ends (os._exit, a crash, a kill) is `Ended`, saying how; one that runs
past `limit` seconds has its worker killed and is `OutOfTime`; either way a fresh worker
takes the next job. A worker leaves with os._exit when it is told to stop: threads the user's
code started never keep it, or cortexm, alive. Workers are spawned interpreters, cortexm's
children (cortexm.base.children), ended with it.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import os
import pickle
import signal
import time
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection, wait
from typing import Any

from cortexm.base import children
from cortexm.base.errors import CortexmError


class Ended(CortexmError):
    """The job's worker process ended before the job did."""


class OutOfTime(CortexmError):
    """The job ran past its limit; its worker was killed."""


class Outcome:
    def __init__(self, result: Any = None, error: BaseException | None = None) -> None:
        self.result, self.error = result, error

    def value(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.result


class _Worker:
    def __init__(self, context, initializer, initargs) -> None:
        self.conn, theirs = context.Pipe()
        self.process = context.Process(target=_serve, args=(theirs, initializer, initargs), daemon=True)
        self.process.start()
        theirs.close()
        self.key: Any = None
        self.deadline = 0.0


class Pool:
    def __init__(self, size: int, initializer: Callable | None = None, initargs: tuple = ()) -> None:
        self.size = size
        self._context = multiprocessing.get_context("spawn")
        self._init = (initializer, initargs)
        self._idle: list[_Worker] = []
        self._busy: list[_Worker] = []
        children.track_pool(self)

    def run(self, jobs: dict[Any, tuple[Callable, tuple]], limit: float | None = None) -> Iterator[tuple[Any, Outcome]]:
        """(key, Outcome) of every job, as each ends; at most `size` at once."""
        todo = list(jobs.items())
        try:
            while todo or self._busy:
                while todo and len(self._busy) < self.size:
                    key, (fn, args) = todo.pop(0)
                    self._start(key, fn, args, limit)
                yield from self._wait()
        except BaseException:
            self.kill()  # the run stops: no job outlives it
            raise

    def _start(self, key, fn, args, limit) -> None:
        worker = self._idle.pop() if self._idle else _Worker(self._context, *self._init)
        try:
            worker.conn.send((fn, args))
        except (OSError, pickle.PicklingError):  # died idle, or the job cannot be sent: a new worker's turn
            self._discard(worker)
            worker = _Worker(self._context, *self._init)
            worker.conn.send((fn, args))
        worker.key, worker.deadline = key, time.monotonic() + limit if limit else float("inf")
        self._busy.append(worker)

    def _wait(self) -> Iterator[tuple[Any, Outcome]]:
        soonest = min(w.deadline for w in self._busy)
        ready = wait([w.conn for w in self._busy] + [w.process.sentinel for w in self._busy],
                     timeout=max(0.0, min(soonest - time.monotonic(), 3600.0)))
        for worker in list(self._busy):
            if worker.conn in ready or worker.process.sentinel in ready:
                try:
                    kind, payload = worker.conn.recv()
                except (EOFError, OSError):
                    self._busy.remove(worker)
                    worker.process.join(5)
                    self._discard(worker)
                    yield worker.key, Outcome(error=Ended(f"its worker process ended ({_how(worker.process.exitcode)})"))
                    continue
                except Exception as e:  # sent, but not to be unpickled here (an exception class of the user's)
                    kind, payload = "raised", CortexmError(f"its outcome could not be read back ({type(e).__name__}: {e})")
                self._busy.remove(worker)
                self._idle.append(worker)
                yield worker.key, Outcome(payload) if kind == "ok" else Outcome(error=payload)
            elif time.monotonic() >= worker.deadline:
                self._busy.remove(worker)
                self._discard(worker)
                yield worker.key, Outcome(error=OutOfTime("it did not finish in time; its worker was stopped"))

    def _discard(self, worker: _Worker) -> None:
        with contextlib.suppress(Exception):
            worker.process.kill()
        with contextlib.suppress(Exception):
            worker.process.join(5)
        worker.conn.close()

    def kill(self) -> None:
        """Every worker killed now (a stop, a signal)."""
        for worker in self._idle + self._busy:
            self._discard(worker)
        self._idle, self._busy = [], []

    def shutdown(self) -> None:
        """Idle workers told to leave (they leave with os._exit: no thread of theirs waits)."""
        for worker in self._idle:
            with contextlib.suppress(Exception):
                worker.conn.send(None)
            with contextlib.suppress(Exception):
                worker.process.join(5)
            self._discard(worker)
        self._idle = []
        self.kill()


def _how(code: int | None) -> str:
    if code is None:
        return "it did not say how"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
        return f"killed by signal {-code}"
    return f"exit code {code}, with no result: the code it ran ended the process (os._exit, a crash)"


def _serve(conn: Connection, initializer, initargs) -> None:
    """A worker's life: jobs in, (kind, payload) out, until told to stop; then gone at once."""
    children.worker_init(initializer and (lambda: initializer(*initargs)))
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            break
        if job is None:
            break
        fn, args = job
        try:
            reply = ("ok", fn(*args))
        except BaseException as e:  # whatever the job raised is its outcome
            reply = ("raised", e)
        try:
            conn.send(reply)
        except Exception:  # an unpicklable result or exception: its text
            error = reply[1] if reply[0] == "raised" else None
            text = f"{type(error).__name__}: {error}" if error else "its result could not be sent back"
            conn.send(("raised", CortexmError(text)))
    # What exit does (finalizers: a semaphore torch made is given back), but for waiting on the
    # threads the jobs left (daemon or not): they do not hold the worker.
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    os._exit(0)
