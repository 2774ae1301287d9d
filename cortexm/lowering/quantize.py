"""Quantizing a model: the part of the lowering no core changes, done once for every core.

torch.export, CortexMQuantizer (PT2E: calibrate, convert), the example inputs placed as the
case's data asks, and torch.export of the quantized model. A Quantized is saved and loaded as
data (nothing pickled), so the export cache keeps it between runs.
"""

from __future__ import annotations

import contextlib
import json
import logging
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cortexm.base import writes
from cortexm.base.errors import CortexmError
from cortexm.lowering import decisions
from cortexm.lowering.modelsource import ModelBundle
from cortexm.lowering.stage import stage
from cortexm.sources import backend_source


def quiet_loggers() -> None:
    # Modules that set their own level at import (exir.pass_manager warns on every
    # CortexMPassManager use that PassManager is deprecated; users cannot act on it).
    logging.getLogger("executorch.exir.pass_manager").setLevel(logging.ERROR)


LAYOUTS = ("legacy", "explicit")


MODEL_KINDS = ("quantized", "float")  # the models an export carries (NAME.<kind>.pt2)


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
    # What the quantizer did to each node (cortexm.lowering.decisions.annotation) and what the
    # backends warned meanwhile: where a call left unlowered gets its reason.
    decisions: dict = field(default_factory=dict)


def quantize(bundle: ModelBundle, layout: str = "legacy") -> Quantized:
    """torch.export, CortexMQuantizer (PT2E: calibrate, convert), the example inputs placed, and
    torch.export of the quantized model: the part of the lowering no core changes.

    layout "explicit" (ExecuTorch's experimental explicit-NHWC pass list, the `*_nhwc`
    operators) takes contiguous NCHW inputs.
    """
    if layout not in LAYOUTS:
        raise CortexmError(f"unknown layout {layout!r}; choose one of {', '.join(LAYOUTS)}")
    backend_source.quiet_lowering_imports()
    backend_source.activate_from_environment()
    import torch
    from executorch.backends.cortex_m.quantizer.quantizer import CortexMQuantizer
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quiet_loggers()
    if layout == "explicit":
        bundle.example_inputs = tuple(t.contiguous() for t in bundle.example_inputs)
        bundle.calibration = [tuple(t.contiguous() for t in s) for s in bundle.calibration]
    inputs = bundle.example_inputs
    with stage(bundle, None, "torch.export"):
        float_program = torch.export.export(bundle.module, inputs, strict=True)
        # check_guards=False: with torch 2.13 the guard module breaks PT2E annotation.
        graph = float_program.module(check_guards=False)
    warnings: list[dict] = []
    with stage(bundle, None, "quantization"), _one_thread(torch), decisions.listening(warnings):
        quantizer = CortexMQuantizer()
        prepared = prepare_pt2e(graph, quantizer)
        annotated = decisions.annotation(prepared, quantizer)
        for sample in bundle.calibration:
            prepared(*sample)
        quantized = convert_pt2e(prepared)
    if bundle.data != "uniform":
        bundle.example_inputs = inputs = _crafted_inputs(bundle, quantized)
    with stage(bundle, None, "torch.export of the quantized model"):
        exported = torch.export.export(quantized, inputs, strict=True)
        models = {"quantized": _saved(exported), "float": _saved(float_program)}
    # The modules of the programs, as a saved and loaded Quantized has them (load_quantized).
    return Quantized(bundle, exported, exported.module(), float_program.module(), models, layout,
                     [tuple(t.detach() for t in sample) for sample in bundle.calibration],
                     {**annotated, "warnings": warnings})


QUANTIZED_FILES = ("quantized.pt2", "float.pt2", "inputs.bin", "calibration-K.bin", "bundle.json")


def save_quantized(quantized: Quantized, folder: Path) -> None:
    """Write `quantized` into `folder` (QUANTIZED_FILES), for load_quantized: nothing pickled
    (the example inputs are raw bytes, described in bundle.json)."""
    for kind, data in quantized.models.items():
        writes.atomic(Path(folder) / f"{kind}.pt2", data)
    b = quantized.bundle
    writes.atomic(Path(folder) / "bundle.json", json.dumps({
        "name": b.name, "qtol": b.qtol, "source": b.source, "notes": b.notes, "data": b.data,
        "layout": quantized.layout, "input_keys": list(b.input_keys),
        "inputs": _save_tensors(Path(folder) / "inputs", b.example_inputs),
        "calibration": [_save_tensors(Path(folder) / f"calibration-{k}", sample)
                        for k, sample in enumerate(quantized.calibration)],
        "decisions": quantized.decisions}))


def _save_tensors(stem: Path, tensors) -> list[dict]:
    """Tensors as raw bytes in STEM.bin (nothing pickled); what _tensors needs to read them back."""
    tensors = [t.detach() for t in tensors]
    writes.atomic(stem.with_suffix(".bin"), b"".join(t.contiguous().numpy().tobytes() for t in tensors))
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
    backend_source.activate_from_environment()

    folder = Path(folder)
    meta = json.loads((folder / "bundle.json").read_text())
    models = {kind: pt2.read_checked(folder / f"{kind}.pt2") for kind in MODEL_KINDS}
    program, floating = pt2.load(models["quantized"]), pt2.load(models["float"])
    inputs = _tensors(folder / "inputs", meta["inputs"])
    bundle = ModelBundle(meta["name"], floating.module(), tuple(inputs), [], meta["qtol"], meta["source"], meta["notes"],
                         meta["data"], input_keys=tuple(meta.get("input_keys", ())))
    calibration = [tuple(_tensors(folder / f"calibration-{k}", entries)) for k, entries in enumerate(meta["calibration"])]
    return Quantized(bundle, program, program.module(), floating.module(), models, meta["layout"], calibration,
                     meta.get("decisions") or {})


def _crafted_inputs(bundle: ModelBundle, quantized) -> tuple:
    """The example inputs placed on the boundaries of their own quantization (cortexm.cases.data)."""
    from cortexm.cases import data

    placeholders = [n for n in quantized.graph.nodes if n.op == "placeholder"]
    crafted = []
    for k, (node, tensor) in enumerate(zip(placeholders, bundle.example_inputs, strict=False)):
        quant = next((u for u in node.users if "quantize_per_tensor" in str(u.target)
                      and "dequantize" not in str(u.target)), None)
        if quant is None:
            raise CortexmError(f"{bundle.name}: input {k} is not quantized, so data={bundle.data!r} cannot place it")
        scale, zero_point, qmin, qmax = (quant.args[1], quant.args[2], quant.args[3], quant.args[4])
        key = bundle.input_key(k)
        crafted.append(data.craft(bundle.data, tensor, float(scale), int(zero_point), int(qmin), int(qmax),
                                  seed=zlib.crc32(key.encode()), index=int(key.rsplit(":", 1)[1])))
    return tuple(crafted)


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
