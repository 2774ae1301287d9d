"""What the quantizer and the cortex_m passes decided about the model's nodes, in their own words.

A call that is not a cortex_m kernel is explained by what happened to its node on the way, not
guessed from the program: the quantizer did not annotate it (which nodes, what operator each
was, whether any of the quantizer's patterns names that operator at all, and the rejections its
QuantizerReporter recorded), or a pass declined it (the warnings the passes log, each with the
node the pass was handling when it logged: upstream's messages name nodes of a graph the program
no longer has), or a pass failed while handling it (the node an exception was raised at).

What enters: the model prepare_pt2e annotated and its quantizer; the log records of
`executorch.backends` while a stage runs; an exception. What leaves: plain data the sidecar
keeps (`quantizer`, `passes`; cortexm.checking.lowering turns it into reasons), and the clause
a failed stage's line ends with.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from types import FrameType

from cortexm.lowering import provenance

# The loggers the quantizer and the passes write to (cortex_m's and the Arm backend's it uses).
LOGGER = "executorch.backends"
# A pass that logs does it within a few calls of the node it handles; the walk stops here.
MAX_FRAMES = 24
# Rejections that say nothing about a node's fate (it was taken by another pattern first).
_NOT_A_REASON = ("Tried annotating already quantized node.",)
ANNOTATION = "quantization_annotation"  # torchao's Q_ANNOTATION_KEY


def annotation(prepared, quantizer) -> dict:
    """What the quantizer did to each node of `prepared` (prepare_pt2e's result):
    {"not_annotated": [{node, op, module, source, patterned}], "rejected": [{nodes, reason}],
    "shared": {node: [nodes whose quantization parameters its output shares]}}. `patterned`:
    whether any pattern of the quantizer names the node's operator (None: the quantizer says
    nothing of its patterns)."""
    targets = _pattern_targets(quantizer)
    not_annotated: list[dict] = []
    shared: dict[str, list[str]] = {}
    for node in prepared.graph.nodes:
        if node.op != "call_function" or getattr(node.target, "__name__", "") == "getitem":
            continue
        mark = node.meta.get(ANNOTATION)
        if mark is None or not (any(q is not None for q in mark.input_qspec_map.values()) or mark.output_qspec):
            not_annotated.append({"node": node.name, "op": op_name(node.target), "module": provenance.module_path(node),
                                  "source": provenance.source_line(node),
                                  "patterned": None if targets is None else node.target in targets})
        for other in _sharing(node, mark):
            shared.setdefault(other, []).append(node.name)
    return {"not_annotated": not_annotated, "rejected": _rejections(quantizer), "shared": shared}


def _pattern_targets(quantizer) -> set | None:
    """Every operator the quantizer's patterns (and shared-qspec targets) name, or None."""
    found: set = set()
    told = False
    for part in getattr(quantizer, "quantizers", ()) or ():
        support = getattr(getattr(part, "pattern_matcher", None), "support_dict", None)
        if isinstance(support, dict):
            told = True
            found.update(t for pattern in support for t in pattern)
        if isinstance(getattr(part, "targets", None), (list, tuple, set)):
            told = True
            found.update(part.targets)
    return found if told else None


def _rejections(quantizer) -> list[dict]:
    """The patterns upstream's QuantizerReporter recorded as rejected, with its reason."""
    reporter = next((getattr(p, "reporter", None) for p in getattr(quantizer, "quantizers", ()) or ()
                     if getattr(p, "reporter", None) is not None), None)
    found = []
    for report in (getattr(reporter, "quantizers", None) or {}).values():
        for rejected in getattr(report, "rejected_patterns", ()):
            if rejected.rejection_reason not in _NOT_A_REASON:
                found.append({"nodes": list(rejected.node_names), "reason": rejected.rejection_reason})
    return found


