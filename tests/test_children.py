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
