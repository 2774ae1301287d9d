"""Proving a verdict of `cortexm test` on a zoo model by a path of its own.

cortexm judges a program with its integer reference (cortexm.oracle), the semantic reference
(cortexm.semantic) and its checks (cortexm.checking). None of them is imported here. This
module lowers the model again with upstream's own flow, the way upstream's test harness does
(backends/cortex_m/test/tester.py: torch.export, CortexMQuantizer, prepare/convert_pt2e,
to_edge with the cortex_m edge config, CortexMPassManager with the core's target config,
to_executorch), runs the simulator on the program cortexm judged (`cortexm run`, a
measurement, not a judge), and compares:

  same     the program it lowered is byte for byte the one cortexm judged (sha256), so what
           follows speaks of that program
  dialect  the simulator's outputs against upstream's Python reference of the lowered program
           (the edge program after the cortex_m passes, run with ops/operators.py, as
           test_dialect does), in quantization steps of the output
  model    the simulator's outputs against the PT2E quantized model run in torch (what
           upstream's harness compares every stage with): SQNR and top-1
  float    the simulator's outputs against the float model on the model's own example input:
           SQNR, against the floor the README states (20 dB less 10 log10 of the model's
           activation quantization points)
  float ops  compute operators the passes left outside the cortex_m dialect, read off the graph
  runs     whether the simulator runs the program at all (the run skips cortexm's audit)

A verdict is proven when this evidence says the same: a PASS needs every comparison to hold,
a failure needs the evidence to show a failure of the kind the verdict names.
"""

from __future__ import annotations

import copy
import hashlib
import math
import subprocess
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

# Differences between the simulator and operators.py that upstream's own model tests allow
# (test_mobilenet_v1_025, test_deep_autoencoder: qtol=1): operators.py averages in float and
# rounds some quantizes otherwise than CMSIS-NN, and one step in a layer can move the next.
DIALECT_LSB = 1
# Where the difference is larger, what upstream's MobileNetV3 test then asks (qtol=20, top-1
# agrees): every element within DIALECT_WIDE_LSB and the top class the same.
DIALECT_WIDE_LSB = 20
# The program against its PT2E quantized model, as upstream's harness compares a whole model
# with it: within qtol output steps, the widest its model tests allow (test_mobilenet_v3: 20),
# and the top class the same.
MODEL_LSB = 20
FLOOR_DB = 20.0  # README, "test": the accuracy floor of one quantization stage

# Edge operators that move or reshape values and compute nothing: left out of the float ops.
MOVEMENT = ("view", "reshape", "permute", "transpose", "clone", "cat", "slice", "select", "squeeze", "unsqueeze",
            "expand", "split", "split_with_sizes", "chunk", "_to_dim_order", "_clone_dim_order", "alias", "t_copy", "contiguous",
            "unbind", "getitem", "flatten", "quantize_per_tensor", "dequantize_per_tensor", "full", "zeros", "ones",
            "arange", "scalar_tensor", "sym_size", "_assert", "lift_fresh")


@dataclass
class Evidence:
    """What the independent path found for one model on one core."""

    lowered: str = ""  # "" when it lowered, else the first line of what failed
    same: bool | None = None  # its program is the one cortexm judged
    float_ops: list[str] = field(default_factory=list)
    runs: str | None = None  # "" ran, else the simulator's failure line; None: not run
    dialect_lsb: float | None = None  # max |sim - operators.py| in output steps
    dialect_share: float | None = None  # share of elements within DIALECT_LSB
    dialect_top1: bool | None = None
    model_lsb: float | None = None
    model_sqnr: float | None = None
    model_top1: bool | None = None
    hardswish_lsb: float | None = None  # hardswish_departure of the model's hardswishes
    float_sqnr: float | None = None
    floor: float | None = None
    points: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def dialect_holds(self) -> bool:
        if self.dialect_lsb is None:
            return False
        if self.dialect_lsb <= DIALECT_LSB:
            return True
        return self.dialect_lsb <= DIALECT_WIDE_LSB and self.dialect_top1 is not False

    @property
    def model_holds(self) -> bool:
        return self.model_lsb is not None and self.model_lsb <= MODEL_LSB and self.model_top1 is not False

    @property
    def float_holds(self) -> bool:
        return self.float_sqnr is not None and self.floor is not None and self.float_sqnr >= self.floor

    def summary(self) -> str:
        if self.lowered:
            return f"lowering failed: {self.lowered}"
        parts = []
        if self.float_ops:
            parts.append(f"left in float: {', '.join(self.float_ops)}")
        if self.runs:
            parts.append(f"sim fails: {self.runs}")
        if self.dialect_lsb is not None:
            parts.append(f"vs operators.py {self.dialect_lsb:g} LSB")
        if self.model_sqnr is not None:
            parts.append(f"vs PT2E {self.model_lsb:g} LSB ({_db(self.model_sqnr)}"
                         f"{'' if self.model_top1 is not False else ', top-1 differs'})")
        if self.same is False:
            parts.append("NOT the judged program")
        return "; ".join(parts + self.notes) or "-"


