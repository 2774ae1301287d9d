"""The sidecar: the JSON cortexm writes beside a .pte it exports (cortexm.lowering.export
says what it holds), read by every stage after the lowering, and how reports name a program.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from functools import cache
from pathlib import Path
from typing import Any, ClassVar, TypeVar, get_args, get_origin, get_type_hints

from cortexm.base import files
from cortexm.base.errors import CortexmError

# A sidecar holds names, shapes and a few hundred points: far below this.
MAX_SIDECAR = 64 * 1024 * 1024


def sidecar_path(pte_path: Path) -> Path:
    return pte_path.with_suffix(".json")


# File stems that say nothing about the model (upstream's examples all ship `model.pte`).
GENERIC_STEMS = frozenset({"model", "program", "out", "output", "net", "network", "graph"})


R = TypeVar("R", bound="Record")


class Record:
    """A JSON object of the sidecar with fixed keys, read into typed fields: `made` is what the
    export writes, `of` what every stage reads, `json()` the object as written (keys in field
    order; a field that defaults to None is left out while it is None)."""

    @classmethod
    def made(cls: type[R], **values: Any) -> R:
        return cls.of(_json(cls(**values)), f"the {cls.__name__.lower()} being written")

    @classmethod
    def of(cls: type[R], data: object, where: str = "the sidecar", name: str = "") -> R:
        """The record `data` (parsed JSON) at `name` in the sidecar, its fields' types checked."""
        if not isinstance(data, dict):
            raise CortexmError(f"{where}: its {name} is {_JSON.get(type(data), 'a value')}, not an object")
        return cls(**_fields(cls, data, where, f"{name}."))

    def json(self) -> dict:
        return {_key(type(self), f.name): _json(getattr(self, f.name)) for f in fields(self)  # type: ignore[arg-type]
                if not (f.default is None and getattr(self, f.name) is None)}


@dataclass(frozen=True)
class Marker(Record):
    """What marks the JSON as a sidecar: its format, and the cortexm that wrote it."""

    format: int | None = None
    version: str | None = None


@dataclass(frozen=True)
class Versions(Record):
    """The ExecuTorch the program was lowered by."""

    version: str | None = None
    git_version: str | None = None


@dataclass(frozen=True)
class Source(Record):
    """Where the model came from: a built-in case, or a factory (in a file)."""

    case: str | None = None
    file: str | None = None
    factory: str | None = None


@dataclass(frozen=True)
class Quant(Record):
    """How a program input or output is (de)quantized: real = scale * (q - zero_point)."""

    scale: float
    zero_point: int
    qmin: int
    qmax: int
    dtype: str


@dataclass(frozen=True)
class Tensor(Record):
    """A program input: the file of its example bytes, laid out in `dim_order`; its quantization
    where the program quantizes it."""

    FILE: ClassVar[str] = "file"  # the JSON key of `file`

    file: str | None
    dtype: str
    shape: tuple[int, ...]
    dim_order: tuple[int, ...]
    quant: Quant | None


@dataclass(frozen=True)
class Output(Tensor):
    """A program output: `file` is its reference output."""

    FILE: ClassVar[str] = "reference"

    def json(self) -> dict:
        data = super().json()
        data[self.FILE] = data.pop(self.FILE)  # last, as every export has written it
        return data


@dataclass(frozen=True)
class Sidecar:
    """The sidecar's one schema: what an export writes (`made`) and what every stage reads (`of`)
    are this class, field by field, in the order they are written. A sidecar may come from
    elsewhere: a field of another type is one line naming it, not an error deep inside a stage.
    `raw` is the JSON as written."""

    raw: dict = field(repr=False)
    cortexm: Marker = field(default_factory=Marker)
    name: str | None = None
    target: str | None = None  # the core it was lowered for
    backend: str | None = None  # its CMSIS-NN variant
    executorch: Versions = field(default_factory=Versions)
    torch: str | None = None  # torch's version
    source: Source | None = None
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
    inputs: tuple[Tensor, ...] = ()
    outputs: tuple[Output, ...] = ()
    # Records other modules own, kept as their JSON:
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
        written), in its order; each of the type the readers check (a record or its JSON)."""
        names = [f.name for f in fields(cls) if f.name != "raw"]
        unknown = set(values) - set(names)
        if unknown:
            raise TypeError(f"not a sidecar field: {', '.join(sorted(unknown))}")
        return cls.of({name: _json(values[name]) for name in names if name in values}, "the sidecar being written")

    def replaced(self, **values: Any) -> Sidecar:
        """This sidecar with `values` changed, keys where they were."""
        return type(self).made(**{**self.raw, **values})

    @classmethod
    def of(cls, data: dict, where: str = "the sidecar") -> Sidecar:
        """The sidecar `data` (parsed JSON, or what an export made), its fields' types checked."""
        return cls(raw=data, **_fields(cls, data, where, ""))


_JSON = {str: "a string", int: "an integer", float: "a number", bool: "a boolean", dict: "an object", list: "an array"}


def _json(value: Any) -> Any:
    """`value` as JSON: a record as its object, a tuple as an array."""
    if isinstance(value, Record):
        return value.json()
    return [_json(v) for v in value] if isinstance(value, (tuple, list)) else value


@cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def _key(cls: type, name: str) -> str:
    """The JSON key of field `name` of `cls`."""
    return cls.FILE if name == "file" and issubclass(cls, Tensor) else name


def _fields(cls: type, data: dict, where: str, prefix: str) -> dict[str, Any]:
    """The values of `cls`'s fields in `data`: those it holds (not None), each of its field's type,
    and None for a field without a default that may be None."""
    values: dict[str, Any] = {}
    for f in fields(cls):
        if f.name == "raw":
            continue
        value, hint = data.get(_key(cls, f.name)), _hints(cls)[f.name]
        name = prefix + _key(cls, f.name)
        if value is not None:
            values[f.name] = _typed(hint, value, where, name)
        elif f.default is MISSING and f.default_factory is MISSING:
            if type(None) not in get_args(hint):
                raise CortexmError(f"{where}: its {name} is missing")
            values[f.name] = None
    return values


def _typed(hint: Any, value: Any, where: str, name: str) -> Any:
    """`value` (parsed JSON, not None) as the type `hint` names, or one line naming the field."""
    kind = next((t for t in get_args(hint) if t is not type(None)), hint) if get_origin(hint) is not tuple else hint
    if isinstance(kind, type) and issubclass(kind, Record):
        return kind.of(value, where, name)
    if get_origin(kind) is tuple:
        item = get_args(kind)[0]
        if not isinstance(value, list):
            raise CortexmError(f"{where}: its {name} is {_JSON.get(type(value), 'a value')}, not an array")
        if isinstance(item, type) and issubclass(item, Record) and not all(isinstance(v, dict) for v in value):
            raise CortexmError(f"{where}: its {name} are not all objects")
        return tuple(_typed(item, v, where, f"{name}[{k}]") for k, v in enumerate(value))
    number = kind is float and isinstance(value, int)  # JSON does not tell 1 from 1.0
    if not (isinstance(value, kind) or number) or isinstance(value, bool) and kind in (int, float):
        raise CortexmError(f"{where}: its {name} is {_JSON.get(type(value), 'a value')}, not {_JSON[kind]}")
    return value


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
