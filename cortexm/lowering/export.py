"""Lowering a float model to a .pte for one Cortex-M core, with everything needed to check it.

The flow is upstream's (backends/cortex_m/test/tester.py, examples/arm/aot_arm_compiler.py):
torch.export -> CortexMQuantizer (PT2E) -> to_edge -> CortexMPassManager with the
core's CortexMTargetConfig -> to_executorch. The target config is always passed
explicitly: left out, ExecuTorch silently lowers for the M55 (MVE).

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

import contextlib
import hashlib
import json
import logging
import os
import zlib
from dataclasses import dataclass, field

import numpy as np
from pathlib import Path
from typing import Any

from cortexm import __version__

from cortexm.base import manifest

from cortexm.lowering.source import ensure_chosen
from cortexm.sources import backend_source
from cortexm.base.errors import CortexmError, StorageError, storage_error
from cortexm.pte.sidecar import read_sidecar, sidecar_path
from cortexm.lowering.modelsource import ModelBundle
from cortexm.base.targets import Core

SIDECAR_FORMAT = 1


def _quiet_loggers() -> None:
    # Modules that set their own level at import (exir.pass_manager warns on every
    # CortexMPassManager use that PassManager is deprecated; users cannot act on it).
    logging.getLogger("executorch.exir.pass_manager").setLevel(logging.ERROR)


@dataclass
class Export:
    name: str
    core: Core
    pte: bytes
    sidecar: dict[str, Any]
    dialect: str
    inputs: list[bytes]
    references: list[bytes]
    isolated: bytes | None = None  # the program planned one tensor per buffer
    models: dict[str, bytes] = field(default_factory=dict)  # "quantized"/"float" -> torch.export program
    model_outputs: list[bytes] = field(default_factory=list)  # the quantized model's, program dim order


LAYOUTS = ("legacy", "explicit")
MODEL_KINDS = ("quantized", "float")  # the models an export carries (NAME.<kind>.pt2)


@dataclass
class Lowered:
    edge: Any  # EdgeProgramManager after the cortex_m passes
    quantized: Any  # the PT2E-converted module (q/dq around float ops), what the program means
    # The quantized and the float model as torch.export programs, serialized before
    # to_edge (which may change what it is given): what cortexm.semantic runs.
    models: dict[str, bytes] = field(default_factory=dict)
    # Each output's shape, dtype and dim order in the edge program before any cortex_m pass:
    # what the lowered program's outputs must be.
    signature: list[dict] = field(default_factory=list)
    float_module: Any = None  # the float model, for how far quantization moved the outputs


@dataclass
class Quantized:
    """A model after PT2E quantization, before anything a core decides: where the lowering for
    every core starts (quantize once, lower for each core from here)."""

    bundle: ModelBundle  # example inputs placed as the case's data asks
    program: Any  # the quantized model as a torch.export program: what to_edge takes
    quantized: Any  # its module (q/dq around float ops): what the program means
    float_module: Any  # the float model's, as torch.export has it
    models: dict[str, bytes]  # "quantized", "float" -> the two saved as torch.export programs
    layout: str = "legacy"
    # The calibration samples: what accuracy is measured like (cortexm.semantic.accuracy.draw).
    calibration: list = field(default_factory=list)


def quantize(bundle: ModelBundle, layout: str = "legacy") -> Quantized:
    """torch.export, CortexMQuantizer (PT2E: calibrate, convert), the example inputs placed, and
    torch.export of the quantized model: the part of the lowering no core changes.

    layout "explicit" (ExecuTorch's experimental explicit-NHWC pass list, the `*_nhwc`
    operators) takes contiguous NCHW inputs.
    """
    if layout not in LAYOUTS:
        raise CortexmError(f"unknown layout {layout!r}; choose one of {', '.join(LAYOUTS)}")
    backend_source.quiet_lowering_imports()
    ensure_chosen()
    import torch
    from executorch.backends.cortex_m.quantizer.quantizer import CortexMQuantizer
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    _quiet_loggers()
    if layout == "explicit":
        bundle.example_inputs = tuple(t.contiguous() for t in bundle.example_inputs)
        bundle.calibration = [tuple(t.contiguous() for t in s) for s in bundle.calibration]
    inputs = bundle.example_inputs
    with _stage(bundle, None, "torch.export"):
        float_program = torch.export.export(bundle.module, inputs, strict=True)
        # check_guards=False: with torch 2.13 the guard module breaks PT2E annotation.
        graph = float_program.module(check_guards=False)
    with _stage(bundle, None, "quantization"), _one_thread(torch):
        prepared = prepare_pt2e(graph, CortexMQuantizer())
        for sample in bundle.calibration:
            prepared(*sample)
        quantized = convert_pt2e(prepared)
    if bundle.data != "uniform":
        bundle.example_inputs = inputs = _crafted_inputs(bundle, quantized)
    with _stage(bundle, None, "torch.export of the quantized model"):
        exported = torch.export.export(quantized, inputs, strict=True)
        models = {"quantized": _saved(exported), "float": _saved(float_program)}
    # The modules of the programs, as a saved and loaded Quantized has them (load_quantized).
    return Quantized(bundle, exported, exported.module(), float_program.module(), models, layout,
                     [tuple(t.detach() for t in sample) for sample in bundle.calibration])


QUANTIZED_FILES = ("quantized.pt2", "float.pt2", "inputs.bin", "calibration-K.bin", "bundle.json")


def save_quantized(quantized: Quantized, folder: Path) -> None:
    """Write `quantized` into `folder` (QUANTIZED_FILES), for load_quantized: nothing pickled
    (the example inputs are raw bytes, described in bundle.json)."""
    for kind, data in quantized.models.items():
        (Path(folder) / f"{kind}.pt2").write_bytes(data)
    b = quantized.bundle
    (Path(folder) / "bundle.json").write_text(json.dumps({
        "name": b.name, "qtol": b.qtol, "source": b.source, "notes": b.notes, "data": b.data,
        "layout": quantized.layout, "input_keys": list(b.input_keys),
        "inputs": _save_tensors(Path(folder) / "inputs", b.example_inputs),
        "calibration": [_save_tensors(Path(folder) / f"calibration-{k}", sample)
                        for k, sample in enumerate(quantized.calibration)]}))


def _save_tensors(stem: Path, tensors) -> list[dict]:
    """Tensors as raw bytes in STEM.bin (nothing pickled); what _tensors needs to read them back."""
    tensors = [t.detach() for t in tensors]
    stem.with_suffix(".bin").write_bytes(b"".join(t.contiguous().numpy().tobytes() for t in tensors))
    return [{"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape), "strides": list(t.stride())}
            for t in tensors]


def _tensors(stem: Path, entries: list[dict]) -> list:
    """The tensors _save_tensors wrote, in the strides they had (a channels-last input stays one)."""
    import torch

    raw, tensors, at = stem.with_suffix(".bin").read_bytes(), [], 0
    for entry in entries:
        dtype = {"float32": torch.float32, "int8": torch.int8, "int32": torch.int32, "int64": torch.int64,
                 "bool": torch.bool}[entry["dtype"]]
        size = int(np.prod(entry["shape"], dtype=np.int64)) * torch.empty((), dtype=dtype).element_size()
        values = torch.frombuffer(bytearray(raw[at:at + size]), dtype=dtype) if size else torch.empty(0, dtype=dtype)
        tensors.append(torch.empty_strided(entry["shape"], entry["strides"], dtype=dtype).copy_(values.reshape(entry["shape"])))
        at += size
    return tensors


def load_quantized(folder: Path) -> Quantized:
    """The Quantized save_quantized wrote: the same programs, so the same lowering. The
    programs are read as data (cortexm.pte.pt2), never unpickled."""
    from cortexm.pte import pt2

    backend_source.quiet_lowering_imports()
    ensure_chosen()

    folder = Path(folder)
    meta = json.loads((folder / "bundle.json").read_text())
    models = {kind: pt2.read_checked(folder / f"{kind}.pt2") for kind in MODEL_KINDS}
    program, floating = pt2.load(models["quantized"]), pt2.load(models["float"])
    inputs = _tensors(folder / "inputs", meta["inputs"])
    bundle = ModelBundle(meta["name"], floating.module(), tuple(inputs), [], meta["qtol"], meta["source"], meta["notes"],
                         meta["data"], input_keys=tuple(meta.get("input_keys", ())))
    calibration = [tuple(_tensors(folder / f"calibration-{k}", entries)) for k, entries in enumerate(meta["calibration"])]
    return Quantized(bundle, program, program.module(), floating.module(), models, meta["layout"], calibration)


def to_edge_program(quantized: Quantized):
    """to_edge of the quantized model (ExecuTorch's, with the cortex_m edge config); one serves
    every core: lower() takes a copy."""
    from executorch.backends.cortex_m.edge_compile_config import cortex_m_edge_compile_config
    from executorch.exir import to_edge

    with _stage(quantized.bundle, None, "to_edge"):
        return to_edge(quantized.program, compile_config=cortex_m_edge_compile_config())


def lower(source: ModelBundle | Quantized, core: Core, layout: str = "legacy", edge=None) -> Lowered:
    """The program lowered for `core` from a model (quantized first) or a quantized model, and
    the quantized model it was lowered from; `edge`: to_edge_program's result to start from."""
    import copy

    quantized = source if isinstance(source, Quantized) else quantize(source, layout)
    ensure_chosen()
    from executorch.backends.cortex_m.passes.cortex_m_pass_manager import CortexMPassManager
    from executorch.backends.cortex_m.target_config import CortexMTargetConfig

    config = CortexMTargetConfig.from_target_string(core.target_string)
    edge = copy.deepcopy(edge) if edge is not None else to_edge_program(quantized)
    signature = output_signature(edge.exported_program())
    with _stage(quantized.bundle, core, "the cortex_m passes"):
        # Only the explicit layout passes the flag: ExecuTorch main has no such argument.
        explicit = {"use_explicit_layout": True} if quantized.layout == "explicit" else {}
        edge._edge_programs["forward"] = CortexMPassManager(
            edge.exported_program(), target_config=config, **explicit
        ).transform()
    return Lowered(edge, quantized.quantized, quantized.models, signature, quantized.float_module)


def output_signature(program) -> list[dict]:
    """Shape, dtype and dim order of each output of an exported program, from its graph."""
    output = next(n for n in program.graph.nodes if n.op == "output")
    values = output.args[0] if isinstance(output.args[0], (tuple, list)) else (output.args[0],)
    signature = []
    for node in values:
        value = node.meta.get("val") if hasattr(node, "meta") else None
        if value is None or not hasattr(value, "stride"):
            signature.append(None)
            continue
        signature.append({"shape": list(value.shape), "dtype": str(value.dtype).removeprefix("torch."),
                          "dim_order": list(value.dim_order())})
    return signature


@contextlib.contextmanager
def _one_thread(torch):
    """Calibrate on one thread: reductions split over threads sum in another order, and the
    observed ranges then depend on the machine's core count (backend_source.portable_float)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _saved(program) -> bytes:
    """`program` as a .pt2 that is data only (cortexm.pte.pt2): saved without its example
    inputs, which torch would pickle; checked as every reader of it will check it."""
    import copy
    import io

    import torch

    from cortexm.pte import pt2

    program = copy.copy(program)
    program.example_inputs = None
    buffer = io.BytesIO()
    torch.export.save(program, buffer)
    pt2.check(buffer.getvalue(), "the saved model")
    return buffer.getvalue()


def export(source: ModelBundle | Quantized, core: Core, layout: str = "legacy", edge=None) -> Export:
    """The bundle for `core` (module docstring) from a model or a quantized model (`edge` as
    lower() takes it)."""
    import torch
    from executorch import version as et_version

    from cortexm.checking import constants
    from cortexm.lowering import dialect, provenance
    from cortexm.semantic import accuracy
    from cortexm.pte import parse

    quantized = source if isinstance(source, Quantized) else quantize(source, layout)
    bundle = quantized.bundle
    place_solved(quantized, edge)
    lowered = lower(quantized, core, edge=edge)
    program = lowered.edge.exported_program()
    text = dialect.render(program, _title(bundle, core))
    with _stage(bundle, core, "to_executorch"):
        import copy

        from cortexm.checking import memory_plan

        # to_executorch changes the graph it is given: the second plan starts from a copy.
        isolated = memory_plan.to_executorch_isolated(copy.deepcopy(lowered.edge)).buffer
        manager = lowered.edge.to_executorch()
        pte = manager.buffer
    plan = parse(pte).plan()
    calls: list = []
    reference, reference_kind, upstream_calls = _reference(pte, bundle, core, lowered, calls)

    in_qparams, out_qparams = _io_qparams(program)
    inputs_meta, input_bytes = [], []
    for k, (tensor, index) in enumerate(zip(bundle.example_inputs, plan.inputs)):
        tv = plan.values[index]
        input_bytes.append(_raw(tensor, tv.dim_order))
        inputs_meta.append(_io_entry(tv, f"{bundle.name}.input-{k}.bin", in_qparams.get(k)))
    outputs_meta, ref_bytes = [], []
    for k, (tensor, index) in enumerate(zip(reference, plan.outputs)):
        tv = plan.values[index]
        ref_bytes.append(_raw(tensor, tv.dim_order))
        entry = _io_entry(tv, f"{bundle.name}.reference-{k}.bin", out_qparams.get(k))
        entry["reference"] = entry.pop("file")
        outputs_meta.append(entry)
    semantic, model_outputs = _semantic(bundle, core, lowered, plan, calls, reference, outputs_meta)
    with _stage(bundle, core, "measuring accuracy against the float model"):
        # Over inputs drawn like the calibration data, where the integer reference runs the program.
        measured = accuracy.measure(pte, core.backend, lowered.quantized, lowered.float_module,
                                    accuracy.draw(quantized.calibration, bundle.name)) if calls else None
    without_helium = _without_helium(pte, bundle, core) if calls else None

    sidecar = {
        "cortexm": {"format": SIDECAR_FORMAT, "version": __version__},
        "name": bundle.name,
        "target": core.name,
        "backend": core.backend,
        "executorch": {"version": et_version.__version__, "git_version": et_version.git_version},
        "torch": torch.__version__,
        "source": bundle.source,
        "layout": layout,
        "qtol": bundle.qtol,
        "data": bundle.data,
        "data_targets": bundle.placed,
        "reference": reference_kind,
        # ExecuTorch's own Python reference (operators.py) against the integer one, call by call:
        # findings about the former (cortexm.oracle.upstream); None where it was not compared.
        "upstream_reference": {"calls": upstream_calls},
        "notes": bundle.notes,
        "pte_sha256": hashlib.sha256(pte).hexdigest(),
        "dialect": f"{bundle.name}.dialect.txt",
        "isolated": f"{bundle.name}.isolated.pte",
        "inputs": inputs_meta,
        "outputs": outputs_meta,
        "semantic": semantic,
        "accuracy": measured,
        # Where each call came from in the model (cortexm.lowering.provenance), and the name of
        # each constant by its content (cortexm.checking.constants): reports name them.
        "calls": provenance.calls(manager),
        "constants": constants.names_of(manager.exported_program()),
        # The M55's outputs had ExecuTorch's Helium loops rounded as its scalar loop does: what
        # excuses a cross-core difference as that rounding, and nothing else (cortexm.testing.app).
        "reference_without_helium": without_helium,
    }
    return Export(bundle.name, core, pte, sidecar, text, input_bytes, ref_bytes, isolated, lowered.models, model_outputs)


def _semantic(bundle: ModelBundle, core: Core, lowered: Lowered, plan, calls: list, reference: list,
              outputs_meta: list[dict]):
    """The program against the model it was lowered from (cortexm.semantic): the sidecar's
    `semantic` record, and the quantized model's outputs as the runner lays them out."""
    from cortexm.semantic.model import judge_trace

    record, model_outputs = judge_trace(
        lowered.quantized, lowered.float_module, bundle.example_inputs, calls,
        [np.asarray(r.detach().numpy() if hasattr(r, "detach") else r) for r in reference],
        plan.outputs, [(e["quant"] or {}).get("scale") for e in outputs_meta], core.backend)
    _call_arguments(record["points"], plan)
    record["program_outputs"] = [{k: e[k] for k in ("shape", "dtype", "dim_order")} for e in outputs_meta]
    record["model_outputs"] = lowered.signature
    raw = [_raw(m, e["dim_order"]) if list(m.shape) == e["shape"] else b""
           for m, e in zip(model_outputs, outputs_meta)]
    record["models"] = {kind: f"{bundle.name}.{kind}.pt2" for kind in lowered.models}
    record["outputs"] = [f"{bundle.name}.model-{k}.bin" if data else None for k, data in enumerate(raw)]
    return record, raw


def _call_arguments(points: list[dict], plan) -> None:
    """Each point's call's scalar arguments by name (zero points, multipliers, shifts): a
    departure names the one that differs from the model's quantization."""
    from cortexm.checking import library

    calls = {n: (op, call) for n, op, call in plan.kernel_calls()}
    for point in points:
        op, call = calls.get(point.get("call"), (None, None))
        names = library.arguments_for(op.qualified_name, len(call.args), library.installed()) if call else None
        if names:
            point["call_args"] = {name: plan.values[index] for name, index in zip(names, call.args)
                                  if isinstance(plan.values[index], (int, float)) and not isinstance(plan.values[index], bool)}


class KnownFailure(CortexmError):
    """Lowering failed as a case's known upstream defect says it will."""


def lowered_texts(bundle: ModelBundle, cores: list[Core]) -> dict[str, "str | KnownFailure"]:
    """Lower `bundle` for each core (quantized and taken to the edge dialect once) and render
    each; core name -> its text, or the KnownFailure a case's known defect expects."""
    from cortexm import cases
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
            if known and known.explains("export", str(e)):
                texts[core.name] = KnownFailure(f"{known.name}: {known.reason}")
                continue
            if known:
                raise CortexmError(f"fails differently from {known.name}: {e}") from e
            raise
        if known:
            raise CortexmError(f"{bundle.name} for {core.name} lowered, but the case expects it to fail ({known.name}): "
                               "the defect looks fixed here, update its record in cortexm/cases/defects.py")
        texts[core.name] = text
    return texts


def _title(bundle: ModelBundle, core: Core) -> str:
    """The dialect text's title line: what was lowered, for which core and CMSIS-NN variant."""
    return f"{bundle.name} for {core.name} (CMSIS-NN {core.backend})"


def _crafted_inputs(bundle: ModelBundle, quantized) -> tuple:
    """The example inputs placed on the boundaries of their own quantization (cortexm.cases.data)."""
    from cortexm.cases import data

    placeholders = [n for n in quantized.graph.nodes if n.op == "placeholder"]
    crafted = []
    for k, (node, tensor) in enumerate(zip(placeholders, bundle.example_inputs)):
        quant = next((u for u in node.users if "quantize_per_tensor" in str(u.target)
                      and "dequantize" not in str(u.target)), None)
        if quant is None:
            raise CortexmError(f"{bundle.name}: input {k} is not quantized, so data={bundle.data!r} cannot place it")
        scale, zero_point, qmin, qmax = (quant.args[1], quant.args[2], quant.args[3], quant.args[4])
        key = bundle.input_key(k)
        crafted.append(data.craft(bundle.data, tensor, float(scale), int(zero_point), int(qmin), int(qmax),
                                  seed=zlib.crc32(key.encode()), index=int(key.rsplit(":", 1)[1])))
    return tuple(crafted)


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
    from cortexm.oracle.reference import evaluate
    from cortexm.oracle.backends import kernels_for
    from cortexm.pte import parse

    bundle = quantized.bundle
    if bundle.data not in data.SOLVED or bundle.placed is not None:
        return
    lowered = lower(quantized, targets.core(PLACING_CORE), quantized.layout, edge=edge)
    with _stage(bundle, None, f"placing {bundle.data} data"):
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
        if target is None:
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


def _reference(pte: bytes, bundle: ModelBundle, core: Core, lowered: Lowered,
               trace: list) -> tuple[list, str, list | None]:
    """The program's outputs for the example inputs as cortexm's integer reference computes
    them for the core's CMSIS-NN variant (cortexm.oracle), which reference that is, and how
    ExecuTorch's Python reference differs from it call by call; `trace` gets every call's
    (instruction, operator, value index, returned value). Where the integer reference
    cannot evaluate the program, ExecuTorch's Python reference of the whole graph stands in
    and the kind says why."""
    from cortexm.oracle.reference import integer_reference

    def record(*call):
        trace.append(call)

    try:
        outputs, calls = integer_reference(pte, [t.detach().numpy() for t in bundle.example_inputs], core.backend,
                                           compare_upstream=True, trace=record)
    except CortexmError as e:
        trace.clear()
        upstream, kind = _upstream_reference(bundle, core, lowered)
        return upstream, f"{kind}; the integer reference could not evaluate the program: {e}", None
    return outputs, f"cortexm integer reference (CMSIS-NN {core.backend})", calls


def _without_helium(pte: bytes, bundle: ModelBundle, core: Core) -> list[str] | None:
    """Digests of the integer reference's outputs with the scalar loops in place of
    ExecuTorch's Helium ones (cortexm.oracle.helium), for a core that runs them."""
    from cortexm.oracle.reference import integer_reference
    from cortexm.oracle.backends import kernels_for
    from cortexm.pte.tensors import digests

    if kernels_for(core.backend) == kernels_for(core.backend, helium=False):
        return None
    outputs, _ = integer_reference(pte, [t.detach().numpy() for t in bundle.example_inputs], core.backend, helium=False)
    return digests(outputs)


def _upstream_reference(bundle: ModelBundle, core: Core, lowered: Lowered) -> tuple[list, str]:
    """Outputs of ExecuTorch's Python reference for the example inputs, and which one gave them.

    That is the lowered graph itself, whose cortex_m operators have Python
    implementations (ops/operators.py). Where one of those cannot run on the host
    (torch has no integer dilated convolution), the PT2E quantized model (float
    arithmetic between quantize/dequantize) stands in.
    """
    import torch

    try:
        with torch.no_grad():
            outputs = lowered.edge.exported_program().module()(*bundle.example_inputs)
        kind = "ExecuTorch's cortex_m Python reference (ops/operators.py)"
    except Exception as first:
        try:
            with torch.no_grad():
                outputs = lowered.quantized(*bundle.example_inputs)
        except Exception:
            with _stage(bundle, core, "the Python reference"):
                raise first from None
        reason = (str(first).strip().splitlines() or [""])[0][:120]
        kind = f"pt2e quantized model (the cortex_m dialect reference failed: {type(first).__name__}: {reason})"
    outputs = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
    return outputs, kind


# Told each stage as it starts (`cortexm export` shows them): a first export spends minutes
# in stages that print nothing of their own.
STAGE_LISTENERS: list = []


class _stage:
    """Turns any failure inside a lowering stage into one line naming the stage."""

    def __init__(self, bundle: ModelBundle, core: Core | None, what: str) -> None:
        self.where = f"{bundle.name} for {core.name}" if core else bundle.name
        self.what = what

    def __enter__(self):
        for listener in STAGE_LISTENERS:
            listener(f"{self.where}: {self.what}")
        return self

    def __exit__(self, kind, error, tb):
        if error is None or isinstance(error, (CortexmError, KeyboardInterrupt)):
            return False
        # Pass managers wrap the real error ("An error occurred when running ..."): report the innermost.
        cause = error
        while cause.__cause__ is not None:
            cause = cause.__cause__
        first = (str(cause).strip().splitlines() or [""])[0][:300]
        raise CortexmError(f"lowering {self.where} failed in {self.what}: {type(cause).__name__}: {first}") from error


def _io_qparams(program) -> tuple[dict[int, dict], dict[int, dict]]:
    """Quantisation of each user input (its quantize op) and output (its dequantize op)."""
    signature = program.graph_signature
    user_inputs = list(signature.user_inputs)
    ins: dict[int, dict] = {}
    outs: dict[int, dict] = {}
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


def _qparams(args) -> dict:
    _, scale, zero_point, qmin, qmax, dtype = args[:6]
    return {"scale": float(scale), "zero_point": int(zero_point), "qmin": int(qmin), "qmax": int(qmax),
            "dtype": str(dtype).removeprefix("torch.")}


def _io_entry(tv, file: str, quant: dict | None) -> dict:
    return {"file": file, "dtype": tv.dtype, "shape": list(tv.sizes), "dim_order": list(tv.dim_order), "quant": quant}


def _raw(tensor, dim_order) -> bytes:
    """The tensor's (or array's) bytes laid out in `dim_order`, as the runtime reads and writes them."""
    from cortexm.pte.tensors import to_raw

    values = tensor.detach().contiguous().numpy() if hasattr(tensor, "detach") else np.asarray(tensor)
    return to_raw(values, dim_order)


# --- writing and reading bundles ---------------------------------------------

def bundle_names(stem: str, folder: Path) -> list[str]:
    """The files an export to STEM.pte writes, or may have written before (inputs and
    references are numbered)."""
    fixed = [f"{stem}.pte", f"{stem}.json", f"{stem}.dialect.txt", f"{stem}.isolated.pte"]
    fixed += [f"{stem}.{kind}.pt2" for kind in MODEL_KINDS]
    numbered = sorted(p.name for pattern in (f"{stem}.input-*.bin", f"{stem}.reference-*.bin", f"{stem}.model-*.bin")
                      for p in Path(folder).glob(pattern))
    return fixed + numbered


def check_target(pte_path: Path, force: bool = False) -> None:
    """Before any work: the bundle can be written at `pte_path` without touching a file that is
    not cortexm's (cortexm.base.manifest)."""
    from cortexm.base import locks

    pte_path = Path(pte_path)
    if pte_path.suffix != ".pte":
        raise CortexmError(f"{pte_path}: the output must be a .pte path")
    manifest.check_writable(pte_path)
    # Every file of the bundle, not only the .pte, must fit a file name: the longest are
    # NAME.quantized.pt2 and NAME.reference-K.bin (a bundle cut short would lack its sidecar).
    longest = max([*bundle_names(pte_path.stem, Path("/nonexistent")), f"{pte_path.stem}.reference-99.bin"],
                  key=lambda n: len(os.fsencode(n)))
    if len(os.fsencode(longest)) > manifest.NAME_MAX:
        raise CortexmError(f"{pte_path.name[:40]}...: a name too long for the bundle beside it ({longest[-20:]} is "
                           f"{len(os.fsencode(longest))} bytes, at most {manifest.NAME_MAX}); choose a shorter -o")
    locks.hold(pte_path, f"{pte_path} (an export's output)", "choose another -o")
    folder, sidecar_file = pte_path.parent, sidecar_path(pte_path)
    if folder.is_dir():
        manifest.check_owned(folder, bundle_names(pte_path.stem, folder), _owned(sidecar_file), force,
                              "choose another -o")


def _owned(sidecar_file: Path) -> dict[str, dict] | None:
    """The files beside `sidecar_file` that cortexm may replace or remove: those its manifest
    lists as they were written, the sidecar too. A manifest naming a file there that is not one
    of the bundle's is not cortexm's (None), nor is a sidecar of an older cortexm, without a
    manifest, unless the program beside it is the one it describes (then the bundle files it
    names, as they are)."""
    if not sidecar_file.is_file() or sidecar_file.is_symlink():
        return None
    folder, pte = sidecar_file.parent, sidecar_file.with_suffix(".pte")
    names = set(bundle_names(pte.stem, folder))
    written = manifest.read(sidecar_file)
    if written is None:
        sidecar = read_sidecar(pte)
        if sidecar is None or not pte.is_file() or sidecar.get("pte_sha256") != manifest.sha256(pte):
            return None
        listed = [pte.name, sidecar.get("dialect"), sidecar.get("isolated")]
        listed += [e.get("file") for e in sidecar.get("inputs", [])] + [e.get("reference") for e in sidecar.get("outputs", [])]
        written = manifest.of_files(folder, [n for n in listed if n in names and (folder / n).is_file()])
    if any(n not in names and os.path.lexists(folder / n) for n in written):
        return None
    return {**manifest.owned(folder, written), sidecar_file.name: manifest.entry(sidecar_file)}


def write(result: Export, pte_path: Path, force: bool = False) -> list[Path]:
    """Write the bundle for `result`; refuses to replace files cortexm did not write (unless
    `force`), and removes files of an earlier export of its own it no longer writes."""
    pte_path = Path(pte_path)
    check_target(pte_path, force)
    folder = pte_path.parent
    folder.mkdir(parents=True, exist_ok=True)
    stem = pte_path.stem
    sidecar = dict(result.sidecar)
    # File names follow the .pte's name, not the model's.
    sidecar["dialect"] = f"{stem}.dialect.txt"
    if result.isolated is not None:
        sidecar["isolated"] = f"{stem}.isolated.pte"
    sidecar["inputs"] = [dict(e, file=f"{stem}.input-{k}.bin") for k, e in enumerate(sidecar["inputs"])]
    sidecar["outputs"] = [dict(e, reference=f"{stem}.reference-{k}.bin") for k, e in enumerate(sidecar["outputs"])]
    if sidecar.get("semantic"):
        semantic = sidecar["semantic"] = dict(sidecar["semantic"])
        semantic["models"] = {kind: f"{stem}.{kind}.pt2" for kind in result.models}
        semantic["outputs"] = [f"{stem}.model-{k}.bin" if data else None for k, data in enumerate(result.model_outputs)]
    sidecar_file = sidecar_path(pte_path)
    before = _owned(sidecar_file) or {}
    files: list[tuple[Path, bytes]] = [(pte_path, result.pte)]
    files.append((folder / sidecar["dialect"], result.dialect.encode()))
    if result.isolated is not None:
        files.append((folder / sidecar["isolated"], result.isolated))
    files += [(folder / e["file"], data) for e, data in zip(sidecar["inputs"], result.inputs)]
    files += [(folder / e["reference"], data) for e, data in zip(sidecar["outputs"], result.references)]
    if sidecar.get("semantic"):
        files += [(folder / name, result.models[kind]) for kind, name in sidecar["semantic"]["models"].items()]
        files += [(folder / name, data) for name, data in zip(sidecar["semantic"]["outputs"], result.model_outputs) if name]
    sidecar[manifest.KEY] = manifest.of_data({p.name: data for p, data in files})
    _atomic_write(files + [(sidecar_file, (json.dumps(sidecar, indent=2) + "\n").encode())])
    for stale in set(before) - {p.name for p, _ in files} - {sidecar_file.name}:
        if manifest.matches(folder / stale, before[stale]):
            (folder / stale).unlink()
    return [p for p, _ in files] + [sidecar_file]


def _atomic_write(files: list[tuple[Path, bytes]]) -> None:
    """The bundle whole, or no file of it changed (cortexm.base.manifest.atomic_write_all)."""
    try:
        manifest.atomic_write_all(files)
    except OSError as e:
        if storage_error(e) is None:
            raise
        raise StorageError(f"{files[0][0].parent}: the export could not be written ({e.strerror})") from None
