"""A package's import graph, read from its source: every `import` and `from ... import`,
inside functions too (a lazy import is still a dependency).

The export cache keys on the code an export runs (cortexm.testing.cache), and
tests/project/test_layout.py keeps the graph free of cycles; both read it from here.
"""

from __future__ import annotations

import ast
from pathlib import Path

from cortexm.base import syntax


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
    names = frozenset(mods)
    seen, todo = set(), list(roots)
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(_imports(module, mods, Path(package).name, names))
    return seen


# (module, package, the package's module names, the file's text) -> what it imports: the export
# cache keys every store on the import closure of its code, read afresh each time; a file whose
# text is the same is not parsed again (its text is still read, so an edit is always seen).
_IMPORTS: dict[tuple[str, str, frozenset[str], str], frozenset[str]] = {}


def _imports(name: str, mods: dict[str, Path], root: str, names: frozenset[str] | None = None) -> set[str]:
    """The modules of `mods` that module `name` imports (`names`: mods' names, when known)."""
    text = mods[name].read_text()
    key = (name, root, frozenset(mods) if names is None else names, text)
    if key not in _IMPORTS:
        _IMPORTS[key] = frozenset(_parsed_imports(name, mods, root, text))
    return set(_IMPORTS[key])


def _parsed_imports(name: str, mods: dict[str, Path], root: str, text: str) -> set[str]:
    """_imports of module `name` whose source is `text`, parsed."""

    def known(target: str) -> str | None:
        while target and target not in mods:
            target = target.rpartition(".")[0]
        return target or None

    path = mods[name]
    here = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(syntax.parse(text, str(path))):
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


# --- a user's file: the files its imports reach --------------------------------------------

def file_closure(path: Path, search: list[str] | None = None) -> tuple[list[Path], list[str]]:
    """The user's own files that `path` imports, directly or not (every `import` statement,
    inside functions too), found where Python would find them (`search`, default sys.path, and
    `path`'s folder); and how each other top-level module it names resolves: "NAME: installed"
    (a distribution's, the standard library's, cortexm's) or "NAME: missing". Both change when
    what an import would load changes: an edited helper, a module installed since."""
    import sys
    import sysconfig

    search = [str(Path(path).resolve().parent)] + [str(Path(p or ".").resolve())
                                                     for p in (sys.path if search is None else search)]
    installs = {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots = {Path(r).resolve() for r in installs if r} | {Path(__file__).resolve().parent.parent}  # cortexm: keyed apart

    def installed(file: Path) -> bool:
        return "site-packages" in file.parts or any(file.is_relative_to(root) for root in roots)

    own, other, seen, todo = [], set(), set(), [Path(path).resolve()]
    while todo:
        file = todo.pop()
        if file in seen:
            continue
        seen.add(file)
        own.append(file)
        for name, required in sorted(_imported(file), key=str):
            found = _find(name, search)
            if isinstance(found, Path) and not installed(found):
                todo.append(found)
            elif required and isinstance(name, str) and "." not in name:
                other.add(f"{name}: {'missing' if found is None else 'installed'}")
    return sorted(own), sorted(other)


def _imported(file: Path) -> set[tuple[str | Path, bool]]:
    """(module, whether it must exist) for every module an import statement of `file` names,
    each parent package too; `from M import x` may name a submodule x or an attribute. A
    relative import names the file it reaches."""
    try:
        tree = syntax.parse(file.read_text(errors="replace"), str(file))
    except (SyntaxError, ValueError, OSError):
        return set()
    found: set[tuple[str | Path, bool]] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                found.update((".".join(parts[:i]), True) for i in range(1, len(parts) + 1))
        elif isinstance(node, ast.ImportFrom) and node.level:
            base = file.parents[node.level - 1].joinpath(*(node.module or "").split(".") if node.module else ())
            for candidate in [base] + [base / a.name for a in node.names]:
                for module in (candidate.with_suffix(".py"), candidate / "__init__.py"):
                    if module.is_file():
                        found.add((module.resolve(), False))
        elif isinstance(node, ast.ImportFrom) and node.module:
            parts = node.module.split(".")
            found.update((".".join(parts[:i]), True) for i in range(1, len(parts) + 1))
            found.update((f"{node.module}.{a.name}", False) for a in node.names if a.name != "*")
    return found


def _find(name: str | Path, search: list[str]) -> Path | str | None:
    """The file of module `name` on `search`, "installed" for one without a file of its own
    (built-in, frozen, a namespace), None when there is none; nothing is imported."""
    import importlib.machinery
    import sys

    if isinstance(name, Path):
        return name
    top, _, rest = name.partition(".")
    if not rest and (top in sys.builtin_module_names or importlib.machinery.FrozenImporter.find_spec(top)):
        return "installed"
    spec = importlib.machinery.PathFinder.find_spec(top, search)
    for part in rest.split(".") if rest else []:
        if spec is None or not spec.submodule_search_locations:
            return None
        spec = importlib.machinery.PathFinder.find_spec(f"{spec.name}.{part}", list(spec.submodule_search_locations))
    if spec is None:
        return None
    return Path(spec.origin).resolve() if spec.origin and Path(spec.origin).is_file() else "installed"
