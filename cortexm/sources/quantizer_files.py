"""Which files of backends/cortex_m decide how a model quantizes.

What enters: the backend's Python files, by path relative to backends/cortex_m. What leaves:
the paths whose code runs when CortexMQuantizer annotates a model (PT2E), or None when that
cannot be told, and then every file counts.

The quantization stage of an export (cortexm.lowering.quantize) is cached on these
alone, so an edit of a lowering pass re-runs only what comes after it. They are the
quantizer package, the quantizer reporter, the pass manager (it lists the passes), the
passes it runs for annotation (`pass_list_transform_for_annotation`, read from its source)
and everything those import from the backend, followed statement by statement. Not followed:
the pass manager's own imports (the lowering passes, which only the cortex_m pass stage
runs) and package `__init__` files (they only import).
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from cortexm.base import syntax

BACKEND = "executorch.backends.cortex_m"
MANAGER = "passes/cortex_m_pass_manager.py"
ANNOTATION_PASSES = "pass_list_transform_for_annotation"
ROOTS = ("quantizer_reporter.py", MANAGER)


def quantization_files(paths: set[str], read: Callable[[str], str]) -> set[str] | None:
    """The files of `paths` (all the backend's .py files, relative) whose code quantizes, read
    through `read(path)`; None when the pass manager's annotation list cannot be found."""
    annotation = _annotation_modules(read(MANAGER), paths) if MANAGER in paths else None
    if annotation is None:
        return None
    todo = [p for p in paths if p.startswith("quantizer/")] + [p for p in ROOTS if p in paths] + sorted(annotation)
    found: set[str] = set()
    while todo:
        path = todo.pop()
        if path in found:
            continue
        found.add(path)
        if path == MANAGER:
            continue
        todo += [p for p in _imports(path, read(path), paths) if p not in found]
    return found


def _annotation_modules(source: str, paths: set[str]) -> set[str] | None:
    """The modules that define the passes the manager runs for annotation."""
    tree = syntax.parse(source)
    names = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == ANNOTATION_PASSES for t in targets):
                if isinstance(node.value, ast.List):
                    names = {e.id for e in node.value.elts if isinstance(e, ast.Name)}
    if names is None:
        return None
    where = {alias.asname or alias.name: _resolve(MANAGER, node.module, node.level, alias.name, paths)
             for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
    return {found for n in names if (found := where.get(n))}


def _imports(path: str, source: str, paths: set[str]) -> list[str]:
    """The backend files `path` imports."""
    try:
        tree = syntax.parse(source)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            found += [_resolve(path, node.module, node.level, alias.name, paths) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [_resolve(path, alias.name, 0, None, paths) for alias in node.names]
    return [f for f in found if f]


def _resolve(importer: str, module: str | None, level: int, name: str | None, paths: set[str]) -> str | None:
    """The backend file an import names (a module, or a submodule imported by name), if any."""
    if level:
        package = importer.split("/")[:-1]
        package = package[: len(package) - (level - 1)] if level > 1 else package
        parts = package + (module.split(".") if module else [])
    elif module and (module == BACKEND or module.startswith(BACKEND + ".")):
        parts = module[len(BACKEND):].strip(".").split(".") if module != BACKEND else []
    else:
        return None
    candidates = []
    if name:
        candidates.append("/".join(parts + [name]) + ".py")  # `from package import module`
    if parts:
        candidates.append("/".join(parts) + ".py")
    return next((c for c in candidates if c in paths), None)