def _sharing(node, mark) -> list[str]:
    """The nodes whose output quantization `node`'s annotation shares (SharedQuantizationSpec)."""
    if mark is None:
        return []
    names = []
    for spec in [*mark.input_qspec_map.values(), mark.output_qspec]:
        target = getattr(spec, "edge_or_node", None)
        if target is None:
            continue
        producer = target[0] if isinstance(target, tuple) else target
        if getattr(producer, "name", node.name) != node.name:
            names.append(producer.name)
    return list(dict.fromkeys(names))


def op_name(target) -> str:
    """aten.lstm.input, as a reader of a graph knows an operator."""
    name = str(target)
    return name.split(": schema", 1)[0].removeprefix("<EdgeOpOverload: ").removesuffix(">")


class _Listener(logging.Handler):
    """Keeps each warning of the backends with the node its pass was handling."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[dict] = []

    def emit(self, record: logging.LogRecord) -> None:
        entry = {"pass": record.name.rsplit(".", 1)[-1], "message": record.getMessage()}
        frame: FrameType | None = sys._getframe(1)
        for _ in range(MAX_FRAMES):
            if frame is None:
                break
            node = _fx_node(frame.f_locals.get("node"))
            if node is not None:
                owner = frame.f_locals.get("self")
                entry.update(_described(node))
                if owner is not None:
                    entry["pass"] = type(owner).__name__
                source = _fx_node(frame.f_locals.get("input_node"))
                if source is not None:
                    entry["input"] = provenance.model_node(source)
                break
            frame = frame.f_back
        self.records.append(entry)


def _fx_node(value):
    return value if type(value).__name__ == "Node" and hasattr(value, "meta") and hasattr(value, "target") else None


def _described(node) -> dict:
    """A node as the sidecar names it, and the float range its output is quantized over."""
    found: dict = {"node": provenance.model_node(node), "op": op_name(node.target), "module": provenance.module_path(node)}
    qparams = (node.meta.get("output_qparams") or {}).get(0)
    scale, zero_point = getattr(qparams, "scale", None), getattr(qparams, "zp", None)
    if qparams is not None and isinstance(scale, float) and isinstance(zero_point, int):
        found["range"] = [round((qparams.qmin - zero_point) * scale, 6), round((qparams.qmax - zero_point) * scale, 6)]
    return found


@contextlib.contextmanager
def listening(records: list[dict]):
    """Collect into `records` what the backends warn while the block runs (shown nowhere else:
    cortexm keeps the loggers quiet, and reports the warnings where a call needs them)."""
    logger = logging.getLogger(LOGGER)
    listener = _Listener()
    level, propagate = logger.level, logger.propagate
    logger.addHandler(listener)
    logger.setLevel(logging.WARNING)
    logger.propagate = False
    try:
        yield records
    finally:
        logger.removeHandler(listener)
        logger.setLevel(level)
        logger.propagate = propagate
        records.extend(listener.records)


def handled_when(error: BaseException) -> str:
    """The pass and the node a lowering was handling when `error` was raised, as a clause
    (`in ReplaceScalarWithTensorArgPass, handling aten.bmm.default (node bmm_1, module attn,
    model.py:47)`), or "" where no frame of the error's tracebacks holds a graph node."""
    node, pass_name = None, ""
    for frame in _frames(error):
        chosen = frame.f_locals.get("pass_cls") or frame.f_locals.get("transform_pass")
        if chosen is not None and not pass_name:
            pass_name = getattr(chosen, "__name__", type(chosen).__name__)
        for name in ("node", "n"):
            found = _fx_node(frame.f_locals.get(name))
            if found is not None and found.op == "call_function":
                node = found  # the innermost wins
    if node is None:
        return ""
    about = _described(node)
    where = ", ".join(p for p in (f"node {about['node']}", f"module {about['module']}" if about["module"] else "",
                                  provenance.source_line(node)) if p)
    return f"{'in ' + pass_name + ', ' if pass_name else ''}handling {about['op']} ({where})"


def _frames(error: BaseException):
    """The frames of `error`'s traceback and of the errors it was raised from, outermost first."""
    seen = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        tb = current.__traceback__
        while tb is not None:
            yield tb.tb_frame
            tb = tb.tb_next
        current = current.__cause__ or current.__context__
