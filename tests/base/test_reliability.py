"""Reliability: user files are never lost, damaged caches are never trusted, bad input gets one line.

Each test is one of the attacks that once failed (issues 13 and 21), run the way a user meets it.
"""

from __future__ import annotations

import contextlib
import json
import os

import numpy as np
import pytest

from conftest import MISSING, assert_one_line_error, backend_only_tree, run_cli
from cortexm.base.errors import CortexmError

needs_firmware = pytest.mark.skipif(MISSING is not None, reason=f"firmware tests need: {MISSING}")


# --- model factories that return or do the wrong thing ------------------------------------

@pytest.mark.parametrize("body, fragment", [
    ("return torch.nn.ReLU(), (torch.zeros(1, 0, 4),)", "example input 0 has no elements"),
    ("return torch.nn.ReLU(), (torch.zeros(1, 4),), 5", "calibration_samples must be a list"),
    ("return torch.nn.ReLU(), (torch.zeros(1, 4),), [torch.zeros(2, 2)]", "calibration sample 0 input 0 has shape [2, 2]"),
    ("return Dict(), (torch.zeros(1, 4),)", "the model returns dict"),
    ("sys.exit(0)", "make() called sys.exit(0)"),
])
def test_factory_mistakes_are_one_line_errors(tmp_path, body, fragment):
    model = tmp_path / "model.py"
    model.write_text("import sys\nimport torch\n\n"
                     "class Dict(torch.nn.Module):\n    def forward(self, x):\n        return {'y': x}\n\n"
                     f"def make():\n    {body}\n")
    out = tmp_path / "out" / "m.pte"
    assert_one_line_error(run_cli("export", f"{model}:make", "-t", "cortex-m7", "-o", str(out)), fragment)
    assert not out.parent.exists()


# --- output paths: checked before the lowering ----------------------------------------------

def test_export_output_path_problems(tmp_path):
    (tmp_path / "afile").write_text("mine\n")
    assert_one_line_error(run_cli("export", "relu", "-t", "cortex-m7", "-o", str(tmp_path / "afile" / "x.pte")),
                           "is not a folder")
    long_name = "n" * 300 + ".pte"
    assert_one_line_error(run_cli("export", "relu", "-t", "cortex-m7", "-o", str(tmp_path / long_name)),
                           "longer than 255 bytes")
    assert (tmp_path / "afile").read_text() == "mine\n"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders; run as a user to check this")
def test_export_into_read_only_folder(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir(mode=0o555)
    assert_one_line_error(run_cli("export", "relu", "-t", "cortex-m7", "-o", str(folder / "x.pte")), "is not writable")


# --- the pin file ---------------------------------------------------------------------------

@pytest.mark.parametrize("edit, fragment", [
    (lambda text: "", "format: missing"),
    (lambda text: text.replace("format = 1", "format = 2"), "format: must be the integer 1"),
    (lambda text: text.replace("[cmsis-nn]", "[cmsis-nn-old]"), "cmsis-nn: missing"),
    (lambda text: text.replace('rev = "dbf45dbfcc515421dd6099037d3e2637b90748c8"', "rev = 5"),
     "cmsis-nn.rev: must be a 40-digit git revision, is 5"),
    (lambda text: text.replace('sha256 = "274c28c2', 'sha256 = "74c28c2', 1),
     "wheels.executorch.files.cp311-x86_64-linux.sha256: must be a sha256 of 64 hex digits"),
])
def test_pin_file_schema_names_the_key(tmp_path, edit, fragment):
    from cortexm.sources import pins

    broken = tmp_path / "pins.toml"
    broken.write_text(edit(pins.pins_path().read_text()))
    env = {**os.environ, pins.PINS_ENV: str(broken)}
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "cortexm", "pins"], capture_output=True, text=True, env=env, timeout=300)
    assert_one_line_error(result, fragment)


