"""Which Python lowers: the installed executorch wheel's `backends/cortex_m`, or an
ExecuTorch tree's on top of the wheel.

A contributor changes `backends/cortex_m` in their tree; the runner is built from
that tree, so the lowering must come from it too, or a change to a pass or the
quantizer is never tested. `activate(tree)` makes `executorch.backends.cortex_m`
and its submodules load from TREE/backends/cortex_m first and from the wheel
second (for what the tree does not hold as Python, e.g. the compiled cmsis_nn
helper), exactly as the Nix package copies the tree's Python over the wheel. The
rest of ExecuTorch (exir, the serializer) stays the wheel's.

`fingerprint(tree)` is a digest of every file the lowering reads from there, for
the export cache key: a change in the tree re-exports what it can affect. A Python file counts
by its syntax tree, so an edit of comments, blank lines or formatting re-exports nothing.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import os
import sys
import warnings
from functools import cache
from pathlib import Path

from cortexm.base import syntax
from cortexm.base.errors import CortexmError

PACKAGE = "executorch.backends.cortex_m"
TREE_SUBDIR = Path("backends") / "cortex_m"
# Set by activate() so export workers (fresh processes) use the same Python.
ENV = "CORTEXM_LOWERING_TREE"
# Modules the lowering imports: probing them tells whether the tree's Python runs on the wheel.
# (The pass manager first: importing ops.operators alone runs into a cycle upstream resolves this way.)
PROBE_MODULES = (
    f"{PACKAGE}.passes.cortex_m_pass_manager",
    f"{PACKAGE}.ops.operators",
    f"{PACKAGE}.quantizer.quantizer",
    f"{PACKAGE}.target_config",
    f"{PACKAGE}.edge_compile_config",
)


HELPER_MODULE = f"{PACKAGE}.library._cmsis_nn.cmsis_nn"
# Set by activate(): the CMSIS-NN buffer-size module built from the runner's CMSIS-NN tree.
HELPER_ENV = "CORTEXM_LOWERING_CMSIS_NN_HELPER"


class _TreeFirst(importlib.abc.MetaPathFinder):
    """Finds executorch.backends.cortex_m[.x] in the tree, then in the wheel; and CMSIS-NN's
    buffer-size module (what the scratch pass sizes with) in a build from the CMSIS-NN tree."""

    def __init__(self, tree_backend: Path | None, wheel_backend: Path | None, helper: Path | None) -> None:
        self.roots = [r for r in (tree_backend, wheel_backend) if r is not None]
        self.tree, self.helper = tree_backend, helper

    def find_spec(self, fullname, path=None, target=None):
        if fullname == HELPER_MODULE and self.helper is not None:
            return importlib.util.spec_from_file_location(fullname, self.helper)
        if self.tree is None or (fullname != PACKAGE and not fullname.startswith(PACKAGE + ".")):
            return None
        parts = fullname.split(".")[3:]  # below executorch.backends.cortex_m
        if not parts:  # the package itself: a namespace over both folders
            spec = importlib.machinery.ModuleSpec(fullname, None, is_package=True)
            spec.submodule_search_locations = [str(r) for r in self.roots]
            return spec
        folders = [root.joinpath(*parts[:-1]) for root in self.roots]
        spec = importlib.machinery.PathFinder.find_spec(fullname, [str(f) for f in folders if f.is_dir()])
        if spec is None:
            return None
        if spec.submodule_search_locations is not None:
            # A subpackage searches the tree's folder, then the wheel's (e.g. library/_cmsis_nn).
            spec.submodule_search_locations = [str(r.joinpath(*parts)) for r in self.roots
                                               if r.joinpath(*parts).is_dir()]
        return spec


def _wheel_backend() -> Path | None:
    spec = importlib.machinery.PathFinder.find_spec("executorch")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(list(spec.submodule_search_locations)[0]) / TREE_SUBDIR
    return folder if folder.is_dir() else None


def tree_backend(tree: Path) -> Path:
    folder = Path(tree) / TREE_SUBDIR
    if not (folder / "passes" / "cortex_m_pass_manager.py").is_file():
        raise CortexmError(f"{tree}: no {TREE_SUBDIR}/passes/cortex_m_pass_manager.py, not an ExecuTorch tree with the cortex_m "
                           "backend")
    return folder


def activate(tree: Path | None, helper: Path | None = None) -> None:
    """Lower with TREE's backends/cortex_m Python (None: the wheel's) and size scratch with
    the CMSIS-NN module at `helper` (None: the one the wheel bundles). Call before the
    backend is imported; choosing another source after that is an error."""
    wanted = (str(Path(tree).resolve()) if tree else "", str(helper) if helper else "")
    active = (os.environ.get(ENV, ""), os.environ.get(HELPER_ENV, ""))
    if any(name == PACKAGE or name.startswith(PACKAGE + ".") for name in sys.modules) and active != wanted:
        raise CortexmError(f"{PACKAGE} was imported before the lowering source was chosen")
    os.environ[ENV], os.environ[HELPER_ENV] = wanted
    _install()


def _install() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _TreeFirst)]
    tree, helper = os.environ.get(ENV), os.environ.get(HELPER_ENV)
    if tree or helper:
        sys.meta_path.insert(0, _TreeFirst(tree_backend(Path(tree)) if tree else None, _wheel_backend(),
                                           Path(helper) if helper else None))


# What activate_from_environment does in a process that chose nothing: the caller's choice,
# made on first use (the command line: the runner's trees, cortexm.lowering.source.choose).
# Set by the caller, never an import here: a lookup compiles nothing.
_default_choice = None


def choose_by_default(choice) -> None:
    """`choice()` (which must call activate) runs when a lowering source is first needed
    and none was chosen; None forgets it."""
    global _default_choice
    _default_choice = choice


def forget_inherited() -> None:
    """Drop the choice this process inherited from its parent's environment (what export
    workers take), so that the default choice (choose_by_default) decides: a command given
    its trees reads those, whoever started it. Before the backend is imported only."""
    if any(name == PACKAGE or name.startswith(PACKAGE + ".") for name in sys.modules):
        raise CortexmError(f"{PACKAGE} was imported before the lowering source was chosen")
    os.environ.pop(ENV, None)
    os.environ.pop(HELPER_ENV, None)
    _install()


def chosen() -> bool:
    """Whether this process (or its parent, for export workers) chose a lowering source."""
    return ENV in os.environ


def activate_from_environment() -> None:
    """The source chosen in this process or its parent (export workers are fresh
    processes); when none was chosen, the caller's default (choose_by_default), or one
    line saying what to call."""
    if not chosen():
        if _default_choice is None:
            raise CortexmError("no lowering source was chosen in this process: call "
                               "cortexm.lowering.source.choose() (the trees' Python and their CMSIS-NN module) "
                               "or cortexm.sources.backend_source.activate(None) (the installed wheel's) first")
        _default_choice()
        return
    if not any(isinstance(f, _TreeFirst) for f in sys.meta_path):
        _install()


def active_helper() -> Path | None:
    helper = os.environ.get(HELPER_ENV)
    return Path(helper) if helper else None


def active_tree() -> Path | None:
    """The tree whose Python lowers, None for the wheel's (call after choosing)."""
    tree = os.environ.get(ENV)
    return Path(tree) if tree else None


