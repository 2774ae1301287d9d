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
