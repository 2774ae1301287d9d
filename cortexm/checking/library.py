"""What a kernel library registers, and how many values each kernel wrapper expects.

ExecuTorch's codegen (codegen/gen.py, ComputeCodegenUnboxedKernels) wraps every
kernel in a check `stack.size() == N` with N = (number of schema arguments,
out arguments included) + 1 for the returned value; a program whose call passes
another count fails at execute with InvalidProgram. A library is read from:

- an ExecuTorch source tree or installed `executorch` package: the schemas in
  backends/cortex_m/ops/operators.yaml and the kernels/*/ yaml files; `- op:`
  entries take their schema from torchgen's native_functions.yaml;
- a generated or built library: the `Register*Kernels*.cpp` files codegen wrote,
  whose wrappers state N literally;
- a single schema yaml file (custom-ops format, `- func: ...` entries).
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass, field
from pathlib import Path

from cortexm.base.errors import CortexmError

# Operator schema yaml files of a tree, relative to its root (the first is required).
TREE_SCHEMA_FILES = (
    "backends/cortex_m/ops/operators.yaml",
    "kernels/portable/functions.yaml",
    "kernels/portable/custom_ops.yaml",
    "kernels/quantized/quantized.yaml",
)
PRIM_OPS_SOURCE = "kernels/prim_ops/register_prim_ops.cpp"
# Registered by the runtime itself (register_prim_ops.cpp), not by codegen: no
# generated wrapper checks their argument count.
PRIM_NAMESPACES = ("executorch_prim",)
PRIM_ATEN_OPS = ("aten::sym_size.int", "aten::sym_numel", "aten::_local_scalar_dense")


@dataclass(frozen=True)
class Kernel:
    name: str  # "cortex_m::quantized_avg_pool2d.out"
    expects: int | None  # values the wrapper accepts; None = not checked by a wrapper
    origin: str  # file it was read from
    # Argument names in call order (out arguments last), when a schema was read.
    arguments: tuple[str, ...] | None = None


@dataclass
class Library:
    description: str
    kernels: dict[str, Kernel] = field(default_factory=dict)
    # True when the library is a whole runtime whose prim ops are known to be present.
    prim_ops_known: bool = False

    def lookup(self, name: str) -> Kernel | None:
        kernel = self.kernels.get(name)
        if kernel is None and not self.prim_ops_known and _is_prim(name):
            return Kernel(name, None, "the runtime's prim ops")
        return kernel


def _is_prim(name: str) -> bool:
    return name.split("::", 1)[0] in PRIM_NAMESPACES or name in PRIM_ATEN_OPS


def load(spec: str | Path) -> Library:
    """The library at `spec`: a path, or `installed` for the installed executorch package."""
    if str(spec) == "installed":
        return _from_tree(_installed_package(), "installed executorch package")
    path = Path(spec)
    if not path.exists():
        raise CortexmError(f"{path}: no such library "
                           "(expected an ExecuTorch tree, a generated-kernels folder, or a schema .yaml)")
    if path.is_dir():
        if (path / TREE_SCHEMA_FILES[0]).is_file():
            return _from_tree(path, f"ExecuTorch tree {path}")
        registrations = sorted(p for p in path.rglob("Register*Kernels*.cpp") if p.is_file())
        if registrations:
            library = _from_registrations(registrations, f"generated library {path}")
            _add_shipped_prim_ops(library, path)
            return library
        raise CortexmError(
            f"{path}: neither an ExecuTorch tree ({TREE_SCHEMA_FILES[0]}) nor a generated library (Register*Kernels*.cpp)"
        )
    if path.suffix in (".yaml", ".yml"):
        library = Library(f"schema file {path}")
        _add_yaml(library, path)
        return library
    if path.suffix == ".cpp":
        return _from_registrations([path], f"generated registration {path}")
    raise CortexmError(f"{path}: not a library (give a folder, a schema .yaml, or a Register*Kernels*.cpp)")


_INSTALLED: Library | None = None


def installed() -> Library:
    """The installed executorch package's schemas (empty if it is not installed), cached."""
    global _INSTALLED
    if _INSTALLED is None:
        try:
            _INSTALLED = load("installed")
        except CortexmError:
            _INSTALLED = Library("no installed executorch")
    return _INSTALLED


def arguments_for(op_name: str, count: int, *libraries: Library | None) -> tuple[str, ...] | None:
    """Argument names of the first schema whose layout fits a call passing `count` values."""
    for library in libraries:
        kernel = library.lookup(op_name) if library else None
        if kernel and kernel.arguments and len(kernel.arguments) + 1 == count:
            return kernel.arguments
    return None


def _installed_package() -> Path:
    spec = importlib.util.find_spec("executorch")
    if spec is None or not spec.submodule_search_locations:
        raise CortexmError("no installed executorch package (pip install executorch), give --library PATH")
    return Path(list(spec.submodule_search_locations)[0])


def _from_tree(root: Path, description: str) -> Library:
    library = Library(description)
    for rel in TREE_SCHEMA_FILES:
        path = root / rel
        if path.is_file():
            _add_yaml(library, path)
    prim = root / PRIM_OPS_SOURCE
    if prim.is_file():
        library.prim_ops_known = True
        _add_prim_ops(library, prim)
    return library


def _add_prim_ops(library: Library, source: Path) -> None:
    """The operators register_prim_ops.cpp registers (no wrapper checks their count)."""
    for name in sorted(set(re.findall(r'"((?:aten|executorch_prim)::[\w.]+)"', source.read_text()))):
        library.kernels[name] = Kernel(name, None, str(source))


