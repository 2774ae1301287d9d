"""Runner builds are bit-reproducible: an M7 runner built twice, into two empty build caches
(two paths), gives the same ELF, map and build.json, byte for byte, and every static library
the build made holds its members without timestamps or owners (ar's D), whatever the
toolchain's ar does by default. (The Arduino library likewise: tests/firmware/test_arduino.py,
test_generated_twice_is_byte_identical.)"""

from __future__ import annotations

import subprocess

import pytest

from conftest import MISSING
from cortexm.base import manifest

FILES = ("executor_runner.elf", "executor_runner.map", "build.json")
# A few operators (CMSIS-NN's and the runtime's code all the same), to keep two builds short.
OPS = ("cortex_m::dequantize_per_tensor.out", "cortex_m::quantize_per_tensor.out", "cortex_m::quantized_add.out")


@pytest.mark.slow
def test_a_runner_builds_to_the_same_bytes_twice(tmp_path, monkeypatch):
    from cortexm.firmware import build_runner
    from cortexm.firmware.tools import toolchain_prefix

    if MISSING:
        pytest.skip(f"runner builds need: {MISSING}")
    built = []
    for cache in ("first", "second"):
        monkeypatch.setenv("CORTEXM_BUILD_CACHE", str(tmp_path / cache))
        built.append(build_runner("cortex-m7", ops=OPS))
    first, second = built
    assert not first.cached and not second.cached and second.build_dir != first.build_dir
    differ = [name for name in FILES if manifest.sha256(first.build_dir / name) != manifest.sha256(second.build_dir / name)]
    assert differ == [], f"two builds of the same inputs differ in {differ}"

    archives = sorted(second.work().rglob("*.a"))
    assert archives, f"no static library in {second.work()}"
    for archive in archives:
        listing = subprocess.run([toolchain_prefix() + "ar", "tv", str(archive)], capture_output=True, text=True,
                                 check=True, timeout=60).stdout.splitlines()
        stamped = [line for line in listing if " 0/0 " not in line or not line.rstrip().split()[-2] == "1970"]
        assert not stamped, f"{archive.name}: members with a timestamp or an owner: {stamped[:3]}"