# torch's CPU kernels round differently on different machines: ATen picks AVX2 or AVX-512
# loops at run time, oneDNN JIT-compiles convolutions for the best ISA it finds, MKL picks its
# code path by CPU, and each sums in another order. One ulp of a calibration range or of a
# weight divided by its scale changes the program (measured: keyword_spotting's weights and
# requantize multipliers differed between the AVX2 and the portable kernels of one machine).
# The lowering runs on the portable paths, so a model lowers to the same program on every
# x86-64 machine; it also runs single-threaded (lower() sees to it): split reductions differ too.
PORTABLE_FLOAT = {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41", "MKL_CBWR": "COMPATIBLE"}


def portable_float() -> None:
    """Select torch's machine-independent float kernels for this process (and its children).
    Takes effect where torch has not run a kernel yet: call it before the lowering's imports."""
    os.environ.update(PORTABLE_FLOAT)


def quiet_lowering_imports() -> None:
    """Silence import-time chatter of torch/torchao that users cannot act on. torch first: its
    logging setup at import would override levels set before it (callers import it next anyway).
    The lowering's float kernels are the portable ones (portable_float)."""
    portable_float()
    import torch  # noqa: F401

    for name in ("torch", "torchao", "executorch"):
        logging.getLogger(name).setLevel(logging.ERROR)
    # A failing meta kernel logs its whole traceback at ERROR before the error reaches cortexm,
    # which reports it in one line.
    logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
    warnings.filterwarnings("ignore", module=r"(torch|torchao|executorch)(\.|$)")
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)


def probe() -> None:
    """Import what the lowering imports; one line naming the import that failed."""
    import importlib

    quiet_lowering_imports()
    activate_from_environment()
    for name in PROBE_MODULES:
        try:
            importlib.import_module(name)
        except Exception as e:
            tree = active_tree()
            where = f"the cortex_m Python of {tree}" if tree else "the installed executorch"
            first = (str(e).strip().splitlines() or [""])[0]
            raise CortexmError(f"{where} cannot run on the installed executorch {_wheel_version()}: "
                               f"importing {name} failed: {type(e).__name__}: {first}") from None


