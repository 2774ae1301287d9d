"""Shared fixtures: exports made once per test session, through cortexm's own export."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
GOLDENS = REPO / "tests" / "goldens"


def in_checkout(*parts: str) -> Path:
    """REPO/parts, or a skip where this tree does not have it: the flake's pytest check runs in
    the package's sources and the files nix/checks.nix adds, not in a whole checkout."""
    path = REPO.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{'/'.join(parts)} is not in this tree (a checkout has it; the flake's pytest check "
                    "takes only what nix/checks.nix names)", allow_module_level=True)
    return path

# In this process the lowering is the installed wheel's, the pinned one the goldens record,
# whatever ExecuTorch tree is around; commands the tests run choose for themselves.
from cortexm.sources import backend_source  # noqa: E402

backend_source.activate(None)
# Before any torch kernel runs here: the lowering's machine-independent float kernels.
backend_source.portable_float()


def session_folder(tmp_path_factory, name: str) -> Path:
    """A folder for this test run: shared by the run's pytest-xdist workers (each has a
    temporary folder of its own below the run's), so a case exported, a program run or a
    runner built by one worker serves the others. cortexm's caches take concurrent writers
    (cortexm/base/locks.py); a run without workers gets the same folder of its own."""
    import os

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    folder = root / f"shared-{name}"
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="session", autouse=True)
def export_cache(tmp_path_factory):
    """One export cache and run store for the session: a case lowered or run once serves every
    test (and the commands tests run), without touching the user's cache."""
    patch = pytest.MonkeyPatch()
    patch.setenv("CORTEXM_EXPORT_CACHE", str(session_folder(tmp_path_factory, "exports")))
    patch.setenv("CORTEXM_RUN_CACHE", str(session_folder(tmp_path_factory, "runs")))
    yield
    patch.undo()


@pytest.fixture(scope="session")
def exported():
    """exported(case, core, layout="legacy") -> path of the .pte bundle, through the test app's
    export cache; a failed export raises its CortexmError. `case`: a built-in case, or a test's
    own model as FILE.py:FACTORY (keyed by the file's content, as a user's case file is)."""
    from cortexm.base import targets
    from cortexm.base.errors import CortexmError
    from cortexm.lowering import export, modelsource, writer
    from cortexm.testing import cache

    def get(case: str, core: str, layout: str = "legacy") -> Path:
        spec, case_file = case, None
        if ":" in case and case.rsplit(":", 1)[0].endswith(".py"):
            case_file, case = Path(case.rsplit(":", 1)[0]).resolve(), modelsource.name_of(case)
        hit = cache.lookup(case, core, layout, case_file)
        if isinstance(hit, str):
            raise CortexmError(hit)
        if hit is not None:
            return hit
        return cache.store(case, core, layout, case_file,
                           lambda path: writer.write(export.export(modelsource.load(spec), targets.core(core), layout), path))

    return get


# --- the firmware path ---------------------------------------------------------------

def _missing() -> str | None:
    """Why runner builds and QEMU runs cannot happen here, or None when they can."""

    from cortexm import sources
    from cortexm.firmware.tools import INSTALL_GCC, toolchain_prefix
    from cortexm.sim.qemu import INSTALL as INSTALL_QEMU

    for kind in (sources.EXECUTORCH, sources.CMSIS_NN):
        if sources.locate(kind).path is None:
            return sources.missing_message(kind)
    if shutil.which(toolchain_prefix() + "gcc") is None:
        return f"{toolchain_prefix()}gcc not found: {INSTALL_GCC}"
    if shutil.which("cmake") is None:
        return "cmake not found (apt install cmake ninja-build)"
    if shutil.which("qemu-system-arm") is None:
        return f"qemu-system-arm not found: {INSTALL_QEMU}"
    return None


MISSING = _missing()


@pytest.fixture(scope="session")
def runners(tmp_path_factory):
    """core name -> the suite runner, built once per session into a fresh build cache
    (CORTEXM_TEST_REUSE_BUILDS=1 takes the user's cache instead). The cache folder stays
    set for the session, so commands the tests run find these runners."""
    import os

    from cortexm.firmware import build_runner

    if MISSING:
        pytest.skip(f"firmware tests need: {MISSING}")
    patch = pytest.MonkeyPatch()
    if os.environ.get("CORTEXM_TEST_REUSE_BUILDS") != "1":
        patch.setenv("CORTEXM_BUILD_CACHE", str(session_folder(tmp_path_factory, "builds")))
    built = {name: build_runner(name) for name in ("cortex-m7", "cortex-m55")}
    yield built
    patch.undo()


@pytest.fixture(scope="session")
def host_runner(runners):
    """The host build of the runner (AddressSanitizer and UBSan), in the session's build cache."""

    from cortexm.firmware import build_runner

    if shutil.which("cc") is None:
        pytest.skip("the host build needs a C/C++ compiler (Debian/Ubuntu: sudo apt install build-essential)")
    return build_runner("host")


def backend_only_tree(folder: Path) -> Path:
    """FOLDER holding a copy of the ExecuTorch tree's backends/cortex_m and nothing a runner is
    built from (skips without a tree): what `--executorch-src` gives the backend's Python from."""
    from cortexm import sources

    real = sources.locate(sources.EXECUTORCH).path
    if real is None:
        pytest.skip(sources.missing_message(sources.EXECUTORCH))
    shutil.copytree(real / "backends" / "cortex_m", folder / "backends" / "cortex_m")
    return folder


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The real `cortexm` command, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "cortexm", *args], capture_output=True, text=True, cwd=cwd, timeout=600)


def assert_one_line_error(result, *fragments: str) -> None:
    """What a user sees of bad input: exit 2 and one `error:` line holding every fragment, no traceback."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    # Progress lines (indented) may come first: what was under way when the error came.
    lines = [l for l in result.stderr.splitlines() if l.strip() and not l.startswith(("library:", "  "))]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
