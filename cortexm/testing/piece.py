"""The piece of a model one call was made from, as a module of its own: extracted, shrunk, written.

What enters: the original's float and quantized models (GraphModules of its export), its
sidecar's provenance (the model node each call was made from: cortexm.lowering.provenance), the
call, the example inputs and calibration samples. What leaves: a Piece: the call's model nodes
(its operator with the same parameters and weights, and the nodes the lowering folds into it: a
batch norm, a relu), the input that reached it when the original ran (the quantized model's
value there) and what the original's observers saw there (the float model's values over the
calibration samples: calibrated on them, the piece gets the original's quantization parameters);
smaller pieces (channels, spatial size); the piece as a case file and as a test in the style of
ExecuTorch's backends/cortex_m/test/ops. cortexm.testing.reduce drives it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from cortexm.base import writes
from cortexm.base.errors import CortexmError

# Failure lines name a call as `op#N` (verify), `call N op` (semantic), `instruction N` (lowering, run).
# (The memory check's "call K op (instruction N)" counts calls from 1: its instruction comes first.)
_CALL = (re.compile(r"#(\d+)\b"), re.compile(r"\binstruction (\d+)\b"), re.compile(r"\bcall (\d+) [\w:]"))
STAGE_ORDER = ("export", "lowering", "verify", "constants", "dialect", "run", "memory", "compare", "semantic",
               "upstream-reference", "accuracy", "cross-core")


@dataclass(frozen=True)
class Failure:
    stage: str
    line: str
    instruction: int | None  # the call the line names
    op: str  # that call's operator ("cortex_m::quantized_conv2d.out"; "" when the line names no call)

    @property
    def kind(self) -> tuple[str, str]:
        """What must match for a reproducer to fail "the same way": the stage, the call's operator."""
        return self.stage, self.op.split(".", 1)[0]

    @property
    def reason(self) -> str:
        """For a lowering failure, why its first call was left in float (cortexm.checking.reasons'
        words, without names, shapes and numbers): a reproducer must be left in float for the
        same reason, not only at a call of the same operator."""
        if self.stage != "lowering" or "): " not in self.line:
            return ""
        why = self.line.split("): ", 1)[1]
        why = re.split(r" \(|: |; ", why, maxsplit=1)[0]
        return re.sub(r"\s+", " ", re.sub(r"\d+", "", why)).strip()

    def describe(self) -> str:
        return f"{self.stage}: {self.line}"


def named_call(line: str) -> int | None:
    for pattern in _CALL:
        found = pattern.search(line)
        if found:
            return int(found.group(1))
    return None


# A line that names the model's nodes, not the calls' numbers: `left in float: 2
# aten::convolution.out (c1, c2); 1 aten::relu.out (relu): ... (node relu, models.py:126)`
# (cortexm.checking.reasons).
_NODES = (re.compile(r"\(node (\w+)[,)]"), re.compile(r"\b\w+::\w+\.\w+ \((\w+(?:, \w+)*)\)"))


# An export that stops in a pass or the quantizer names the node it was handling:
# `... (handling aten.matmul.default (node matmul, ops.py:192))` (cortexm.lowering.stage).
_HANDLING = re.compile(r"handling (\w+)\.(\w+)\.(\w+) \(node (\w+)[,)]")


def handled(line: str) -> tuple[str, str] | None:
    """(operator as a call names it, "aten::matmul.default"; the model node) of a failure that
    stopped while handling one node, or None."""
    found = _HANDLING.search(line)
    if found is None:
        return None
    return f"{found.group(1)}::{found.group(2)}.{found.group(3)}", found.group(4)


def named_node(line: str, calls: list[dict]) -> int | None:
    """The earliest call made from a model node the line names, by the node's name or its
    module's (a name only one call was made from)."""
    made = []
    for pattern in _NODES:
        for found in pattern.finditer(line):
            for name in found.group(1).split(", "):
                at = [c["instruction"] for c in calls if isinstance(c, dict) and name in (c.get("node"), c.get("module"))
                      and isinstance(c.get("instruction"), int)]
                made += at if len(at) == 1 else []
    return min(made) if made else None


