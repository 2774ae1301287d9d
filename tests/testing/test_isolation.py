"""The user's code in `cortexm test`: each case's factory runs in an export worker under a time
limit, from a state no other case left, and its export is keyed on what it read (files,
environment variables, modules, wherever they live); the case file's bytes are read once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CASES = '''
import importlib, os, sys, threading, time
import torch
from cortexm.cases.registry import register

HERE = os.path.dirname(os.path.abspath(__file__))

def _linear(n):
    return torch.nn.Linear(n, 4).eval(), (torch.rand(1, n),)

@register("sets_dtype", "leaves float64 as torch's default dtype")
def _():
    torch.set_default_dtype(torch.float64)
    torch.manual_seed(1234)
    return torch.nn.Linear(4, 4).float().eval(), (torch.rand(1, 4, dtype=torch.float32),)

@register("needs_float32", "built after sets_dtype, in the same worker")
def _():
    if torch.get_default_dtype() != torch.float32:
        raise RuntimeError("another case's default dtype leaked into this one")
    return _linear(4)

@register("leaves_thread", "starts a thread that never ends")
def _():
    threading.Thread(target=time.sleep, args=(3600,)).start()
    return _linear(4)

@register("reads_file", "its width is in width.txt")
def _():
    with open(os.path.join(HERE, "width.txt")) as f:
        return _linear(int(f.read()))

@register("reads_env", "its width is in $ISOLATION_WIDTH")
def _():
    return _linear(int(os.environ.get("ISOLATION_WIDTH", "4")))

@register("imports_module", "its width is in a module found on a path it adds itself")
def _():
    sys.path.insert(0, os.path.join(HERE, "elsewhere"))
    return _linear(importlib.import_module("isolation_width").WIDTH)

@register("exits", "ends its process")
def _():
    os._exit(0)

@register("hangs", "never returns")
def _():
    while True:
        time.sleep(0.05)
'''


def _run(folder: Path, cache: Path, report: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cortexm", "test", "--sim", "none", "-t", "cortex-m7", "-j", "1",
                           "--timeout", "5", "--cases", str(folder / "cases.py"), "--json", str(report)],
                          capture_output=True, text=True, timeout=900,
                          env=dict(os.environ, CORTEXM_EXPORT_CACHE=str(cache), **env))


def test_user_code_is_isolated_and_keyed_on_what_it_read(tmp_path):
    folder, cache, report = tmp_path / "cases", tmp_path / "cache", tmp_path / "report.json"
    (folder / "elsewhere").mkdir(parents=True)
    cache.mkdir(mode=0o700)
    (folder / "cases.py").write_text(CASES)
    (folder / "width.txt").write_text("4")
    (folder / "elsewhere" / "isolation_width.py").write_text("WIDTH = 4\n")

    first = _run(folder, cache, report, ISOLATION_WIDTH="4")
    # Whatever the user's code did, the run ends, with a report and a verdict per case.
    assert first.returncode == 1, first.stdout + first.stderr
    rows = {r["case"]: r for r in json.loads(report.read_text())["results"]}
    assert rows["exits"]["status"] == "ERROR" and "exit code 0" in rows["exits"]["reason"], rows["exits"]
    assert rows["hangs"]["status"] == "ERROR" and "longer than 5 s" in rows["hangs"]["reason"], rows["hangs"]
    # The next case does not inherit what sets_dtype set.
    for name in ("sets_dtype", "needs_float32", "leaves_thread", "reads_file", "reads_env", "imports_module"):
        assert rows[name]["status"] == "NOT RUN" and rows[name]["verify"] == "ok", rows[name]

    # What the factories read changes: those three are exported again, and only they.
    (folder / "width.txt").write_text("6")
    (folder / "elsewhere" / "isolation_width.py").write_text("WIDTH = 8\n")
    second = _run(folder, cache, report, ISOLATION_WIDTH="5")
    again = second.stderr
    assert "reads_file is exported again for cortex-m7: " in again and "width.txt changed" in again, again
    assert "reads_env is exported again for cortex-m7: the environment variable ISOLATION_WIDTH changed" in again
    assert "imports_module is exported again for cortex-m7: " in again and "isolation_width.py changed" in again
    # The three others came from the cache; the two stopped ones are never cached.
    assert "exporting (3 of 8 cached)" in again, again
    rows = {r["case"]: r for r in json.loads(report.read_text())["results"]}
    assert rows["needs_float32"]["status"] == "NOT RUN"


def test_workers_run_the_case_file_as_it_was_read(tmp_path, monkeypatch):
    """A case file edited after cortexm read it: the workers export what was read and keyed."""
    from cortexm.base.targets import core as core_named
    from cortexm.pte.bundle import Bundle
    from cortexm.testing import casefiles, exports
    from cortexm.testing.results import Options

    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    monkeypatch.setenv("CORTEXM_EXPORT_CACHE", str(cache))
    path = tmp_path / "edited_cases.py"
    source = ("import torch\nfrom cortexm.cases.registry import register\n"
              + "".join(f"@register('edited_{k}', 'its width is in its source')\n"
                        "def _():\n    return torch.nn.Linear({n}, 4).eval(), (torch.rand(1, {n}),)\n" for k in "ab"))
    path.write_text(source.format(n=3))
    casefiles.load_case_file(path)
    path.write_text(source.format(n=7))  # edited while the run goes on

    core = core_named("cortex-m7")
    pairs = [("edited_a", core), ("edited_b", core)]
    results = exports.export_all(pairs, Options(cores=[core], jobs=2), progress=lambda _: None)
    for case, _ in pairs:  # each in a worker of its own, which imported the file after the edit
        exported = results[(case, "cortex-m7")]
        assert isinstance(exported, Path), exported
        [example] = Bundle.open(exported).sidecar.inputs
        assert example.shape == (1, 3), example


@pytest.mark.parametrize("kind", ["env", "package", "file"])
def test_a_record_of_reads_names_what_changed(tmp_path, monkeypatch, kind):
    from cortexm.testing import reads

    data = tmp_path / "weights.bin"
    data.write_bytes(b"1")
    monkeypatch.setenv("READS_PROBE", "a")
    with reads.recording() as record:
        os.environ.get("READS_PROBE")
        data.read_bytes()
    facts = record.facts()
    assert reads.changed(facts) is None
    assert facts["env"]["READS_PROBE"] == "a" and str(data) in facts["files"]
    if kind == "env":
        monkeypatch.setenv("READS_PROBE", "b")
        assert reads.changed(facts) == "the environment variable READS_PROBE"
    elif kind == "package":  # an installed package by version, as the installed metadata says
        from importlib import metadata

        facts["packages"]["torch"] = "0.0"
        assert reads.changed(facts) == f"the installed package torch (0.0 -> {metadata.version('torch')})"
    else:
        data.write_bytes(b"2")
        assert reads.changed(facts) == str(data)