def _db(value: float | None) -> str:
    return "-" if value is None else ("exact" if math.isinf(value) else f"{value:.1f} dB")


def sqnr(signal: np.ndarray, test: np.ndarray) -> float:
    signal, test = signal.astype(np.float64).ravel(), test.astype(np.float64).ravel()
    noise = float(np.sum((signal - test) ** 2))
    power = float(np.sum(signal ** 2))
    return math.inf if noise == 0 else 10 * math.log10(max(power, 1e-30) / noise)


def _tensors(out) -> list:
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [o.detach().float().contiguous().numpy() for o in outs]


@dataclass
class Quantized:
    """A zoo model through upstream's quantization: what every core's lowering starts from."""

    name: str
    example: tuple
    float_outputs: list
    model_outputs: list  # the PT2E quantized model's
    scales: list  # each output's quantization step (None for a float output)
    points: int  # activation quantization points (quantize nodes) of the quantized model
    edge: object = None  # to_edge of the quantized model
    # Each hardswish of the quantized model: its input's and its output's (scale, zero point).
    hardswish: list = field(default_factory=list)
    failed: str = ""


def quantize(case) -> Quantized:
    """Build the case as cortexm does (torch seeded by the case name) and quantize it as upstream's
    harness does; calibration on one thread, as cortexm's lowering calibrates."""
    import torch
    from executorch.backends.cortex_m.edge_compile_config import cortex_m_edge_compile_config
    from executorch.backends.cortex_m.quantizer.quantizer import CortexMQuantizer
    from executorch.exir import to_edge
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    torch.manual_seed(zlib.crc32(case.name.encode()))
    module, example, calibration = case.build()
    example = tuple(example)
    with torch.no_grad():
        float_outputs = _tensors(module(*example))
    result = Quantized(case.name, example, float_outputs, [], [], 0)
    try:
        graph = torch.export.export(module, example, strict=True).module(check_guards=False)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            prepared = prepare_pt2e(graph, CortexMQuantizer())
            for sample in calibration:
                prepared(*sample)
            quantized = convert_pt2e(prepared)
        finally:
            torch.set_num_threads(threads)
        with torch.no_grad():
            result.model_outputs = _tensors(quantized(*example))
        exported = torch.export.export(quantized, example, strict=True)
        result.scales = _output_scales(exported)
        result.points = sum(1 for n in exported.graph.nodes if n.op == "call_function"
                            and str(n.target).startswith("quantized_decomposed.quantize_per_tensor"))
        result.hardswish = _hardswish_points(exported)
        result.edge = to_edge(exported, compile_config=cortex_m_edge_compile_config())
    except Exception as e:  # what failed is the evidence
        result.failed = _line(e)
    return result


def _output_scales(program) -> list:
    """Each output's step: the scale of the dequantize that makes it (as upstream's harness finds it)."""
    output = next(n for n in program.graph.nodes if n.op == "output")
    values = output.args[0] if isinstance(output.args[0], (tuple, list)) else (output.args[0],)
    return [float(v.args[1]) if getattr(v, "op", "") == "call_function" and "dequantize_per_tensor" in str(v.target) else None
            for v in values]


def _hardswish_points(program) -> list:
    points = []
    for node in program.graph.nodes:
        if node.op != "call_function" or "hardswish" not in str(node.target):
            continue
        source = node.args[0]
        out = next((u for u in node.users if "quantize_per_tensor" in str(u.target)), None)
        if "dequantize_per_tensor" in str(getattr(source, "target", "")) and out is not None:
            points.append((float(source.args[1]), int(source.args[2]), float(out.args[1]), int(out.args[2])))
    return points


