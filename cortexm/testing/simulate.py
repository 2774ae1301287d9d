"""The simulator stage of the test app: one runner per core, built (or taken from the cache) once."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from cortexm.base.errors import CortexmError, StorageError
from cortexm.base.targets import Core
from cortexm.testing.results import SimOutcome

if TYPE_CHECKING:
    from cortexm.firmware import BuildOptions
    from cortexm.pte.bundle import Bundle


class RunnerSimulator:
    """Runs programs on one core's runner in one simulator."""

    def __init__(self, core: Core, sim_name: str, runner, fvp: str | None = None,
                 executorch_src: str | None = None, cmsis_nn_src: str | None = None,
                 timeout: float | None = None) -> None:
        from cortexm import sim

        self.core, self.sim_name, self.runner, self.fvp = core, sim_name, runner, fvp
        self.timeout = timeout or sim.DEFAULT_TIMEOUT
        self.executorch_src, self.cmsis_nn_src = executorch_src, cmsis_nn_src
        self.name = f"{sim.for_core(core, sim_name, fvp).name} {runner.board}"
        # Where a known defect's files are looked up: the trees this runner was built from.
        self.locators = {component: (lambda rel, root=root: root / rel) for component, root in runner.trees().items()}
        # Simulator runs so far, not counting those cortexm.sim.memo answered (the test app runs them on threads).
        self.boots, self._lock = 0, threading.Lock()

    def run(self, program: Bundle, core: Core, inputs: list[Path] | None = None,
            extra_args: tuple[str, ...] = ()) -> SimOutcome:
        """One run of `program` (its bytes and parse, read already): outputs, counts and the log,
        or the failure line; the outputs are judged elsewhere (cortexm.testing.checks)."""
        from cortexm.firmware.ops import program_ops
        from cortexm.sim.run import RunError, run_program

        # A program calling an operator the suite's runner lacks gets a runner of its own.
        runner = self.runner if set(program_ops(program.program())) <= set(self.runner.ops) else None
        try:
            result = run_program(program, core, self.sim_name, list(inputs) if inputs is not None else None,
                                 runner=runner, fvp=self.fvp, extra_args=extra_args, timeout=self.timeout,
                                 remember=True, executorch_src=self.executorch_src, cmsis_nn_src=self.cmsis_nn_src)
        except RunError as e:
            self._count(False)
            failure = str(e).split(": ", 1)[-1]
            if core.hosted:
                from cortexm.sim.host import sanitizer_failure

                failure = sanitizer_failure(e.result.log, program.pte) or failure
            return SimOutcome([], e.result.instructions, e.result.log, failure)
        self._count(result.sim_result.remembered)
        return SimOutcome(result.outputs, result.instructions, result.log, None, result.sim_result.calls,
                          remembered=result.sim_result.remembered)

    def _count(self, remembered: bool) -> None:
        if not remembered:
            with self._lock:
                self.boots += 1

    def memory_args(self, fill: int) -> tuple[str, ...]:
        """Runner arguments of the memory oracle on this simulator (guards, or the sanitizers)."""
        from cortexm import sim

        return sim.for_core(self.core, self.sim_name, self.fvp).memory_args(fill)


def simulators(cores: list[Core], sim: str, executorch_src: str | None, cmsis_nn_src: str | None,
               progress: Callable[[str], None], fvp: str | None = None,
               build: BuildOptions | None = None, timeout: float | None = None) -> dict[str, RunnerSimulator | str]:
    """core name -> a simulator with its runner built (with `build`'s options, e.g. gcov
    counters), or the one-line reason there is none."""
    if sim == "none":
        return {c.name: "--sim none" for c in cores}
    from cortexm import sim as simulators_pkg
    from cortexm.firmware import BuildOptions, build_runner

    found: dict[str, RunnerSimulator | str] = {}
    for core in cores:
        try:
            simulator = simulators_pkg.for_core(core, sim, fvp)
            board = simulator.board(core)
            simulator.require(core)  # an absent simulator says so before a runner is built for it
            progress(f"runner for {core.name} ({sim} {board})")
            runner = build_runner(core, board=board, executorch_src=executorch_src, cmsis_nn_src=cmsis_nn_src,
                                  options=build or BuildOptions(), progress=progress)
            found[core.name] = RunnerSimulator(core, sim, runner, fvp, executorch_src, cmsis_nn_src, timeout)
        except StorageError:
            raise  # a full or read-only cache stops the run: no result is "not run" for it
        except CortexmError as e:
            found[core.name] = str(e)
    return found


class InBackground:
    """`build()` (a `simulators(...)` call) started now in a thread of its own, so that the runner
    builds overlap the exports: a test run's runners register the suite's operators, known before
    any program is written (a program that calls more gets a runner of its own when it runs).
    `result()` waits and gives what `build()` returned, or raises what it raised (a full cache's
    StorageError) in the caller's thread: the outcome of the call made there, only later. A daemon
    thread: a run that ends first (an error, or a signal, which stops every child group) does not
    wait for a build nobody will use."""

    def __init__(self, build: Callable[[], dict[str, RunnerSimulator | str]]) -> None:
        self._value: dict[str, RunnerSimulator | str] = {}
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._target, args=(build,), name="cortexm-runner-build", daemon=True)
        self._thread.start()

    def _target(self, build: Callable[[], dict[str, RunnerSimulator | str]]) -> None:
        try:
            self._value = build()
        except BaseException as e:  # handed to the thread that waits, as it would have met it
            self._error = e

    def result(self) -> dict[str, RunnerSimulator | str]:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value
