"""Turning the MODEL argument into a float module, example inputs and calibration data.

MODEL is a built-in case name or `path/to/file.py:factory`. A factory takes no
arguments and returns `(module, example_inputs)` or `(module, example_inputs,
calibration_samples)`, where calibration_samples is a list of input tuples.
torch's global RNG is seeded before the factory runs, so a factory that draws
random weights gives the same model every time.
"""

from __future__ import annotations

import importlib.util
import sys
import traceback
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cortexm import cases
from cortexm.base.errors import CortexmError
from cortexm.cases.data import CALIBRATION_SAMPLES, like


@dataclass
class ModelBundle:
    name: str
    module: Any  # torch.nn.Module
    example_inputs: tuple
    calibration: list[tuple]
    qtol: int
    source: dict  # recorded in the sidecar: {"case": name} or {"file": ..., "factory": ...}
    notes: str = ""
    data: str = "uniform"  # how example inputs are placed once quantized (cortexm.cases.data)
    # For data solved from the lowered program (cortexm.cases.solve): which call, and how many
    # of its targets the inputs meet; None until placed.
    placed: dict | None = None
    # Per example input, what seeds its placed data ("case:k"; a packed case's part's own).
    input_keys: tuple[str, ...] = ()

    def input_key(self, k: int) -> str:
        return self.input_keys[k] if k < len(self.input_keys) else f"{self.name}:{k}"


def name_of(spec: str) -> str:
    """The name a model gets, without loading it: the case, the factory, or for a factory
    named like a verb (model, make, ...) the file's stem."""
    if ":" in spec and spec.rsplit(":", 1)[0].endswith(".py"):
        path_text, factory_name = spec.rsplit(":", 1)
        return factory_name if factory_name not in GENERIC_FACTORIES else Path(path_text).stem
    return spec


GENERIC_FACTORIES = ("model", "make", "build", "factory")


def check_spec(spec: str) -> None:
    """One line now for a MODEL that cannot be loaded whatever happens next: a built-in case
    that does not exist, a .py without its factory (a factory's own errors come when it runs)."""
    if ":" in spec and spec.rsplit(":", 1)[0].endswith(".py"):
        return
    if spec.endswith(".py"):
        raise CortexmError(f"{spec}: name the factory too, as {spec}:FACTORY")
    cases.get(spec)


def load(spec: str) -> ModelBundle:
    from cortexm.sources.backend_source import quiet_lowering_imports

    quiet_lowering_imports()
    import torch

    if ":" in spec and spec.rsplit(":", 1)[0].endswith(".py"):
        path_text, factory_name = spec.rsplit(":", 1)
        path = Path(path_text)
        seed = zlib.crc32(f"{path.name}:{factory_name}".encode())
        torch.manual_seed(seed)
        result = _call_factory(path, factory_name)
        return _bundle(name_of(spec), result, qtol=0, source={"file": str(path), "factory": factory_name}, where=spec)
    if spec.endswith(".py"):
        raise CortexmError(f"{spec}: name the factory too, as {spec}:FACTORY")
    case = cases.get(spec)
    torch.manual_seed(case.seed)
    try:
        result = case.build()
    except Exception as e:  # a bug in a built-in case: still one line for the user
        raise CortexmError(f"case {case.name} failed to build: {type(e).__name__}: {e}") from e
    bundle = _bundle(case.name, result, qtol=case.qtol, source={"case": case.name}, where=case.name)
    bundle.notes, bundle.data, bundle.input_keys = case.notes, case.data, case.input_keys
    return bundle


def _call_factory(path: Path, factory_name: str) -> Any:
    if not path.is_file():
        raise CortexmError(f"{path}: no such model file")
    module_name = f"cortexm_user_model_{zlib.crc32(str(path.resolve()).encode()):08x}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise CortexmError(f"{path}: cannot be imported as a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except SystemExit as e:
        raise CortexmError(f"{path}: importing it called sys.exit({e.code!r}){_where(e, path)}") from None
    except Exception as e:
        raise CortexmError(f"{path}: importing it raised {type(e).__name__}: {e}{_where(e, path)}") from e
    factory = getattr(module, factory_name, None)
    if not callable(factory):
        raise CortexmError(f"{path}: no function {factory_name!r}")
    try:
        return factory()
    except SystemExit as e:
        raise CortexmError(f"{path}:{factory_name}() called sys.exit({e.code!r}){_where(e, path)}") from None
    except Exception as e:
        raise CortexmError(f"{path}:{factory_name}() raised {type(e).__name__}: {e}{_where(e, path)}") from e