def _add_shipped_prim_ops(library: Library, folder: Path) -> None:
    """A folder that ships the runtime with its registration (an Arduino library) is the
    whole library: its prim ops are what a register_prim_ops.cpp in it registers, if any."""
    if not any(folder.rglob("runtime/executor/method.cpp")):
        return
    library.prim_ops_known = True
    for prim in sorted(folder.rglob(Path(PRIM_OPS_SOURCE).name)):
        _add_prim_ops(library, prim)


# --- yaml schemas -------------------------------------------------------------

# No pattern here may backtrack: a schema file is a user's, and `\s*(.+?)\s*$` on a line of
# spaces is quadratic (a 40 KB line took 13 s). Each line is matched once and stripped.
_ENTRY = re.compile(r"- (func|op):")
_NAME = re.compile(r"[\w:]+(?:\.\w+)?")


def _add_yaml(library: Library, path: Path) -> None:
    """Kernels of a functions.yaml / custom ops yaml (entries `- func:` or `- op:`)."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise CortexmError(f"{path}: cannot read ({e})") from None
    for line in text.splitlines():
        m = _ENTRY.match(line)
        if not m:
            continue
        kind, value = m.group(1), line[m.end():].strip()
        if not value:
            continue
        arguments = None
        expects: int | None
        if kind == "func":
            name, expects = parse_schema(value, path)
            arguments = argument_names(value)
        else:
            name = value if "::" in value else f"aten::{value}"
            expects = _aten_expects(name)
        library.kernels[name] = Kernel(name, expects, str(path), arguments)


def parse_schema(schema: str, origin: Path | str = "schema") -> tuple[str, int]:
    """('ns::name.overload', values the generated wrapper expects) for a schema string."""
    name, args = _name_and_arguments(schema, origin)
    if "::" not in name:
        name = f"aten::{name}"
    return name, len(_split_args(args)) + 1


def _name_and_arguments(schema: str, origin: Path | str) -> tuple[str, str]:
    """`name(arguments) -> returns` split in one pass (no backtracking)."""
    text = schema.strip()
    name = _NAME.match(text)
    open_at = text.find("(", name.end() if name else 0)
    close_at, depth = -1, 0
    for i in range(max(open_at, 0), len(text)):  # the parenthesis that closes the arguments
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            close_at = i
            break
    if not name or open_at < 0 or close_at < 0 or text[name.end():open_at].strip() \
            or not text[close_at + 1:].lstrip().startswith("->"):
        raise CortexmError(f"{origin}: cannot parse schema {schema[:80]!r}")
    return name.group(0), text[open_at + 1:close_at]


def argument_names(schema: str) -> tuple[str, ...]:
    """Names of a schema's arguments in call order, e.g. ('input', ..., 'out')."""
    _name, inner = _name_and_arguments(schema, "schema")
    return tuple(arg.split("=", 1)[0].split()[-1] for arg in _split_args(inner))


def _split_args(args: str) -> list[str]:
    """Top-level, comma-separated arguments of a schema, without the `*` marker."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(args):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(args[start:i].strip())
            start = i + 1
    if args[start:].strip():
        parts.append(args[start:].strip())
    return [p for p in parts if p and p != "*"]


_NATIVE: dict[str, int] | None = None
_AUTOGEN = re.compile(r"\s+autogen:\s*(\S.*)")


def _aten_expects(name: str) -> int | None:
    """Expected values for an ATen op, from torchgen's native_functions.yaml."""
    global _NATIVE
    if _NATIVE is None:
        _NATIVE = _read_native_functions()
    return _NATIVE.get(name)


def _read_native_functions() -> dict[str, int]:
    spec = importlib.util.find_spec("torchgen")
    if spec is None or not spec.submodule_search_locations:
        return {}
    native = Path(list(spec.submodule_search_locations)[0]) / "packaged/ATen/native/native_functions.yaml"
    if not native.is_file():
        return {}
    table: dict[str, int] = {}
    current: str | None = None
    for line in native.read_text().splitlines():
        m = _ENTRY.match(line)
        if m and m.group(1) == "func":
            current = line[m.end():].strip()
            name, expects = parse_schema(current, native)
            table[name] = expects
            continue
        m = _AUTOGEN.match(line)
        if m and current:
            # An autogenerated out variant: the functional schema plus one out per return.
            _, functional_expects = parse_schema(current, native)
            returns = current.rsplit("->", 1)[1].strip()
            n_returns = len(_split_args(returns.strip("()"))) if returns not in ("()", "") else 0
            for variant in (v.strip() for v in m.group(1).strip().split(",")):
                if "." in variant and variant.split(".", 1)[1].endswith("out"):
                    table[f"aten::{variant}"] = functional_expects + n_returns
    return table


# --- generated registrations ----------------------------------------------------

_KERNEL = re.compile(r'Kernel\(\s*"([\w:.]+)"')
_STACK_CHECK = re.compile(r"stack\.size\(\)\s*==\s*(\d+)")


def _from_registrations(files: list[Path], description: str) -> Library:
    library = Library(description)
    for path in files:
        text = path.read_text(errors="replace")
        starts = [(m.start(), m.group(1)) for m in _KERNEL.finditer(text)]
        for i, (start, name) in enumerate(starts):
            end = starts[i + 1][0] if i + 1 < len(starts) else len(text)
            check = _STACK_CHECK.search(text, start, end)
            library.kernels[name] = Kernel(name, int(check.group(1)) if check else None, str(path))
    if not library.kernels:
        raise CortexmError(f"{description}: no Kernel(...) registrations found")
    return library
