"""Running a runner ELF on QEMU's model of the core's board.

Instruction counts are deterministic: with `-icount shift=N` QEMU advances
2^N ns of virtual time per instruction, whatever the host's load, and the runner
turns the SysTick ticks of execute() into instructions when told N.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from cortexm.base.errors import CortexmError
from cortexm.base.targets import CORES, Core
from cortexm.firmware.tools import INSTALL as INSTALL_HINTS
from cortexm.sim.protocol import DEFAULT_TIMEOUT, GUARD_BYTES, SimResult, run_process

ICOUNT_SHIFT = 6
INSTALL = INSTALL_HINTS["qemu-system-arm"]


class Qemu:
    name = "qemu"

    def __init__(self, binary: str | None = None) -> None:
        self.binary = binary or "qemu-system-arm"

    def board(self, core: Core) -> str:
        if core.qemu_machine is None or core.board is None:
            cores = ", ".join(c.name for c in CORES if c.qemu_machine)
            raise CortexmError(f"QEMU has no board for {core.name} (cores it runs: {cores})")
        return core.board

    def require(self, core: Core) -> str:
        """The QEMU executable that runs `core`, or an error that says how to get one."""
        self.board(core)
        binary = shutil.which(self.binary)
        if binary is None:
            raise CortexmError(f"{self.binary} not found: {INSTALL}")
        return binary

    def command(self, elf: Path, core: Core, argv: list[str]) -> list[str]:
        binary = self.require(core)
        machine = core.qemu_machine
        assert machine is not None  # require() refused a core QEMU has no board for
        # QEMU splits options at commas; a doubled comma is a literal one.
        args = ",".join(f"arg={a.replace(',', ',,')}" for a in [*argv, "--icount-shift", str(ICOUNT_SHIFT)])
        return [
            binary, "-M", machine, "-cpu", core.name,
            "-nographic", "-monitor", "none", "-serial", "none", "-nic", "none",  # no network for the guest
            "-semihosting-config", f"enable=on,target=native,{args}",
            "-icount", f"shift={ICOUNT_SHIFT}",
            "-kernel", str(elf),
        ]

    def run(self, elf: Path, core: Core, workdir: Path, argv: list[str], timeout: float = DEFAULT_TIMEOUT) -> SimResult:
        """Runs `elf` on the board of `core` with `workdir` as the semihosting folder."""
        command = self.command(Path(elf), core, argv)
        return run_process(command, Path(workdir), timeout)

    def memory_args(self, fill: int) -> tuple[str, ...]:
        """The memory oracle on a simulated core: guard regions around every planned buffer."""
        return ("--guard", str(GUARD_BYTES), "--fill", str(fill))
