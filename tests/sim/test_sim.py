"""Simulator launchers, the runner protocol and `cortexm sources`, without building firmware.

The FVP cannot be downloaded here: its launcher is checked against a stand-in
executable that records the command line upstream's tooling would pass and plays
the runner's side of the protocol.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap

import pytest

from conftest import run_cli
from cortexm import sim, sources
from cortexm.base.errors import CortexmError
from cortexm.base.targets import core
from cortexm.sim.protocol import SimResult

FAKE_FVP = textwrap.dedent("""\
    #!{python}
    # Records its arguments, then answers like a runner: out-0.bin in the semihosting folder.
    import json, pathlib, sys
    args = sys.argv[1:]
    settings = [args[i + 1] for i, a in enumerate(args) if a == "-C"]
    cwd = pathlib.Path(next(s.split("=", 1)[1] for s in settings if s.startswith("cpu0.semihosting-cwd=")))
    (cwd / "fvp-args.json").write_text(json.dumps(args))
    (cwd / "out-0.bin").write_bytes(b"\\x01\\x02")
    print("I ticks: 1234")
    """)


@pytest.fixture
def fake_fvp(tmp_path):
    path = tmp_path / "bin" / "FVP_Corstone_SSE-300_Ethos-U55"
    path.parent.mkdir()
    path.write_text(FAKE_FVP.format(python=sys.executable))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_fvp_gets_upstreams_corstone_300_command_line(fake_fvp, tmp_path):
    workdir = tmp_path / "case"
    workdir.mkdir()
    fvp = sim.get("fvp", fake_fvp)
    argv = sim.command_line(["i0.bin", "i1.bin"])
    result = fvp.run(tmp_path / "runner.elf", core("cortex-m55"), workdir, argv, timeout=30)
    assert result.ok and result.ticks == 1234 and result.instructions is None
    args = json.loads((workdir / "fvp-args.json").read_text())
    settings = [args[i + 1] for i, a in enumerate(args) if a == "-C"]
    assert settings == [
        "mps3_board.visualisation.disable-visualisation=1",
        "mps3_board.telnetterminal0.start_telnet=0",
        "mps3_board.uart0.out_file='-'",
        "cpu0.semihosting-enable=1",
        "cpu0.semihosting-stack_base=0",
        "cpu0.semihosting-heap_limit=0",
        f"cpu0.semihosting-cwd={workdir}",
        "cpu0.semihosting-cmd_line='executor_runner -m program.pte -o out -i i0.bin -i i1.bin'",
    ]
    assert args[args.index("-a") + 1] == str(tmp_path / "runner.elf")
    assert args[args.index("--timelimit") + 1] == "30"
    assert (workdir / "out-0.bin").read_bytes() == b"\x01\x02"


def test_fvp_found_through_the_environment(fake_fvp, monkeypatch):
    monkeypatch.setenv("CORTEXM_FVP", str(fake_fvp))
    assert sim.get("fvp").require(core("cortex-m7")) == str(fake_fvp)
    assert sim.get("fvp").board(core("cortex-m7")) == "corstone-300"  # M7 code runs on the Corstone-300's M55


def test_absent_fvp_is_one_clear_error(monkeypatch, tmp_path):
    monkeypatch.delenv("CORTEXM_FVP", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(CortexmError, match=r"no Corstone FVP: FVP_Corstone_SSE-300_Ethos-U55 is not on PATH.*--fvp PATH"):
        sim.get("fvp").require(core("cortex-m55"))


def test_fvp_refuses_a_command_line_it_would_truncate(fake_fvp, tmp_path):
    argv = sim.command_line([f"input-with-a-long-name-{k}.bin" for k in range(10)])
    with pytest.raises(CortexmError, match="fewer than 256"):
        sim.get("fvp", fake_fvp).run(tmp_path / "runner.elf", core("cortex-m55"), tmp_path, argv)


def test_cli_run_on_an_absent_fvp_fails_before_building(exported, tmp_path):
    pte = exported("conv2d", "cortex-m55")
    env = {**os.environ, "CORTEXM_BUILD_CACHE": str(tmp_path / "builds")}
    result = subprocess.run([sys.executable, "-m", "cortexm", "run", str(pte), "--target", "cortex-m55", "--sim", "fvp",
                             "--fvp", str(tmp_path / "nowhere" / "FVP")], capture_output=True, text=True, env=env,
                            timeout=120)
    assert result.returncode == 2
    lines = [l for l in result.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: no Corstone FVP:"), result.stderr
    assert not (tmp_path / "builds").exists()  # no runner was built for a simulator that is not there


def test_qemu_command_line(monkeypatch, tmp_path):
    qemu = sim.get("qemu")
    binary = tmp_path / "qemu-system-arm"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    command = qemu.command(tmp_path / "r.elf", core("cortex-m55"), sim.command_line(["i,0.bin"]))
    assert command[command.index("-M") + 1] == "mps3-an547" and command[command.index("-cpu") + 1] == "cortex-m55"
    assert command[command.index("-icount") + 1] == "shift=6"
    config = command[command.index("-semihosting-config") + 1]
    assert config == ("enable=on,target=native,arg=executor_runner,arg=-m,arg=program.pte,arg=-o,arg=out,"
                      "arg=-i,arg=i,,0.bin,arg=--icount-shift,arg=6")
    assert command[-2:] == ["-kernel", str(tmp_path / "r.elf")]


def test_qemu_has_no_board_for_some_cores():
    with pytest.raises(CortexmError, match="QEMU has no board for cortex-m85"):
        sim.get("qemu").board(core("cortex-m85"))


@pytest.mark.parametrize("log, code, failure", [
    ("I ticks: 5\nI instructions: 3\n", 0, None),
    ("I starting\nE [method.cpp:12] Missing operator\nE executing failed\n", 1, "E [method.cpp:12] Missing operator"),
    ("F HardFault: undefined instruction CFSR=0x00010000\n", 5, "F HardFault: undefined instruction CFSR=0x00010000"),
    ("all quiet\n", 3, "exit status 3: all quiet"),
    ("Assertion failed: x\n", 0, "Assertion failed: x"),
])
def test_failure_line_follows_upstreams_rule_and_the_exit_status(log, code, failure):
    result = SimResult(code, log)
    assert result.failure_line == failure
    assert result.ok is (failure is None)


def test_counts_are_parsed():
    result = SimResult(0, "I ticks: 13365035\nI instructions: 8353147\n")
    assert (result.ticks, result.instructions) == (13365035, 8353147)


def test_timeout_is_a_failure():
    line = SimResult(-1, "", seconds=120, timed_out=True).failure_line
    assert line == "timed out after 120 s (the limit; --timeout SECONDS raises it)"


# --- cortexm sources ------------------------------------------------------------------------

def _git_rev(path) -> str | None:
    out = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else None


def test_sources_reports_the_actual_revisions():
    result = run_cli("sources", "--json")
    assert result.returncode in (0, 1), result.stderr
    from cortexm.sources import pins

    for entry in json.loads(result.stdout):
        kind = {"executorch": sources.EXECUTORCH, "cmsis-nn": sources.CMSIS_NN}[entry["name"]]
        found = sources.locate(kind)
        assert entry["path"] == (str(found.path) if found.path else None)
        assert entry["pin_rev"] == pins.load()[entry["name"]]["rev"]
        if found.path is not None and _git_rev(found.path):
            assert entry["rev"] == _git_rev(found.path)  # the real checkout, never just the pin
            assert entry["matches_pin"] == (entry["rev"] == entry["pin_rev"] and not entry["uncommitted_changes"])


def test_sources_fetch_without_network_is_one_line(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "CORTEXM_EXECUTORCH_SRC": "",
           "CORTEXM_CMSIS_NN_SRC": "", "CORTEXM_ARCHIVE_URL": "http://127.0.0.1:9/{owner}/{repo}/{rev}.tar.gz"}
    result = subprocess.run([sys.executable, "-m", "cortexm", "sources", "--fetch"], capture_output=True, text=True,
                            env=env, timeout=120)
    assert result.returncode == 2
    errors = [l for l in result.stderr.splitlines() if l.startswith("error:")]
    assert len(errors) == 1 and "cannot download http://127.0.0.1:9/pytorch/executorch/" in errors[0], result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "cortexm" / "sources" / "executorch").exists()  # nothing half-made left behind
