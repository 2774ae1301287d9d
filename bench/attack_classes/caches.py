"""Attacks: Damaged caches."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from attack_classes.lab import Result, attack


def _export_cache(lab) -> Path:
    """An export cache of the lab's own: the relu entry in it is the one `test -k relu` uses."""
    return lab.folder("exports")


def _cache_of_relu(lab) -> Path | None:
    """The export cache folder of the relu case for the M7 (after a `test -k relu` made it)."""
    found = list(_export_cache(lab).glob("**/relu.pte"))
    return found[0].parent if len(found) == 1 else None


def _test_relu(lab) -> Result:
    return lab.cli("test", "-t", "cortex-m7", "-k", "relu", "--grid", "none", "--json", str(lab.root / "relu-report.json"),
                   timeout=900, env={"CORTEXM_EXPORT_CACHE": str(_export_cache(lab))})


def _relu_result(lab) -> dict | None:
    try:
        rows = json.loads((lab.root / "relu-report.json").read_text())["results"]
    except (OSError, ValueError, KeyError):
        return None
    return next((r for r in rows if r["case"] == "relu"), None)


def _damaged_export(lab, damage: Callable[[Path], None], what: str) -> tuple[str, str | None]:
    first = _test_relu(lab)
    folder = _cache_of_relu(lab)
    if first.rc not in (0, 1) or folder is None:
        return "cortexm test -t cortex-m7 -k relu", f"the first run failed (exit {first.rc}) or cached nothing"
    damage(folder)
    try:
        again = _test_relu(lab)
        row = _relu_result(lab)
        if again.rc is None or "Traceback" in again.err + again.out:
            problem = "hung or printed a traceback"
        elif row is None or row["status"] != "PASS":
            problem = f"relu {row['status'] if row else 'missing'}: {(row or {}).get('reason', again.err.strip()[-120:])[:120]}"
        else:
            problem = None if "damaged" in again.err + again.out else "passed, but said nothing about the damage"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return f"cortexm test -t cortex-m7 -k relu, after {what} in the export cache", problem


@attack("caches", "bit-flipped cached .pte")
def bit_flipped_cached_pte(lab):
    def flip(folder):
        pte = folder / "relu.pte"
        data = bytearray(pte.read_bytes())
        data[len(data) // 2] ^= 0x01
        pte.write_bytes(bytes(data))
    return _damaged_export(lab, flip, "one bit flipped in relu.pte")


@attack("caches", "truncated cached reference")
def truncated_cached_reference(lab):
    def truncate(folder):
        ref = next(folder.glob("*.reference-0.bin"))
        ref.write_bytes(ref.read_bytes()[:7])
    return _damaged_export(lab, truncate, "relu.reference-0.bin cut to 7 B")


@attack("caches", "bit-flipped cached sidecar")
def bit_flipped_cached_sidecar(lab):
    def edit(folder):
        sidecar = folder / "relu.json"
        sidecar.write_text(sidecar.read_text().replace('"qtol": 0', '"qtol": 9'))
    return _damaged_export(lab, edit, "relu.json's qtol edited")


@attack("caches", "temporary folder of a killed run")
def temporary_folder_of_a_killed_run(lab):
    first = _test_relu(lab)
    folder = _cache_of_relu(lab)
    if folder is None:
        return "cortexm test -t cortex-m7 -k relu", f"the first run cached nothing (exit {first.rc})"
    dead = folder.parent / ".tmp-999999999-attack"
    dead.mkdir(exist_ok=True)
    shutil.rmtree(folder)  # so the next run stores an entry
    _test_relu(lab)
    left = dead.exists()
    shutil.rmtree(dead, ignore_errors=True)
    return ("cortexm test -k relu, with .tmp-<dead pid>-* in the export cache",
            "the dead run's folder is still there" if left else None)


def _built_m7(lab) -> tuple[Result, Path | None]:
    r = lab.cli("build", "-t", "cortex-m7", "--json", timeout=1800)
    try:
        return r, Path(json.loads(r.out)["elf"])
    except (ValueError, KeyError, TypeError):
        return r, None


@attack("caches", "truncated runner ELF in the build cache")
def truncated_runner_elf_in_the_build_cache(lab):
    r, elf = _built_m7(lab)
    if elf is None:
        return "cortexm build -t cortex-m7", f"no runner to damage (exit {r.rc}: {r.err.strip()[-100:]})"
    good = elf.read_bytes()
    elf.write_bytes(good[:1000])
    again, elf2 = _built_m7(lab)
    ok = elf2 is not None and elf2.is_file() and elf2.read_bytes() == good
    if not ok:
        shutil.rmtree(elf.parent, ignore_errors=True)  # leave no broken entry behind
    return "cortexm build -t cortex-m7, its cached ELF cut to 1000 B", None if ok else "the truncated ELF is used as cached"


@attack("caches", "build.json holding []")
def build_json_holding(lab):
    r, elf = _built_m7(lab)
    if elf is None:
        return "cortexm build -t cortex-m7", f"no runner to damage (exit {r.rc})"
    (elf.parent / "build.json").write_text("[]")
    again, elf2 = _built_m7(lab)
    if elf2 is None:
        shutil.rmtree(elf.parent, ignore_errors=True)
        return "cortexm build -t cortex-m7, its build.json replaced by []", f"exit {again.rc}: {again.err.strip()[-100:]}"
    return "cortexm build -t cortex-m7, its build.json replaced by []", None


@attack("caches", "SIGKILLed build leaves its compiler running")
def sigkilled_build_leaves_its_compiler_running(lab):
    env = {"CORTEXM_BUILD_CACHE": str(lab.folder("kill-builds"))}
    process = subprocess.Popen([sys.executable, "-m", "cortexm", "build", "-t", "cortex-m3"], cwd=lab.root,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **env})
    time.sleep(25)  # into the compile
    process.kill()
    process.wait()
    time.sleep(3)
    left = subprocess.run(["pgrep", "-f", str(lab.root / "kill-builds")], capture_output=True, text=True).stdout.split()
    for pid in left:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    return "kill -9 of cortexm build -t cortex-m3, 25 s in", f"{len(left)} of its processes still ran" if left else None
