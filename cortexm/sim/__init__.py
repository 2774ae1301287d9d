"""Simulators that run the runner firmware, behind one interface.

    simulator = cortexm.sim.get("qemu")        # or get("fvp", fvp="/path/to/FVP")
    simulator.require(core)                    # the executable, or an error saying how to get it
    board = simulator.board(core)              # board support the ELF must be built for
    result = simulator.run(elf, core, workdir, argv, timeout)
    result.ok, result.failure_line, result.instructions, result.log

run.py runs a .pte on a core (runner, inputs, simulator) and reads its outputs back;
inputs.py reads what a user gives `cortexm run`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from cortexm.base.errors import CortexmError
from cortexm.base.targets import Core
from cortexm.sim.fvp import Fvp
from cortexm.sim.host import Host
from cortexm.sim.protocol import DEFAULT_TIMEOUT, SimResult, command_line, output_path  # noqa: F401
from cortexm.sim.qemu import Qemu

NAMES = ("qemu", "fvp", "host-asan")


class Simulator(Protocol):
    name: str

    def board(self, core: Core) -> str: ...

    def require(self, core: Core) -> str: ...

    def run(self, elf: Path, core: Core, workdir: Path, argv: list[str], timeout: float = DEFAULT_TIMEOUT) -> SimResult: ...

    def memory_args(self, fill: int) -> tuple[str, ...]: ...  # the runner's arguments of the memory oracle


def for_core(core: Core, name: str, fvp: str | Path | None = None) -> Simulator:
    """The simulator `name` for a Cortex-M core; the host core runs on the host build, whatever
    was asked for the others."""
    return Host() if core.hosted else get(name, fvp)


def get(name: str, fvp: str | Path | None = None) -> Simulator:
    if name == "qemu":
        return Qemu()
    if name == "fvp":
        return Fvp(fvp)
    if name == "host-asan":
        return Host()
    raise CortexmError(f"unknown simulator {name!r}; known: {', '.join(NAMES)}")
