"""Progress of long work: one live display (rich) on a terminal, plain lines in logs.

    with Progress() as progress:
        progress("runner for cortex-m7")                 # a message
        task = progress.task("exporting", total=190)     # a counted task, with its ETA
        task.advance()
        task.done()

On a terminal the tasks are bars with counts, rates and ETAs, updated in place.
Elsewhere (CI logs, pipes) each task prints a line when it starts, about every
tenth of the way or every 15 s, and when it ends, so a log shows what happened
without a line per item.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Literal

from cortexm.base.text import raw, visible

PLAIN_EVERY_SECONDS = 15.0


class Task:
    def __init__(self, progress: Progress, description: str, total: float | None, unit: str, eta: bool = True) -> None:
        self.progress, self.description, self.total, self.unit = progress, description, total, unit
        # eta=False: the count is of steps of unequal cost (a build's compiles and links), so no
        # time left is derived from it; the count is shown, with the time so far.
        self.eta = eta
        self.completed = 0.0
        self.started = time.monotonic()
        self._id = None
        self._last_line, self._last_fraction = self.started, 0.0
        if progress.live is not None:
            self._id = progress.live.add_task(visible(description), total=total if eta else None)
        else:
            progress.line(f"{description}: started" + (f" ({self._amount(total)})" if total else ""))

    def advance(self, amount: float = 1) -> None:
        self.update(completed=self.completed + amount)

    def update(self, completed: float | None = None, total: float | None = None, description: str | None = None) -> None:
        if completed is not None:
            self.completed = completed
        if total is not None:
            self.total = total
        if description is not None:
            self.description = description
        if self._id is not None:
            if self.eta:
                self.progress.live.update(self._id, completed=self.completed, total=self.total, description=self.description)
            else:  # an indeterminate bar (rich would derive a time left from a total)
                self.progress.live.update(self._id, description=visible(f"{self.description} ({self._count()})"))
            return
        now = time.monotonic()
        fraction = self.completed / self.total if self.total else 0.0
        if fraction - self._last_fraction >= 0.1 or now - self._last_line >= PLAIN_EVERY_SECONDS:
            self._last_line, self._last_fraction = now, fraction
            self.progress.line(f"{self.description}: {self._count()}{self._eta(now)}")

    def done(self, note: str = "") -> None:
        seconds = time.monotonic() - self.started
        if self._id is not None:
            if self.total is not None:
                self.progress.live.update(self._id, completed=self.total, total=self.total)
            self.progress.live.stop_task(self._id)
            return
        self.progress.line(f"{self.description}: done, {self._count()} in {seconds:.0f} s" + (f" ({note})" if note else ""))

    def _count(self) -> str:
        if self.total:
            return f"{self._amount(self.completed)}/{self._amount(self.total)}"
        return self._amount(self.completed)

    def _amount(self, value: float | None) -> str:
        if value is None:
            return "?"
        if self.unit == "B":
            return f"{value / 1e6:.1f} MB"
        return f"{int(value)}"

    def _eta(self, now: float) -> str:
        elapsed = now - self.started
        if not self.eta or not self.total or not self.completed or elapsed < 1:
            return ""
        left = elapsed * (self.total - self.completed) / self.completed
        return f", about {left:.0f} s left"


class Progress:
    """Messages and counted tasks; `progress(message)` says a one-off message."""

    def __init__(self, live: bool | None = None) -> None:
        self.interactive = sys.stderr.isatty() if live is None else live
        self.live: Any = None  # rich's Progress while one is shown
        self._status: Any = None

    def __enter__(self) -> Progress:
        if self.interactive:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as RichProgress

            self.live = RichProgress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                     MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                                     console=Console(file=raw(sys.stderr)), transient=False)
            self.live.__enter__()
            self._status = self.live.add_task("starting", total=None)
        return self

    def __call__(self, message: str) -> None:
        if self.live is not None:
            self.live.update(self._status, description=visible(message))
        else:
            self.line(message)

    def task(self, description: str, total: float | None = None, unit: str = "", eta: bool = True) -> Task:
        return Task(self, description, total, unit, eta)

    def line(self, text: str) -> None:
        print(f"  {text}", file=sys.stderr, flush=True)

    def __exit__(self, *exc) -> Literal[False]:
        if self.live is not None:
            self.live.update(self._status, visible=False)
            self.live.__exit__(*exc)
            self.live = None
        return False


def quiet(_message: str) -> None:
    """A progress callback that says nothing."""


class _Silent:
    def advance(self, amount: float = 1) -> None: ...
    def update(self, completed=None, total=None, description=None) -> None: ...
    def done(self, note: str = "") -> None: ...


def task(progress, description: str, total: float | None = None, unit: str = "", eta: bool = True):
    """A counted task on `progress` when it is a Progress, else one that shows nothing
    (a plain callback, e.g. from a test, gets messages only)."""
    if isinstance(progress, Progress):
        return progress.task(description, total, unit, eta)
    return _Silent()
