"""A package's import graph, read from its source: every `import` and `from ... import`,
inside functions too (a lazy import is still a dependency).

The export cache keys on the code an export runs (cortexm.testing.cache), and
tests/test_layout.py keeps the graph free of cycles; both read it from here.
"""

from __future__ import annotations

import ast
from pathlib import Path


def modules(package: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under `package` (a package is its __init__)."""
    found = {}
    for f in sorted(Path(package).rglob("*.py")):
        parts = f.relative_to(Path(package).parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return found


def graph(package: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports. `from P import name` names the
    submodule P.name when there is one, else P itself."""
    mods = modules(package)
    return {name: _imports(name, mods, Path(package).name) for name in mods}


def closure(package: Path, roots: list[str]) -> set[str]:
    """`roots` and every module of `package` they import, directly or not (reading only those)."""
    mods = modules(package)
    seen, todo = set(), list(roots)
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(_imports(module, mods, Path(package).name))
    return seen


def _imports(name: str, mods: dict[str, Path], root: str) -> set[str]:
    """The modules of `mods` that module `name` imports."""

    def known(target: str) -> str | None:
        while target and target not in mods:
            target = target.rpartition(".")[0]
        return target or None

    path = mods[name]
    here = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = here.split(".")[: len(here.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
        else:
            continue
        for target in targets:
            if target == root or target.startswith(root + "."):
                resolved = known(target)
                if resolved and resolved != name:
                    found.add(resolved)
    return found
