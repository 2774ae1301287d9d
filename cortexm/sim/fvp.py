"""Running a runner ELF on an Arm Corstone FVP, with upstream ExecuTorch's command line.

The FVP is a separate download (free, with an EULA: see pins.toml [fvp.corstone-300])
and is looked up as: the path given (`--fvp`), $CORTEXM_FVP, then the model's
binary name on PATH. It has no -icount: runs report SysTick ticks, not instructions.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from cortexm.base.errors import CortexmError
from cortexm.base.targets import CORES, Core
from cortexm.sim.protocol import DEFAULT_TIMEOUT, GUARD_BYTES, MAX_COMMAND_LINE, SimResult, run_process

FVP_ENV = "CORTEXM_FVP"
# FVP model -> board support folder (fvp/boards) of code linked for it.
BOARDS = {"FVP_Corstone_SSE-300_Ethos-U55": "corstone-300"}


class Fvp:
    name = "fvp"

    def __init__(self, binary: str | Path | None = None) -> None:
        self.binary = str(binary) if binary else os.environ.get(FVP_ENV) or None

    def board(self, core: Core) -> str:
        if core.fvp_model is None:
            cores = ", ".join(c.name for c in CORES if c.fvp_model in BOARDS)
            raise CortexmError(f"no FVP runs {core.name} (cores the FVP runs: {cores})")
        if core.fvp_model not in BOARDS:
            raise CortexmError(f"{core.fvp_model} (for {core.name}) has no board support in fvp/boards yet")
        return BOARDS[core.fvp_model]

    def require(self, core: Core) -> str:
        """The FVP executable for `core`, or an error that says how to provide it."""
        self.board(core)
        wanted = self.binary or core.fvp_model
        found = shutil.which(wanted) if wanted else None
        if found is None:
            given = f"{self.binary} (from --fvp or ${FVP_ENV})" if self.binary else f"{core.fvp_model} is not on PATH"
            raise CortexmError(
                f"no Corstone FVP: {given}; install it from developer.arm.com (see pins.toml [fvp.corstone-300]), "
                f"then put it on PATH, set {FVP_ENV} or pass --fvp PATH"
            )
        return found

    def command(self, elf: Path, core: Core, workdir: Path, argv: list[str], timeout: float) -> list[str]:
        command_line = " ".join(argv)
        if len(command_line) >= MAX_COMMAND_LINE:
            raise CortexmError(f"the runner's command line is {len(command_line)} characters; the FVP takes fewer than "
                               f"{MAX_COMMAND_LINE}")
        return [
            self.require(core),
            "-C", "mps3_board.visualisation.disable-visualisation=1",
            "-C", "mps3_board.telnetterminal0.start_telnet=0",
            "-C", "mps3_board.uart0.out_file='-'",
            "-C", "cpu0.semihosting-enable=1",
            "-C", "cpu0.semihosting-stack_base=0",
            "-C", "cpu0.semihosting-heap_limit=0",
            "-C", f"cpu0.semihosting-cwd={workdir}",
            "-C", f"cpu0.semihosting-cmd_line='{command_line}'",
            "-a", str(elf),
            "--timelimit", str(int(timeout)),
        ]

    def run(self, elf: Path, core: Core, workdir: Path, argv: list[str], timeout: float = DEFAULT_TIMEOUT) -> SimResult:
        """Runs `elf` (built for the FVP's board) with `workdir` as the semihosting folder."""
        command = self.command(Path(elf), core, Path(workdir), argv, timeout)
        # The FVP listens on TCP ports for its terminals, started or not: it keeps the network.
        return run_process(command, Path(workdir), timeout + 30, network=True)

    def memory_args(self, fill: int) -> tuple[str, ...]:
        """The memory oracle on a simulated core: guard regions around every planned buffer."""
        return ("--guard", str(GUARD_BYTES), "--fill", str(fill))
