"""What every simulator shares: the runner's protocol, running it, reading the result.

The command line and the failure rule are upstream ExecuTorch's
(backends/arm/test/runner_utils.py): `executor_runner -m program.pte -o out
-i i0.bin ...`, run with the case folder as the semihosting working folder;
outputs come back as out-0.bin, out-1.bin, ...; a run failed when a line starts
with `E ` or `F ` (or mentions a hard fault or an assertion) or, with this
project's runner, when the exit status is not 0.
"""

from __future__ import annotations

import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from cortexm.base import children

PROGRAM = "program.pte"
OUTPUT_BASE = "out"
# The FVP truncates a longer semihosting command line.
MAX_COMMAND_LINE = 256
# Seconds one run may take (`--timeout`): the largest suite model executes in ~10 s under
# QEMU; a hung kernel or an endless loop must not hold a run forever.
DEFAULT_TIMEOUT = 120.0
# Bytes of guard the memory oracle puts before and after every planned buffer on a core.
GUARD_BYTES = 256
# Every run times each kernel call on its own (the runner's --calls, printing between calls not
# counted): per-call costs for the performance gate, and the one instruction count every command
# reports (`run`, `test`, `fit`), the sum of the calls' (a whole execute() takes ~16 fewer per call).
CALLS = ("--calls", "1")

_FAILURE = re.compile(r"(^[EF][: ].*$)|(^.*Hard fault.*$)|(^.*Assertion.*$)|(^==\d+==ERROR: .*$)|(^\S+: runtime error: .*$)",
                      re.MULTILINE)
_COUNT = re.compile(r"^I (instructions|ticks): (\d+)\s*$", re.MULTILINE)
_CALL = re.compile(r"^I call (\d+) (instructions|ticks): (\d+)\s*$", re.MULTILINE)


@dataclass
class SimResult:
    exit_code: int
    log: str  # everything the simulator printed, stdout and stderr
    command: list[str] = field(default_factory=list)
    seconds: float = 0.0
    timed_out: bool = False
    remembered: bool = False  # answered from cortexm.sim.memo: no simulator ran

    @property
    def failure_line(self) -> str | None:
        """The first line that says what went wrong, or None when the run succeeded."""
        if self.timed_out:
            return f"timed out after {self.seconds:.0f} s (the limit; --timeout SECONDS raises it)"
        m = _FAILURE.search(self.log)
        if m:
            return m.group(0).strip()
        if self.exit_code != 0:
            last = next((l.strip() for l in reversed(self.log.splitlines()) if l.strip()), "")
            return f"exit status {self.exit_code}" + (f": {last}" if last else "")
        return None

    @property
    def ok(self) -> bool:
        return self.failure_line is None

    @property
    def instructions(self) -> int | None:
        """Instructions execute() took (QEMU with -icount only)."""
        return _counts(self.log).get("instructions")

    @property
    def ticks(self) -> int | None:
        """SysTick ticks of the CPU clock that execute() took."""
        return _counts(self.log).get("ticks")

    @property
    def calls(self) -> dict[int, int]:
        """Instruction index -> what it took, for a run with `--calls 1`: instructions with
        QEMU's -icount, else SysTick ticks."""
        counts: dict[str, dict[int, int]] = {"instructions": {}, "ticks": {}}
        for m in _CALL.finditer(self.log):
            counts[m.group(2)][int(m.group(1))] = int(m.group(3))
        return counts["instructions"] or counts["ticks"]


def _counts(log: str) -> dict[str, int]:
    return {m.group(1): int(m.group(2)) for m in _COUNT.finditer(log)}


def command_line(inputs: list[str], program: str = PROGRAM, output_base: str = OUTPUT_BASE) -> list[str]:
    """argv for the runner; `inputs` are file names in the case folder."""
    argv = ["executor_runner", "-m", program, "-o", output_base]
    for name in inputs:
        argv += ["-i", name]
    return argv


def output_path(workdir: Path, index: int, output_base: str = OUTPUT_BASE) -> Path:
    return Path(workdir) / f"{output_base}-{index}.bin"


def run_process(command: list[str], workdir: Path, timeout: float, env: dict | None = None) -> SimResult:
    """Runs a simulator to its end; the log is stdout and stderr together."""
    started = time.monotonic()
    try:
        done = children.run(command, cwd=workdir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        log = (e.stdout or b"").decode(errors="replace")
        return SimResult(-1, log, command, time.monotonic() - started, timed_out=True)
    return SimResult(done.returncode, done.stdout.decode(errors="replace"), command, time.monotonic() - started)
