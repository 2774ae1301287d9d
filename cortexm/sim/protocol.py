"""What every simulator shares: the runner's protocol, running it, reading the result.

The command line and the failure rule are upstream ExecuTorch's
(backends/arm/test/runner_utils.py): `executor_runner -m program.pte -o out
-i i0.bin ...`, run with the case folder as the semihosting working folder;
outputs come back as out-0.bin, out-1.bin, ...; a run failed when a line starts
with `E ` or `F ` (or mentions a hard fault or an assertion) or, with this
project's runner, when the exit status is not 0.
"""

from __future__ import annotations

import collections
import os
import re
import select
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from cortexm.base import children
from cortexm.sim import confine

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

    @property
    def call_ticks(self) -> dict[int, int]:
        """Instruction index -> SysTick ticks it took (a run with `--calls 1`): what the runner
        sums into execute()'s `I ticks:` exactly."""
        return {int(m.group(1)): int(m.group(3)) for m in _CALL.finditer(self.log) if m.group(2) == "ticks"}


def call_instructions(ticks: dict[int, int], cpu_hz: int, icount_shift: int) -> dict[int, int]:
    """Each call's instructions such that they sum to the runner's `I instructions:` exactly.

    The runner converts the sum of the calls' ticks once (ticks_to_instructions, rounding to
    the nearest); converting each call alone rounds each, and the sum drifts by up to half an
    instruction a call. Here each call gets the conversion of the ticks up to its end less that
    of the ticks before it: within one instruction of the runner's own `I call N instructions:`,
    and the sum telescopes to the runner's total."""
    per_instruction = cpu_hz << icount_shift

    def convert(t: int) -> int:  # kernels/runner/runner.cpp ticks_to_instructions
        return (t * 1_000_000_000 + per_instruction // 2) // per_instruction

    found, before = {}, 0
    for index in sorted(ticks):
        after = before + ticks[index]
        found[index] = convert(after) - convert(before)
        before = after
    return found


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


def run_process(command: list[str], workdir: Path, timeout: float, env: dict | None = None,
                network: bool = False, also_writes: tuple[str, ...] = ()) -> SimResult:
    """Runs a simulator to its end, confined to `workdir` and the folders `also_writes`
    (cortexm.sim.confine; `network`: it may use TCP); the log is stdout and stderr together, at
    most LOG_HEAD + LOG_TAIL bytes of it.

    The limit is the simulator's whole process group's: when the simulator ends or its time is
    up, whatever it left in its group is stopped, and output still held open by a process that
    left the group is read for at most LATE_OUTPUT seconds more."""
    started = time.monotonic()
    log = _BoundedLog()
    with children.started(confine.command(command, str(workdir), network, also_writes), cwd=workdir, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env) as process:
        assert process.stdout is not None  # stdout=PIPE
        reader = threading.Thread(target=log.read, args=(process.stdout.fileno(),), daemon=True)
        reader.start()
        try:
            process.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            # Stopped (Ctrl-Z) past its deadline, it may have ended in time all the same.
            timed_out = process.poll() is None
        children.kill_group(process)
        reader.join(LATE_OUTPUT)
        log.stop.set()
        reader.join()
        process.stdout.close()
    seconds = time.monotonic() - started
    return SimResult(-1 if timed_out else process.returncode, log.text(), command, seconds, timed_out=timed_out)


# The log kept of one run: its beginning and its end (a runner's verdict lines come last),
# whatever a simulator prints without end; the rest is counted.
LOG_HEAD = 1 << 20
LOG_TAIL = 1 << 20
LATE_OUTPUT = 1.0  # seconds: output of a process that left the simulator's group, after it ended


class _BoundedLog:
    def __init__(self) -> None:
        self.head = bytearray()
        self.tail: collections.deque[bytes] = collections.deque()
        self.tail_bytes = 0
        self.dropped = 0
        self.stop = threading.Event()

    def read(self, fd: int) -> None:
        while not self.stop.is_set():
            if not select.select([fd], [], [], 0.1)[0]:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return
            self._keep(chunk)

    def _keep(self, chunk: bytes) -> None:
        room = LOG_HEAD - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self.tail.append(chunk)
        self.tail_bytes += len(chunk)
        while self.tail_bytes - len(self.tail[0]) >= LOG_TAIL:
            self.tail_bytes -= len(self.tail[0])
            self.dropped += len(self.tail.popleft())

    def text(self) -> str:
        middle = f"\n[cortexm: {self.dropped:,} bytes of the simulator's output not kept]\n".encode() if self.dropped else b""
        return (bytes(self.head) + middle + b"".join(self.tail)).decode(errors="replace")
