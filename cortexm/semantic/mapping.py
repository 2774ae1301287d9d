"""Which program call computes each point of the quantized model: by provenance, never by shape.

What enters: the quantized model's graph and the program's calls, each with the name of the
model node it was made from (the export's `calls`, cortexm.lowering.provenance: torch's
`from_node`, which to_edge and the cortex_m passes carry over to every node they make). What
leaves: for each point (an activation quantize of the model) how the program holds its value:

- `Own(calls)`: the integer calls made from the point's own operators (those between the
  point and the dequantizes that feed it, the quantize itself included). Mostly one; a pass
  that splits an operator makes more, and one that copies a node's metadata onto a node it
  adds names the copy's source (the minimum ExecuTorch's hardswish decomposition adds after
  a linear carries the linear's provenance): cortexm.semantic.model takes the first within
  its operator's tolerance of the model's value (_Forced._own).
- `Viewed(source)`: no call of its own, and its operators only reshape or reorder a value
  (flatten, view, permute, ...): the program holds it as a view of the point it comes from,
  so it is that point's value put through the same operators.
- absent: no call of its own and operators that compute (a call the lowering dropped, or
  folded into another): not observed; nor is a view of a point the program does not hold.

A value the program does not compute is never compared with a call that computes something
else because the two have the same shape.
"""

from __future__ import annotations

from dataclasses import dataclass

# Operators that move values without computing new ones: a point made of these alone needs no
# call, the program views its input. RESHAPES keep the order of the elements (a C-order
# reshape of the logical value); the others reorder them.
RESHAPES = frozenset({"view", "reshape", "_unsafe_view", "flatten", "unflatten", "squeeze", "unsqueeze"})
VIEWS = RESHAPES | {"permute", "transpose", "t", "contiguous", "clone", "alias", "detach"}


@dataclass(frozen=True)
class Own:
    calls: tuple[int, ...]  # indices into the calls given to `map_points`, in program order


@dataclass(frozen=True)
class Viewed:
    source: str  # the point whose value this one views
    nodes: tuple  # the model's view operators, in order, from the source's dequantize to the point


def is_activation_quantize(node) -> bool:
    """A quantize of a computed value (not of a constant weight or bias)."""
    return (node.op == "call_function" and "quantize_per_tensor" in str(node.target)
            and "dequantize" not in str(node.target) and getattr(node.args[0], "op", None) != "get_attr")


def is_dequantize(node) -> bool:
    return node.op == "call_function" and "dequantize_per" in str(node.target)


def base_name(node) -> str:
    """`flatten` for aten.flatten.using_ints."""
    parts = str(node.target).split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def own_nodes(point) -> list:
    """The point's own operators, in graph order: back from its quantize to the dequantizes
    (and inputs, constants) that feed them, the quantize included."""
    found, todo = {point}, [point.args[0]]
    while todo:
        node = todo.pop()
        if not hasattr(node, "op") or node in found or node.op != "call_function" or is_dequantize(node):
            continue
        found.add(node)
        todo += node.all_input_nodes
    order = {n: k for k, n in enumerate(point.graph.nodes)}
    return sorted(found, key=order.__getitem__)


def map_points(graph, made_from: list[str | None]) -> dict[str, Own | Viewed]:
    """point name -> how the program holds it, for a program whose integer calls were made from
    the model nodes `made_from` (in program order; None where the program does not say)."""
    calls_of: dict[str, list[int]] = {}
    for k, name in enumerate(made_from):
        if name:
            calls_of.setdefault(name, []).append(k)
    mapped: dict[str, Own | Viewed] = {}
    for point in (n for n in graph.nodes if is_activation_quantize(n)):
        nodes = own_nodes(point)
        own = sorted(k for n in nodes for k in calls_of.get(n.name, []))
        if own:
            mapped[point.name] = Own(tuple(own))
            continue
        source = _viewed_point(point, nodes)
        if source is not None:  # held only as far as the program holds its source
            mapped[point.name] = Viewed(source.name, tuple(n for n in nodes if n is not point))
    return mapped


def _viewed_point(point, nodes: list):
    """The point whose value `point` views, when its own operators only view one dequantized
    value (of that point); else None."""
    operators = [n for n in nodes if n is not point]
    if not operators or any(base_name(n) not in VIEWS for n in operators):
        return None
    inputs = {i for n in operators for i in n.all_input_nodes if i not in nodes}
    if len(inputs) != 1:
        return None
    (dequantize,) = inputs
    source = dequantize.args[0] if is_dequantize(dequantize) else None
    return source if source is not None and is_activation_quantize(source) else None


def apply_views(viewed: Viewed, value):
    """The source point's value (a torch tensor) put through the model's view operators."""
    from torch.fx.node import map_arg

    values: dict = {}
    for node in viewed.nodes:  # any node not computed here is the source's dequantize (_viewed_point)
        args = map_arg(node.args, lambda n: values.get(n, value))
        kwargs = map_arg(node.kwargs, lambda n: values.get(n, value))
        values[node] = node.target(*args, **kwargs)
    return values[viewed.nodes[-1]]
