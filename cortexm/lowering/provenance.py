"""Where each call of a lowered program came from in the user's model.

What enters: the ExecuTorch program manager to_executorch returned (its graph's nodes carry
the instruction index each became, as `debug_handle`). What leaves: per kernel call, the
model node it came from (the name it has in the quantized and the float model), the
module that holds it (`b1.c2`), and the line of the model's source that made it: what a
report names instead of an instruction number. Recorded in the sidecar as `calls`.
"""

from __future__ import annotations

import os

# Frames of the tools, not the model: these packages', and a tree's lowering passes and quantizer
# wherever the tree is (a call a pass made names no model line; nor then does the sidecar name a
# pass's line, which a comment edit moves without changing the program:
# cortexm.sources.backend_source).
_TOOL_FRAMES = (f"{os.sep}torch{os.sep}", f"{os.sep}executorch{os.sep}", f"{os.sep}torchao{os.sep}",
                f"{os.sep}cortexm{os.sep}lowering{os.sep}", "<eval_with_key>",
                *(os.sep.join(("", "backends", *part, "")) for part in (("cortex_m", "passes"), ("cortex_m", "quantizer"),
                                                                        ("arm",))))


def calls(program_manager) -> list[dict]:
    """[{instruction, op, node, module, source}] for every call_function node that became an
    instruction, in instruction order (a node the emitter gave no instruction is left out)."""
    found: dict[int, dict] = {}
    for node in program_manager.exported_program().graph.nodes:
        handle = node.meta.get("debug_handle") if node.op == "call_function" else None
        name = getattr(node.target, "__name__", "")
        if not isinstance(handle, int) or handle in found or "." not in name:  # a view, a getitem: no kernel
            continue
        found[handle] = {"instruction": handle, "op": _op(node.target), "node": model_node(node),
                         "module": module_path(node), "source": source_line(node)}
    return [found[k] for k in sorted(found)]


def _op(target) -> str:
    namespace = getattr(target, "namespace", "")
    return f"{namespace}::{target.__name__}" if namespace else str(target)


def model_node(node) -> str:
    """The name of the node this one was made from by the lowering: the quantized model's
    (a cortex_m pass names its replacement after the pattern it took)."""
    sources = node.meta.get("from_node") or []
    return sources[-1].name if sources else node.name


def module_path(node) -> str:
    """The attribute path of the nn.Module that made the node (`b1.c2`; "" at the top)."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path = list(stack.values())[-1][0]
    for prefix in ("L['self'].", "L__self__."):
        path = path.removeprefix(prefix)
    return "" if path in ("L['self']", "L__self__") else path


def source_line(node) -> str:
    """`file.py:LINE` of the model's code that made the node ("" when no frame is the model's)."""
    lines = (node.meta.get("stack_trace") or "").splitlines()
    for line in reversed(lines):
        text = line.strip()
        if text.startswith('File "') and not any(t in text for t in _TOOL_FRAMES):
            path, _, rest = text[len('File "'):].partition('", line ')
            return f"{os.path.basename(path)}:{rest.split(',', 1)[0]}"
    return ""
