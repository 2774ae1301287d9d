"""Attacks: Sweeps: bounded memory, partial results kept."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from attack_classes.caches import _export_cache
from attack_classes.lab import attack
from attack_classes.signals import _as_in_a_terminal


@attack("sweeps", "sweep --count 100000000")
def sweep_count_100000000(lab):
    import resource

    limit = 2 << 30
    command = [sys.executable, "-m", "cortexm", "sweep", "add", "-t", "cortex-m7", "--count", "100000000",
               "--out", str(lab.folder("big-sweep"))]
    process = subprocess.Popen(command, cwd=lab.root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True, env={**os.environ, "CORTEXM_EXPORT_CACHE": str(_export_cache(lab))},
                               preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (16 << 30, 16 << 30)))
    peak, started = 0, time.monotonic()
    try:
        while time.monotonic() - started < 90 and process.poll() is None and peak <= limit:
            try:
                rss = next(l for l in open(f"/proc/{process.pid}/status") if l.startswith("VmRSS:"))
                peak = max(peak, int(rss.split()[1]) * 1024)
            except (OSError, StopIteration):
                pass
            time.sleep(0.2)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    return ("cortexm sweep add -t cortex-m7 --count 100000000 (90 s, main process RSS)",
            f"{peak >> 20} MiB resident after {time.monotonic() - started:.0f} s" if peak > limit else None)


@attack("sweeps", "Ctrl-C in a sweep keeps the samples run")
def ctrl_c_in_a_sweep_keeps_the_samples_run(lab):
    report = lab.root / "interrupted-sweep.json"
    report.unlink(missing_ok=True)
    process = subprocess.Popen([sys.executable, "-m", "cortexm", "sweep", "add", "-t", "cortex-m7", "--count", "400",
                                "--out", str(lab.folder("int-sweep")), "--json", str(report)], cwd=lab.root,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                               env={**os.environ, "CORTEXM_EXPORT_CACHE": str(_export_cache(lab))},
                               preexec_fn=_as_in_a_terminal)
    time.sleep(150)
    os.killpg(process.pid, signal.SIGINT)
    try:
        out, err = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return "Ctrl-C of cortexm sweep add --count 400 --json r.json, 150 s in", "still ran 60 s after Ctrl-C"
    try:
        rows = json.loads(report.read_text())["results"]
    except (OSError, ValueError, KeyError):
        rows = []
    return ("Ctrl-C of cortexm sweep add --count 400 --json r.json, 150 s in",
            None if rows and process.returncode != 0 else
            f"exit {process.returncode}, {len(rows)} samples in the report: {(err.strip().splitlines() or [''])[-1][:100]}")
