"""Why a call is not a cortex_m kernel, from what the lowering recorded about its model node.

cortexm.lowering.decisions keeps in the sidecar what the quantizer did to each node
(`quantizer`: the nodes it did not annotate, the operator each was, whether any of its patterns
names that operator, the rejections upstream's QuantizerReporter recorded, and whose
quantization parameters an output shares) and what the cortex_m passes said (`passes`: each
warning with the node the pass was handling). This turns them into the reason for one call,
with the fix where one is known and was measured to lower (docs/deployment.md). A program
without those records (exported elsewhere, or by an older cortexm) gets none from here:
cortexm.checking.lowering then says only what the program itself shows.
"""

from __future__ import annotations

from dataclasses import dataclass

# The model operator's base name (aten.conv1d.default -> conv1d) -> what to write instead.
FIXES = {
    "conv1d": "fix: nn.Conv2d with a (1, k) kernel over the input as [N, C, 1, L] in channels_last, which the "
              "quantizer takes and CMSIS-NN runs",
    "lstm": "torch.ao.nn.quantizable.LSTM is the form the quantizer annotates (upstream's test/ops/test_lstm.py), "
            "but the cortex_m passes of ExecuTorch 1.5.1 and main cff6f4dd then fail on its gates' sigmoid "
            "('quantized_activation input must be int8'; upstream skips that test as not implemented yet): "
            "no form of an LSTM lowers there",
    "mean": "fix, for a mean over H and W: nn.AdaptiveAvgPool2d(1), which the quantizer's passes make an average "
            "pool and CMSIS-NN runs",
}
# A Python scalar operand: ReplaceScalarWithTensorArgPass makes it a float constant nothing quantizes.
SCALAR_FIX = ("fix: make the scalar a tensor of the other operand's shape that the model holds "
              "(self.register_buffer(NAME, torch.full(SHAPE, VALUE))): the quantizer quantizes it and the call is lowered")
# What an activation fusion leaves behind when a pass declines it (ActivationFusionPass's patterns
# are a quantizer pattern of two nodes: the first has no output quantization of its own).
FUSED_ACTIVATIONS = frozenset({"relu", "relu_", "hardtanh", "hardtanh_", "hardsigmoid", "hardsigmoid_", "clamp", "clamp_"})


def base_of(op: str) -> str:
    """aten.conv1d.default or aten::convolution.out -> conv1d, convolution."""
    name = op.split("::", 1)[-1]
    parts = name.split(".")
    return parts[1] if len(parts) > 2 and parts[0] in ("aten", "cortex_m", "quantized_decomposed") else parts[0]


@dataclass(frozen=True)
class Records:
    """The sidecar's `quantizer` and `passes`, indexed by model node."""

    not_annotated: dict[str, dict]
    rejected: dict[str, str]
    shared: dict[str, list]
    passes: list[dict]

    @classmethod
    def of(cls, quantizer: dict | None, passes: list | None) -> Records | None:
        if not isinstance(quantizer, dict):
            return None
        rejected: dict[str, str] = {}
        for entry in quantizer.get("rejected") or []:
            for node in entry.get("nodes") or []:
                rejected.setdefault(node, str(entry.get("reason") or ""))
        said = [*(quantizer.get("warnings") or []), *(passes or [])]  # while quantizing, then in the passes
        return cls({e["node"]: e for e in quantizer.get("not_annotated") or [] if isinstance(e, dict) and "node" in e},
                   rejected, dict(quantizer.get("shared") or {}), [p for p in said if isinstance(p, dict)])

    def annotated(self, node: str) -> bool:
        return node not in self.not_annotated

    def reason(self, node: str, call_op: str) -> str | None:
        """Why the call `call_op` made from model node `node` is not a cortex_m kernel, as far as
        the quantizer's and the passes' records tell (None: they tell nothing of it)."""
        entry = self.not_annotated.get(node)
        if entry is not None:
            return self._not_annotated(entry, call_op)
        declined = [p for p in self.passes if p.get("input") == node or p.get("node") == node]
        if declined:
            return self._declined(node, declined[0])
        return None

    def _not_annotated(self, entry: dict, call_op: str) -> str:
        op, node = entry.get("op", "?"), entry["node"]
        where = ", ".join(p for p in (f"node {node}", entry.get("module") and f"module {entry['module']}",
                                      entry.get("source")) if p)
        made = "" if base_of(op) == base_of(call_op) else ", which to_edge made into this call"
        if node in self.rejected:
            why = f"upstream's QuantizerReporter: '{self.rejected[node]}'"
        elif entry.get("patterned") is False:
            why = f"no pattern of the quantizer has {op}"
        elif entry.get("patterned"):
            why = f"a pattern of the quantizer has {op}, but none matched here"
        else:
            why = "its patterns were not recorded"
        fix = FIXES.get(base_of(op))
        return f"the quantizer did not annotate {op} ({where}){made}: {why}" + (f"; {fix}" if fix else "")

    def _declined(self, node: str, said: dict) -> str:
        message = f"{said.get('pass', 'a pass')}: '{said.get('message', '')}'"
        if said.get("input") != node:
            return f"the quantizer annotated it, and {message}"
        other = said.get("node", "?")
        named = f"{other} ({said['module']})" if said.get("module") else other
        detail = ""
        span = said.get("range")
        if isinstance(span, list) and len(span) == 2:
            detail = f"; {other}'s output is quantized over [{span[0]:g}, {span[1]:g}]"
            sharing = self.shared.get(other)
            if sharing:
                detail += f", the parameters it shares with {', '.join(sharing)}"
        left = ""
        if base_of(said.get("op", "")) in FUSED_ACTIVATIONS:
            left = (f": the quantizer took {node} and {other} as one pattern, so without the fusion {node} has no "
                    "output quantization of its own and no cortex_m kernel took it")
        return f"the {said.get('op', 'call')} after it, {named}, was not fused into it ({message}{detail}){left}"
