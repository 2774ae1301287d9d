"""Attacks: Signals: every child dies with cortexm."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from attack_classes.lab import attack


def _marked(mark: str) -> list[int]:
    """The processes whose environment carries `mark` (cortexm and everything it started)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if mark.encode() in f.read():
                    with open(f"/proc/{pid}/stat") as s:
                        if s.read().rsplit(")", 1)[1].split()[0] != "Z":
                            found.append(int(pid))
        except OSError:
            continue
    return found


def _as_in_a_terminal() -> None:
    """Ctrl-C's default action, which a process started in the background (by a script, by CI)
    inherits as ignored: cortexm then rightly ignores it too."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _signalled(lab, args: list[str], after: float, sig: int, env: dict | None = None, group: bool = False,
               exit_within: float = 15, grace: float = 3) -> str | None:
    """Start `cortexm ARGS`, send `sig` after `after` seconds; what outlived it, or None."""
    if not os.path.isdir("/proc"):
        return "needs /proc"
    mark = f"CORTEXM_ATTACK_MARK={os.getpid()}-{time.monotonic_ns()}"
    key, value = mark.split("=", 1)
    process = subprocess.Popen([sys.executable, "-m", "cortexm", *args], cwd=lab.root, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env={**os.environ, **(env or {}), key: value},
                               start_new_session=True, preexec_fn=_as_in_a_terminal)
    try:
        time.sleep(after)
        if process.poll() is not None:
            return f"cortexm ended by itself before the signal (exit {process.returncode})"
        (os.killpg if group else os.kill)(process.pid, sig)
        try:
            process.wait(timeout=exit_within)
        except subprocess.TimeoutExpired:
            return f"cortexm still ran {exit_within:.0f} s after the signal"
        time.sleep(grace)
        left = _marked(mark)
        if left:
            names = sorted({open(f"/proc/{p}/comm").read().strip() for p in left if os.path.exists(f"/proc/{p}/comm")})
            return f"{len(left)} processes outlived it {grace:.0f} s later ({', '.join(names)[:80]})"
        return None
    finally:
        for pid in _marked(mark):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if process.poll() is None:
            process.kill()
        process.wait()


def _slow_cases(lab) -> Path:
    """Four cases whose build takes 60 s each: the export workers are busy when the signal comes."""
    path = lab.root / "slow_cases.py"
    path.write_text("import time\nimport torch\nfrom cortexm.cases import register\n\n"
                    + "".join(f"@register('slow_{k}', 'a slow build')\ndef _():\n    time.sleep(60)\n"
                              "    return torch.nn.ReLU(), (torch.rand(1, 8),)\n\n" for k in range(4)))
    return path


def _export_signal(lab, sig: int, group: bool = False) -> str | None:
    return _signalled(lab, ["test", "--cases", str(_slow_cases(lab)), "-t", "cortex-m7", "--sim", "none", "-j", "2"],
                      after=25, sig=sig, group=group, env={"CORTEXM_EXPORT_CACHE": str(lab.folder("sig-exports"))})


def _build_signal(lab, sig: int) -> str | None:
    cache = lab.folder(f"sig-builds-{sig}")
    shutil.rmtree(cache, ignore_errors=True)
    return _signalled(lab, ["build", "-t", "cortex-m3"], after=25, sig=sig, grace=1,
                      env={"CORTEXM_BUILD_CACHE": str(cache)})


_SIGNALS = (
    ("SIGTERM of test while exporting", "kill -TERM of cortexm test --cases slow.py -j 2, 25 s in",
     lambda lab: _export_signal(lab, signal.SIGTERM)),
    ("SIGKILL of test while exporting", "kill -KILL of cortexm test --cases slow.py -j 2, 25 s in",
     lambda lab: _export_signal(lab, signal.SIGKILL)),
    ("Ctrl-C of test while exporting", "Ctrl-C (SIGINT to the group) of cortexm test --cases slow.py -j 2, 25 s in",
     lambda lab: _export_signal(lab, signal.SIGINT, group=True)),
    ("SIGTERM of build while compiling", "kill -TERM of cortexm build -t cortex-m3 (empty cache), 25 s in; 1 s later",
     lambda lab: _build_signal(lab, signal.SIGTERM)),
    ("SIGINT of build while compiling", "kill -INT of cortexm build -t cortex-m3 (empty cache), 25 s in; 1 s later",
     lambda lab: _build_signal(lab, signal.SIGINT)),
    ("SIGTERM of upstream-tests", "kill -TERM of cortexm upstream-tests -t cortex-m7 -k conv, 40 s in",
     lambda lab: _signalled(lab, ["upstream-tests", "-t", "cortex-m7", "-k", "conv", "--out",
                                  str(lab.folder("sig-upstream"))], after=40, sig=signal.SIGTERM)),
)
for _name, _command, _run in _SIGNALS:
    attack("signals", _name)(lambda lab, command=_command, run=_run: (command, run(lab)))
