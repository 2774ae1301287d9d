"""CMSIS-NN's buffer-size module, which the lowering sizes scratch with: built from the
CMSIS-NN tree in use, or taken from $CORTEXM_CMSIS_NN_HELPER for the tree it was built from
(the Nix package's, cmsis_nn/helper.nix); a tree whose module cannot be built stops the
lowering in one line instead of planning with the wheel's bundled CMSIS-NN."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cortexm import sources


def _cmsis_nn() -> Path:
    tree = sources.locate(sources.CMSIS_NN).path
    if tree is None:
        pytest.skip(sources.missing_message(sources.CMSIS_NN))
    for tool in ("cmake", "cc"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not found: CMSIS-NN's module is built with cmake and a C compiler "
                        "(Debian/Ubuntu: apt install cmake build-essential)")
    return tree


def test_a_prebuilt_module_is_taken_for_its_tree_only(tmp_path, monkeypatch):
    from cortexm.firmware.helper import PREBUILT_ENV, RECORD, build_helper, prebuilt

    tree = _cmsis_nn()
    built = build_helper(tree)
    folder = tmp_path / "prebuilt"
    folder.mkdir()
    shutil.copy2(built, folder / built.name)
    (folder / RECORD).write_text(json.dumps({"tree": str(tree), "identity": "a test copy"}))
    monkeypatch.setenv(PREBUILT_ENV, str(folder))
    assert build_helper(tree) == folder / built.name
    assert prebuilt(tmp_path) is None  # another tree: built as usual, not this one


def test_a_cmsis_nn_whose_module_does_not_build_stops_the_lowering(tmp_path):
    tree = _cmsis_nn()
    broken = tmp_path / "cmsis-nn"
    shutil.copytree(tree, broken, ignore=shutil.ignore_patterns(".git"))
    (broken / "Source" / "Bindings" / "arm_py_module.cpp").write_text("#error a broken CMSIS-NN binding\n")
    env = dict(os.environ, CORTEXM_CMSIS_NN_SRC=str(broken), CORTEXM_BUILD_CACHE=str(tmp_path / "builds"))
    env.pop("CORTEXM_CMSIS_NN_HELPER", None)
    done = subprocess.run([sys.executable, "-m", "cortexm", "export", "add", "-t", "cortex-m7", "-o", str(tmp_path / "add.pte")],
                          capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode != 0, done.stderr
    lines = done.stderr.strip().splitlines()  # progress lines, then the one error line
    errors = [line for line in lines if line.startswith("error:")]
    assert errors == lines[-1:] and errors[0].startswith("error: cannot size scratch with the CMSIS-NN at"), done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "add.pte").exists()


SELECT = Path(__file__).resolve().parents[2] / "kernels" / "cmsis_nn_helper" / "select_sources.py"


def test_the_module_is_built_from_the_sources_its_bindings_reach(tmp_path):
    # A made-up tree: the binding calls arm_a; a.c's arm_a calls arm_b (b.c) and its own static
    # arm_s; c.c (a kernel nobody calls) and the static arm_s elsewhere are left out.
    files = {
        "Source/Bindings/x.cpp": "int f() { return arm_a(1); }  // arm_c( in a comment\n",
        "Source/A/a.c": "#include \"x.h\"\nstatic int arm_s(int x) { return x; }\n"
                        "int arm_a(int x)\n{\n    if (arm_b(x) > 0) { return arm_s(x); }\n    return 0;\n}\n",
        "Source/A/b.c": "int32_t arm_b(const int *p,\n              int n) { return n; }\n",
        "Source/B/c.c": "int arm_c(void) { return arm_a(2); }\n",
        "Source/B/d.c": "__STATIC_INLINE int arm_s(int x) { return x; }\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    done = subprocess.run([sys.executable, str(SELECT), str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(";") == [str(tmp_path / "Source/A/a.c"), str(tmp_path / "Source/A/b.c")]
    no_tree = subprocess.run([sys.executable, str(SELECT), str(tmp_path / "Source")], capture_output=True, text=True, timeout=60)
    assert no_tree.returncode == 1 and "no Source/Bindings" in no_tree.stderr


# Every function of the module over a grid of arguments (invalid combinations answer with the
# error they raise): run in a child per module, both modules being named cmsis_nn.
ANSWERS = r'''
import importlib.util, itertools, json, sys
spec = importlib.util.spec_from_file_location("cmsis_nn", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
answers, called = {}, set()
def ask(name, *args):
    called.add(name)
    try:
        value = getattr(m, name)(*args)
    except Exception as e:
        value = type(e).__name__
    answers[f"{name}{args!r}"] = value if isinstance(value, (int, str)) else str(value)
kinds = list(itertools.product(m.Backend.__members__.values(), m.DataType.__members__.values()))
for core in m.CortexM.__members__.values():
    ask("resolve_backend", core)
for (b, t), hw, c, k, s, d, p in itertools.product(kinds, (1, 7, 16), (1, 3, 8, 24), (1, 3), (1, 2), (1, 2), (0, 1)):
    out = (1, max(1, (hw + 2 * p - d * (k - 1) - 1) // s + 1), max(1, (hw + 2 * p - d * (k - 1) - 1) // s + 1))
    ask("convolve_wrapper_buffer_size", b, t, (1, hw, hw, c), (8, k, k, c), (*out, 8), (p, p), (s, s), (d, d))
    ask("convolve_wrapper_buffer_size", b, t, (1, 1, hw, c), (8, 1, k, c), (1, 1, out[2], 8), (0, p), (1, s), (1, d))
    for mult in (1, 2):
        ask("depthwise_conv_wrapper_buffer_size", b, t, (1, hw, hw, c), (1, k, k, c * mult), (*out, c * mult),
            (p, p), (s, s), (d, d), mult)
    up = (hw - 1) * s + k
    ask("transpose_conv_buffer_size", b, t, (1, hw, hw, c), (8, k, k, c), (1, up, up, 8), (p, p), (s, s), (d, d))
    ask("transpose_conv_reverse_conv_buffer_size", b, t, (1, hw, hw, c), (8, k, k, c), (p, p), (s, s))
for (b, t), n, c in itertools.product(kinds, (1, 10, 64), (1, 3, 16, 100, 1000)):
    ask("fully_connected_buffer_size", b, t, (n, 1, 1, c))
    ask("svdf_buffer_size", b, t, (n, 1, 1, c))
    ask("avgpool_buffer_size", b, t, n, c)
public = {n for n in dir(m) if not n.startswith("_") and n not in ("Backend", "DataType", "CortexM")}
json.dump({"answers": answers, "not_called": sorted(public - called)}, sys.stdout)
'''


def _answers(module: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", ANSWERS, str(module)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow
def test_the_module_answers_as_cmsis_nn_s_own_build_of_it(tmp_path):
    """cortexm's build (only the sources the bindings reach, one unit) against CMSIS-NN's own
    CMakeLists with CMSISNN_BUILD_PYBIND (its whole library): the same answer to every call."""
    import pybind11

    from cortexm.firmware.helper import build_helper

    tree = _cmsis_nn()
    ours = _answers(build_helper(tree))
    build = tmp_path / "reference"
    for command in (["cmake", "-S", str(tree), "-B", str(build), "-DCMSISNN_BUILD_PYBIND=ON", "-DCMAKE_BUILD_TYPE=Release",
                     f"-DPython3_EXECUTABLE={sys.executable}", f"-Dpybind11_DIR={pybind11.get_cmake_dir()}"],
                    ["cmake", "--build", str(build), "--target", "cmsis_nn"]):
        done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    reference = _answers(next(build.glob("cmsis_nn*.so")))
    assert ours["not_called"] == [], "a binding the grid does not call: add it to ANSWERS"
    assert len(ours["answers"]) > 5000 and ours == reference


def test_the_build_s_progress_counts_steps_and_claims_no_time_left(monkeypatch, capsys):
    """The module's build is a dozen quick compiles, then one long one and a link: a time left
    derived from its step count would be wrong (it said "about 5 s left" for a minute). The plain
    lines count steps and say nothing of time until the end."""
    from cortexm.base import progress as progress_mod

    clock = iter(range(0, 1000, 20))  # every step 20 s apart: a line each time
    monkeypatch.setattr(progress_mod.time, "monotonic", lambda: next(clock))
    with progress_mod.Progress(live=False) as p:
        for eta in (False, True):
            task = progress_mod.task(p, f"build eta={eta}", eta=eta)
            for step in range(1, 16):
                task.update(completed=step, total=15)
            task.done()
    lines = capsys.readouterr().err.splitlines()
    counted = [line for line in lines if "eta=False" in line]
    assert counted[-2].endswith("build eta=False: 15/15") and counted[-1].endswith("done, 15/15 in 320 s")
    assert not any("left" in line for line in counted)
    assert any("left" in line for line in lines if "eta=True" in line)  # a task of even steps keeps its ETA


def test_the_module_s_project_is_no_runner_input(tmp_path, monkeypatch):
    """kernels/cmsis_nn_helper compiles nothing into a runner: an edit of it leaves the runners'
    key as it was (the Nix kernels package leaves it out of its source too)."""
    from cortexm.firmware import build, paths

    root = Path(__file__).resolve().parents[2]
    shutil.copytree(root / "kernels", tmp_path / "kernels")
    shutil.copytree(root / "fvp" / "boards", tmp_path / "fvp" / "boards")
    monkeypatch.setenv(paths.FIRMWARE_SRC_ENV, str(tmp_path))
    before = build._project_digest()
    with (tmp_path / "kernels" / "cmsis_nn_helper" / "CMakeLists.txt").open("a") as f:
        f.write("# an edit\n")
    assert build._project_digest() == before
    with (tmp_path / "kernels" / "CMakeLists.txt").open("a") as f:
        f.write("# an edit\n")
    assert build._project_digest() != before
