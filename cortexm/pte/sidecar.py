"""The sidecar: the JSON cortexm writes beside a .pte it exports (cortexm.lowering.export
says what it holds), read by every stage after the lowering, and how reports name a program.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cache
from pathlib import Path
from typing import Any, get_args, get_type_hints

from cortexm.base import files
from cortexm.base.errors import CortexmError

# A sidecar holds names, shapes and a few hundred points: far below this.
MAX_SIDECAR = 64 * 1024 * 1024


def sidecar_path(pte_path: Path) -> Path:
    return pte_path.with_suffix(".json")


# File stems that say nothing about the model (upstream's examples all ship `model.pte`).
GENERIC_STEMS = frozenset({"model", "program", "out", "output", "net", "network", "graph"})


@dataclass(frozen=True)
class Sidecar:
    """The sidecar's one schema: what an export writes (`made`) and what every stage reads (`of`)
    are this class, field by field, in the order they are written. A sidecar may come from
    elsewhere: a field of another type is one line naming it, not an error deep inside a stage.
    `raw` is the JSON as written."""

    raw: dict = field(repr=False)
    cortexm: dict = field(default_factory=dict)  # format, version: what marks the JSON as a sidecar
    name: str | None = None
    target: str | None = None  # the core it was lowered for
    backend: str | None = None  # its CMSIS-NN variant
    executorch: dict = field(default_factory=dict)  # version, git_version
    torch: str | None = None  # torch's version
    source: dict | None = None  # {"case": name} or {"file": ..., "factory": ...}
    layout: str = "legacy"
    qtol: int | None = None  # the difference from the reference allowed, in quantization steps
    data: str = "uniform"  # what the example inputs are (cortexm.cases.data)
    data_targets: dict | None = None  # what solved boundary data met (cortexm.cases.solve)
    reference: str | None = None  # which reference computed the outputs
    upstream_reference: dict | None = None  # findings about ExecuTorch's Python reference
    notes: str | None = None  # the case's notes
    pte_sha256: str | None = None
    # File names in the bundle: the lowered graph's text, the program planned one tensor per buffer.
    dialect: str | None = None
    isolated: str | None = None
    # Per input (`file`) and output (`reference`): dtype, shape, dim order, quantization.
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    semantic: dict | None = None  # the program against its quantized model (cortexm.semantic)
    accuracy: dict | None = None  # against the float model (cortexm.semantic.accuracy)
    calls: list | None = None  # where each call came from in the model (cortexm.lowering.provenance)
    # What the quantizer did to each model node, and what the cortex_m passes said of the nodes they
    # handled (cortexm.lowering.decisions): where a call's reason comes from (cortexm.checking.reasons).
    quantizer: dict | None = None
    passes: list | None = None
    constants: dict | None = None  # constant names by content (cortexm.checking.constants)
    reference_without_helium: list | None = None  # output digests (cortexm.oracle.helium)
    written: dict | None = None  # the manifest of the bundle's files (cortexm.base.manifest.KEY)

    @classmethod
    def made(cls, **values: Any) -> Sidecar:
        """The sidecar an export writes: only this class's fields (a key nobody reads cannot be
        written), in its order; each of the type the readers check."""
        names = [f.name for f in fields(cls) if f.name != "raw"]
        unknown = set(values) - set(names)
        if unknown:
            raise TypeError(f"not a sidecar field: {', '.join(sorted(unknown))}")
        return cls.of({name: values[name] for name in names if name in values}, "the sidecar being written")

    def replaced(self, **values: Any) -> Sidecar:
        """This sidecar with `values` changed, keys where they were."""
        return type(self).made(**{**self.raw, **values})

    @classmethod
    def of(cls, data: dict, where: str = "the sidecar") -> Sidecar:
        """The sidecar `data` (parsed JSON, or what an export made), its fields' types checked."""
        values: dict[str, Any] = {"raw": data}
        for f in fields(cls):
            if f.name == "raw" or data.get(f.name) is None:
                continue
            value, kind = data[f.name], _kind(f.name)
            if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
                raise CortexmError(f"{where}: its {f.name} is {_JSON.get(type(value), 'a value')}, not {_JSON[kind]}")
            if isinstance(value, list) and f.name in ("inputs", "outputs") and not all(isinstance(e, dict) for e in value):
                raise CortexmError(f"{where}: its {f.name} are not all objects")
            values[f.name] = value
        return cls(**values)


_JSON = {str: "a string", int: "an integer", float: "a number", bool: "a boolean", dict: "an object", list: "an array"}
@cache
def _kind(name: str) -> type:
    """The JSON type Sidecar's field `name` must have: the one its annotation names besides None."""
    hint = get_type_hints(Sidecar)[name]
    return next(t for t in get_args(hint) or (hint,) if t is not type(None))


def program_name(pte_path: Path, sidecar: Sidecar | None = None) -> str:
    """How reports name a program: its sidecar's name, else its file stem, else (for a generic
    stem such as model.pte) the folder it is in."""
    if sidecar and sidecar.name:
        return sidecar.name
    path = Path(pte_path)
    if path.stem.lower() in GENERIC_STEMS and path.resolve().parent.name:
        return path.resolve().parent.name
    return path.stem


def read_sidecar(pte_path: Path) -> Sidecar | None:
    """The sidecar beside `pte_path`, or None if there is none (or the JSON there is not one)."""
    path = sidecar_path(Path(pte_path))
    if not path.is_file():
        return None
    data = files.read_json(path, "sidecar", MAX_SIDECAR)
    if not isinstance(data, dict) or "cortexm" not in data:
        return None
    return Sidecar.of(data, str(path))
