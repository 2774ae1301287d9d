"""Attacks (round 4): one ownership rule for every writer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from attack_classes.lab import _unchanged, attack


def _keep_run_started(lab, d: Path, until) -> subprocess.Popen:
    """`cortexm run relu --keep d` started in the background, returned once `until()` holds."""
    process = subprocess.Popen([sys.executable, "-m", "cortexm", "run", str(lab.relu()), "-t", "cortex-m7", "--keep", str(d)],
                               cwd=lab.root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not until():
        time.sleep(0.02)
    return process


@attack("writers", "run --keep DIR killed with SIGKILL, then run --keep DIR again")
def killed_keep_then_rerun(lab):
    d = lab.root / "killed-keep"
    process = _keep_run_started(lab, d, lambda: (d / "program.pte").exists())
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    if not (d / "program.pte").exists():
        return "cortexm run --keep DIR (kill -9), again", "SKIPPED: the run never wrote its folder"
    r = lab.cli("run", str(lab.relu()), "-t", "cortex-m7", "--keep", str(d), timeout=300)
    return "cortexm run --keep DIR (kill -9), again", None if r.rc == 0 else f"the rerun: {r.one_error_line() or r.rc}"


@attack("writers", "a file saved into the --keep folder during the run, then a second run")
def saved_during_run_not_adopted(lab):
    d = lab.root / "saved-during"
    process = _keep_run_started(lab, d, d.is_dir)
    (d / "notes.txt").write_text("mine\n") if d.is_dir() else None
    process.wait(timeout=300)
    lab.cli("run", str(lab.relu()), "-t", "cortex-m7", "--keep", str(d), "--force", timeout=300)
    return "cortexm run --keep DIR (a file saved meanwhile), again", _unchanged(d / "notes.txt", "mine\n")


@attack("writers", "sweep --out DIR holding the user's file: the refusal's advice")
def sweep_advice(lab):
    d = lab.folder("sweep-advice")
    (d / "sweep-add-0.py").write_text("mine\n")
    r = lab.cli("sweep", "add", "-t", "cortex-m7", "--count", "1", "--out", str(d), timeout=300)
    if "--force" in r.err:
        return "cortexm sweep add --out DIR", "it advises --force, which sweep does not take"
    return "cortexm sweep add --out DIR", _unchanged(d / "sweep-add-0.py", "mine\n") or r.one_error_line()


@attack("writers", "export -o NAME.pte where NAME fits the limit but NAME.quantized.pt2 does not")
def long_output_name(lab):
    d = lab.folder("long-name")
    r = lab.cli("export", "relu", "-t", "cortex-m7", "-o", str(d / ("n" * 245 + ".pte")), timeout=600)
    leftovers = [p.name for p in d.iterdir()]
    if leftovers:
        return "cortexm export relu -o <245 characters>.pte", f"it left {len(leftovers)} files"
    return "cortexm export relu -o <245 characters>.pte", r.one_error_line("too long")