def test_a_wheel_that_is_not_the_pinned_one_fails_pins(tmp_path):
    """A wheel file here whose sha256 is not its pin (a replaced file, or a pin edited by hand)."""
    import subprocess
    import sys

    from cortexm.sources import pins

    entry = pins.load()["wheels"]["torchao"]["files"]["any"]
    wheels = tmp_path / "cortexm" / "wheels"
    wheels.mkdir(parents=True)
    (wheels / entry["file"]).write_bytes(b"not the pinned wheel")
    env = {k: v for k, v in os.environ.items() if k != "PIP_FIND_LINKS"}
    result = subprocess.run([sys.executable, "-m", "cortexm", "pins"], capture_output=True, text=True, timeout=300,
                            env={**env, "XDG_CACHE_HOME": str(tmp_path)})
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"FAIL  wheel {entry['file']}: {wheels / entry['file']} has sha256" in result.stdout, result.stdout


def test_revisions_that_differ_late_are_shown_whole():
    from cortexm.sources.pins import distinct

    a, b = "dbf45dbfcc51" + "5" * 28, "dbf45dbfcc51" + "6" * 28
    assert distinct(a, b) == (a, b)
    assert distinct("1" * 40, "2" * 40) == ("1" * 12, "2" * 12)


# --- special files as input -----------------------------------------------------------------

def test_run_refuses_special_files_before_building(tmp_path):
    fifo = tmp_path / "fifo.pte"
    os.mkfifo(fifo)
    assert_one_line_error(run_cli("run", str(fifo), "-t", "cortex-m7"), "is a FIFO")
    assert_one_line_error(run_cli("run", str(tmp_path), "-t", "cortex-m7"), "is a directory")
    assert_one_line_error(run_cli("run", "/dev/zero", "-t", "cortex-m7"), "is a device")


# --- damaged caches -------------------------------------------------------------------------