def _wheel_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("executorch")
    except metadata.PackageNotFoundError:
        return "(not installed)"


@cache
def fingerprint(tree: Path | None, helper: Path | None = None) -> str:
    """Digest of the files the lowering reads from backends/cortex_m: the tree's Python and
    operators.yaml, the wheel's files the tree does not shadow, and the CMSIS-NN module
    that sizes the scratch buffers."""
    digest = hashlib.sha256()
    if helper is not None:
        digest.update(b"helper\0" + helper.read_bytes())
    for rel, file in sorted(_backend_files(tree).items()):
        digest.update(rel.encode() + b"\0" + lowering_content(file))
    return digest.hexdigest()


def lowering_content(file: Path) -> bytes:
    """What of a backend file decides a program: a Python file's syntax tree without positions
    (a comment, a blank line or a re-wrapped call changes no lowered byte: the programs carry no
    source line), any other file's bytes. A file that does not parse counts by its bytes."""
    data = file.read_bytes()
    if file.suffix == ".py":
        try:
            return ast.dump(syntax.parse(data)).encode()
        except (SyntaxError, ValueError):
            pass
    return data


def quantization_fingerprint(tree: Path | None) -> str:
    """Digest of the backend files whose code decides how a model quantizes
    (cortexm.sources.quantizer_files); of all of them when that cannot be told."""
    from cortexm.sources.quantizer_files import quantization_files

    view = _backend_files(tree)
    python = {rel for rel in view if rel.endswith(".py")}
    chosen = quantization_files(python, lambda rel: view[rel].read_text(errors="replace")) or set(view)
    digest = hashlib.sha256()
    for rel in sorted(chosen):
        digest.update(rel.encode() + b"\0" + lowering_content(view[rel]))
    return digest.hexdigest()


def _backend_files(tree: Path | None) -> dict[str, Path]:
    """backends/cortex_m as the lowering sees it, path relative to it -> file: the tree's
    Python, operators.yaml and modules, and the wheel's where the tree has none."""
    view: dict[str, Path] = {}
    for root in ([tree_backend(tree)] if tree else []) + [r for r in [_wheel_backend()] if r]:
        for file in sorted(root.rglob("*")):
            rel = file.relative_to(root)
            if (not file.is_file() or "__pycache__" in rel.parts or rel.parts[0] == "test"
                    or file.suffix not in (".py", ".yaml", ".so")):
                continue
            view.setdefault(rel.as_posix(), file)
    return view


def describe(tree: Path | None = None, helper: Path | None = None) -> str:
    """One line: which Python lowers, and what sizes its scratch buffers."""
    tree = tree if tree is not None else active_tree()
    helper = helper if helper is not None else active_helper()
    sized = f"; scratch sized by {_helper_origin(helper)}" if helper else ""
    wheel = f"the executorch {_wheel_version()} wheel"
    try:
        from executorch import version

        wheel += f" (git {version.git_version[:12]})"
    except ImportError:
        pass
    if tree is None:
        return f"backends/cortex_m of {wheel}{sized}"
    from cortexm.sources.identity import tree as identify

    return f"backends/cortex_m of {tree} ({identify(Path(tree)).describe()}) on {wheel}{sized}"


# The record cortexm.firmware.helper writes beside each module it builds: the tree it is from.
HELPER_RECORD = "helper.json"


def _helper_origin(helper: Path) -> str:
    """'CMSIS-NN's module built from TREE (identity)', from the record beside it."""
    import json

    try:
        record = json.loads((Path(helper).parent / HELPER_RECORD).read_text())
        return f"CMSIS-NN's module built from {record['tree']} ({record['identity']})"
    except (OSError, ValueError, KeyError, TypeError):
        return f"CMSIS-NN's module {helper}"


def lowering_file(rel: str) -> Path | None:
    """The file at `rel` (relative to an ExecuTorch tree) that the lowering reads: the
    chosen tree's for backends/cortex_m, the wheel's for the rest of ExecuTorch."""
    activate_from_environment()
    rel_path = Path(rel)
    tree = active_tree()
    if tree is not None and rel_path.parts[:2] == TREE_SUBDIR.parts and (tree / rel_path).is_file():
        return tree / rel_path
    wheel = _wheel_backend()
    if wheel is None:
        return None
    file = wheel.parent.parent / rel_path
    return file if file.is_file() else None


def upstream_backend(core) -> str:
    """The CMSIS-NN backend ExecuTorch resolves for `core` (needs the executorch wheel)."""
    activate_from_environment()
    from executorch.backends.cortex_m.target_config import CortexMTargetConfig

    return CortexMTargetConfig.from_target_string(core.target_string).backend.name