def failures(result, calls: list[dict]) -> list[Failure]:
    """Every failure line of `result` (a CaseResult), earliest call first; lines naming no call
    after, in stage order. A line naming no call in a program of one computing call (an output
    off by some LSB) is that call's. `calls`: the sidecar's provenance."""
    ops = {c.get("instruction"): str(c.get("op", "")) for c in calls if isinstance(c, dict)}
    computing = [c for c in calls if isinstance(c, dict) and not _moves_only(str(c.get("op", "")))]
    alone = computing[0]["instruction"] if len({c.get("node") for c in computing}) == 1 else None
    found = []
    for stage, line in result.failures:
        n = named_call(line)
        n = named_node(line, calls) if n is None else n
        n = alone if n is None else n
        order = STAGE_ORDER.index(stage) if stage in STAGE_ORDER else len(STAGE_ORDER)
        op = ops.get(n, "") if n is not None else (handled(line) or ("", ""))[0]
        found.append(((n if n is not None else 10**9), order, Failure(stage, line, n, op)))
    return [f for *_, f in sorted(found, key=lambda f: f[:2])]


def first_failure(result, calls: list[dict]) -> Failure | None:
    """The failure of `result` at the earliest call its lines name (cortexm.testing.piece.failures)."""
    found = failures(result, calls)
    return found[0] if found else None


def _moves_only(op: str) -> bool:
    """A call that only converts or moves values (the program's input quantize, output dequantize)."""
    return any(word in op for word in ("quantize_per_tensor", "dequantize_per_tensor", "_copy", "view"))


# --- the piece of the model a call was made from -------------------------------------------

@dataclass
class Node:
    """One operator of the reproducer's forward: `var = torch.ops.<target>(*args)`."""

    var: str
    target: str  # "aten.conv2d.default"
    args: list  # ("in", k) | ("var", name) | ("const", key) | ("lit", value) | ("list", [...])


@dataclass
class Piece:
    nodes: list[Node]
    consts: dict[str, np.ndarray]
    example: list[np.ndarray]  # per input: the value that reached the call
    calibration: list[list[np.ndarray]]  # per calibration sample, per input: what the observers saw
    channels_last: list[bool]  # per input
    model_nodes: list[str] = field(default_factory=list)  # the original's nodes it holds
    buffers: set[str] = field(default_factory=set)  # constants that are buffers (a batch norm's statistics)
    # The original's data kind when its inputs lie beyond the calibrated range on purpose
    # ("beyond": cortexm.cases.data), so the reproducer's are not judged against it either.
    data: str = "uniform"

    @property
    def main(self) -> Node:
        return self.nodes[0]

    def describe(self) -> str:
        shapes = ", ".join(str(list(x.shape)) for x in self.example)
        return f"{' -> '.join(n.target.split('.')[1] for n in self.nodes)} on {shapes}"


def _const_key(name: str, taken: dict) -> str:
    """An attribute name for constant `name` ("features.4.weight" -> "weight", else the whole path)."""
    for key in (name.rsplit(".", 1)[-1], name):
        key = re.sub(r"\W", "_", key).strip("_") or "c"
        key = key if key[0].isalpha() else f"c_{key}"
        if key not in taken:
            return key
    while key in taken:
        key += "_"
    return key