def test_damaged_export_cache_entry_is_exported_again(exported):
    from cortexm.testing import cache

    pte = exported("relu", "cortex-m7")
    good = pte.read_bytes()
    flipped = bytearray(good)
    flipped[len(flipped) // 2] ^= 0x01  # a constant, say: the program still parses
    pte.write_bytes(bytes(flipped))
    notes = []
    assert cache.lookup("relu", "cortex-m7", "legacy", note=notes.append) is None
    assert notes == ["note: the cached export of relu for cortex-m7 is damaged (relu.pte changed since it was written); "
                     "exporting it again"]
    again = exported("relu", "cortex-m7")
    assert again.read_bytes() == good  # the export is deterministic: the same program as before the damage


def test_abandoned_temporary_export_folders_are_removed(exported):
    from cortexm.base import entries

    folder = exported("relu", "cortex-m7").parent.parent
    dead = folder / f"{entries.TMP_PREFIX}999999999-abcd"  # no such process
    dead.mkdir()
    (dead / entries.UNFINISHED).write_text(f"cortexm 999999999 {dead.name}\n")  # as entries.new marks it
    (dead / "half.pte").write_bytes(b"partial")
    mine = folder / f"{entries.TMP_PREFIX}999999998-my-notes"  # the user's own, named like a dead run's
    mine.mkdir()
    (mine / "notes.txt").write_text("mine\n")
    entries.remove_abandoned(folder)
    assert not dead.exists()
    assert (mine / "notes.txt").read_text() == "mine\n"


@needs_firmware
def test_damaged_runner_in_the_build_cache_is_built_again(runners):
    from cortexm.firmware import build_runner

    # The session's M7 runner, its cached ELF truncated (as a full disk or a killed copy leaves it).
    runner = runners["cortex-m7"]
    good = runner.elf.read_bytes()
    runner.elf.write_bytes(good[:1000])
    notes = []
    rebuilt = build_runner("cortex-m7", progress=notes.append)
    assert any(f"is damaged ({runner.elf.name} has 1000 B, {len(good)} B were written); building it again" in n
               for n in notes), notes
    assert rebuilt.elf.read_bytes() == good

    (rebuilt.build_dir / "build.json").write_text("[]")
    notes.clear()
    assert build_runner("cortex-m7", progress=notes.append).elf.read_bytes() == good
    assert any("its build.json is unreadable" in n for n in notes), notes


@needs_firmware
def test_another_checkout_of_the_project_builds_in_a_folder_of_its_own(runners, tmp_path, monkeypatch):
    import shutil

    from cortexm.firmware import build_runner, paths

    # A second checkout (a clone, a worktree) whose kernels/ differ from the first's: CMake ties a
    # build folder to its source folder, so the first checkout's folder must not be handed to it.
    copy = tmp_path / "checkout"
    shutil.copytree(paths.kernels(), copy / "kernels")
    shutil.copytree(paths.boards(), copy / "fvp" / "boards")
    with (copy / "kernels" / "CMakeLists.txt").open("a") as f:
        f.write("# another checkout\n")
    monkeypatch.setenv("CORTEXM_FIRMWARE_SRC", str(copy))
    # Three operators, not the suite's: where it builds is the point, not what (a third of the compiling).
    runner = build_runner("cortex-m7", ops=("cortex_m::dequantize_per_tensor.out", "cortex_m::quantize_per_tensor.out",
                                            "cortex_m::quantized_add.out"))
    assert runner.work() is not None and runner.work() != runners["cortex-m7"].work()
    assert f"CMAKE_HOME_DIRECTORY:INTERNAL={copy / 'kernels'}" in (runner.work() / "CMakeCache.txt").read_text()


# --- run: inputs as a user has them, files it may touch -------------------------------------

@needs_firmware
def test_run_reads_npy_and_c_headers_like_raw_inputs(runners, exported, tmp_path):
    from cortexm.pte import load
    from cortexm.pte.sidecar import read_sidecar
    from cortexm.sim.run import from_raw

    pte = exported("conv2d", "cortex-m7")
    sidecar = read_sidecar(pte)
    plan = load(pte).plan()
    raw = (pte.parent / sidecar.inputs[0].file).read_bytes()
    values = from_raw(raw, plan.values[plan.inputs[0]], "input 0")  # logical shape, NCHW
    np.save(tmp_path / "x.npy", values)
    ctype = {"float32": "float", "int8": "int8_t"}[str(values.dtype)]
    literals = ", ".join(repr(float(v)) + "f" if ctype == "float" else str(int(v)) for v in values.reshape(-1))
    (tmp_path / "x.h").write_text(f"// as an Arduino example ships it\nstatic const {ctype} test_input[{values.size}] = "
                                  f"{{{literals}}};\n")

    outputs = {}
    for given in (None, tmp_path / "x.npy", tmp_path / "x.h"):
        args = ["run", str(pte), "-t", "cortex-m7", "--json"] + (["-i", str(given)] if given else [])
        result = run_cli(*args)
        assert result.returncode == 0, result.stderr
        outputs[str(given)] = json.loads(result.stdout)["outputs"]
    assert len({json.dumps(o) for o in outputs.values()}) == 1, outputs

    (tmp_path / "bad.h").write_text("float a[2] = {1.0f, 2.0f};\n")
    assert_one_line_error(run_cli("run", str(pte), "-t", "cortex-m7", "-i", str(tmp_path / "bad.h")), "2 values")


@needs_firmware
def test_run_keep_and_save_never_replace_user_files(runners, exported, tmp_path):
    pte = str(exported("relu", "cortex-m7"))
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "program.pte").write_text("my notes\n")
    assert_one_line_error(run_cli("run", pte, "-t", "cortex-m7", "--keep", str(keep)),
                           "program.pte, which cortexm did not write")
    assert (keep / "program.pte").read_text() == "my notes\n"

    (keep / "program.pte").unlink()
    saved = tmp_path / "y.npy"
    first = run_cli("run", pte, "-t", "cortex-m7", "--keep", str(keep), "--save", str(saved))
    assert first.returncode == 0, first.stderr
    assert sorted(p.name for p in keep.iterdir()) == [".cortexm-run.json", "i0.bin", "out-0.bin", "program.pte"]
    assert np.load(saved).shape == (1, 4, 6, 6)
    # Its own files it replaces; a file it wrote that the user changed, or a --save target, it does not.
    again = run_cli("run", pte, "-t", "cortex-m7", "--keep", str(keep))
    assert again.returncode == 0, again.stderr
    assert_one_line_error(run_cli("run", pte, "-t", "cortex-m7", "--save", str(saved)), "exists")
    (keep / "out-0.bin").write_bytes(b"edited")
    assert_one_line_error(run_cli("run", pte, "-t", "cortex-m7", "--keep", str(keep)), "out-0.bin")
    assert (keep / "out-0.bin").read_bytes() == b"edited"
    # --force writes over what a run writes, and never adopts the user's files: the next run
    # without it still refuses them.
    (keep / "mine.txt").write_text("the user's\n")
    forced = run_cli("run", pte, "-t", "cortex-m7", "--keep", str(keep), "--force")
    assert forced.returncode == 0, forced.stderr
    listed = json.loads((keep / ".cortexm-run.json").read_text())["written"]
    assert "mine.txt" not in listed and "out-0.bin" in listed
    assert_one_line_error(run_cli("run", pte, "-t", "cortex-m7", "--keep", str(keep)), "mine.txt, which cortexm did not write")
    assert (keep / "mine.txt").read_text() == "the user's\n"


