"""The trust boundary: code and verdicts only from folders the user alone can write, and a
runner, whatever its origin, writing nothing outside its run folder (cortexm.base.trust,
cortexm.sim.confine); a simulator's limit and log bounded whatever it does (cortexm.sim.protocol).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import MISSING, REPO
from cortexm.base import entries, manifest, trust
from cortexm.base.errors import CortexmError
from cortexm.base.targets import core
from cortexm.sim import confine, protocol

HOSTILE = REPO / "tests" / "hostile_firmware"


@pytest.fixture
def private(tmp_path):
    """A folder of the test's own that no one else can write (pytest's may be 0755 or 0700)."""
    folder = tmp_path / "mine"
    folder.mkdir(mode=0o700)
    return folder


def test_a_folder_others_can_write_is_refused_with_the_fix(private):
    shared = private / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(trust.UntrustedFolder) as refused:
        trust.require_private(shared / "runs", "run store", "set CORTEXM_RUN_CACHE to a folder of your own")
    assert f"{shared} is writable by others, mode 0777; chmod go-w {shared}" in str(refused.value)
    assert "set CORTEXM_RUN_CACHE to a folder of your own" in str(refused.value)
    group = private / "group"
    group.mkdir()
    group.chmod(0o775)
    with pytest.raises(trust.UntrustedFolder, match="writable by its group"):
        trust.require_private(group, "export cache", "fix")


def test_a_sticky_folder_above_is_allowed_but_not_the_folder_itself(private):
    sticky = private / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    assert trust.require_private(sticky / "cache", "export cache", "fix") == sticky / "cache"  # made, and the user's
    with pytest.raises(trust.UntrustedFolder, match="writable by others"):  # anyone could add entries to it
        trust.require_private(sticky, "export cache", "fix")


def test_a_link_to_a_folder_others_can_write_is_refused(private):
    shared = private / "elsewhere"
    shared.mkdir()
    shared.chmod(0o757)
    (private / "cache").symlink_to(shared)
    with pytest.raises(trust.UntrustedFolder, match="elsewhere is writable by others"):
        trust.require_private(private / "cache", "runner build cache", "fix")


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_a_folder_of_another_user_is_refused(private):
    theirs = private / "theirs"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)
    with pytest.raises(trust.UntrustedFolder, match=r"belongs to .*65534"):
        trust.require_private(theirs, "run store", "fix")


@pytest.mark.parametrize("variable, args", [
    ("CORTEXM_BUILD_CACHE", ["build", "-t", "cortex-m7"]),
    ("CORTEXM_EXPORT_CACHE", ["test", "-t", "cortex-m7", "-k", "relu", "--grid", "none"]),
    ("CORTEXM_RUN_CACHE", ["test", "-t", "cortex-m7", "-k", "relu", "--grid", "none"]),
])
def test_every_cache_another_user_can_write_stops_the_command_in_one_line(private, variable, args):
    shared = private / "ci-cache"
    shared.mkdir()
    shared.chmod(0o777)
    env = {**os.environ, variable: str(shared)}
    if variable != "CORTEXM_BUILD_CACHE":  # the build cache is the session's, for the test app
        env.setdefault("CORTEXM_BUILD_CACHE", str(private / "builds"))
    done = subprocess.run([sys.executable, "-m", "cortexm", *args], capture_output=True, text=True, env=env, cwd=private,
                          timeout=600)
    lines = [l for l in done.stderr.splitlines() if l.startswith("error:")]
    assert done.returncode == 2, done.stderr[-800:]
    assert len(lines) == 1 and str(shared) in lines[0] and "chmod go-w" in lines[0] and variable in lines[0], done.stderr
    assert "Traceback" not in done.stderr
    assert os.listdir(shared) == [], "nothing is read from it or written to it"


# --- the simulator, confined -----------------------------------------------------------------

def _confinements() -> list:
    found = []
    for method in ("landlock", "bwrap"):
        why = ("this kernel has no Landlock" if method == "landlock" and confine.landlock_abi() < 1 else
               confine.bwrap_problem() if method == "bwrap" else None)
        found.append(pytest.param(method, marks=pytest.mark.skipif(why is not None, reason=f"{method}: {why}")))
    return found


@pytest.mark.parametrize("method", _confinements())
def test_a_confined_command_writes_its_folder_and_nothing_else(private, monkeypatch, method):
    monkeypatch.setenv(confine.METHOD_ENV, method)
    run = private / "run"
    run.mkdir()
    outside = private / "outside.txt"
    script = f"echo in > {run}/in.txt; echo out > {outside}; echo done"
    done = subprocess.run(confine.command(["sh", "-c", script], str(run)), capture_output=True, text=True, cwd=run,
                          timeout=60)
    assert (run / "in.txt").read_text() == "in\n"
    assert not outside.exists()
    assert "done" in done.stdout


def test_no_confinement_is_one_line_unless_the_user_says_so(monkeypatch, private):
    monkeypatch.setenv(confine.METHOD_ENV, "chroot")
    with pytest.raises(CortexmError, match="cannot confine the simulator.*CORTEXM_UNCONFINED=1"):
        confine.command(["true"], str(private))
    monkeypatch.setenv(confine.UNCONFINED_ENV, "1")
    assert confine.command(["true"], str(private)) == ["true"]


def _hostile_elf(folder: Path, target: Path) -> Path:
    """An ELF that asks semihosting to write `target` (tests/hostile_firmware)."""
    from cortexm.firmware.tools import toolchain_prefix

    gcc = shutil.which(toolchain_prefix() + "gcc")
    if gcc is None:
        pytest.skip(f"{toolchain_prefix()}gcc is needed to build the hostile firmware")
    elf = folder / "write_outside.elf"
    subprocess.run([gcc, "-mcpu=cortex-m7", "-mthumb", "-Os", "-nostdlib", "-nostartfiles", "-ffreestanding",
                    f'-DTARGET="{target}"', "-T", str(HOSTILE / "write_outside.ld"), str(HOSTILE / "write_outside.c"),
                    "-o", str(elf)], check=True, capture_output=True)
    return elf


@pytest.mark.skipif(MISSING is not None, reason=f"firmware tests need: {MISSING}")
def test_a_planted_runner_in_the_build_cache_cannot_write_a_host_file(runners, exported, private):
    """The attack: a runner ELF replaced in a build cache the user owns (a CI cache restored
    from another job), its build record updated to match. It runs; it writes nothing outside."""
    suite = runners["cortex-m7"]
    cache = private / "builds"
    planted = cache / suite.build_dir.name
    shutil.copytree(suite.build_dir, planted)
    target = private / "planted.txt"
    shutil.copyfile(_hostile_elf(private, target), planted / "executor_runner.elf")
    record = json.loads((planted / "build.json").read_text())
    record[manifest.KEY] = manifest.of_files(planted, list(record[manifest.KEY]))
    (planted / "build.json").write_text(json.dumps(record))
    pte = exported("relu", "cortex-m7")
    env = {**os.environ, "CORTEXM_BUILD_CACHE": str(cache)}
    done = subprocess.run([sys.executable, "-m", "cortexm", "run", str(pte), "-t", "cortex-m7"], capture_output=True,
                          text=True, env=env, cwd=private, timeout=600)
    assert not target.exists(), "the planted runner wrote a file outside its run folder"
    assert done.returncode != 0 and "could not open the file outside the run folder" in done.stdout + done.stderr


@pytest.mark.skipif(MISSING is not None, reason=f"firmware tests need: {MISSING}")
def test_a_forged_entry_in_a_run_store_others_can_write_gives_no_verdict(runners, exported, private, monkeypatch):
    """The attack: an entry of the run store rewritten (its result and manifest) by whoever can
    write the store; before, the next run took its exit status and instruction count as a run."""
    from cortexm.sim import get, memo
    from cortexm.sim.run import execute

    store = private / "runs"
    monkeypatch.setenv("CORTEXM_RUN_CACHE", str(store))
    pte, m7 = exported("relu", "cortex-m7"), core("cortex-m7")
    first, _ = execute(pte, m7, get("qemu"), runners["cortex-m7"], remember=True)
    assert first.ok and not first.remembered
    (entry,) = [p for p in store.iterdir() if not p.name.startswith(entries.TMP_PREFIX)]
    result = json.loads((entry / memo.RESULT).read_text())
    result["log"] = result["log"].replace(f"I instructions: {first.instructions}", "I instructions: 7")
    (entry / memo.RESULT).write_text(json.dumps(result))
    (entry / entries.MANIFEST).write_text(json.dumps({manifest.KEY: manifest.of_folder(entry, skip=entries.MANIFEST)}))
    store.chmod(0o777)
    monkeypatch.setattr(trust, "_TRUSTED", set())  # the next run is another process: it finds the store as it is now
    try:
        with pytest.raises(trust.UntrustedFolder, match=f"run store {store} is not yours alone"):
            execute(pte, m7, get("qemu"), runners["cortex-m7"], remember=True)
    finally:
        store.chmod(0o700)


# --- a simulator's limit and its log ------------------------------------------------------------

def _fake_simulator(folder: Path, body: str) -> list[str]:
    script = folder / "simulator.py"
    script.write_text(textwrap.dedent(body))
    return [sys.executable, str(script)]


def test_a_simulator_printing_without_end_is_kept_to_a_bounded_log(private):
    run = private / "run"
    run.mkdir()
    command = _fake_simulator(private, """\
        import sys
        print("I first line", flush=True)
        while True:
            sys.stdout.write("x" * 65536)
        """)
    result = protocol.run_process(command, run, timeout=3)
    assert result.timed_out
    assert result.log.startswith("I first line")
    assert len(result.log) <= protocol.LOG_HEAD + protocol.LOG_TAIL + 200
    assert "bytes of the simulator's output not kept" in result.log


def test_a_child_holding_the_output_does_not_hold_cortexm_past_the_limit(private):
    """A simulator that starts a process out of its group (its own session), which keeps the
    output open: cortexm stops waiting for it right after the simulator ends."""
    run = private / "run"
    run.mkdir()
    command = _fake_simulator(private, """\
        import os, subprocess, sys
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
        print("I instructions: 5", flush=True)
        """)
    started = time.monotonic()
    result = protocol.run_process(command, run, timeout=60)
    assert time.monotonic() - started < 15
    assert result.ok and result.instructions == 5


def test_what_a_simulator_leaves_in_its_group_is_stopped(private):
    run = private / "run"
    run.mkdir()
    marker = run / "child.pid"
    command = _fake_simulator(private, f"""\
        import subprocess, sys
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], stdout=subprocess.DEVNULL)
        open({str(marker)!r}, "w").write(str(child.pid))
        """)
    result = protocol.run_process(command, run, timeout=60)
    assert result.exit_code == 0
    pid = int(marker.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _running(pid):
        time.sleep(0.1)
    assert not _running(pid)


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


# --- keys that name what goes in ------------------------------------------------------------------

def test_the_run_store_knows_another_qemu_behind_the_same_shim(private, monkeypatch):
    """A version manager's shim: the same script on PATH, another QEMU behind it."""
    from cortexm.sim import memo
    from cortexm.sim.qemu import Qemu

    shim = private / "bin" / "qemu-system-arm"
    shim.parent.mkdir()
    (private / "version").write_text("7.2.0")
    shim.write_text(f"#!/bin/sh\necho \"QEMU emulator version $(cat {private / 'version'})\"\n")
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim.parent}{os.pathsep}{os.environ['PATH']}")
    pte, elf = private / "program.pte", private / "runner.elf"
    pte.write_bytes(b"program")
    elf.write_bytes(b"runner")
    before = memo.key(pte, [b"input"], elf, core("cortex-m7"), ["executor_runner"], Qemu())
    (private / "version").write_text("9.1.0")
    memo._identity.cache_clear()  # the next run is another process
    assert memo.key(pte, [b"input"], elf, core("cortex-m7"), ["executor_runner"], Qemu()) != before


