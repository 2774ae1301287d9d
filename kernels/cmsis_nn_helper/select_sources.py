"""Which CMSIS-NN C sources the buffer-size module needs.

Run by kernels/cmsis_nn_helper/CMakeLists.txt at configure time. Starts from the
functions the tree's Python bindings (Source/Bindings/*.cpp) call and adds, until
nothing is left, every C source of the tree that defines (not `static`) a function
a chosen source calls: the get_buffer_size sources and whatever they reach, never
the kernels. Read from the tree, so a newer CMSIS-NN whose bindings call more is
followed without a list to update; a call this text reading misses fails the
module's import (the build driver imports it), never a silent wrong answer.

Usage: select_sources.py CMSIS_NN_SRC   (prints the sources, ;-separated)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

BINDINGS = "Source/Bindings"
_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_DIRECTIVE = re.compile(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", re.M)
_CALL = re.compile(r"\b(arm_\w+)\s*\(")
# At file scope (bodies emptied): a declaration's words, the name, its parameters, a body.
_DEFINITION = re.compile(r"([^;{}]*?)\b(arm_\w+)\s*\([^;{}]*\)\s*\{\}")


def _text(path: Path) -> str:
    return _COMMENT.sub(" ", path.read_text(errors="replace"))


def _file_scope(text: str) -> str:
    """`text` with every brace's content dropped and directives as `;`: what is left are
    declarations and definitions, never a call inside a body."""
    kept, depth = [], 0
    for char in _DIRECTIVE.sub(";", text):
        if char == "}":
            depth -= 1
        if depth == 0:
            kept.append(char)
        if char == "{":
            depth += 1
    return "".join(kept)


def select(root: Path) -> list[Path]:
    defined_in: dict[str, list[Path]] = {}
    texts: dict[Path, str] = {}
    for source in sorted((root / "Source").rglob("*.c")):
        texts[source] = text = _text(source)
        for m in _DEFINITION.finditer(_file_scope(text)):
            if "static" not in m.group(1).lower():  # static, __STATIC_INLINE: the file's own
                defined_in.setdefault(m.group(2), []).append(source)
    wanted = {name for binding in sorted((root / BINDINGS).glob("*.cpp")) for name in _CALL.findall(_text(binding))}
    chosen: list[Path] = []
    seen: set[str] = set()
    while wanted - seen:
        name = min(wanted - seen)
        seen.add(name)
        for source in defined_in.get(name, []):  # none: a macro or a header's inline function
            if source not in chosen:
                chosen.append(source)
                wanted |= set(_CALL.findall(texts[source]))
    return sorted(chosen)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = Path(argv[1])
    if not (root / BINDINGS).is_dir():
        print(f"{root} has no {BINDINGS}: not a CMSIS-NN tree with Python bindings", file=sys.stderr)
        return 1
    chosen = select(root)
    if not chosen:
        print(f"no C source of {root} defines a function its bindings call", file=sys.stderr)
        return 1
    print(";".join(str(p) for p in chosen), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
