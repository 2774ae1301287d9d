"""Lowering a float model to a .pte for one Cortex-M core, with everything needed to check it.

The flow is upstream's (backends/cortex_m/test/tester.py, examples/arm/aot_arm_compiler.py):
torch.export -> CortexMQuantizer (PT2E) -> to_edge -> CortexMPassManager with the
core's CortexMTargetConfig -> to_executorch. The target config is always passed
explicitly: left out, ExecuTorch silently lowers for the M55 (MVE).

Quantizing, done once for every core, is quantize.py's; this module lowers for a core and
collects the bundle; what the program must compute is references.py's, and writing the
bundle writer.py's.

An export is a bundle of files beside the .pte:
  NAME.pte              the program
  NAME.json             sidecar: target, backend, versions, inputs/outputs (dtype, shape,
                        dim order, quantisation), file names below
  NAME.dialect.txt      the lowered graph in canonical text (see cortexm.lowering.dialect)
  NAME.input-K.bin      example input K, raw bytes in the program's dim order
  NAME.reference-K.bin  the reference output K for those inputs, same layout
  NAME.isolated.pte     the same program with every planned tensor in a buffer of its own
                        (cortexm.checking.memory_plan), for the guard and fill runs of the memory oracle
  NAME.quantized.pt2    the PT2E quantized model the program was lowered from, and
  NAME.float.pt2        the float model (torch.export programs): what the program means,
                        to judge it on any input (cortexm.semantic)
  NAME.model-K.bin      the quantized model's output K for the example inputs, in the program's
                        dim order
"""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from cortexm import __version__
from cortexm.base.errors import CortexmError
from cortexm.base.targets import Core
from cortexm.lowering import decisions, references
from cortexm.lowering.modelsource import ModelBundle
from cortexm.lowering.quantize import Quantized, quantize, quiet_loggers
from cortexm.lowering.stage import stage
from cortexm.pte.program import ExecutionPlan, TensorValue
from cortexm.pte.sidecar import Marker, Output, Quant, Sidecar, Source, Tensor, Versions
from cortexm.sources import backend_source

SIDECAR_FORMAT = 1
T = TypeVar("T", bound=Tensor)  # an input or an output of the sidecar


@dataclass
class Export:
    name: str
    core: Core
    pte: bytes
    sidecar: Sidecar
    dialect: str
    inputs: list[bytes]
    references: list[bytes]
    isolated: bytes | None = None  # the program planned one tensor per buffer
    models: dict[str, bytes] = field(default_factory=dict)  # "quantized"/"float" -> torch.export program
    model_outputs: list[bytes] = field(default_factory=list)  # the quantized model's, program dim order


@dataclass
class Lowered:
    edge: Any  # EdgeProgramManager after the cortex_m passes
    quantized: Any  # the PT2E-converted module (q/dq around float ops), what the program means
    # The quantized and the float model as torch.export programs, serialized before
    # to_edge (which may change what it is given): what cortexm.semantic runs.
    models: dict[str, bytes] = field(default_factory=dict)
    # Each output's shape, dtype and dim order in the edge program before any cortex_m pass:
    # what the lowered program's outputs must be.
    signature: list[dict | None] = field(default_factory=list)  # None: an output that is no tensor
    float_module: Any = None  # the float model, for how far quantization moved the outputs
    passes: list = field(default_factory=list)  # what the passes warned, per node (cortexm.lowering.decisions)


def to_edge_program(quantized: Quantized):
    """to_edge of the quantized model (ExecuTorch's, with the cortex_m edge config); one serves
    every core: lower() takes a copy."""
    from executorch.backends.cortex_m.edge_compile_config import cortex_m_edge_compile_config
    from executorch.exir import to_edge

    with stage(quantized.bundle, None, "to_edge"):
        return to_edge(quantized.program, compile_config=cortex_m_edge_compile_config())