def hardswish_departure(points: list) -> float | None:
    """The largest departure, in output steps, of upstream's hardswish decomposition
    (passes/decompose_hardswish_pass.py: x * (min(x, q(3)) + 3) / 6, the + 3 as the second
    operand's zero point shifted by round(3 / scale), the output scale times 6) from the quantized
    model's hardswish, over every int8 input, both computed exactly with the model's quantization
    (CMSIS-NN's fixed-point requantize adds its own rounding on top)."""
    worst = None
    for s_in, zp_in, s_out, zp_out in points:
        x = np.arange(-128, 128, dtype=np.float64)
        real = s_in * (x - zp_in)
        model = np.clip(np.round(real * np.clip(real + 3, 0, 6) / 6 / s_out) + zp_out, -128, 127)
        q3 = min(max(round(3 / s_in) + zp_in, -128), 127)
        shifted = zp_in - round(3 / s_in)
        program = np.clip(np.round(real * s_in * (np.minimum(x, q3) - shifted) / (6 * s_out) + zp_out), -128, 127)
        depart = float(np.abs(program - model).max())
        worst = depart if worst is None else max(worst, depart)
    return worst


def _line(e: BaseException) -> str:
    return f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:200]}"


def lower(q: Quantized, target_string: str):
    """The cortex_m passes for one core on a copy of the edge program."""
    from executorch.backends.cortex_m.passes.cortex_m_pass_manager import CortexMPassManager
    from executorch.backends.cortex_m.target_config import CortexMTargetConfig

    edge = copy.deepcopy(q.edge)
    edge._edge_programs["forward"] = CortexMPassManager(
        edge.exported_program(), target_config=CortexMTargetConfig.from_target_string(target_string)).transform()
    return edge


def float_ops(program) -> list[str]:
    """Compute operators of the lowered graph outside the cortex_m dialect (by base name)."""
    left = set()
    for node in program.graph.nodes:
        if node.op != "call_function":
            continue
        parts = str(getattr(node.target, "__name__", node.target)).split(".")
        if parts[0] != "aten" or len(parts) < 2:
            continue  # cortex_m kernels, quantized_decomposed q/dq, getitem
        base = parts[1].removesuffix("_copy")
        if base not in MOVEMENT:
            left.add(base)
    return sorted(left)


def simulate(pte: Path, core: str, outputs: int, cortexm: list[str]) -> tuple[list | None, str]:
    """The program run on the core's simulator through `cortexm run` (its audit skipped: a refused
    argument must show in the run itself); the outputs in their logical shapes, or the failure."""
    with tempfile.TemporaryDirectory() as tmp:
        saves = [f"{tmp}/out-{k}.npy" for k in range(outputs)]
        cmd = [*cortexm, "run", str(pte), "-t", core, "--no-audit", "--json", *[a for s in saves for a in ("--save", s)]]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if not all(Path(s).is_file() for s in saves):
            text = (done.stderr.strip() or done.stdout.strip()).splitlines()
            return None, (text[-1] if text else f"exit {done.returncode}")[:240]
        return [np.load(s) for s in saves], ""


def prove(q: Quantized, core: str, target_string: str, judged: dict | None, cortexm: list[str]) -> Evidence:
    """The evidence for one model on one core; `judged`: cortexm's sidecar of the program it
    judged (None when it exported nothing)."""
    import torch

    ev = Evidence(points=q.points)
    if q.failed:
        ev.lowered = q.failed
        return ev
    try:
        edge = lower(q, target_string)
    except Exception as e:
        ev.lowered = _line(e)
        return ev
    program = edge.exported_program()
    ev.float_ops = float_ops(program)
    ev.floor = round(FLOOR_DB - 10 * math.log10(max(1, q.points)), 2)
    ev.hardswish_lsb = hardswish_departure(q.hardswish)
    try:
        with torch.no_grad():
            dialect = _tensors(program.module()(*q.example))
    except Exception as e:
        dialect = None
        ev.notes.append(f"operators.py cannot run it: {_line(e)}")
    if judged is None:
        ev.notes.append("cortexm exported no program")
        return ev
    try:  # last: to_executorch changes the program it is given
        pte = edge.to_executorch().buffer
        ev.same = hashlib.sha256(pte).hexdigest() == judged["sidecar"].get("pte_sha256")
    except Exception as e:
        ev.notes.append(f"to_executorch fails: {_line(e)}")
    outputs, failure = simulate(Path(judged["pte"]), core, len(q.model_outputs), cortexm)
    ev.runs = failure
    if outputs is None:
        return ev
    outputs = [o.astype(np.float32).reshape(m.shape) for o, m in zip(outputs, q.model_outputs, strict=False)]
    if dialect is not None:
        steps, within, top1 = 0.0, [], True
        for sim, ref, scale in zip(outputs, dialect, q.scales, strict=False):
            diff = np.abs(sim.astype(np.float64) - ref.astype(np.float64)) / (scale or 1.0)
            steps = max(steps, float(np.round(diff.max(), 3)))
            within.append(float(np.mean(diff <= DIALECT_LSB + 1e-6)))
            top1 &= _top1(sim) == _top1(ref)
        ev.dialect_lsb, ev.dialect_share, ev.dialect_top1 = steps, min(within), top1
    ev.model_lsb = max(float(np.round((np.abs(m.astype(np.float64) - s) / (scale or 1.0)).max(), 3))
                       for m, s, scale in zip(q.model_outputs, outputs, q.scales, strict=False))
    ev.model_sqnr = min(sqnr(m, s) for m, s in zip(q.model_outputs, outputs, strict=False))
    ev.model_top1 = all(_top1(m) == _top1(s) for m, s in zip(q.model_outputs, outputs, strict=False))
    ev.float_sqnr = min(sqnr(f, s) for f, s in zip(q.float_outputs, outputs, strict=False))
    return ev