def cut_out(floating, quantized, calls: list[dict], instruction: int, example: tuple, calibration: list[tuple],
            levels: int = 0) -> Piece:
    """The piece of the float model (a GraphModule) the call `instruction` was made from, with
    `levels` producing calls before it; its inputs as the quantized model computes them for
    `example`, and as the float model computes them for each calibration sample."""

    graph = {n.name: n for n in floating.graph.nodes}
    called = {str(c.get("node")) for c in calls if isinstance(c, dict)}
    here = next((c for c in calls if isinstance(c, dict) and c.get("instruction") == instruction), None)
    if here is None or str(here.get("node")) not in graph:
        raise CortexmError(f"call {instruction}: the program does not say which model node it was made from")
    members = _members(graph[str(here["node"])], called)
    for _ in range(levels):
        producers = [a for n in members for a in _node_args(n) if a.op == "call_function" and a not in members]
        for p in producers:
            while p.name not in called and _folded(p) and p.args and hasattr(p.args[0], "op"):
                p = p.args[0]  # back to the call the folded node belongs to
            members = [m for m in _members(p, called) if m not in members] + members
    order = [n for n in floating.graph.nodes if n in members]
    outside: list = []
    consts: dict[str, np.ndarray] = {}
    nodes: list[Node] = []
    names: dict = {}
    buffers: set[str] = set()
    for node in order:
        args = []
        for a in node.args:
            args.append(_arg(a, members, outside, consts, names, floating, buffers))
        names[node] = f"v{len(nodes)}"
        nodes.append(Node(names[node], str(node.target), args))
    # Where each outside value enters: the first member that takes it, at which argument.
    entries = []
    for value in outside:
        user = next(n for n in order if value in _node_args(n))
        entries.append((user.name, _position(user, value)))
    recorded = _capture(quantized, example, entries, "the quantized model")
    # A model input reaches the call as the program's own input quantize makes it: given as it was.
    placeholders = [n.name for n in floating.graph.nodes if n.op == "placeholder"]
    for k, value in enumerate(outside):
        if value.op == "placeholder" and value.name in placeholders:
            recorded[k] = example[placeholders.index(value.name)].detach().clone()
    seen = [_capture(floating, sample, entries, "the float model") for sample in calibration]
    layouts = [_channels_last(t) for t in recorded]
    return Piece(nodes, consts, [_numpy(t) for t in recorded], [[_numpy(t) for t in s] for s in seen], layouts,
                 [n.name for n in order], buffers)


def _channels_last(t) -> bool:
    """Laid out channels-last, by its strides (a tensor with size-1 dims is both layouts by torch's test)."""
    import torch

    return t.dim() == 4 and t.stride() == torch.empty(t.shape, memory_format=torch.channels_last).stride() \
        and t.stride() != torch.empty(t.shape).stride()


def _members(start, called: set[str]) -> list:
    """The call's node and those the lowering folds into it: users with no call of their own
    (a batch norm, an activation), while they take nothing else from the model."""
    members = [start]
    while True:
        users = [u for u in members[-1].users]
        if len(users) != 1 or users[0].op != "call_function" or users[0].name in called or not _folded(users[0]):
            return members
        user = users[0]
        if any(a.op not in ("get_attr",) and a not in members for a in _node_args(user)):
            return members
        members.append(user)


# Operators the cortex_m lowering folds into the call before them (a batch norm into a conv's
# weights, an activation into its output range).
_FOLDED = ("batch_norm", "relu", "hardtanh", "clamp")


def _folded(node) -> bool:
    return node.op == "call_function" and any(word in str(node.target) for word in _FOLDED)


def _node_args(node) -> list:
    import torch

    found: list = []
    torch.fx.node.map_arg((node.args, node.kwargs), lambda a: found.append(a))
    return found


def _position(user, value) -> int:
    for k, a in enumerate(user.args):
        if a is value:
            return k
    raise CortexmError(f"{user.name}: takes {value.name} inside a list, which reduce does not follow")


def _arg(a, members, outside, consts, names, module, buffers: set):
    import torch

    if isinstance(a, torch.fx.Node):
        if a in members:
            return ("var", names[a])
        if a.op == "get_attr":
            value = _attr(module, str(a.target))
            key = _const_key(str(a.target), consts)
            consts[key] = _numpy(value)
            if not isinstance(value, torch.nn.Parameter):
                buffers.add(key)
            return ("const", key)
        if a not in outside:
            outside.append(a)
        return ("in", outside.index(a))
    if isinstance(a, (list, tuple)):
        return ("list", [_arg(x, members, outside, consts, names, module, buffers) for x in a])
    if isinstance(a, (bool, int, float, str)) or a is None:
        return ("lit", a)
    if isinstance(a, torch.dtype):
        return ("lit", a)
    raise CortexmError(f"an argument reduce cannot write: {type(a).__name__}")


