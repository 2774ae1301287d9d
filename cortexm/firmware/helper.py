"""CMSIS-NN's buffer-size Python module, built from the CMSIS-NN tree the runner uses.

What enters: a CMSIS-NN source tree. What leaves: the path of its `cmsis_nn` extension
module (Source/Bindings, CMake option CMSISNN_BUILD_PYBIND) for this Python, built once
per tree content and cached beside the runner builds; or, for the tree it was made from,
the one $CORTEXM_CMSIS_NN_HELPER names (a folder with the module and its helper.json: the
Nix package builds it from the flake's cmsis-nn input, cmsis_nn/helper.nix).

It is built by kernels/cmsis_nn_helper (the bindings, unoptimised, and only the C sources
they reach, as one unit: ~8 s on 2 cores where CMSIS-NN's own build of its whole library
took ~24 s), and imported once before it is cached, so a source that project missed is a
build error here.
Without kernels/ (an installed package without the firmware sources) CMSIS-NN's own
CMakeLists builds it, as before.

ExecuTorch's scratch pass sizes every buffer with this module; the wheel bundles one,
built from whatever CMSIS-NN the wheel was made with. A tree whose buffer-size functions
differ (a fix such as CMSIS-NN PR #243, or a contributor's change) must plan with its own,
or the program's planned sizes and the kernels' needs (which the runtime checks) come
from two different CMSIS-NNs.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import sysconfig
from pathlib import Path

from cortexm.base import writes
from cortexm.base.errors import CortexmError
from cortexm.sources import identity

RECORD = "helper.json"  # cortexm.sources.backend_source reads it (HELPER_RECORD) to name a module's tree

PREBUILT_ENV = "CORTEXM_CMSIS_NN_HELPER"


def prebuilt(tree: Path) -> Path | None:
    """The module in $CORTEXM_CMSIS_NN_HELPER when it was built from `tree`, else None."""
    folder = os.environ.get(PREBUILT_ENV)
    if not folder:
        return None
    try:
        record = json.loads((Path(folder) / RECORD).read_text())
    except (OSError, ValueError):
        raise CortexmError(f"${PREBUILT_ENV}={folder} holds no readable {RECORD}: not a CMSIS-NN module folder") from None
    if Path(record.get("tree", "")).resolve() != Path(tree).resolve():
        return None  # made from another tree: this one's is built as usual
    module = Path(folder) / f"cmsis_nn{sysconfig.get_config_var('EXT_SUFFIX') or '.so'}"
    if not module.is_file():
        raise CortexmError(f"${PREBUILT_ENV}={folder} has no {module.name}: it was built for another Python")
    return module


def build_helper(tree: Path, progress=None) -> Path:
    """The module built from `tree` (built now if the cache has none)."""
    from cortexm.base import locks
    from cortexm.base import progress as progress_mod
    from cortexm.firmware import paths
    from cortexm.firmware.commands import _run, builds_dir

    given = prebuilt(tree)
    if given is not None:
        return given
    try:
        import pybind11
    except ImportError:
        raise CortexmError("pybind11 is not installed (pip install pybind11): CMSIS-NN's module cannot be built") from None
    if shutil.which("cmake") is None:
        raise CortexmError("cmake not found: CMSIS-NN's module cannot be built")
    project = paths.kernels() / "cmsis_nn_helper"
    own = (project / "CMakeLists.txt").is_file()
    ident = identity.tree(tree)
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    recipe = [ident.key, sys.version, pybind11.__version__, suffix]
    if own:  # the project is part of what the module is
        recipe += [(f.name, hashlib.sha256(f.read_bytes()).hexdigest()) for f in sorted(project.iterdir()) if f.is_file()]
    key = hashlib.sha256(json.dumps(recipe).encode()).hexdigest()[:16]
    out = builds_dir() / "cmsis-nn-helper" / key
    module = out / f"cmsis_nn{suffix}"
    if module.is_file() and (out / RECORD).is_file():
        return module
    work = builds_dir() / "work" / f"cmsis-nn-helper-{key}"
    work.mkdir(parents=True, exist_ok=True)
    with locks.waiting(work):
        if module.is_file() and (out / RECORD).is_file():
            return module
        # Its steps are of unequal cost (one compile is most of it): a count, no time left. Short
        # enough that the count still shows on an 80-column terminal.
        task = progress_mod.task(progress, "building CMSIS-NN's buffer-size module (once per CMSIS-NN tree)", eta=False)
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        source = (["-S", str(project), f"-DCMSIS_NN_SRC={tree}"] if own
                  else ["-S", str(tree), "-DCMSISNN_BUILD_PYBIND=ON"])
        _run(work, ["cmake", *generator, *source, "-B", str(work), "-DCMAKE_BUILD_TYPE=Release",
                    f"-DPython3_EXECUTABLE={sys.executable}", f"-Dpybind11_DIR={pybind11.get_cmake_dir()}"],
             "configure.log", "configuring CMSIS-NN's buffer-size module")
        _run(work, ["cmake", "--build", str(work), "--target", "cmsis_nn"], "build.log",
             "building CMSIS-NN's buffer-size module", task)
        built = next(work.glob(f"cmsis_nn{suffix}"), None)
        if built is None:
            raise CortexmError(f"building CMSIS-NN's buffer-size module left no cmsis_nn{suffix} in {work}")
        _check_loads(built)
        task.done()
        staging = out.with_name(out.name + ".partial")
        writes.remove_tree(staging)
        staging.mkdir(parents=True)
        writes.copy(built, staging / module.name)
        writes.atomic(staging / RECORD, json.dumps({"tree": str(tree), "identity": ident.describe()}) + "\n")
        writes.remove_tree(out)
        writes.move(staging, out)
    return module


def _check_loads(module: Path) -> None:
    """Imports `module` in a child Python: the dynamic loader resolves every symbol then
    (Python loads extensions with RTLD_NOW), so a C function the build left out is named here."""
    import subprocess

    from cortexm.base import children

    code = ("import importlib.util, sys; spec = importlib.util.spec_from_file_location('cmsis_nn', sys.argv[1]); "
            "spec.loader.exec_module(importlib.util.module_from_spec(spec))")
    done = children.run([sys.executable, "-c", code, str(module)], timeout=120, stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        raise CortexmError(f"the CMSIS-NN module built in {module.parent} does not load: "
                           f"{lines[-1] if lines else 'no output'}")
