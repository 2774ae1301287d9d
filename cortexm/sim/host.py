"""Running the host build of the runner (board `host`): the program itself, with
AddressSanitizer and UBSan, in the run's folder as its working directory.

The runner takes the same command line as under semihosting. A sanitizer report
becomes the run's failure line, naming the kernel call it happened in (the runner,
given --trace 1, prints each instruction before it runs), what was accessed and where.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from cortexm.base.errors import CortexmError
from cortexm.base.targets import Core
from cortexm.sim.protocol import DEFAULT_TIMEOUT, SimResult, run_process

# Leaks are not what this looks for: the runner never frees what a run allocates.
SANITIZER_ENV = {"ASAN_OPTIONS": "detect_leaks=0:halt_on_error=1:abort_on_error=0",
                 "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"}


class Host:
    name = "host-asan"

    def board(self, core: Core) -> str:
        if not core.hosted or core.board is None:
            raise CortexmError(f"the host build runs programs for the core `host`, not {core.name}")
        return core.board

    def require(self, core: Core) -> str:
        self.board(core)
        return "the runner itself"

    def command(self, elf: Path, core: Core, argv: list[str]) -> list[str]:
        # --trace: each instruction announced, so a sanitizer report names its kernel call.
        return [str(elf), *argv[1:], *([] if "--trace" in argv else ["--trace", "1"])]

    def run(self, elf: Path, core: Core, workdir: Path, argv: list[str], timeout: float = DEFAULT_TIMEOUT) -> SimResult:
        return run_process(self.command(Path(elf), core, argv), Path(workdir), timeout,
                           env={**os.environ, **SANITIZER_ENV}, also_writes=_counters_folder(Path(elf)))

    def memory_args(self, fill: int) -> tuple[str, ...]:
        """The memory oracle here is AddressSanitizer on exact-size buffers: no guards."""
        return ("--fill", str(fill))


def _counters_folder(elf: Path) -> tuple[str, ...]:
    """Where a hosted coverage build's libgcov adds a run's counters (beside its objects, in the
    CMake folder its build.json names), which the confined run may write; none otherwise."""
    try:
        record = json.loads((elf.parent / "build.json").read_text())
        coverage, work = record["inputs"]["options"]["coverage"], record.get("work")
    except (OSError, ValueError, KeyError, TypeError):
        return ()
    return (str(elf.parent.parent / work),) if coverage and work else ()


_INSTRUCTION = re.compile(r"^I instruction (\d+)$", re.MULTILINE)
_ASAN = re.compile(r"^==\d+==ERROR: AddressSanitizer: (\S+)", re.MULTILINE)
_ACCESS = re.compile(r"^(READ|WRITE) of size (\d+)", re.MULTILINE)
_WHERE = re.compile(r"is located (\d+) bytes (?:to the )?(right of|left of|after|before|inside of|inside) "
                    r"(?:the )?(\d+)-byte region", re.MULTILINE)
_FRAME = re.compile(r"^\s+#\d+ 0x[0-9a-f]+ in (\S+) (\S+)$", re.MULTILINE)
_UBSAN = re.compile(r"^(\S+:\d+:\d+): runtime error: (.*)$", re.MULTILINE)
_BUFFER = re.compile(r"^I planned buffer (\d+) at (0x[0-9a-f]+)", re.MULTILINE)
_REGION = re.compile(r"-byte region \[(0x[0-9a-f]+),", re.MULTILINE)
_SIDE = {"right of": "past the end of", "after": "past the end of", "left of": "before the start of",
         "before": "before the start of", "inside of": "inside", "inside": "inside"}


def sanitizer_failure(log: str, pte: Path) -> str | None:
    """One line for the first sanitizer report in `log`, naming the kernel call, the buffer
    and the code that made the access, or None."""
    from cortexm.checking.memory_plan import describe

    asan, ubsan = _ASAN.search(log), _UBSAN.search(log)
    if not asan and not ubsan:
        return None
    first = min((m for m in (asan, ubsan) if m), key=lambda m: m.start())
    steps = [m for m in _INSTRUCTION.finditer(log) if m.start() < first.start()]
    if ubsan is not None and first is ubsan:
        if not steps:
            return f"UBSan before the first kernel call: {ubsan.group(2)} ({ubsan.group(1)})"
        return f"UBSan in {describe(pte, int(steps[-1].group(1)), None)[0]}: {ubsan.group(2)} ({ubsan.group(1)})"
    assert asan is not None  # the first report is ASan's
    instruction = int(steps[-1].group(1)) if steps else None
    access, where = _ACCESS.search(log, asan.start()), _WHERE.search(log, asan.start())
    what = f"{access.group(1).lower()} of {access.group(2)} B" if access else "an access"
    region = _REGION.search(log, asan.start())
    # The runner (with --trace) says where each planned buffer is: the region names the buffer.
    buffers = {int(m.group(2), 16): int(m.group(1)) for m in _BUFFER.finditer(log)}
    buffer = buffers.get(int(region.group(1), 16)) if region else None
    call, whose = describe(pte, instruction, buffer) if instruction is not None else ("the run", "a buffer")
    place = f" {where.group(1)} B {_SIDE[where.group(2)]} {whose} ({where.group(3)} B)" if where else ""
    # The code that made the access: the first frames that are not the sanitizer's own.
    frames = [f"{m.group(1)} ({m.group(2)})" for m in _FRAME.finditer(log, asan.start(), where.start() if where else len(log))
              if "interceptor" not in m.group(1) and "sanitizer" not in m.group(2)][:2]
    return f"AddressSanitizer {asan.group(1)} in {call}: {what}{place}" + (f" in {' from '.join(frames)}" if frames else "")