def _attr(module, target: str):
    value = module
    for part in target.split("."):
        value = getattr(value, part)
    return value


def _capture(module, inputs: tuple, entries: list[tuple[str, int]], what: str) -> list:
    """The values node `name` takes at argument `position`, for each entry, when `module` runs on `inputs`."""
    import torch

    got: dict[tuple[str, int], Any] = {}
    wanted = {name for name, _ in entries}

    class Capture(torch.fx.Interpreter):
        def run_node(self, n):
            if n.name in wanted:
                args, _ = self.fetch_args_kwargs_from_env(n)
                for name, position in entries:
                    if name == n.name:
                        got[(name, position)] = args[position].detach().clone()
            return super().run_node(n)

    with torch.no_grad():
        Capture(module).run(*inputs)
    missing = [name for name, position in entries if (name, position) not in got]
    if missing:
        raise CortexmError(f"{what} has no node {missing[0]}: reduce cannot record what reached it")
    return [got[e] for e in entries]


def _numpy(t) -> np.ndarray:
    return t.detach().contiguous().numpy().copy()


# --- shrinking ------------------------------------------------------------------------------

def smaller(piece: Piece) -> list[tuple[str, Piece]]:
    """Pieces one step smaller (fewer channels, a smaller image), most aggressive first, with
    what changed; for a piece of one operator, or one followed by a chain of one-input operators
    (a batch norm, an activation: their per-channel constants are cut with the first's channels)."""
    if any(len([a for a in n.args if a[0] in ("var", "in")]) != 1 for n in piece.nodes[1:]):
        return []  # a chain after the first operator takes nothing else: its shapes follow the first's
    out: list[tuple[str, Piece]] = []
    for what, make in _channel_steps(piece) + _spatial_steps(piece):
        try:
            candidate = make()
        except (IndexError, ValueError):
            continue
        if candidate is not None:
            out.append((what, candidate))
    return out


