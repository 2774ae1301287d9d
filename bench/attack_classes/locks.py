"""Attacks (round 4): one process per output."""

from __future__ import annotations

from attack_classes.lab import attack
from attack_classes.writers import _keep_run_started


@attack("locks", "two run --keep DIR at once")
def two_runs_one_folder(lab):
    d = lab.root / "two-runs"
    first = _keep_run_started(lab, d, d.is_dir)
    second = lab.cli("run", str(lab.relu()), "-t", "cortex-m7", "--keep", str(d), timeout=300)
    first.wait(timeout=300)
    return "cortexm run --keep DIR, twice at once", second.one_error_line("being written by another cortexm")
