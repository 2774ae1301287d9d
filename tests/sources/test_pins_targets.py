"""The pin file is well-formed and honest; targets agree with ExecuTorch."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from cortexm import sources
from cortexm.base.errors import CortexmError
from cortexm.base.targets import CORES, core
from cortexm.sources import nar, pins
from cortexm.sources.backend_source import upstream_backend


def _hashed_entries(data, path=()):
    """Every table in the pin file that carries a hash."""
    if isinstance(data, dict):
        if any(k in data for k in ("sha256", "nar_hash")):
            yield path, data
        for k, v in data.items():
            yield from _hashed_entries(v, path + (k,))


def test_every_hash_has_provenance():
    entries = list(_hashed_entries(pins.load()))
    assert len(entries) > 20
    for path, entry in entries:
        for key in ("sha256", "nar_hash"):
            if key not in entry:
                continue
            value = entry[key]
            provenance = entry.get("provenance") or entry.get(f"{key}_provenance")
            assert provenance, f"{'.'.join(path)}.{key} has no provenance"
            if value:
                pattern = r"[0-9a-f]{64}" if key == "sha256" else r"sha256-[A-Za-z0-9+/]{43}="
                assert re.fullmatch(pattern, value), f"{'.'.join(path)}.{key} = {value!r}"
            else:
                assert "not established" in provenance, f"{'.'.join(path)}.{key} is empty without saying why"


def test_installed_executorch_is_the_pinned_one():
    check = pins.check_installed_executorch(pins.load())
    assert check.ok is True, check.detail  # a dependency: "could not check" (not installed) is a failure here


@pytest.mark.parametrize("same", [True, False])
def test_a_toolchain_of_another_release_than_the_pin_is_named(tmp_path, same):
    """The check compares the compiler's own -dumpversion with the pin's release (a stand-in
    compiler prints each version: the check must not depend on which one this machine has)."""
    pinned = pins.load()["toolchain"]
    major, minor = pinned["version"].split(".")[:2]  # "15.2.rel1"
    version, ok = (f"{major}.{minor}.1", True) if same else (f"{int(major) - 3}.{minor}.1", False)
    gcc = tmp_path / "stand-in-gcc"
    gcc.write_text(f"#!/bin/sh\necho {version}\n")
    gcc.chmod(0o755)
    check = pins.check_toolchain(pins.load(), str(gcc))
    assert check.ok is ok and check.detail.startswith(version)
    assert ok or f"pin is {pinned['name']} {pinned['version']}" in check.detail


def test_cmsis_nn_pin_matches_executorch_tree_and_content(tmp_path):
    data = pins.load()
    tree = sources.locate(sources.EXECUTORCH)
    if tree.path is None:
        pytest.skip(sources.missing_message(sources.EXECUTORCH))
    found = pins.check_cmsis_nn_pin_in_tree(data, tree.path)
    assert found.ok is True, found.detail  # a tree without CMSIS_NN_VERSION is no answer
    cmsis = sources.locate(sources.CMSIS_NN)
    if cmsis.path is None:
        pytest.skip(sources.missing_message(sources.CMSIS_NN))
    rev = data["cmsis-nn"]["rev"]
    # The pinned revision's content as fetchFromGitHub unpacks it: the working files
    # may carry untracked build or cache files the fetched source never has.
    archive = subprocess.run(["git", "-C", str(cmsis.path), "archive", rev], capture_output=True)
    if archive.returncode != 0:
        pytest.skip(f"the CMSIS-NN tree at {cmsis.path} has no git revision {rev[:12]}")
    subprocess.run(["tar", "-x", "-C", str(tmp_path)], input=archive.stdout, check=True)
    assert nar.nar_hash(tmp_path) == data["cmsis-nn"]["nar_hash"]


def test_nar_hash_agrees_with_nix(tmp_path):
    nix_hash = shutil.which("nix-hash")
    if not nix_hash:
        pytest.skip("nix-hash not installed (apt-get install nix-bin) to cross-check the NAR serialiser")
    (tmp_path / "tree" / "sub").mkdir(parents=True)
    (tmp_path / "tree" / "a.txt").write_text("hello\n")
    (tmp_path / "tree" / "sub" / "run.sh").write_text("#!/bin/sh\n")
    (tmp_path / "tree" / "sub" / "run.sh").chmod(0o755)
    (tmp_path / "tree" / "link").symlink_to("a.txt")
    (tmp_path / "tree" / "empty").write_bytes(b"")
    hex_digest = subprocess.run([nix_hash, "--type", "sha256", str(tmp_path / "tree")], capture_output=True, text=True,
                                check=True).stdout.strip()
    import base64

    assert nar.nar_hash(tmp_path / "tree") == "sha256-" + base64.b64encode(bytes.fromhex(hex_digest)).decode()


@pytest.mark.parametrize("c", CORES, ids=lambda c: c.name)
def test_backend_is_what_executorch_resolves(c):
    assert upstream_backend(c) == c.backend


def test_core_names():
    assert core("M7") is core("cortex-m7") is core("m7")
    with pytest.raises(CortexmError, match="unknown target"):
        core("cortex-a53")