def _halves(n: int) -> list[int]:
    return [v for v in dict.fromkeys((1, n // 2)) if 0 < v < n]


def _sliced(piece: Piece, weight: str | None = None, bias: str | None = None, out: int | None = None,
            inp: int | None = None, feature_axis: int = 1, crop: tuple[int, int] | None = None,
            groups: int | None = None, transposed: bool = False) -> Piece:
    """`piece` with `out` output channels (the weight's and bias's first rows), `inp` input
    channels (the inputs' `feature_axis` and the weight's second axis; with `groups`, the grouped
    conv's channels and its groups), or the inputs cropped to `crop` = (axis, size). A
    transposed convolution's weight is [C_in, C_out, kh, kw]: its axes swap roles."""
    if transposed and weight is not None:
        return _sliced_transposed(piece, weight, bias, out, inp)
    consts = dict(piece.consts)

    def cut(x: np.ndarray) -> np.ndarray:
        if inp is not None:
            x = np.take(x, range(inp), axis=feature_axis if feature_axis >= 0 else x.ndim + feature_axis)
        if crop is not None:
            x = np.take(x, range(crop[1]), axis=crop[0])
        return x

    args = list(piece.main.args)
    rows = None  # the output channels left
    if weight is not None and groups is not None and inp is not None:
        rows = inp * (consts[weight].shape[0] // groups)
        args[6] = ("lit", inp)
    elif weight is not None:
        rows = out
        if inp is not None:
            consts[weight] = consts[weight][:, :inp]
    if weight is not None and rows is not None:
        chain = {a[1] for n in piece.nodes[1:] for a in n.args if a[0] == "const"}
        for key in [weight, bias, *chain]:
            if key and (key in (weight, bias) or consts[key].shape[:1] == consts[weight].shape[:1]):
                consts[key] = consts[key][:rows]
    return replace(piece, nodes=[replace(piece.main, args=args), *piece.nodes[1:]], consts=consts,
                   example=[cut(x) for x in piece.example],
                   calibration=[[cut(x) for x in sample] for sample in piece.calibration])


def _sliced_transposed(piece: Piece, weight: str, bias: str | None, out: int | None, inp: int | None) -> Piece:
    consts = dict(piece.consts)
    cout = consts[weight].shape[1]
    chain = {a[1] for n in piece.nodes[1:] for a in n.args if a[0] == "const"}
    if out is not None:
        consts[weight] = consts[weight][:, :out]
        for key in [bias, *chain]:
            if key and consts[key].shape[:1] == (cout,):
                consts[key] = consts[key][:out]
    if inp is not None:
        consts[weight] = consts[weight][:inp]

    def cut(x: np.ndarray) -> np.ndarray:
        return x if inp is None else np.take(x, range(inp), axis=1)

    return replace(piece, consts=consts, example=[cut(x) for x in piece.example],
                   calibration=[[cut(x) for x in sample] for sample in piece.calibration])


def _const(node: Node, k: int) -> str | None:
    return node.args[k][1] if len(node.args) > k and node.args[k][0] == "const" else None


def _channel_steps(piece: Piece) -> list[tuple[str, Callable[[], Piece]]]:
    main, x = piece.main, piece.example[0]
    target = main.target.split(".")[1]
    w, b = _const(main, 1), _const(main, 2)
    steps: list[tuple[str, Callable[[], Piece]]] = []
    if target in ("conv2d", "convolution") and w:
        groups = main.args[6][1] if len(main.args) > 6 and main.args[6][0] == "lit" else 1
        cin, cout = x.shape[1], piece.consts[w].shape[0]
        if groups == 1:
            steps += [(f"output channels {cout} -> {c}", partial(_sliced, piece, w, b, out=c)) for c in _halves(cout)]
            steps += [(f"input channels {cin} -> {c}", partial(_sliced, piece, w, b, inp=c)) for c in _halves(cin)]
        elif groups == cin and cout % cin == 0:
            steps += [(f"channels {cin} -> {c} (groups)", partial(_sliced, piece, w, b, inp=c, groups=cin))
                      for c in _halves(cin)]
    elif target == "conv_transpose2d" and w:
        groups = main.args[6][1] if len(main.args) > 6 and main.args[6][0] == "lit" else 1
        cin, cout = piece.consts[w].shape[:2]
        if groups == 1:
            steps += [(f"output channels {cout} -> {c}", partial(_sliced, piece, w, b, out=c, transposed=True))
                      for c in _halves(cout)]
            steps += [(f"input channels {cin} -> {c}", partial(_sliced, piece, w, b, inp=c, transposed=True))
                      for c in _halves(cin)]
    elif target == "linear" and w:
        fout, fin = piece.consts[w].shape
        steps += [(f"output features {fout} -> {c}", partial(_sliced, piece, w, b, out=c)) for c in _halves(fout)]
        steps += [(f"input features {fin} -> {c}", partial(_sliced, piece, w, b, inp=c, feature_axis=-1))
                  for c in _halves(fin)]
    elif not piece.consts and x.ndim >= 3 and len(piece.nodes) == 1 and all(e.shape == x.shape for e in piece.example):
        steps += [(f"channels {x.shape[1]} -> {c}", partial(_sliced, piece, inp=c)) for c in _halves(x.shape[1])]
    return steps


def _spatial_steps(piece: Piece) -> list[tuple[str, Callable[[], Piece]]]:
    x = piece.example[0]
    if x.ndim != 4 or any(e.shape != x.shape for e in piece.example):
        return []
    return [(f"{label} {x.shape[axis]} -> {n}", partial(_sliced, piece, crop=(axis, n)))
            for axis, label in ((2, "height"), (3, "width")) for n in _halves(x.shape[axis])]


# --- writing it -----------------------------------------------------------------------------

def _render(arg) -> str:
    kind, value = arg
    if kind == "in":
        return f"x{value}"
    if kind == "var":
        return value
    if kind == "const":
        return f"self.{value}"
    if kind == "list":
        return "[" + ", ".join(_render(a) for a in value) + "]"
    return repr(value)


def module_source(piece: Piece, stem: str) -> str:
    """The reproducer's module: its constants from STEM.<name>.npy beside the file, its forward
    the call's operators as the exported model has them."""
    inputs = ", ".join(f"x{k}" for k in range(len(piece.example)))
    lines = ["class Reduced(torch.nn.Module):",
             f'    """{piece.describe()}: the model nodes {", ".join(piece.model_nodes)} of the original."""', "",
             "    def __init__(self):", "        super().__init__()"]
    for key in piece.consts:
        lines.append(f"        self.register_buffer({key!r}, _load({key!r}))" if key in piece.buffers else
                     f"        self.{key} = torch.nn.Parameter(_load({key!r}), requires_grad=False)")
    if not piece.consts:
        lines.append("        pass")
    lines += ["", f"    def forward(self, {inputs}):"]
    for node in piece.nodes:
        lines.append(f"        {node.var} = torch.ops.{node.target}({', '.join(_render(a) for a in node.args)})")
    lines.append(f"        return {piece.nodes[-1].var}")
    return "\n".join(lines) + "\n"


def _inputs_source(piece: Piece) -> str:
    def tensor(name: str, k: int) -> str:
        layout = ".to(memory_format=torch.channels_last)" if piece.channels_last[k] else ""
        return f"_load({name!r}){layout}"

    example = ", ".join(tensor(f"input-{k}", k) for k in range(len(piece.example)))
    calib = ", ".join(f"_load('calibration-{k}')" for k in range(len(piece.example)))
    layouts = ", ".join(str(b) for b in piece.channels_last)
    return (f"def example_inputs():\n    return ({example},)\n\n\n"
            f"def calibration_samples():\n"
            f"    \"\"\"What the original's observers saw at this point, one sample per original calibration sample.\"\"\"\n"
            f"    layouts = ({layouts},)\n"
            f"    stacked = ({calib},)\n"
            f"    return [tuple(s[i].to(memory_format=torch.channels_last) if cl else s[i] for s, cl in zip(stacked, layouts))\n"
            f"            for i in range(stacked[0].shape[0])]\n")


_LOADER = '''HERE = Path(__file__).resolve().parent


def _load(name):
    return torch.from_numpy(np.load(HERE / f"{STEM}.{name}.npy"))
'''


def arrays(piece: Piece) -> dict[str, np.ndarray]:
    """name -> array, written as STEM.<name>.npy beside the case file."""
    out = {f"input-{k}": x for k, x in enumerate(piece.example)}
    out.update({f"calibration-{k}": np.stack([s[k] for s in piece.calibration]) for k in range(len(piece.example))})
    out.update(piece.consts)
    return out


def case_file(piece: Piece, name: str, stem: str, header: str) -> str:
    comments = "\n".join(f"# {line}" if line else "#" for line in header.splitlines())
    return (f"{comments}\nfrom pathlib import Path\n\nimport numpy as np\nimport torch\n\n"
            f"from cortexm.cases.registry import register\n\nSTEM = {stem!r}\n{_LOADER}\n\n"
            f"{module_source(piece, stem)}\n\n{_inputs_source(piece)}\n\n"
            f"@register({name!r}, {piece.describe()!r}{'' if piece.data == 'uniform' else f', data={piece.data!r}'})\n"
            f"def _():\n"
            f"    return Reduced().eval(), example_inputs(), calibration_samples()\n")


def upstream_test(piece: Piece, name: str, stem: str, header: str, before: dict[str, int], after: dict[str, int],
                  xfail: str) -> str:
    """A test in the style of ExecuTorch's backends/cortex_m/test/ops: the module with its
    ops_before_transforms / ops_after_transforms, a McuTestCase, a dialect and an implementation
    test through CortexMTester, calibrated on the original's observed values."""
    comments = "\n".join(f"# {line}" if line else "#" for line in header.splitlines())
    module = module_source(piece, stem).replace(
        '    def __init__(self):',
        f"    ops_before_transforms = {before!r}\n\n    ops_after_transforms = {after!r}\n\n    def __init__(self):", 1)
    marks = f'xfails: dict[str, xfail_type] = {{{name!r}: {xfail!r}}}\n' if xfail else "xfails: dict[str, xfail_type] = {}\n"
    return f'''{comments}
from pathlib import Path

import numpy as np
import torch
from executorch.backends.arm.test.common import parametrize, xfail_type
from executorch.backends.cortex_m.test.tester import CortexMTester, McuTestCase

STEM = {stem!r}
{_LOADER}

{module}

{_inputs_source(piece)}

test_cases = {{
    {name!r}: McuTestCase(model=Reduced().eval(), example_inputs=example_inputs),
}}

{marks}

@parametrize("test_case", test_cases)
def test_dialect_{name}(test_case, cortex_m_target):
    tester = CortexMTester(test_case.model, test_case.get_example_inputs(), target_config=cortex_m_target)
    tester.test_dialect(test_case.model.ops_before_transforms, test_case.model.ops_after_transforms,
                        qtol=1, calibration_samples=calibration_samples())


@parametrize("test_case", test_cases, xfails=xfails)
def test_implementation_{name}(test_case, cortex_m_target):
    tester = CortexMTester(test_case.model, test_case.get_example_inputs(), target_config=cortex_m_target)
    tester.test_implementation(qtol=1, calibration_samples=calibration_samples())
'''


def edge_op_counts(piece: Piece, core: str) -> tuple[dict[str, int], dict[str, int]]:
    """The operator counts upstream's dialect test checks, before and after the cortex_m passes,
    as CortexMTester's own stages give them for the piece (its check_count reads the stage's
    graph code)."""
    import torch
    from executorch.backends.cortex_m.target_config import CortexMTargetConfig
    from executorch.backends.cortex_m.test.tester import CortexMQuantize, CortexMTester

    from cortexm.lowering.quantize import quiet_loggers

    quiet_loggers()
    module, example = build_module(piece)
    samples = [tuple(torch.from_numpy(a).to(memory_format=torch.channels_last) if cl else torch.from_numpy(a)
                     for a, cl in zip(s, piece.channels_last, strict=True)) for s in piece.calibration]
    tester = CortexMTester(module, example, target_config=CortexMTargetConfig.from_target_string(core))
    tester.quantize(CortexMQuantize(calibration_samples=samples)).export().to_edge()
    before = _counts(tester.stages[tester.cur].graph_module.code)
    tester.run_passes()
    after = _counts(tester.stages[tester.cur].graph_module.code)
    return before, after


def _counts(code: str) -> dict[str, int]:
    from collections import Counter

    names = Counter(re.findall(r"executorch_exir_dialects_edge__ops_\w+", code))
    return dict(sorted(names.items()))


def build_module(piece: Piece):
    """The piece as a module and its example inputs, in this process (what the case file builds)."""
    import torch

    namespace: dict = {"torch": torch, "_load": lambda key: torch.from_numpy(piece.consts[key])}
    exec(module_source(piece, ""), namespace)  # noqa: S102 - our own generated source
    example = tuple(torch.from_numpy(x).to(memory_format=torch.channels_last) if cl else torch.from_numpy(x)
                    for x, cl in zip(piece.example, piece.channels_last, strict=True))
    return namespace["Reduced"]().eval(), example


def write(piece: Piece, folder: Path, stem: str, files: dict[str, str]) -> list[Path]:
    """The case file(s) and the arrays beside them."""
    written = []
    for key, array in arrays(piece).items():
        path = folder / f"{stem}.{key}.npy"
        writes.save_npy(path, np.ascontiguousarray(array), inside=folder)
        written.append(path)
    for filename, text in files.items():
        writes.atomic(folder / filename, text, inside=folder)
        written.append(folder / filename)
    return written
