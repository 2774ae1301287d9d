"""Attacks: Disk full, unwritable folders."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from attack_classes.caches import _export_cache
from attack_classes.lab import attack


def _small_disk(lab, name: str, free: int = 0, read_only: bool = False) -> Path | None:
    """A tmpfs of 1 MiB mounted at lab/name, filled to `free` bytes (None: cannot mount here)."""
    path = lab.folder(name)
    if os.path.ismount(path):
        return path
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return None
    options = "size=1M" + (",ro" if read_only else "")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True).returncode:
        return None
    lab.mounts.append(path)
    if not read_only:
        with open(path / ".filler", "wb") as f:
            try:
                f.write(b"\0" * ((1 << 20) - free))
                f.flush()
            except OSError:
                pass
    return path


def _disk_attack(lab, name, command, run, fragment="", read_only=False, free=0) -> tuple[str, str | None]:
    disk = _small_disk(lab, name, free=free, read_only=read_only)
    if disk is None:
        return command, "SKIPPED: mounting a small tmpfs needs root"
    r = run(disk)
    return command, r.one_error_line(str(disk))


@attack("disk full", "the export cache on a full disk")
def the_export_cache_on_a_full_disk(lab):
    return _disk_attack(lab, "full-cache", "CORTEXM_EXPORT_CACHE=<full disk> cortexm test -k relu --sim none",
                        lambda disk: lab.cli("test", "-t", "cortex-m7", "-k", "relu", "--grid", "none", "--sim", "none",
                                             timeout=900, env={"CORTEXM_EXPORT_CACHE": str(disk / "exports")}))


@attack("disk full", "the export cache on a read-only disk")
def the_export_cache_on_a_read_only_disk(lab):
    return _disk_attack(lab, "ro-cache", "CORTEXM_EXPORT_CACHE=<read-only> cortexm test -k relu --sim none",
                        lambda disk: lab.cli("test", "-t", "cortex-m7", "-k", "relu", "--grid", "none", "--sim", "none",
                                             timeout=900, env={"CORTEXM_EXPORT_CACHE": str(disk / "exports")}),
                        read_only=True)


@attack("disk full", "test --json on a full disk: refused before the run")
def test_json_on_a_full_disk_refused_before_the_run(lab):
    command = "cortexm test -k relu --sim none --json <full disk>/r.json"
    disk = _small_disk(lab, "full-report")
    if disk is None:
        return command, "SKIPPED: mounting a small tmpfs needs root"
    r = lab.cli("test", "-t", "cortex-m7", "-k", "relu", "--grid", "none", "--sim", "none", "--json", str(disk / "r.json"),
                timeout=900, env={"CORTEXM_EXPORT_CACHE": str(lab.folder("report-exports"))})
    ran = "exporting" in r.err or any((lab.root / "report-exports").iterdir())
    return command, r.one_error_line(str(disk)) or ("it ran the cases first" if ran else None)


@attack("disk full", "test --json no/such/dir/r.json")
def test_json_no_such_dir_r_json(lab):
    target = lab.root / "no" / "such" / "dir" / "r.json"
    r = lab.cli("test", "-t", "cortex-m7", "-k", "relu", "--grid", "none", "--sim", "none", "--json", str(target),
                timeout=900, env={"CORTEXM_EXPORT_CACHE": str(_export_cache(lab))})
    return "cortexm test -k relu --sim none --json no/such/dir/r.json", \
        None if target.is_file() or (r.rc == 2 and not r.one_error_line()) else r.one_error_line() or "no report written"


@attack("disk full", "export onto a full disk, then again with space")
def export_onto_a_full_disk_then_again_with_space(lab):
    command = "cortexm export relu -o <disk with 8 KiB free>/X.pte; free the disk; the same again"
    disk = _small_disk(lab, "full-export", free=8 << 10)
    if disk is None:
        return command, "SKIPPED: mounting a small tmpfs needs root"
    r = lab.cli("export", "relu", "-t", "cortex-m7", "-o", str(disk / "out" / "X.pte"))
    problem = r.one_error_line(str(disk))
    (disk / ".filler").unlink()
    again = lab.cli("export", "relu", "-t", "cortex-m7", "-o", str(disk / "out" / "X.pte"))
    return command, problem or (None if again.rc == 0 else f"the rerun: {again.one_error_line()}")


@attack("disk full", "a runner build on a full disk")
def a_runner_build_on_a_full_disk(lab):
    return _disk_attack(lab, "full-builds", "CORTEXM_BUILD_CACHE=<full disk> cortexm build -t cortex-m3",
                        lambda disk: lab.cli("build", "-t", "cortex-m3", timeout=900,
                                             env={"CORTEXM_BUILD_CACHE": str(disk / "builds")}))