def lower(source: ModelBundle | Quantized, core: Core, layout: str = "legacy", edge=None) -> Lowered:
    """The program lowered for `core` from a model (quantized first) or a quantized model, and
    the quantized model it was lowered from; `edge`: to_edge_program's result to start from."""
    import copy

    quantized = source if isinstance(source, Quantized) else quantize(source, layout)
    backend_source.activate_from_environment()
    from executorch.backends.cortex_m.passes.cortex_m_pass_manager import CortexMPassManager
    from executorch.backends.cortex_m.target_config import CortexMTargetConfig

    quiet_loggers()  # also where the quantized model came from the cache, and quantize() never ran

    config = CortexMTargetConfig.from_target_string(core.target_string)
    edge = copy.deepcopy(edge) if edge is not None else to_edge_program(quantized)
    signature = output_signature(edge.exported_program())
    said: list[dict] = []
    with stage(quantized.bundle, core, "the cortex_m passes"), decisions.listening(said):
        # Only the explicit layout passes the flag: ExecuTorch main has no such argument.
        explicit = {"use_explicit_layout": True} if quantized.layout == "explicit" else {}
        edge._edge_programs["forward"] = CortexMPassManager(
            edge.exported_program(), target_config=config, **explicit
        ).transform()
    return Lowered(edge, quantized.quantized, quantized.models, signature, quantized.float_module, said)


def output_signature(program) -> list[dict | None]:
    """Shape, dtype and dim order of each output of an exported program, from its graph."""
    output = next(n for n in program.graph.nodes if n.op == "output")
    values = output.args[0] if isinstance(output.args[0], (tuple, list)) else (output.args[0],)
    signature: list[dict | None] = []
    for node in values:
        value = node.meta.get("val") if hasattr(node, "meta") else None
        if value is None or not hasattr(value, "stride"):
            signature.append(None)
            continue
        signature.append({"shape": list(value.shape), "dtype": str(value.dtype).removeprefix("torch."),
                          "dim_order": list(value.dim_order())})
    return signature


def export(source: ModelBundle | Quantized, core: Core, layout: str = "legacy", edge=None, evaluation=None) -> Export:
    """The bundle for `core` (module docstring) from a model or a quantized model (`edge` as
    lower() takes it); `evaluation`: an evaluation set (cortexm.semantic.evalset) to measure
    its accuracy on too."""
    import torch
    from executorch import version as et_version

    from cortexm.checking import constants
    from cortexm.lowering import dialect, provenance
    from cortexm.pte import parse
    from cortexm.semantic import realinputs

    quantized = source if isinstance(source, Quantized) else quantize(source, layout)
    bundle = quantized.bundle
    place_solved(quantized, edge)
    lowered = lower(quantized, core, edge=edge)
    program = lowered.edge.exported_program()
    text = dialect.render(program, _title(bundle, core))
    with stage(bundle, core, "to_executorch"):
        import copy

        from cortexm.checking import memory_plan

        # to_executorch changes the graph it is given: the second plan starts from a copy.
        isolated = memory_plan.to_executorch_isolated(copy.deepcopy(lowered.edge)).buffer
        manager = lowered.edge.to_executorch()
        pte = manager.buffer
    plan = parse(pte).plan()
    # Where each call came from in the model: what the semantic reference maps its points by.
    made = provenance.calls(manager)
    calls: list = []
    reference, reference_kind, upstream_calls = references.reference(pte, bundle, core, lowered, calls)

    in_qparams, out_qparams = _io_qparams(program)
    inputs_meta, input_bytes = [], []
    for k, (tensor, index) in enumerate(zip(bundle.example_inputs, plan.inputs, strict=False)):
        tv = _tensor(plan, index, f"{bundle.name}: the program's input {k}")
        input_bytes.append(references.laid_out(tensor, tv.dim_order))
        inputs_meta.append(_io_entry(Tensor, tv, f"{bundle.name}.input-{k}.bin", in_qparams.get(k)))
    outputs_meta, ref_bytes = [], []
    for k, (tensor, index) in enumerate(zip(reference, plan.outputs, strict=False)):
        tv = _tensor(plan, index, f"{bundle.name}: the program's output {k}")
        ref_bytes.append(references.laid_out(tensor, tv.dim_order))
        outputs_meta.append(_io_entry(Output, tv, f"{bundle.name}.reference-{k}.bin", out_qparams.get(k)))
    semantic, model_outputs = references.semantic(bundle, core, lowered, plan, calls, reference, outputs_meta, made)
    with stage(bundle, core, "measuring accuracy against the float model"):
        # Over inputs drawn like the calibration data, the example inputs and the evaluation set,
        # where the integer reference runs the program.
        measured = realinputs.record(pte, core.backend, lowered.quantized, lowered.float_module, quantized.calibration,
                                     bundle, evaluation) if calls else None
    without_helium = references.without_helium(pte, bundle, core) if calls else None

    sidecar = Sidecar.made(
        cortexm=Marker.made(format=SIDECAR_FORMAT, version=__version__),
        name=bundle.name,
        target=core.name,
        backend=core.backend,
        executorch=Versions.made(version=et_version.__version__, git_version=et_version.git_version),
        torch=torch.__version__,
        source=Source.made(**bundle.source),
        layout=layout,
        qtol=bundle.qtol,
        data=bundle.data,
        data_targets=bundle.placed,
        reference=reference_kind,
        # ExecuTorch's own Python reference (operators.py) against the integer one, call by call:
        # findings about the former (cortexm.oracle.upstream); None where it was not compared.
        upstream_reference={"calls": upstream_calls},
        notes=bundle.notes,
        pte_sha256=hashlib.sha256(pte).hexdigest(),
        dialect=f"{bundle.name}.dialect.txt",
        isolated=f"{bundle.name}.isolated.pte",
        inputs=inputs_meta,
        outputs=outputs_meta,
        semantic=semantic,
        accuracy=measured,
        # Where each call came from in the model (cortexm.lowering.provenance), and the name of
        # each constant by its content (cortexm.checking.constants): reports name them.
        calls=made,
        # What the quantizer did to each node and what the passes said (cortexm.lowering.decisions):
        # why a call is not a cortex_m kernel (cortexm.checking.reasons).
        quantizer=quantized.decisions, passes=lowered.passes,
        constants=constants.names_of(manager.exported_program()),
        # The M55's outputs had ExecuTorch's Helium loops rounded as its scalar loop does: what
        # excuses a cross-core difference as that rounding, and nothing else (cortexm.testing.app).
        reference_without_helium=without_helium,
    )
    return Export(bundle.name, core, pte, sidecar, text, input_bytes, ref_bytes, isolated, lowered.models, model_outputs)