def _where(error: BaseException, path: Path) -> str:
    """' (line N)' of the deepest frame in the user's file, to point at the cause."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if Path(f.filename).resolve() == path.resolve()]
    return f" (line {frames[-1].lineno})" if frames else ""


def from_factory(factory, name: str | None = None, qtol: int = 0) -> ModelBundle:
    """A bundle from a factory function in the caller's own code (the pytest fixture uses this)."""
    import torch

    from cortexm.sources.backend_source import quiet_lowering_imports

    quiet_lowering_imports()
    if not name:
        name = getattr(factory, "__name__", "model")
    torch.manual_seed(zlib.crc32(name.encode()))
    try:
        result = factory()
    except SystemExit as e:
        raise CortexmError(f"{name}() called sys.exit({e.code!r})") from None
    except Exception as e:
        raise CortexmError(f"{name}() raised {type(e).__name__}: {e}") from e
    return _bundle(name, result, qtol=qtol, source={"factory": f"{getattr(factory, '__module__', '?')}.{name}"}, where=name)


def _bundle(name: str, result: Any, qtol: int, source: dict, where: str) -> ModelBundle:
    import torch

    if not isinstance(result, (tuple, list)) or len(result) not in (2, 3):
        raise CortexmError(f"{where}: the factory must return (module, example_inputs[, calibration_samples])")
    module, inputs = result[0], result[1]
    if not isinstance(module, torch.nn.Module):
        raise CortexmError(f"{where}: the factory returned {type(module).__name__}, expected a torch.nn.Module")
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    if not isinstance(inputs, (tuple, list)) or not inputs or not all(isinstance(t, torch.Tensor) for t in inputs):
        raise CortexmError(f"{where}: example_inputs must be a tensor or a tuple of tensors")
    inputs = tuple(inputs)
    empty = next((k for k, t in enumerate(inputs) if t.numel() == 0), None)
    if empty is not None:
        raise CortexmError(f"{where}: example input {empty} has no elements (shape {list(inputs[empty].shape)})")
    if len(result) == 3 and result[2] is not None:
        calibration = _calibration(result[2], inputs, where)
    else:
        calibration = [inputs] + [tuple(like(t) for t in inputs) for _ in range(CALIBRATION_SAMPLES - 1)]
    _check_outputs(module, inputs, where)
    return ModelBundle(name, module.eval(), inputs, calibration, qtol, source)


def _calibration(samples: Any, inputs: tuple, where: str) -> list[tuple]:
    """calibration_samples: a list of samples, each a tensor or a tuple shaped like example_inputs."""
    import torch

    what = f"{where}: calibration_samples must be a list of samples, each a tensor or a tuple of tensors like example_inputs"
    if not isinstance(samples, (tuple, list)):
        raise CortexmError(f"{what}; got {type(samples).__name__}")
    if not samples:
        raise CortexmError(f"{where}: calibration_samples is empty")
    calibration = [tuple(s) if isinstance(s, (tuple, list)) else (s,) for s in samples]
    for k, sample in enumerate(calibration):
        if len(sample) != len(inputs) or not all(isinstance(t, torch.Tensor) for t in sample):
            raise CortexmError(f"{what}; sample {k} is not")
        bad = next((i for i, (t, x) in enumerate(zip(sample, inputs, strict=True)) if t.shape != x.shape), None)
        if bad is not None:
            raise CortexmError(f"{where}: calibration sample {k} input {bad} has shape {list(sample[bad].shape)}, "
                               f"the example input {list(inputs[bad].shape)}")
    return calibration


def _check_outputs(module, inputs: tuple, where: str) -> None:
    """The model runs on its example inputs and returns a tensor or a tuple of tensors (what a
    .pte's outputs can be)."""
    import torch

    try:
        with torch.no_grad():
            out = module(*inputs)
    except Exception as e:
        raise CortexmError(f"{where}: the model raised {type(e).__name__} on its example inputs: {e}") from e
    outputs = out if isinstance(out, (tuple, list)) else (out,)
    if not outputs or not all(isinstance(t, torch.Tensor) for t in outputs):
        raise CortexmError(f"{where}: the model returns {type(out).__name__}; it must return a tensor or a tuple of tensors")
