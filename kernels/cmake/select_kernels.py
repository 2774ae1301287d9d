"""Which ExecuTorch sources a runner with a given operator set compiles.

Run by kernels/CMakeLists.txt at configure time. The source lists come from the
tree's own shim_et/xplat/executorch/build/build_variables.bzl (plain Python data,
which ExecuTorch's CMake build evaluates the same way), so nothing here copies a
list that a newer tree could change. Writes a CMake file that sets:

  CORTEXM_CORE_SRCS           the core runtime (EXECUTORCH_CORE_SRCS)
  CORTEXM_PRIM_OPS_SRCS       the prim ops and their registration (EXECUTORCH_SRCS)
  CORTEXM_KERNEL_UTIL_SRCS    portable kernel utilities (KERNELS_UTIL_ALL_DEPS_SRCS)
  CORTEXM_PORTABLE_OP_SRCS    the portable kernels of the selected aten ops, and the
                              shared unary patterns they may use
  CORTEXM_ROOT_OPS            the selected operators codegen registers, comma-separated

An operator that neither kernels/portable/functions.yaml nor the cortex_m
operators.yaml of the tree defines is an error that names it.

Usage: select_kernels.py EXECUTORCH_SRC OUTPUT.cmake OP [OP ...]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

BUILD_VARIABLES = "shim_et/xplat/executorch/build/build_variables.bzl"
PORTABLE_YAML = "kernels/portable/functions.yaml"
CORTEX_M_YAML = "backends/cortex_m/ops/operators.yaml"
# Registered by register_prim_ops.cpp, which is always linked: not for codegen.
PRIM_NAMESPACES = ("executorch_prim",)
PRIM_ATEN_OPS = ("aten::sym_size.int", "aten::sym_numel", "aten::_local_scalar_dense")


def build_variables(root: Path) -> dict:
    scope: dict = {}
    exec(compile((root / BUILD_VARIABLES).read_text(), BUILD_VARIABLES, "exec"), scope)
    return scope


def yaml_ops(path: Path, default_namespace: str) -> dict[str, str]:
    """Operator name ('aten::add.out') -> C++ kernel function name ('add_out')."""
    ops = {}
    for entry in yaml.safe_load(path.read_text()) or []:
        name = entry.get("op") or entry["func"].split("(", 1)[0]
        if "::" not in name:
            name = f"{default_namespace}::{name}"
        kernel = entry["kernels"][0]["kernel_name"]
        ops[name] = kernel.rsplit("::", 1)[-1]
    return ops


def portable_source(op: str, function: str, sources: list[str], root: Path) -> str | None:
    """The file of PORTABLE_KERNELS_SRCS that implements `op`.

    ExecuTorch names the file after the operator (op_add.cpp for aten::add.out,
    op_softmax.cpp for aten::_softmax.out); a few kernels are defined by macros in
    a differently named file, found by their function name.
    """
    base = op.split("::", 1)[-1].split(".", 1)[0]
    for stem in (base, base.strip("_")):
        candidate = f"kernels/portable/cpu/op_{stem}.cpp"
        if candidate in sources:
            return candidate
    word = re.compile(rf"\b{re.escape(function)}\b")
    hits = [s for s in sources if word.search((root / s).read_text(errors="replace"))]
    return hits[0] if len(hits) == 1 else None


def is_prim(op: str) -> bool:
    return op.split("::", 1)[0] in PRIM_NAMESPACES or op in PRIM_ATEN_OPS


def select(root: Path, ops: list[str]) -> dict[str, list[str]]:
    variables = build_variables(root)
    portable_sources = list(variables["PORTABLE_KERNELS_SRCS"])
    portable = yaml_ops(root / PORTABLE_YAML, "aten")
    cortex_m = yaml_ops(root / CORTEX_M_YAML, "cortex_m")
    chosen, root_ops, problems = set(), [], []
    for op in sorted(set(ops)):
        if is_prim(op):
            continue
        if op in cortex_m:
            root_ops.append(op)
        elif op in portable:
            source = portable_source(op, portable[op], portable_sources, root)
            if source is None:
                problems.append(f"{op}: no portable kernel source for {portable[op]} in {BUILD_VARIABLES}")
                continue
            chosen.add(source)
            root_ops.append(op)
        else:
            problems.append(f"{op}: no kernel in {PORTABLE_YAML} or {CORTEX_M_YAML}")
    if problems:
        raise SystemExit("select_kernels: " + "; ".join(problems))
    patterns = [s for s in portable_sources if "/pattern/" in s]
    return {
        "CORTEXM_CORE_SRCS": list(variables["EXECUTORCH_CORE_SRCS"]),
        "CORTEXM_PRIM_OPS_SRCS": list(variables["EXECUTORCH_SRCS"]),
        "CORTEXM_KERNEL_UTIL_SRCS": list(variables["KERNELS_UTIL_ALL_DEPS_SRCS"]),
        "CORTEXM_PORTABLE_OP_SRCS": sorted(chosen) + (patterns if chosen else []),
        "CORTEXM_ROOT_OPS": [",".join(root_ops)],
    }


def main(argv: list[str]) -> None:
    if len(argv) < 3:
        raise SystemExit(__doc__.rsplit("Usage: ", 1)[1])
    root, output, ops = Path(argv[0]), Path(argv[1]), argv[2:]
    lists = select(root, ops)
    lines = [f"# Written by {Path(__file__).name}; do not edit."]
    for name, values in lists.items():
        items = "\n  ".join(f'"{v}"' for v in values)
        lines.append(f"set({name}\n  {items}\n)")
    output.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
