"""Builds and simulators do not outlive cortexm (cortexm.base.children)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from cortexm.base import children

# A child that starts grandchildren, as `cmake --build` starts ninja and compilers.
FAMILY = ["sh", "-c", "sleep 300 & sleep 300 & wait"]


def _alive(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.append(pid)
    return alive


def _group(pgid: int) -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and _pgid(int(p)) == pgid]


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _wait_gone(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while _alive(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return _alive(pids)


pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc to see processes")


def test_a_killed_cortexm_leaves_no_child_running(tmp_path):
    # A stand-in for `cortexm build`, SIGKILLed while its build runs.
    script = ("import sys; from cortexm.base import children\n"
              f"with children.started({FAMILY!r}) as p:\n"
              "    print(p.pid, flush=True); p.wait()\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    leader = int(parent.stdout.readline())
    time.sleep(0.3)
    family = _group(leader)
    assert len(family) == 3, family  # sh and its two sleeps
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    assert not _wait_gone(family, 3.0), "the build's processes outlived cortexm"


def test_an_exception_or_timeout_kills_the_whole_group():
    with pytest.raises(subprocess.TimeoutExpired):
        with children.started(FAMILY) as process:
            time.sleep(0.3)
            family = _group(process.pid)
            raise subprocess.TimeoutExpired(FAMILY, 0)
    assert len(family) == 3 and not _wait_gone(family, 1.0)

    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        children.run(FAMILY, timeout=0.5)
    assert time.monotonic() - started < 5  # `wait` returned: the sleeps did not hold the pipe


def test_a_child_that_ends_by_itself_is_left_alone():
    done = children.run(["sh", "-c", "echo out; echo err >&2; exit 3"], stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")


def _ninja_jobs(tmp_path) -> tuple[list[str], callable]:
    """A real ninja running two jobs, each of which it puts in a process group of its own (as
    every compile of a runner build): the command, and a function listing the jobs' live pids.
    Each job writes its own pid (a shell's pid stays when it execs its last command), so no
    command line is scanned for them."""
    import shutil

    ninja = shutil.which("ninja")
    if ninja is None:
        pytest.skip("ninja not found (Debian: apt install ninja-build)")
    (tmp_path / "build.ninja").write_text("rule wait\n  command = echo $$$$ > $out.pid && sleep 300\n"
                                          "build a: wait\nbuild b: wait\n")

    def jobs() -> list[int]:
        pids = []
        for name in ("a.pid", "b.pid"):
            try:
                pids.append(int((tmp_path / name).read_text()))
            except (OSError, ValueError):  # not started, or being written
                pass
        return _alive(pids)

    return [ninja, "-C", str(tmp_path), "-j", "2"], jobs


# Seconds two jobs have to start: a CI machine busy compiling on both cores can be slow to fork.
JOBS_START = 60


def _wait_for(predicate, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.1)


def test_a_stopped_build_stops_the_jobs_ninja_put_in_groups_of_their_own(tmp_path):
    command, jobs = _ninja_jobs(tmp_path)
    try:
        with pytest.raises(RuntimeError):
            with children.started(command, stdout=subprocess.DEVNULL) as process:
                _wait_for(lambda: len(jobs()) >= 2, JOBS_START)
                assert len(jobs()) >= 2 and all(os.getpgid(j) != process.pid for j in jobs())
                raise RuntimeError("the build is stopped")
        assert not jobs(), "ninja's jobs outlived the stopped build"
    finally:
        for pid in jobs():
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_cortexm_stops_its_builds_before_it_exits(tmp_path, sig):
    # A stand-in for `cortexm build` (the CLI's signal handling, a real ninja), stopped as a CI
    # timeout or Ctrl-C stops it: the jobs are gone when it has exited, not a guard's second later.
    command, jobs = _ninja_jobs(tmp_path)
    script = ("import signal, subprocess, sys\nfrom cortexm.base import children\n"
              "signal.signal(signal.SIGINT, signal.default_int_handler)\nchildren.stop_on_signals()\n"
              f"with children.started({command!r}, stdout=subprocess.DEVNULL) as p:\n"
              "    print('started', flush=True); p.wait()\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert parent.stdout.readline() == "started\n"
        _wait_for(lambda: len(jobs()) >= 2, JOBS_START)
        assert len(jobs()) >= 2
        parent.send_signal(sig)
        parent.wait(timeout=10)
        assert not jobs(), "the build's jobs outlived cortexm"
    finally:
        parent.kill()
        for pid in jobs():
            os.kill(pid, signal.SIGKILL)
