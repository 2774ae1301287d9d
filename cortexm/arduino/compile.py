"""Cross-compiling an Arduino library the way the Arduino builder compiles it:
every .c/.cpp below src/ with src/ on the include path, and each example sketch
as C++ with `#include <Arduino.h>` put in front, for one core with the pinned
arm-none-eabi toolchain. It compiles, it does not link: linking needs the board
core itself, which `core_include` only stands in for with its headers.

The work goes through ninja in a folder of the build cache keyed by the library's
content, the core, the compiler and the core headers, so checking the same library
again takes a moment.
"""

from __future__ import annotations

import hashlib
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cortexm.base import children, writes
from cortexm.base.errors import CortexmError
from cortexm.base.targets import Core
from cortexm.firmware import tools
from cortexm.firmware.commands import build_environment, builds_dir, first_problem
from cortexm.sources.identity import files_digest

# What the Arduino builder adds for a sketch (arduino-builder's preprocessing, minus
# the prototypes it generates with ctags: the examples need none).
SKETCH_PREAMBLE = '#include <Arduino.h>\n#line 1 "{name}"\n'
C_FLAGS = ("-std=gnu11", "-Os", "-ffunction-sections", "-fdata-sections")
CXX_FLAGS = ("-std=gnu++17", "-Os", "-ffunction-sections", "-fdata-sections", "-fno-exceptions", "-fno-rtti",
             "-fno-threadsafe-statics")
DEFINES = ("-DARDUINO=10607",)


@dataclass(frozen=True)
class Compiled:
    sources: int  # library sources compiled
    sketches: int  # example sketches compiled
    objects: list[Path]
    warnings: int  # compiler warnings
    gcc: str  # `gcc --version`'s first line
    log: Path


def compile_library(library: Path, core: Core, core_include: Path, jobs: int = 2) -> Compiled:
    """Compiles every library source and example sketch; raises with the first compiler error."""
    ninja = shutil.which("ninja")
    if ninja is None:
        raise CortexmError("ninja not found on PATH (Debian: apt install ninja-build)")
    prefix = tools.toolchain_prefix()
    gcc = tools.gcc_version(prefix)
    key = files_digest(library, core_include) + repr((core.gcc_flags, gcc, C_FLAGS, CXX_FLAGS, DEFINES))
    work = builds_dir() / "arduino" / hashlib.sha256(key.encode()).hexdigest()[:16]
    if not (work / library.name).is_dir():  # compiled in place, so that ninja's paths stay the same
        writes.remove_tree(work)
        writes.copy_tree(library, work / library.name)
    library = work / library.name
    src = library / "src"
    include = [f"-I{src}", f"-I{core_include}"]
    base = [*core.gcc_flags, *DEFINES]
    rules = [
        f"rule cc\n  command = {prefix}gcc {_join(base + list(C_FLAGS) + include)} $extra -c $in -o $out\n",
        f"rule cxx\n  command = {prefix}g++ {_join(base + list(CXX_FLAGS) + include)} $extra -c $in -o $out\n",
    ]
    builds, objects = [], []
    sources = sorted(p for p in src.rglob("*") if p.suffix in (".c", ".cpp") and p.is_file())
    for path in sources:
        obj = work / "lib" / path.relative_to(src).with_suffix(path.suffix + ".o")
        builds.append(f"build {_ninja_path(obj)}: {'cc' if path.suffix == '.c' else 'cxx'} {_ninja_path(path)}\n")
        objects.append(obj)
    sketches = sorted((library / "examples").glob("*/*.ino"))
    for ino in sketches:
        cpp = work / "sketches" / ino.parent.name / f"{ino.name}.cpp"
        cpp.parent.mkdir(parents=True, exist_ok=True)
        text = SKETCH_PREAMBLE.format(name=ino.name) + ino.read_text()
        if not cpp.is_file() or cpp.read_text() != text:
            writes.atomic(cpp, text)
        obj = cpp.with_suffix(".o")
        builds.append(f"build {_ninja_path(obj)}: cxx {_ninja_path(cpp)}\n  extra = -I{_ninja_path(ino.parent)}\n")
        objects.append(obj)
    writes.atomic(work / "build.ninja", "".join(rules + builds))
    log = work / "compile.log"
    with writes.stream(log) as f:
        done = children.run([ninja, "-C", str(work), "-k", "0", "-j", str(jobs)], stdout=f, stderr=subprocess.STDOUT,
                            env=build_environment())
    if done.returncode != 0:
        raise CortexmError(f"compiling {library.name} for {core.name} failed: "
                           f"{first_problem(log.read_text(errors='replace'))} (log: {log})")
    warnings = sum(": warning: " in line for line in log.read_text(errors="replace").splitlines())
    return Compiled(len(sources), len(sketches), objects, warnings, gcc, log)


def _join(args: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in args)


def _ninja_path(path: Path) -> str:
    return str(path).replace("$", "$$").replace(" ", "$ ").replace(":", "$:")