class KnownFailure(CortexmError):
    """Lowering failed as a case's known upstream defect says it will."""


def lowered_texts(bundle: ModelBundle, cores: list[Core]) -> dict[str, str | KnownFailure]:
    """Lower `bundle` for each core (quantized and taken to the edge dialect once) and render
    each; core name -> its text, or the KnownFailure a case's known defect expects."""
    from cortexm import cases
    from cortexm.cases import defects
    from cortexm.lowering import dialect

    case = cases.get(bundle.source["case"]) if "case" in bundle.source else None
    try:
        quantized = quantize(bundle)
        edge, failure = to_edge_program(quantized), None
    except CortexmError as e:
        failure = e
    texts: dict[str, str | KnownFailure] = {}
    for core in cores:
        known = case.fails_at("export", core.name) if case else None
        try:
            if failure is not None:
                raise failure
            text = dialect.render(lower(quantized, core, edge=edge).edge.exported_program(), _title(bundle, core))
        except CortexmError as e:
            judged = defects.judge((known,) if known else (), [("export", str(e))], {"export"})
            if judged is None:
                raise
            if judged.status == "XFAIL":
                texts[core.name] = KnownFailure(judged.reason)
                continue
            raise CortexmError(judged.reason) from e
        judged = defects.judge((known,) if known else (), [], {"export"})
        if judged is not None:
            raise CortexmError(f"{bundle.name} for {core.name} lowered: {judged.reason}")
        texts[core.name] = text
    return texts


def _title(bundle: ModelBundle, core: Core) -> str:
    """The dialect text's title line: what was lowered, for which core and CMSIS-NN variant."""
    return f"{bundle.name} for {core.name} (CMSIS-NN {core.backend})"


# The core whose lowering the solved data is placed from: the DSP variant's arguments, the
# same whichever cores the case is then lowered for (cortexm.cases.solve).
PLACING_CORE = "cortex-m7"


