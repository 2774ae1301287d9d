"""The runner's coverage records, kept in its build folder.

What enters: what a run on a core wrote (kernels/runner/coverage.c: one file of records, 'F'
a .gcda file's name, 'D' its bytes, 'V' a call site's value counters) and the program it ran.
What leaves: in the runner's build folder, the merged .gcda files of every run so far (TOTAL),
each run's own (RUNS, with its program's name and size) and the value counters summed per
call site (VALUES); `cortexm.firmware.coverage.analysis` reads them.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import threading
from collections import defaultdict
from pathlib import Path

from cortexm.base import writes
from cortexm.base.errors import CortexmError

TOTAL = "coverage-total"  # in the runner's build folder: the merged counters of every run so far
RUNS = "coverage-runs"  # beside it: each run's own counters (only the files it executed) and its program
VALUES = "value-counters.json"  # beside it: every run's value counters, summed per call site
COUNTER_TAGS = range(0x01A10000, 0x01B10000, 0x20000)  # gcov-io.h: GCOV_TAG_FOR_COUNTER(0..7)
_ABSORBING: defaultdict[Path, threading.Lock] = defaultdict(threading.Lock)  # a runner's folder -> its runs, one at a time


def reset(runner) -> None:
    """Counters back to zero before the runs."""
    work = runner.work()
    if work is not None:
        writes.remove_tree(work / TOTAL)
        writes.remove_tree(work / RUNS)
        writes.remove(work / VALUES)
        for gcda in work.rglob("*.gcda"):
            writes.remove(gcda)


def absorb(runner, records: bytes, program: Path | None = None) -> None:
    """Adds one run's counters (the runner's coverage.bin) to the runner's total, and keeps
    them apart, named by the `program` that ran."""
    work = runner.work()
    if work is None:
        return
    with _ABSORBING[work], writes.temporary_folder(work) as tmp:
        run = Path(tmp) / "run"
        name, offset, values = None, 0, []
        while offset < len(records):
            tag = records[offset:offset + 1]
            (length,) = struct.unpack_from("<I", records, offset + 1)
            data = records[offset + 5: offset + 5 + length]
            offset += 5 + length
            if tag == b"F":
                name = run / data.decode().lstrip("/")
                name.parent.mkdir(parents=True, exist_ok=True)
                writes.atomic(name, b"")
            elif tag == b"D" and name is not None:
                with writes.stream(name, "ab") as f:
                    f.write(data)
            elif tag == b"V":
                values.append(data)
        if values:
            _add_values(work / VALUES, values)
        if program is not None:
            _keep(run, work / RUNS, program)
        total = work / TOTAL
        if not total.exists():
            writes.move(run, total)
            return
        done = subprocess.run([_arm_tool("gcov-tool"), "merge", str(total), str(run), "-o", str(total)],
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise CortexmError(f"gcov-tool could not merge a run's counters: {(done.stderr.strip().splitlines() or [''])[-1]}")


def _add_values(path: Path, records: list[bytes]) -> None:
    """A run's 'V' records (kind, line, five counts, file name) added to the sums in `path`."""
    sums = json.loads(path.read_text()) if path.is_file() else {}
    for data in records:
        kind, line, *counts = struct.unpack_from("<7I", data)
        key = f"{chr(kind)} {data[28:].decode(errors='replace')}:{line}"
        sums[key] = [a + b for a, b in zip(sums.get(key, [0] * 5), counts, strict=False)]
    writes.atomic(path, json.dumps(sums))


def _keep(run: Path, runs: Path, program: Path) -> None:
    """A copy of the .gcda files a run executed, under RUNS/<sequence>/, with its program."""
    kept = runs / f"{len(list(runs.glob('*'))) if runs.is_dir() else 0:06d}"
    for gcda in run.rglob("*.gcda"):
        if _executed(gcda.read_bytes()):
            target = kept / gcda.relative_to(run)
            target.parent.mkdir(parents=True, exist_ok=True)
            writes.copy(gcda, target)
    kept.mkdir(parents=True, exist_ok=True)
    # NAME.isolated.pte is the memory oracle's build of NAME's program (cortexm.lowering.export).
    name = program.name.removesuffix(".pte").removesuffix(".isolated")
    main = program.with_name(f"{name}.pte")
    size = (main if main.is_file() else program).stat().st_size
    writes.atomic(kept / "program.json", json.dumps({"name": name, "bytes": size}))


def _executed(gcda: bytes) -> bool:
    """Whether a .gcda holds any non-zero counter (GCC 12's format: a 16-byte header, then
    records of tag, length in bytes and data; a counter record of negative length is that
    many zero counters)."""
    offset = 16
    while offset + 8 <= len(gcda):
        tag, length = struct.unpack_from("<Ii", gcda, offset)
        offset += 8
        if length < 0:
            continue
        if tag in COUNTER_TAGS and any(gcda[offset:offset + length]):
            return True
        offset += length
    return False


def _arm_tool(name: str) -> str:
    from cortexm.firmware.tools import toolchain_prefix

    tool = toolchain_prefix() + name
    if shutil.which(tool) is None:
        raise CortexmError(f"{tool} not found: the Arm toolchain's {name} reads the Cortex-M counters")
    return tool
