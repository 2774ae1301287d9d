"""The package's layout: stages as packages, no import cycles, the CLI on top.

Imports are read from the source (cortexm.base.imports: every `import` and
`from ... import`, inside functions too), so the graph is the one a reader sees,
whatever runs first.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
from pathlib import Path

import pytest

import cortexm
from cortexm.base.imports import graph as import_graph

PACKAGE = Path(cortexm.__file__).resolve().parent


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    found = cycles(import_graph(PACKAGE))
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_cycle_check_sees_a_cycle(tmp_path):
    # The check above can fail: two modules of a package that import each other, one lazily.
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from pkg import a\n")
    (pkg / "c.py").write_text("from . import a\n")
    graph = import_graph(pkg)
    assert graph["pkg.c"] == {"pkg.a"}
    assert cycles(graph) == [["pkg.a", "pkg.sub.b"]]


def test_the_cli_is_on_top():
    graph = import_graph(PACKAGE)
    below = {m: sorted(t for t in targets if t == "cortexm.cli" or t.startswith("cortexm.cli."))
             for m, targets in graph.items() if not m.startswith("cortexm.cli") and m != "cortexm.__main__"}
    assert not {m: t for m, t in below.items() if t}, "stages that import the CLI"


def test_base_stands_alone():
    graph = import_graph(PACKAGE)
    outside = {m: sorted(t for t in targets if not t.startswith("cortexm.base"))
               for m, targets in graph.items() if m.startswith("cortexm.base")}
    assert not {m: t for m, t in outside.items() if t}


def test_mypy_finds_nothing():
    """The type check pyproject.toml configures ([tool.mypy]: the packages it covers)."""
    mypy = shutil.which("mypy")
    if mypy is None:
        pytest.skip("mypy not found: pip install mypy (the packages it checks are [tool.mypy] in pyproject.toml)")
    done = subprocess.run([mypy, "--no-incremental"], cwd=PACKAGE.parent, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_root_holds_only_the_package_face_and_the_entry_point():
    loose = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert loose == ["__init__.py", "__main__.py"]
    for package in sorted(p for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()):
        assert ast.get_docstring(ast.parse((package / "__init__.py").read_text())), f"{package.name}: no docstring"


def test_ruff_finds_nothing():
    """The lint pyproject.toml configures ([tool.ruff]), over the package, the tests and bench."""
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff not found: pip install ruff (its rules are [tool.ruff] in pyproject.toml)")
    done = subprocess.run([ruff, "check", "--no-cache", "--output-format", "concise", "."], cwd=PACKAGE.parent,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_stages_below_the_test_app_do_not_import_it():
    """cortexm.testing sequences the stages: the tensor codec, digests and comparison they share
    live in cortexm.pte.tensors, so the simulator and the lowering run without the test app."""
    graph = import_graph(PACKAGE)
    up = {(m, t) for m, targets in graph.items() for t in targets
          if t.startswith("cortexm.testing") and not m.startswith(("cortexm.testing", "cortexm.cli", "cortexm.__main__"))}
    assert up == set()


def test_the_stage_packages_import_only_downward():
    """Package by package (base, sources, pte, oracle, ..., testing, cli) the imports form no
    cycle: each stage imports only the stages below it, whatever module starts the import."""
    graph = import_graph(PACKAGE)

    def package(module: str) -> str:
        return module.split(".")[1] if "." in module else module

    packages: dict[str, set[str]] = {}
    for m, targets in graph.items():
        packages.setdefault(package(m), set()).update(package(t) for t in targets if package(t) != package(m))
    for targets in list(packages.values()):
        for t in targets:
            packages.setdefault(t, set())
    tangled = {p for component in cycles(packages) for p in component}
    up = {(m, t) for m, targets in graph.items() for t in targets
          if package(m) != package(t) and {package(m), package(t)} <= tangled}
    assert up == set()  # CMSIS-NN's module is built by whoever chooses the lowering (lowering.source)


def test_every_import_of_cortexm_names_what_exists():
    """`from cortexm.x import y` inside a function runs only when the function does: each is
    checked here (a module moved, a name renamed), the package's and the tests'."""
    import importlib

    missing = []
    for path in sorted([*PACKAGE.rglob("*.py"), *(PACKAGE.parent / "tests").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("cortexm"):
                module = importlib.import_module(node.module)
                for alias in node.names:
                    if not hasattr(module, alias.name) and importlib.util.find_spec(f"{node.module}.{alias.name}") is None:
                        missing.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {node.module} has no {alias.name}")
    assert missing == []


# --- one writer: every file cortexm writes, moves or removes goes through cortexm.base.writes ------

WRITER = PACKAGE / "base" / "writes.py"
_WRITING_METHODS = {"write_text", "write_bytes", "touch", "symlink_to", "hardlink_to", "rename", "unlink", "rmdir",
                    "tofile", "extractall", "extract"}
_WRITING_CALLS = {("shutil", n) for n in ("copy", "copy2", "copyfile", "copytree", "move", "rmtree", "copymode")} | \
    {("os", n) for n in ("replace", "rename", "remove", "unlink", "symlink", "link", "rmdir", "removedirs", "mkfifo",
                         "truncate")} | \
    {("tempfile", n) for n in ("mkstemp", "mkdtemp", "NamedTemporaryFile", "TemporaryDirectory", "TemporaryFile")} | \
    {("np", "save"), ("numpy", "save"), ("np", "savez"), ("torch", "save")}
_WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND"}


def writes_outside_the_writer(source: str) -> list[str]:
    """The calls in `source` that write, move or remove a file (what cortexm.base.writes is for)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "open":
            mode = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
            text = mode.value if isinstance(mode, ast.Constant) and isinstance(mode.value, str) else "?" if mode else "r"
            if set(text) & set("wax+?"):
                found.append(f"line {node.lineno}: open(..., {text!r})")
        elif isinstance(func, ast.Attribute):
            owner = func.value.id if isinstance(func.value, ast.Name) else None
            if (owner, func.attr) in _WRITING_CALLS:
                found.append(f"line {node.lineno}: {owner}.{func.attr}")
            elif owner == "os" and func.attr == "open" and _WRITE_FLAGS & {n.attr for n in ast.walk(node)
                                                                           if isinstance(n, ast.Attribute)}:
                found.append(f"line {node.lineno}: os.open for writing")
            elif owner not in ("os", "shutil", "tempfile", "writes") and func.attr in _WRITING_METHODS:
                found.append(f"line {node.lineno}: .{func.attr}(...)")
    return sorted(found, key=lambda line: int(line.split()[1].rstrip(":")))


def test_only_the_writer_writes_files():
    """cortexm.base.writes is where every write, move and removal happens, so that its rules (no
    write through a link, none outside the folder written) hold for all of them."""
    offenders = {str(path.relative_to(PACKAGE)): lines for path in sorted(PACKAGE.rglob("*.py")) if path != WRITER
                 for lines in [writes_outside_the_writer(path.read_text())] if lines}
    assert not offenders, "files written outside cortexm.base.writes: " + "; ".join(
        f"{name}: {', '.join(lines)}" for name, lines in offenders.items())


def test_the_writer_check_sees_a_write():
    source = ("from pathlib import Path\nimport shutil, os\nPath('x').write_text('y')\nwith open('z', 'a') as f: pass\n"
              "shutil.rmtree('d')\nos.open('p', os.O_WRONLY | os.O_CREAT)\nopen('r').read()\n")
    assert [line.split(":")[0] for line in writes_outside_the_writer(source)] == ["line 3", "line 4", "line 5", "line 6"]
