"""Upstream's Arduino library generator, as the ExecuTorch tree ships it.

examples/arduino/ holds build_arduino_library.sh, the files it copies into the
library (library.properties, ExecuTorch.h, ETModel.h, arduino_pal.cpp,
platform_stubs.c, examples/, tools) and pte_to_header.py. Everything the
library takes from upstream is read from there at run time; what the script
states only in its own text (the default operator set, the cmake_macros.h stub,
the third-party notice) is read out of the script, so a tree that changes them
changes the library, and a script whose text no longer says them is an error
rather than a silently different library.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from cortexm.base.errors import CortexmError
from cortexm.checking import library as libs

FOLDER = "examples/arduino"
SCRIPT = "build_arduino_library.sh"
CORTEX_M_YAML = "backends/cortex_m/ops/operators.yaml"


@dataclass(frozen=True)
class Upstream:
    tree: Path  # the ExecuTorch tree

    @property
    def folder(self) -> Path:
        return self.tree / FOLDER

    @property
    def script(self) -> Path:
        return self.folder / SCRIPT

    @cached_property
    def script_text(self) -> str:
        if not self.script.is_file():
            raise CortexmError(f"{self.tree} has no {FOLDER}/{SCRIPT}: this ExecuTorch tree has no Arduino library generator")
        return self.script.read_text()

    @property
    def script_sha256(self) -> str:
        return hashlib.sha256(self.script.read_bytes()).hexdigest()

    @cached_property
    def properties(self) -> dict[str, str]:
        return read_properties(self.folder / "library.properties")

    def default_root_ops(self) -> list[str]:
        """The script's DEFAULT_ROOT_OPS: the portable operators it registers besides cortex_m's."""
        m = re.search(r'^DEFAULT_ROOT_OPS="((?:[^"\\]|\\\n)*)"', self.script_text, re.M)
        if not m:
            raise CortexmError(f"{self.script}: no DEFAULT_ROOT_OPS=\"...\" (the generator changed; cortexm follows its op set)")
        return [op for op in m.group(1).replace("\\\n", "").split(",") if op.strip()]

    def cortex_m_ops(self) -> list[str]:
        """Every operator of the tree's cortex_m schema: the script registers them all
        (gen_oplist --ops_schema_yaml_path=operators.yaml)."""
        return sorted(libs.load(self.tree / CORTEX_M_YAML).kernels)

    def library_ops(self) -> list[str]:
        """The operators the library registers, as upstream's script selects them by default."""
        return sorted(set(self.default_root_ops()) | set(self.cortex_m_ops()))

    def heredoc(self, target: str) -> str:
        """The text the script writes to a file whose path ends with `target` (cat > ... << 'MARK')."""
        m = re.search(rf"^cat > \"[^\"]*{re.escape(target)}\" << '(\w+)'\n(.*?)^\1$", self.script_text, re.M | re.S)
        if not m:
            raise CortexmError(f"{self.script}: it no longer writes {target} (the generator changed; cortexm follows it)")
        return m.group(2)

    def examples(self) -> list[Path]:
        return sorted(p for p in (self.folder / "examples").iterdir() if p.is_dir())


def read_properties(path: Path) -> dict[str, str]:
    """A library.properties file: key=value lines; # comments and blank lines skipped."""
    values = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        key, sep, value = stripped.partition("=")
        if sep:
            values[key.strip()] = value.strip()
    return values
