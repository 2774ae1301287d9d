"""Attacks (round 5): a cache someone else can write, keys that miss what goes in, a simulator
that will not end or will not stop printing."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from attack_classes.lab import attack

HOSTILE = Path(__file__).resolve().parents[2] / "tests" / "hostile_firmware"


def _shared(lab, name: str) -> Path:
    """A folder anyone can write, as a shared CI cache or a shared XDG_CACHE_HOME is."""
    folder = lab.folder(name)
    folder.chmod(0o777)
    return folder


def _refused(r, folder: Path) -> str | None:
    """What is wrong with `r` as a refusal of `folder` (None: a one-line error naming it)."""
    return r.one_error_line(str(folder))


def _built_m7(lab, env: dict | None = None):
    r = lab.cli("build", "-t", "cortex-m7", "--json", timeout=3600, env=env)
    try:
        return r, json.loads(r.out)
    except ValueError:
        return r, None


def _hostile_elf(lab, target: Path) -> Path:
    elf = lab.root / "write_outside.elf"
    subprocess.run(["arm-none-eabi-gcc", "-mcpu=cortex-m7", "-mthumb", "-Os", "-nostdlib", "-nostartfiles",
                    "-ffreestanding", f'-DTARGET="{target}"', "-T", str(HOSTILE / "write_outside.ld"),
                    str(HOSTILE / "write_outside.c"), "-o", str(elf)], check=True, capture_output=True)
    return elf


@attack("trust", "a planted runner ELF in a build cache, its build record updated to match")
def a_planted_runner_elf(lab):
    r, built = _built_m7(lab)
    if built is None:
        return "cortexm build -t cortex-m7", f"no runner to plant beside (exit {r.rc})"
    entry = Path(built["elf"]).parent
    cache = lab.folder("planted-builds")
    planted = cache / entry.name
    shutil.rmtree(planted, ignore_errors=True)
    shutil.copytree(entry, planted)
    victim = lab.root / "victim.txt"
    victim.unlink(missing_ok=True)
    shutil.copyfile(_hostile_elf(lab, victim), planted / "executor_runner.elf")
    record = json.loads((planted / "build.json").read_text())
    import hashlib

    for name in record["written"]:
        data = (planted / name).read_bytes()
        record["written"][name] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (planted / "build.json").write_text(json.dumps(record))
    lab.cli("run", str(lab.relu()), "-t", "cortex-m7", env={"CORTEXM_BUILD_CACHE": str(cache)})
    return ("cortexm run relu.pte -t cortex-m7, a runner that writes ../victim.txt planted in the build cache",
            "the planted runner wrote a file outside its run folder" if victim.exists() else None)


@attack("trust", "a run store others can write, one of its entries forged")
def a_forged_run_store_entry(lab):
    store = _shared(lab, "shared-runs")
    env = {"CORTEXM_RUN_CACHE": str(store)}
    report = lab.root / "forged.json"
    args = ("test", "-t", "cortex-m7", "-k", "relu", "--grid", "none", "--json", str(report))
    first = lab.cli(*args, env=env, timeout=900)
    if first.rc == 2:
        return "cortexm test -k relu, CORTEXM_RUN_CACHE a folder anyone can write", _refused(first, store)
    for result in store.glob("*/result.json"):  # forged: another count, and its manifest to match
        data = json.loads(result.read_text())
        data["log"] = "\n".join("I instructions: 7" if l.startswith("I instructions:") else l for l in data["log"].splitlines())
        result.write_text(json.dumps(data))
        import hashlib

        files = {p.name: {"size": p.stat().st_size, "sha256": hashlib.sha256(p.read_bytes()).hexdigest()}
                 for p in result.parent.iterdir() if p.name != "entry.json"}
        (result.parent / "entry.json").write_text(json.dumps({"written": files}))
    again = lab.cli(*args, env=env, timeout=900)
    rows = json.loads(report.read_text())["results"] if report.is_file() else []
    counts = [r.get("instructions") for r in rows if r.get("case") == "relu"]
    forged = 7 in counts
    return ("cortexm test -k relu twice, CORTEXM_RUN_CACHE a folder anyone can write, an entry forged between",
            f"the forged entry gave the verdict (instructions {counts})" if forged else
            f"the store was used without a word (exit {again.rc})")


@attack("trust", "a build cache others can write")
def a_build_cache_others_can_write(lab):
    cache = _shared(lab, "shared-builds")
    r = lab.cli("build", "-t", "cortex-m7", env={"CORTEXM_BUILD_CACHE": str(cache)}, timeout=3600)
    return "cortexm build -t cortex-m7, CORTEXM_BUILD_CACHE a folder anyone can write", _refused(r, cache)


@attack("trust", "an export cache others can write")
def an_export_cache_others_can_write(lab):
    cache = _shared(lab, "shared-exports")
    r = lab.cli("test", "-t", "cortex-m7", "-k", "relu", "--grid", "none", env={"CORTEXM_EXPORT_CACHE": str(cache)},
                timeout=900)
    return "cortexm test -k relu, CORTEXM_EXPORT_CACHE a folder anyone can write", _refused(r, cache)


@attack("trust", "a lock folder others can write, a link planted where the lock goes")
def a_link_in_a_shared_lock_folder(lab):
    import hashlib

    xdg = lab.folder("shared-xdg")
    locks = xdg / "cortexm" / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    locks.chmod(0o777)
    victim = lab.root / "lock-victim.txt"
    victim.write_text("the user's notes\n")
    out = lab.folder("lock-out") / "relu.pte"
    for place in (out, out.parent):  # wherever the export takes its lock
        link = locks / f"{hashlib.sha256(str(place.resolve()).encode()).hexdigest()[:32]}.lock"
        link.unlink(missing_ok=True)
        link.symlink_to(victim)
    r = lab.cli("export", "relu", "-t", "cortex-m7", "-o", str(out), env={"XDG_CACHE_HOME": str(xdg)})
    if victim.read_text() != "the user's notes\n":
        return "cortexm export relu -o OUT, a link to notes.txt where OUT's lock goes", "the lock wrote through the link"
    return "cortexm export relu -o OUT, a link to notes.txt where OUT's lock goes", _refused(r, locks)


@attack("trust", "CFLAGS in the environment")
def cflags_in_the_environment(lab):
    plain, flagged = lab.folder("cflags-plain"), lab.folder("cflags-flagged")
    a, one = _built_m7(lab, {"CORTEXM_BUILD_CACHE": str(plain)})
    b, two = _built_m7(lab, {"CORTEXM_BUILD_CACHE": str(flagged), "CFLAGS": "-O0", "CXXFLAGS": "-O0"})
    if one is None or two is None:
        return "cortexm build -t cortex-m7, with and without CFLAGS=-O0", f"a build failed (exit {a.rc}, {b.rc})"
    same_key = one["key"] == two["key"]
    same_code = Path(one["elf"]).read_bytes() == Path(two["elf"]).read_bytes()
    problem = None if same_code or not same_key else "CFLAGS=-O0 built other code under the same key"
    return "cortexm build -t cortex-m7 into two caches, one with CFLAGS=-O0 CXXFLAGS=-O0", problem


def _qemu_shim(lab, name: str, body: str) -> dict:
    """PATH with `qemu-system-arm` a script of `body` (which finds the real one as $REAL)."""
    folder = lab.folder(name)
    shim = folder / "qemu-system-arm"
    shim.write_text(f"#!/bin/sh\nREAL={shutil.which('qemu-system-arm')}\n{body}\n")
    shim.chmod(0o755)
    return {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


@attack("trust", "another QEMU behind the same shim")
def another_qemu_behind_the_same_shim(lab):
    target = lab.root / "qemu-target"
    broken = lab.folder("broken-qemu") / "qemu"
    broken.write_text('#!/bin/sh\nif [ "$1" = --version ]; then echo "QEMU emulator version 99.0"; exit 0; fi\n'
                      'echo "F this QEMU cannot run anything"; exit 1\n')
    broken.chmod(0o755)
    target.write_text(shutil.which("qemu-system-arm"))
    env = {**_qemu_shim(lab, "shim-bin", f'exec "$(cat {target})" "$@"'), "CORTEXM_RUN_CACHE": str(lab.folder("shim-runs"))}
    args = ("test", "-t", "cortex-m7", "-k", "relu", "--grid", "none", "--json", str(lab.root / "shim.json"))
    lab.cli(*args, env=env, timeout=900)
    target.write_text(str(broken))
    again = lab.cli(*args, env=env, timeout=900)
    return ("cortexm test -k relu twice, the QEMU behind a shim swapped between",
            "the run store answered for the other QEMU (exit 0)" if again.rc == 0 else None)


def _peak(command: list[str], env: dict, timeout: float) -> tuple[int | None, float, int]:
    """Exit status (None: killed at `timeout`), seconds and peak RSS in MiB of `command`."""
    started = time.monotonic()
    process = subprocess.Popen(command, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    while process.poll() is None and time.monotonic() - started < timeout:
        time.sleep(0.2)
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    _, status, usage = os.wait4(process.pid, 0) if process.returncode is None else (0, 0, None)
    rss = usage.ru_maxrss // 1024 if usage else 0
    return process.returncode, time.monotonic() - started, rss


@attack("trust", "a simulator that prints without end")
def a_simulator_that_prints_without_end(lab):
    env = _qemu_shim(lab, "chatty-bin", "yes 'I chatter chatter chatter chatter chatter chatter chatter'")
    rc, seconds, rss = _peak([sys.executable, "-m", "cortexm", "run", str(lab.relu()), "-t", "cortex-m7", "--timeout",
                              "15"], env, 120)
    problem = (f"hung ({seconds:.0f} s)" if rc is None else
               f"kept {rss} MiB of output" if rss > 1024 else None)
    return "cortexm run relu.pte --timeout 15, QEMU printing without end", problem


@attack("trust", "a simulator that leaves a child holding its output")
def a_simulator_that_leaves_a_child_holding_its_output(lab):
    env = _qemu_shim(lab, "holding-bin", 'setsid sleep 600 & exec "$REAL" "$@"')
    started = time.monotonic()
    r = lab.cli("run", str(lab.relu()), "-t", "cortex-m7", "--timeout", "20", env=env, timeout=200)
    seconds = time.monotonic() - started
    subprocess.run(["pkill", "-f", "sleep 600"], capture_output=True)
    problem = f"cortexm waited {seconds:.0f} s with --timeout 20" if r.rc is None or seconds > 60 else None
    return "cortexm run relu.pte --timeout 20, QEMU leaving `setsid sleep 600` on its output", problem
