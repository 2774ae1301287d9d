"""A canonical text form of a lowered (cortex_m dialect) graph, for golden files.

One line per operator in execution order, with its arguments named from the
operator schema: tensors as dtype[shape], constants as `const dtype[shape]#digest`
(the first 8 hex digits of the sha256 of their bytes, so a changed weight, bias or
requantization multiplier shows), scalars as written (floats to 8 significant
digits), and the scratch buffers the memory planner will allocate as `N B`.
Parameter names and node names are left out on purpose: they change without the
graph changing.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

from cortexm.base.errors import CortexmError

FORMAT_LINE = "# cortexm dialect 2"


def render(exported_program, title: str) -> str:
    """The text form of an edge-dialect ExportedProgram."""
    from executorch.exir import memory

    signature = exported_program.graph_signature
    user_inputs = list(signature.user_inputs)
    names: dict[Any, str] = {}
    count = 0
    lines = [FORMAT_LINE, f"# {title}"]

    for node in exported_program.graph.nodes:
        if node.op == "placeholder":
            if node.name in user_inputs:
                names[node] = f"%in{user_inputs.index(node.name)}"
                lines.append(f"{names[node]} = input {_tensor(node.meta.get('val'))}")
            else:
                names[node] = "const " + _tensor(node.meta.get("val")) + _digest(exported_program, node.name)
        elif node.op == "call_function":
            if node.target is memory.alloc:
                (shape, dtype), = node.args[0] if isinstance(node.args[0], list) else (node.args[0],)
                names[node] = f"{_numel(shape) * _itemsize(dtype)} B"
                continue
            names[node] = f"%{count}"
            count += 1
            lines.append(f"{names[node]} = {_op_name(node.target)}({_args(node, names)}) -> {_tensor(node.meta.get('val'))}")
        elif node.op == "output":
            outs = node.args[0] if isinstance(node.args[0], (tuple, list)) else (node.args[0],)
            lines.append("return " + ", ".join(_value(o, names) for o in outs))
    return "\n".join(lines) + "\n"


def _digest(exported_program, name: str) -> str:
    """'#' and 8 hex digits of the sha256 of a lifted constant's bytes ('' when not found)."""
    import hashlib

    signature = exported_program.graph_signature
    for table, store in ((signature.inputs_to_parameters, exported_program.state_dict),
                         (signature.inputs_to_buffers, exported_program.state_dict),
                         (signature.inputs_to_lifted_tensor_constants, exported_program.constants)):
        key = table.get(name)
        if key is not None and key in store:
            data = store[key].detach().contiguous().cpu().numpy().tobytes()
            return "#" + hashlib.sha256(data).hexdigest()[:8]
    return ""


def _op_name(target) -> str:
    name = getattr(target, "__name__", None) or str(target)
    # EdgeOpOverload names look like "cortex_m.quantized_conv2d.default".
    return name.removesuffix(".default")


def _args(node, names) -> str:
    schema = getattr(node.target, "_schema", None)
    arg_names = [a.name for a in schema.arguments] if schema is not None else []
    parts = []
    for i, arg in enumerate(node.args):
        label = arg_names[i] if i < len(arg_names) else f"arg{i}"
        parts.append(f"{label}={_value(arg, names)}")
    for key, arg in node.kwargs.items():
        parts.append(f"{key}={_value(arg, names)}")
    return ", ".join(parts)


def _value(v, names) -> str:
    import torch
    import torch.fx

    if isinstance(v, torch.fx.Node):
        return names.get(v, v.name)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x, names) for x in v) + "]"
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, float):
        return f"{v:.8g}"
    if isinstance(v, torch.dtype):
        return str(v).removeprefix("torch.")
    return str(v)


def _tensor(val) -> str:
    import torch

    if isinstance(val, (tuple, list)):
        return "(" + ", ".join(_tensor(v) for v in val) + ")"
    if not isinstance(val, torch.Tensor):
        return repr(val)
    dtype = str(val.dtype).removeprefix("torch.")
    text = f"{dtype}[{','.join(str(int(s)) for s in val.shape)}]"
    if val.dim() == 4 and val.dim_order() == (0, 2, 3, 1) and val.shape[1] > 1:
        text += " channels_last"
    return text


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


def _itemsize(dtype) -> int:
    import torch

    return torch.empty((), dtype=dtype).element_size()


def golden_path(goldens: Path, core_name: str, case_name: str) -> Path:
    return goldens / core_name / f"{case_name}.txt"


def write_golden(goldens: Path, core_name: str, case_name: str, text: str) -> Path:
    """`text` as the golden of the case on the core, inside `goldens` and nowhere else: never
    through a link (a folder or the file itself) that leads out of it, and replacing only a
    golden file (what `render` writes) or nothing."""
    from cortexm.base import files, writes

    files.check_name(case_name, "case name")
    path = golden_path(goldens, core_name, case_name)
    root = Path(os.path.realpath(goldens))
    path.parent.mkdir(parents=True, exist_ok=True)
    if Path(os.path.realpath(path.parent)) != root / core_name:
        raise CortexmError(f"{path.parent} leads out of the goldens folder {goldens} (a link); no golden is written "
                           "through it")
    if os.path.lexists(path):
        if path.is_symlink() or not path.is_file():
            raise CortexmError(f"{path} is not a regular file (a link is never followed); remove it to write its golden")
        with open(path, "rb") as f:
            head = f.read(len(FORMAT_LINE))
        if not head.startswith(b"# cortexm dialect"):
            raise CortexmError(f"{path} is not a golden file cortexm wrote; remove it to write its golden")
    writes.atomic(path, text.encode())
    return path


def compare(text: str, golden: Path) -> str | None:
    """None if `text` equals the golden file, else a unified diff (golden -> actual)."""
    try:
        expected = golden.read_text()
    except FileNotFoundError:
        raise CortexmError(f"{golden}: no golden file (create it with --update-goldens)") from None
    if expected == text:
        return None
    return "".join(
        difflib.unified_diff(
            expected.splitlines(keepends=True), text.splitlines(keepends=True),
            fromfile=str(golden), tofile="lowered now",
        )
    )