def test_builds_run_without_the_flags_the_environment_would_add(private, monkeypatch):
    """CFLAGS and the like change a runner's code without entering its key: builds never see them."""
    from cortexm.firmware.commands import _run

    monkeypatch.setenv("CFLAGS", "-O0 -DPLANTED")
    monkeypatch.setenv("CPATH", str(private))
    monkeypatch.setenv("CMAKE_BUILD_TYPE", "Debug")
    monkeypatch.setenv("CORTEXM_KEPT", "yes")
    _run(private, ["sh", "-c", "env"], "env.log", "listing the environment")
    seen = dict(line.split("=", 1) for line in (private / "env.log").read_text().splitlines() if "=" in line)
    assert "CFLAGS" not in seen and "CPATH" not in seen and "CMAKE_BUILD_TYPE" not in seen
    assert seen.get("CORTEXM_KEPT") == "yes"


# --- every input read once ------------------------------------------------------------------------

@pytest.mark.skipif(MISSING is not None, reason=f"firmware tests need: {MISSING}")
def test_a_run_judges_the_inputs_it_read_whatever_happens_to_the_files(runners, exported, private, monkeypatch):
    """An input file and the program replaced while `run` builds its runner: the outputs are
    those of the program and inputs the references were computed for (before, the simulator
    got the new input and the comparison blamed the kernel for the difference)."""
    import numpy as np

    from cortexm.pte.bundle import Bundle
    from cortexm.sim import run as running

    source = exported("relu", "cortex-m7")
    pte = private / "relu.pte"
    for f in source.parent.iterdir():
        if f.is_file():
            shutil.copyfile(f, private / f.name)
    entry = Bundle.open(pte).sidecar.inputs[0]
    shape, dtype = entry.shape, np.dtype(entry.dtype)
    given = private / "x.npy"
    np.save(given, np.linspace(-1, 1, int(np.prod(shape))).reshape(shape).astype(dtype))
    before_runner = running.runner_for

    def replacing(*args, **kwargs):
        np.save(given, np.full(shape, 0.75).astype(dtype))  # another input, meanwhile
        pte.write_bytes(b"\0" * 64)  # and no program at all
        return before_runner(*args, **kwargs)

    monkeypatch.setattr(running, "runner_for", replacing)
    result = running.run_pte(pte, "cortex-m7", inputs=[given], runner=None)
    assert result.max_diff_lsb == 0, f"judged against another input's reference: {result.max_diff_lsb} LSB"