def test_run_audits_before_building(exported, tmp_path):
    """A program planned for the M7's DSP kernels, run on the M55: refused before any build
    (the tree given has the backend's Python the audit reads, and nothing a runner is built from)."""
    backend_only = backend_only_tree(tmp_path / "backend-only")
    pte = str(exported("conv2d", "cortex-m7"))
    verify = run_cli("verify", pte, "--target", "cortex-m55")
    assert verify.returncode == 1, verify.stdout  # scratch sized for DSP; the MVE kernel needs more
    first_problem = next(l for l in verify.stdout.splitlines() if l.startswith("FAIL"))
    result = run_cli("run", pte, "-t", "cortex-m55", "--executorch-src", str(backend_only))
    assert_one_line_error(result, first_problem, "--no-audit")


# --- issue 21: nothing outside what cortexm wrote is touched --------------------------------

def _entry(path) -> dict:
    import hashlib

    return {"size": path.stat().st_size, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def test_a_sidecar_never_names_a_file_outside_its_bundle(tmp_path):
    """A sidecar beside the output that lists ../notes.txt or an absolute path (in its manifest,
    or, without one, as an older cortexm's file names): the export never removes those."""
    notes, absolute = tmp_path / "notes.txt", tmp_path / "abs-notes.txt"
    for path in (notes, absolute):
        path.write_text("the user's\n")
    forged = {
        "dotdot": {"written": {"../notes.txt": _entry(notes)}},
        "absolute": {"written": {str(absolute): _entry(absolute)}},
        "old-format": {"cortexm": {"format": 1}, "name": "X", "dialect": "../notes.txt", "inputs": [], "outputs": []},
    }
    for name, sidecar in forged.items():
        out = tmp_path / name
        out.mkdir()
        (out / "X.json").write_text(json.dumps(sidecar))
        result = run_cli("export", "relu", "-t", "cortex-m7", "-o", str(out / "X.pte"))
        assert notes.read_text() == "the user's\n" and absolute.read_text() == "the user's\n", name
        if result.returncode != 0:  # the forged sidecar is not cortexm's: refused, and left as it was
            assert_one_line_error(result, "X.json exists and was not written by cortexm")
            assert json.loads((out / "X.json").read_text()) == sidecar


def test_reports_replace_only_reports(tmp_path):
    """--json/--junit over a user's file, or through a link to one, is refused before the run;
    a report cortexm wrote is replaced; a folder that is not there yet is made."""
    mine = tmp_path / "mine.txt"
    mine.write_text("the user's\n")
    link = tmp_path / "link.json"
    link.symlink_to(mine)
    common = ["test", "-t", "cortex-m7", "-k", "relu", "--grid", "none", "--sim", "none"]
    assert_one_line_error(run_cli(*common, "--junit", str(mine)), "not a JUnit report cortexm wrote")
    assert_one_line_error(run_cli(*common, "--json", str(link)), "not a regular file")
    assert mine.read_text() == "the user's\n" and link.is_symlink()
    report = tmp_path / "no" / "such" / "folder" / "r.json"
    for _ in range(2):  # the second run replaces the first's report
        done = run_cli(*common, "--json", str(report), "--junit", str(report.with_suffix(".xml")))
        assert done.returncode in (0, 1), done.stderr  # 1: a golden may differ with the tree's lowering
        assert json.loads(report.read_text())["results"]
    assert_one_line_error(run_cli("report", "merge", str(report), "--json", str(mine)), "not a test report cortexm wrote")
    assert mine.read_text() == "the user's\n"
    # cortexm's own file of another kind, which names cortexm too: an export's sidecar.
    sidecar = tmp_path / "model.json"
    sidecar.write_text(json.dumps({"cortexm": {"format": 3, "version": "0.1.0"}, "name": "model", "inputs": []}))
    before = sidecar.read_text()
    assert_one_line_error(run_cli(*common, "--json", str(sidecar)), "not a test report cortexm wrote")
    assert sidecar.read_text() == before


def test_case_names_that_are_paths_are_refused(tmp_path):
    cases = tmp_path / "deep" / "cases.py"
    cases.parent.mkdir()
    cases.write_text("import torch\nfrom cortexm.cases import register\n\n"
                     "@register('../../escaped', 'a name that is a path')\n"
                     "def _():\n    return torch.nn.ReLU(), (torch.rand(1, 8),)\n")
    result = run_cli("test", "--cases", str(cases), "-t", "cortex-m7", "--sim", "none")
    assert_one_line_error(result, "case name '../../escaped' cannot name a file")
    assert not list(tmp_path.rglob("escaped*"))


# --- issue 21: no stale program is tested -----------------------------------------------------

def _case_file_run(folder, body: str) -> dict:
    """`cortexm test --cases cases.py --sim none` in `folder`: the case's report row."""
    (folder / "cases.py").write_text("import torch\nfrom cortexm.cases import register\n\n"
                                     "@register('helped', 'a case whose model comes from a helper')\n"
                                     f"def _():\n{body}\n")
    result = run_cli("test", "--cases", "cases.py", "-t", "cortex-m7", "--sim", "none", "--json", "r.json", cwd=folder)
    assert result.returncode in (0, 1), result.stderr
    return json.loads((folder / "r.json").read_text())["results"][0]


def test_a_case_files_helper_is_part_of_its_export_key(tmp_path):
    body = "    import helper\n    return helper.model(), (torch.rand(1, 8) - 0.5,)"
    (tmp_path / "helper.py").write_text("import torch\ndef model():\n    return torch.nn.ReLU()\n")
    assert _case_file_run(tmp_path, body)["status"] == "NOT RUN"  # exported, checked, not simulated
    (tmp_path / "helper.py").write_text("def model():\n    raise ValueError('helper v2 is broken')\n")
    row = _case_file_run(tmp_path, body)
    assert row["status"] == "FAIL" and "helper v2 is broken" in row["reason"], row


def test_a_failure_that_may_pass_by_itself_is_not_cached(tmp_path):
    body = "    open('weights.txt').read()\n    return torch.nn.ReLU(), (torch.rand(1, 8) - 0.5,)"
    row = _case_file_run(tmp_path, body)
    assert row["status"] == "FAIL" and "FileNotFoundError" in row["reason"], row
    (tmp_path / "weights.txt").write_text("1\n")
    assert _case_file_run(tmp_path, body)["status"] == "NOT RUN"


# --- issue 21: every child dies with cortexm --------------------------------------------------

def _marked(mark: str) -> list[int]:
    """Processes (not zombies) whose environment holds `mark`: a command and all it started."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if mark.encode() not in f.read():
                    continue
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(pid))
        except OSError:
            continue
    return found


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc to see processes")
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGKILL"])
def test_export_workers_die_with_cortexm(tmp_path, sig):
    """`cortexm test` stopped (as CI stops a job) or killed while its spawn workers export: no
    worker, and no resource tracker, outlives it."""
    import signal
    import subprocess
    import sys
    import time

    cases = tmp_path / "slow.py"
    cases.write_text("import time\nimport torch\nfrom cortexm.cases import register\n\n" + "".join(
        f"@register('slow_{k}', 'a slow build')\ndef _():\n    time.sleep(120)\n"
        "    return torch.nn.ReLU(), (torch.rand(1, 8),)\n\n"
        for k in range(4)))
    mark = f"CORTEXM_TEST_MARK={tmp_path.name}-{sig}"
    env = {**os.environ, mark.split("=")[0]: mark.split("=")[1], "CORTEXM_EXPORT_CACHE": str(tmp_path / "exports")}
    process = subprocess.Popen([sys.executable, "-m", "cortexm", "test", "--cases", str(cases), "-t", "cortex-m7",
                                "--sim", "none", "-j", "2"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        while len(_marked(mark)) < 4 and time.monotonic() < deadline:  # cortexm, two workers, the tracker
            time.sleep(0.5)
        assert len(_marked(mark)) >= 4, "the export workers never started"
        time.sleep(2)  # into the exports
        process.send_signal(getattr(signal, sig))
        process.wait(timeout=30)
        deadline = time.monotonic() + 5
        while _marked(mark) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _marked(mark), f"{len(_marked(mark))} processes outlived cortexm"
    finally:
        for pid in _marked(mark):
            os.kill(pid, signal.SIGKILL)
        process.kill()
        process.wait()


# --- issue 21: verdicts that cannot be silently green ----------------------------------------

def test_a_case_file_that_exits_or_loops_at_import_is_an_error(tmp_path):
    import subprocess
    import sys

    exits, loops = tmp_path / "exits.py", tmp_path / "loops.py"
    exits.write_text("import sys\nsys.exit(0)\n")
    loops.write_text("while True:\n    pass\n")
    assert_one_line_error(run_cli("test", "--cases", str(exits), "-t", "cortex-m7", "--sim", "none"), "sys.exit(0)")
    looped = subprocess.run([sys.executable, "-m", "cortexm", "test", "--cases", str(loops), "-t", "cortex-m7",
                             "--sim", "none", "--timeout", "5"], capture_output=True, text=True, timeout=120)
    assert_one_line_error(looped, "loops.py: importing it took longer than 5 s")
    for value in ("nan", "inf", "1e300"):
        assert_one_line_error(run_cli("test", "--cases", str(exits), "--timeout", value), "--timeout")


def test_merge_refuses_a_missing_shard_and_shards_of_other_runs(tmp_path):
    def shard(pattern: str, k: int) -> str:
        out = tmp_path / f"{pattern}-{k}.json"
        done = run_cli("test", "-t", "cortex-m7", "-k", pattern, "--grid", "none", "--sim", "none", "--shard", f"{k}/2",
                       "--json", str(out))
        assert done.returncode in (0, 1), done.stderr
        return str(out)

    first, second = shard("relu", 1), shard("relu", 2)
    merged = run_cli("report", "merge", first, second)
    assert merged.returncode in (0, 1) and "merged 2 reports" in merged.stdout, merged.stderr
    assert_one_line_error(run_cli("report", "merge", first), "shard 2/2 is missing")
    assert_one_line_error(run_cli("report", "merge", first, shard("conv", 2)), "its run")


# --- issue 21: parsers take linear time ---------------------------------------------------------

def test_headers_and_labels_parse_in_linear_time(tmp_path):
    """Lines a backtracking pattern chokes on (100 KB, where minutes were spent): answered
    in a fraction of the time limit, with the same one line as any file without an array."""
    import subprocess
    import sys

    (tmp_path / "words.h").write_text("a " * 50_000 + "\n")
    (tmp_path / "spaces.ino").write_text('const char* kLabels[] = {"a"' + " " * 100_000 + "\n")
    script = ("import sys\nfrom pathlib import Path\nfrom cortexm.base.errors import CortexmError\n"
              "from cortexm.sim.inputs import c_array, read_labels\n"
              "for read, name in ((c_array, 'words.h'), (read_labels, 'spaces.ino')):\n"
              "    try:\n        read(Path(sys.argv[1]) / name)\n"
              "    except CortexmError as e:\n        print(e)\n")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.stdout.splitlines() == [f"{tmp_path / 'words.h'}: no numeric array initialiser (TYPE NAME[] = {{...}};) in it",
                                        f"{tmp_path / 'spaces.ino'}: no array of strings (NAME[] = {{\"a\", \"b\"}}) in it"], done


def test_c_arrays_as_upstream_and_users_write_them(tmp_path):
    from cortexm.sim.inputs import c_array, read_labels

    header = tmp_path / "x.h"
    header.write_text('#include <stdint.h>\n// "not a string" {\nconst char* kLabels[] = {"yes", "no\\"", /* c */ "up",};\n'
                      "static const int8_t mfcc[2][2] = {{1, -2}, /* 3 */ {0x7f, +4}};\n"
                      "alignas(16) const float scale[] = {1.5f, -2e-3};\n")
    assert c_array(header, "mfcc").tolist() == [1, -2, 127, 4]
    assert c_array(header, "scale").tolist() == pytest.approx([1.5, -0.002])
    assert read_labels(header.rename(tmp_path / "x.ino")) == ["yes", 'no\\"', "up"]


def test_an_array_under_a_condition_is_refused_not_read_from_either_branch(tmp_path):
    """Which branch of #if/#else the compiler takes is the preprocessor's to say; an include
    guard is no such condition."""
    from cortexm.sim.inputs import c_array

    header = tmp_path / "x.h"
    header.write_text("#ifndef X_H\n#define X_H\n#if USE_SMALL\nconst int8_t input[2] = {1, 2};\n#else\n"
                      "const int8_t input[2] = {3, 4};\n#endif\nconst int8_t kept[2] = {5, 6};\n#endif\n")
    with pytest.raises(CortexmError, match=r"x.h:input: it sits inside #if/#ifdef/#else"):
        c_array(header, "input")
    assert c_array(header, "kept").tolist() == [5, 6]
    inside = tmp_path / "y.h"
    inside.write_text("const int8_t input[] = {\n#ifdef BIG\n 1, 2,\n#endif\n 3, 4};\n")
    with pytest.raises(CortexmError, match="sits inside #if"):
        c_array(inside)


def test_update_goldens_writes_nothing_through_a_link_out_of_the_goldens_folder(tmp_path):
    victim = tmp_path / "notes.txt"
    victim.write_text("the user's\n")
    goldens = tmp_path / "goldens"
    (goldens / "cortex-m7").mkdir(parents=True)
    (goldens / "cortex-m7" / "relu.txt").symlink_to(victim)
    args = ["dialect", "relu", "-t", "cortex-m7", "--goldens", str(goldens), "--update-goldens"]
    assert_one_line_error(run_cli(*args), "is not a regular file (a link is never followed)")
    (goldens / "cortex-m7" / "relu.txt").unlink()
    (goldens / "cortex-m7").rmdir()
    (goldens / "cortex-m7").symlink_to(tmp_path)  # the core's folder a link out: relu.txt would land beside notes
    assert_one_line_error(run_cli(*args), "leads out of the goldens folder")
    assert victim.read_text() == "the user's\n" and not (tmp_path / "relu.txt").exists()


# --- issue 21: a full or read-only disk is one line naming the place ------------------------------

@pytest.fixture
def small_disk(tmp_path):
    """A mounted tmpfs of 1 MiB: small(free=N) fills it to N bytes free, read_only() remounts it."""
    import shutil
    import subprocess

    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a full disk is a small tmpfs, which only root can mount; run the tests as root (or in CI) to check this")
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1M", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("mounting a tmpfs failed here (a container without the capability)")

    class Disk:
        path = disk

        def fill(self, free: int = 0) -> None:
            with open(disk / ".filler", "wb") as f:
                with contextlib.suppress(OSError):
                    f.write(b"\0" * ((1 << 20) - free))
                    f.flush()

        def read_only(self) -> None:
            subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)

    yield Disk()
    subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def test_a_full_export_cache_is_one_line_before_the_exports(small_disk, tmp_path):
    import subprocess
    import sys

    small_disk.fill()
    cache = small_disk.path / "exports"
    env = {**os.environ, "CORTEXM_EXPORT_CACHE": str(cache)}
    result = subprocess.run([sys.executable, "-m", "cortexm", "test", "-t", "cortex-m7", "-k", "relu", "--grid", "none",
                             "--sim", "none"], capture_output=True, text=True, env=env, timeout=600)
    assert_one_line_error(result, str(cache))
    # The report path too, before the run; then an export onto a disk that fills up midway
    # leaves nothing that a second try, with room, refuses.
    assert_one_line_error(run_cli("test", "-t", "cortex-m7", "-k", "relu", "--sim", "none", "--json",
                                   str(small_disk.path / "r.json")), str(small_disk.path))
    (small_disk.path / ".filler").unlink()
    small_disk.fill(free=8 << 10)
    out = small_disk.path / "out" / "X.pte"
    assert_one_line_error(run_cli("export", "relu", "-t", "cortex-m7", "-o", str(out)), str(out.parent))
    (small_disk.path / ".filler").unlink()
    again = run_cli("export", "relu", "-t", "cortex-m7", "-o", str(out))
    assert again.returncode == 0, again.stderr


def test_a_read_only_export_cache_is_one_line(small_disk):
    import subprocess
    import sys

    small_disk.read_only()
    cache = small_disk.path / "exports"
    result = subprocess.run([sys.executable, "-m", "cortexm", "test", "-t", "cortex-m7", "-k", "relu", "--grid", "none",
                             "--sim", "none"], capture_output=True, text=True, timeout=600,
                            env={**os.environ, "CORTEXM_EXPORT_CACHE": str(cache)})
    assert_one_line_error(result, str(cache))


# --- issue 21: sweeps hold what they run, and keep it on Ctrl-C (issue 42: as data) ---------------

@pytest.mark.slow
@needs_firmware
def test_an_interrupted_sweep_of_any_length_keeps_its_finished_samples(runners, tmp_path):
    import signal
    import subprocess
    import sys
    import time

    out, report, log = tmp_path / "out", tmp_path / "r.json", tmp_path / "stderr"
    with open(log, "w") as err_file:
        process = subprocess.Popen([sys.executable, "-m", "cortexm", "sweep", "add", "-t", "cortex-m7", "--count",
                                    "100000000", "--out", str(out), "--json", str(report)], stdout=subprocess.PIPE,
                                   stderr=err_file, text=True, start_new_session=True,
                                   preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as in a terminal
    largest = 0
    deadline = time.monotonic() + 600
    try:
        while process.poll() is None and time.monotonic() < deadline and " samples run" not in log.read_text():  # a batch ran
            # 10^8 samples drawn at once take tens of GB: stopped here, before the machine is out of memory.
            with contextlib.suppress(OSError, StopIteration):
                largest = max(largest, int(next(line for line in open(f"/proc/{process.pid}/status")
                                                if line.startswith("VmRSS:")).split()[1]) << 10)
            if largest > 2 << 30:
                break
            time.sleep(0.5)
        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C, as a terminal sends it
        process.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    err = log.read_text()
    assert largest <= 2 << 30, f"{largest >> 20} MiB resident before the first batch ran"
    assert process.returncode == 130, err
    # The samples ran as data: no case file but a failure's reproducer.
    assert all(p.name.startswith("sweep-repro-add-0-") for p in out.glob("*.py")), sorted(out.iterdir())
    data = json.loads(report.read_text())
    assert data["meta"]["interrupted"] and data["results"], data["meta"]
    assert {r["case"] for r in data["results"]} <= {f"sweep_add_0_{i}" for i in range(1000)}
    assert_one_line_error(run_cli("report", "merge", str(report)), "interrupted")


def test_the_writer_never_writes_through_a_link(tmp_path):
    from cortexm.base import writes

    victim = tmp_path / "notes.txt"
    victim.write_text("the user's\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "log.txt").symlink_to(victim)
    with pytest.raises(CortexmError, match="is a link"):
        with writes.stream(out / "log.txt") as f:
            f.write("overwritten")
    writes.atomic(out / "log.txt", "cortexm's")  # the link is replaced, not followed
    assert victim.read_text() == "the user's\n" and (out / "log.txt").read_text() == "cortexm's"
    (out / "sub").symlink_to(tmp_path)
    with pytest.raises(CortexmError, match="leads out of"):
        writes.atomic(out / "sub" / "x.txt", "data", inside=out)
    assert not (tmp_path / "x.txt").exists()