def _top1(x: np.ndarray):
    """The top class of a classifier-shaped output ([1, classes]), else None."""
    return int(x.argmax()) if x.ndim == 2 and x.shape[0] == 1 and 2 <= x.shape[1] <= 1000 else None


# --- judging the verdict --------------------------------------------------------------------

def proven(status: str, stages: list[str], ev: Evidence) -> tuple[bool, str]:
    """Whether the evidence says what cortexm's verdict says, and why. `stages`: the stages the
    verdict failed at (cortexm's `failures`)."""
    if status == "PASS":
        why = []
        if ev.lowered:
            why.append(f"the lowering fails here: {ev.lowered}")
        if ev.float_ops:
            why.append(f"left in float: {', '.join(ev.float_ops)}")
        if ev.same is False:
            why.append("another program than the one judged")
        if ev.runs:
            why.append(f"the simulator fails: {ev.runs}")
        if not ev.dialect_holds:
            why.append(f"the simulator departs from operators.py by {ev.dialect_lsb} LSB")
        if not ev.model_holds:
            why.append(f"the simulator departs from the PT2E model by {ev.model_lsb} LSB")
        if not ev.float_holds:
            why.append(f"SQNR vs float {_db(ev.float_sqnr)} below the floor {ev.floor}")
        return (not why, "; ".join(why) or "every comparison holds")
    shown = []
    if ev.lowered:
        shown.append(("export", f"the lowering fails: {ev.lowered}"))
    if ev.float_ops:
        shown.append(("lowering", f"left in float: {', '.join(ev.float_ops)}"))
    if ev.runs:
        shown.append(("sim", f"the simulator fails: {ev.runs}"))
    if ev.dialect_lsb is not None and not ev.dialect_holds:
        shown.append(("compare", f"the simulator departs from operators.py by {ev.dialect_lsb:g} LSB"))
    if ev.model_sqnr is not None and not ev.model_holds:
        shown.append(("semantic", f"the simulator departs from the PT2E model by {ev.model_lsb:g} LSB"))
    if ev.hardswish_lsb is not None and ev.hardswish_lsb > DIALECT_LSB:
        shown.append(("semantic", f"upstream's hardswish decomposition, computed exactly with the model's quantization, "
                                  f"departs from the model's hardswish by {ev.hardswish_lsb:g} LSB"))
    if ev.float_sqnr is not None and not ev.float_holds:
        shown.append(("accuracy", f"SQNR vs float {_db(ev.float_sqnr)} below the floor {ev.floor}"))
    if not shown:
        return False, "the independent path finds nothing wrong"
    # The failure must be of the kind the verdict names: each failed stage shown by its own path.
    kinds = {k for k, _ in shown}
    unmatched = [s for s in stages if not (STAGE_EVIDENCE.get(s, set()) & kinds)]
    if unmatched:
        return False, f"stage(s) {', '.join(unmatched)} not shown; shown: " + "; ".join(w for _, w in shown)
    return True, "; ".join(w for _, w in shown)


# cortexm's stage -> the kinds of independent evidence that show a failure there.
STAGE_EVIDENCE = {
    "export": {"export", "lowering"},
    "lowering": {"lowering", "export"},
    "verify": {"sim", "compare", "semantic"},
    "sim": {"sim"},
    "run": {"sim"},
    "upstream-reference": {"compare"},
    "compare": {"compare", "semantic", "sim"},
    "semantic": {"semantic", "compare"},
    "memory": {"sim", "compare"},
    "accuracy": {"accuracy"},
    "crosscore": {"compare", "semantic"},
}

