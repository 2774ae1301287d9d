"""A time limit on the user's code that runs inside cortexm (importing a case file), so that
an endless loop there is one line, not a run that never ends.

    with limits.time_limit(120):
        spec.loader.exec_module(module)      # raises limits.Expired after 120 s
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


class Expired(BaseException):
    """The time ran out. Not an Exception: the user's `except Exception` does not swallow it."""


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raises Expired in the block after `seconds` (none: no limit). Only the main thread has a
    timer signal; elsewhere the block runs without a limit."""
    if not seconds or threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def expire(_signum, _frame):
        raise Expired()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
