"""What every attack stands on: the lab (a temporary folder, `cortexm` run as a user runs it),
what a command gave, and the registry the attack classes add themselves to."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

TIMEOUT = 120  # seconds: an attack that takes longer hung


@dataclass
class Result:
    rc: int | None  # None: it hung and was killed
    out: str
    err: str
    seconds: float

    def one_error_line(self, *fragments: str) -> str | None:
        """What is wrong with this as a bad-input answer (None: nothing)."""
        if self.rc is None:
            return f"hung ({self.seconds:.0f} s)"
        lines = [l for l in self.err.splitlines()
                 if l.strip() and not l.startswith(("library:", "warning:", "note:", "  "))]  # "  ": progress
        if "Traceback" in self.err + self.out:
            return f"exit {self.rc} with a traceback"
        if self.rc != 2 or len(lines) != 1 or not lines[0].startswith("error: "):
            return f"exit {self.rc}: {(lines or ['(nothing)'])[-1][:120]}"
        missing = [f for f in fragments if f not in lines[0]]
        return f"says {lines[0][:120]!r}" if missing else None


class Lab:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.mounts: list[Path] = []  # small disks the attacks mounted, unmounted at the end

    def cli(self, *args: str, timeout: float = TIMEOUT, env: dict | None = None, cwd: Path | None = None) -> Result:
        started = time.monotonic()
        process = subprocess.Popen([sys.executable, "-m", "cortexm", *args], cwd=cwd or self.root, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **(env or {})},
                                   start_new_session=True)
        try:
            out, err = process.communicate(timeout=timeout)
            return Result(process.returncode, out, err, time.monotonic() - started)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            out, err = process.communicate()
            return Result(None, out, err, time.monotonic() - started)

    def folder(self, name: str) -> Path:
        path = self.root / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def exported(self, case: str) -> Path:
        """`case` exported for the M7, with its sidecar (made once per lab)."""
        out = self.root / "exported" / f"{case}.pte"
        if not out.is_file():
            out.parent.mkdir(exist_ok=True)
            r = self.cli("export", case, "-t", "cortex-m7", "-o", str(out), timeout=600)
            if r.rc != 0:
                raise SystemExit(f"attacks: exporting {case} failed: {r.err.strip()[-300:]}")
        return out

    def relu(self) -> Path:
        return self.exported("relu")

    def backend_only_tree(self) -> Path:
        """A folder with the ExecuTorch tree's backends/cortex_m and nothing a runner is built
        from: what an audit reads, and a build of it fails."""
        from cortexm import sources

        out = self.root / "backend-only"
        if not out.is_dir():
            real = sources.locate(sources.EXECUTORCH).path
            if real is None:
                raise SystemExit(f"attacks: {sources.missing_message(sources.EXECUTORCH)}")
            shutil.copytree(real / "backends" / "cortex_m", out / "backends" / "cortex_m")
        return out


Attack = Callable[[Lab], tuple[str, str | None]]  # -> (command, what failed or None)
ATTACKS: list[tuple[str, str, Attack]] = []


def attack(group: str, name: str):
    def register(fn: Attack) -> Attack:
        ATTACKS.append((group, name, fn))
        return fn
    return register


def _unchanged(path: Path, text: str) -> str | None:
    if not path.exists():
        return f"{path.name} was deleted"
    return None if path.read_text(errors="replace") == text else f"{path.name} was overwritten"