def place_solved(quantized: Quantized, edge=None) -> None:
    """For data solved from the program (cortexm.cases.data.SOLVED), each example input placed
    for the first conv, depthwise conv or linear call that reads it straight from its
    quantize (cortexm.cases.solve), once per quantized model; `bundle.placed` says what was
    met. Inputs no such call reads keep the crafted values."""
    import torch

    from cortexm.base import targets
    from cortexm.cases import data, solve
    from cortexm.oracle.backends import kernels_for
    from cortexm.oracle.reference import evaluate
    from cortexm.pte import parse

    bundle = quantized.bundle
    if bundle.data not in data.SOLVED or bundle.placed is not None:
        return
    lowered = lower(quantized, targets.core(PLACING_CORE), quantized.layout, edge=edge)
    with stage(bundle, None, f"placing {bundle.data} data"):
        pte = lowered.edge.to_executorch().buffer
    plan = parse(pte).plan()
    calls = plan.kernel_calls()
    kernels = kernels_for(targets.core(PLACING_CORE).backend)
    observed = [n for n, op, _ in calls if op.name in kernels]
    seen: dict[int, tuple] = {}
    evaluate(pte, [t.detach().numpy() for t in bundle.example_inputs], kernels=kernels,
             observe=lambda name, args, out, result: seen.setdefault(observed[len(seen)], (name, args, out)))
    inputs, placed = list(bundle.example_inputs), []
    for k, index in enumerate(plan.inputs):
        quantize = next(((n, call) for n, op, call in calls if op.name == "cortex_m::quantize_per_tensor"
                         and call.args[0] == index), None)
        target = quantize and next((n for n, op, call in calls if op.name in solve.SOLVABLE
                                    and call.args[0] == quantize[1].args[-1]), None)
        if quantize is None or target is None:
            continue
        name, args, out = seen[target]
        q, met = solve.solve(bundle.data, name, args, out, seed=zlib.crc32(bundle.input_key(k).encode()))
        scale, zero_point = seen[quantize[0]][1]["scale"], seen[quantize[0]][1]["zero_point"]
        new = torch.from_numpy(data.on_grid(q.astype(np.int64), float(scale), int(zero_point))).to(inputs[k].dtype)
        if inputs[k].dim() == 4 and inputs[k].is_contiguous(memory_format=torch.channels_last):
            new = new.contiguous(memory_format=torch.channels_last)
        inputs[k] = new
        placed.append({"input": k, "call": f"{plan.where(target)} {name}", **met})
    bundle.example_inputs = tuple(inputs)
    bundle.placed = {"targets": sum(p["targets"] for p in placed), "met": sum(p["met"] for p in placed),
                     "inputs": placed} if placed else \
        {"targets": 0, "met": 0, "inputs": [], "why": "no conv, depthwise conv or linear reads a program input from its quantize"}


def _io_qparams(program) -> tuple[dict[int, Quant], dict[int, Quant]]:
    """Quantisation of each user input (its quantize op) and output (its dequantize op)."""
    signature = program.graph_signature
    user_inputs = list(signature.user_inputs)
    ins: dict[int, Quant] = {}
    outs: dict[int, Quant] = {}
    nodes = {n.name: n for n in program.graph.nodes}
    for k, name in enumerate(user_inputs):
        for user in nodes[name].users:
            if "quantize_per_tensor" in str(user.target) and "dequantize" not in str(user.target):
                ins[k] = _qparams(user.args)
                break
    output = next(n for n in program.graph.nodes if n.op == "output")
    results = output.args[0] if isinstance(output.args[0], (tuple, list)) else (output.args[0],)
    for k, node in enumerate(results):
        if hasattr(node, "target") and "dequantize_per_tensor" in str(node.target):
            outs[k] = _qparams(node.args)
    return ins, outs


def _qparams(args) -> Quant:
    _, scale, zero_point, qmin, qmax, dtype = args[:6]
    return Quant.made(scale=float(scale), zero_point=int(zero_point), qmin=int(qmin), qmax=int(qmax),
                      dtype=str(dtype).removeprefix("torch."))


def _tensor(plan: ExecutionPlan, index: int, what: str) -> TensorValue:
    """The tensor at value `index` of `plan`; an input or output that is none is one line."""
    tv = plan.tensor(index)
    if tv is None:
        raise CortexmError(f"{what} is not a tensor")
    return tv


def _io_entry(kind: type[T], tv: TensorValue, file: str, quant: Quant | None) -> T:
    return kind.made(file=file, dtype=tv.dtype, shape=tuple(tv.sizes), dim_order=tuple(tv.dim_order), quant=quant)
