"""A torch.export archive (.pt2) read as data: checked before torch sees it.

torch.export.load is not a data reader. It unpickles payloads marked `use_pickle`, custom and
opaque objects and the sample inputs (falling back to an unrestricted unpickler), compiles the
program's `guards_code` strings into Python when the module is made, evaluates symbolic shape
expressions with sympy (which evaluates Python), resolves any `torch.*` name as an operator,
and loads AOTInductor libraries. An archive from elsewhere could run code through each.

So cortexm loads a .pt2 only after `check` has found in it nothing but what its own exports
write: the archive's fixed records, one model's JSON and raw tensor payloads, stored
uncompressed; every node an ATen, quantized_decomposed or getitem operator; every argument
a literal or a tensor; every shape a number; no guards, symbols, custom objects, pickled
payloads or sample inputs. Everything else is refused with one line naming what was found.
The check is linear in the archive's size and needs no torch; `load` hands torch the very
bytes that were checked.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path

from cortexm.base import files
from cortexm.base.errors import CortexmError

MAX_SIZE = 512 * 1024 * 1024  # a model of cortexm's fits a microcontroller: far below this
MAX_JSON = 64 * 1024 * 1024  # one model's graph, as text
MAX_DEPTH = 64  # nesting of the JSON (a graph is 8 deep; a treespec a few more per input level)

_FIXED = {"archive/archive_format", "archive/archive_version", "archive/.data/version", "archive/byteorder",
          "archive/.data/serialization_id"}
_MODEL = re.compile(r"archive/models/([A-Za-z0-9_]+)\.json")
_CONFIG = re.compile(r"archive/data/(weights|constants)/([A-Za-z0-9_]+)_(weights|constants)_config\.json")
_PAYLOAD = re.compile(r"archive/data/(weights/weight|constants/tensor)_[0-9]+")
_SAMPLE = re.compile(r"archive/data/sample_inputs/([A-Za-z0-9_]+)\.pt")

# Node targets that compute on tensors and nothing else.
_TARGET = re.compile(r"torch\.ops\.(aten|quantized_decomposed)\.[A-Za-z0-9_]+\.[A-Za-z0-9_]+|_operator\.getitem")
# Operators of those namespaces that reach outside the tensors they are given.
_NOT_DATA = re.compile(r"\.(from_file|_?save|_?load|print|_print|set_|_assert_async\.msg)\b")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_.<>]*")
# Argument kinds that are literals or tensors (torch/_export/serde/schema.py, Argument).
_LITERAL_ARGS = {"as_none", "as_int", "as_ints", "as_float", "as_floats", "as_string", "as_strings", "as_bool",
                 "as_bools", "as_scalar_type", "as_memory_format", "as_layout", "as_device", "as_int_lists",
                 "as_float_lists", "as_complex"}
_TENSOR_ARGS = {"as_tensor", "as_tensors", "as_optional_tensor", "as_optional_tensors", "as_nested_tensors"}
_INPUT_SPECS = {"user_input", "parameter", "buffer", "tensor_constant"}
_OUTPUT_SPECS = {"user_output", "buffer_mutation", "user_input_mutation", "parameter_mutation"}
_METADATA = {"stack_trace", "nn_module_stack", "source_fn_stack", "torch_fn", "custom", "from_node"}
_TREESPEC_TYPES = {None, "builtins.tuple", "builtins.list", "builtins.dict", "collections.OrderedDict"}


class NotData(CortexmError):
    """A .pt2 that holds something other than what cortexm's exports write."""


def read_checked(path: str | Path, what: str = "model") -> bytes:
    """The bytes of the .pt2 at `path`, once `check` has passed them."""
    path = files.regular(path, what, MAX_SIZE)
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise CortexmError(f"{path}: cannot read ({e.strerror or e})") from None
    check(data, str(path))
    return data


def check(data: bytes, name: str = "model") -> None:
    """Raises NotData (one line, naming `name` and what was found) unless `data` is an
    archive as cortexm's exports write it (module docstring)."""
    try:
        _check(data)
    except NotData as e:
        raise NotData(f"{name}: {e}; cortexm loads a saved model only as data (export it again with cortexm)") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, KeyError, TypeError, OverflowError,
            RecursionError, UnicodeDecodeError, EOFError, OSError) as e:
        raise NotData(f"{name}: not a torch.export archive cortexm can read ({type(e).__name__}); "
                      "export it again with cortexm") from None


def load(data: bytes):
    """The torch.export program in `data`, which `check` has passed. Needs torch."""
    import torch
    import torch.ao.quantization.fx._decomposed  # registers the quantize ops the model calls

    return torch.export.load(io.BytesIO(data))


def _check(data: bytes) -> None:
    if len(data) > MAX_SIZE:
        raise NotData(f"{len(data)} B, more than the {MAX_SIZE} B a saved model may have")
    archive = zipfile.ZipFile(io.BytesIO(data))
    members = archive.infolist()
    if len(members) > 100_000:
        raise NotData(f"{len(members)} records")
    models, total = [], 0
    for info in members:
        total += info.file_size
        if info.compress_type != zipfile.ZIP_STORED or total > len(data):
            raise NotData(f"record {info.filename!r} is compressed (cortexm's archives are stored)")
        if info.filename in _FIXED or _PAYLOAD.fullmatch(info.filename) or _CONFIG.fullmatch(info.filename):
            continue
        if m := _MODEL.fullmatch(info.filename):
            models.append(m.group(1))
        elif _SAMPLE.fullmatch(info.filename):
            if info.file_size:
                raise NotData(f"record {info.filename!r} holds sample inputs (a pickle)")
        else:
            raise NotData(f"record {info.filename!r} is not one cortexm's exports write")
    if len(models) != 1:
        raise NotData(f"{len(models)} models in it, cortexm's exports save one")
    model = models[0]
    for kind in ("weights", "constants"):
        config = _json(archive, f"archive/data/{kind}/{model}_{kind}_config.json")
        _payloads(kind, config)
    _model(_json(archive, f"archive/models/{model}.json"))


def _json(archive: zipfile.ZipFile, name: str):
    info = archive.getinfo(name)
    if info.file_size > MAX_JSON:
        raise NotData(f"record {name!r} is {info.file_size} B of JSON")
    value = json.loads(archive.read(name))
    _depth(value, name)
    return value


def _depth(value, name: str) -> None:
    """Nesting within MAX_DEPTH, walked without recursion (a deep document is refused, not a crash)."""
    todo = [(value, 0)]
    while todo:
        item, depth = todo.pop()
        if depth > MAX_DEPTH:
            raise NotData(f"record {name!r} nests deeper than {MAX_DEPTH}")
        if isinstance(item, dict):
            todo += [(v, depth + 1) for v in item.values()]
        elif isinstance(item, list):
            todo += [(v, depth + 1) for v in item]


def _payloads(kind: str, config) -> None:
    for fqn, entry in _dict(config, "config").items():
        if entry.get("use_pickle") is not False:
            raise NotData(f"{kind} {fqn!r} is pickled")
        prefix = "weight_" if kind == "weights" else "tensor_"
        if not re.fullmatch(prefix + r"[0-9]+", str(entry.get("path_name"))):
            raise NotData(f"{kind} {fqn!r} is not a tensor ({entry.get('path_name')!r})")
        _tensor_meta(entry.get("tensor_meta"), f"{kind} {fqn!r}")


def _dict(value, key: str) -> dict:
    found = value.get(key) if isinstance(value, dict) else None
    if not isinstance(found, dict):
        raise NotData(f"no {key} in it")
    return found


def _tensor_meta(meta, what: str) -> None:
    if not isinstance(meta, dict):
        raise NotData(f"{what} has no tensor description")
    for field in ("sizes", "strides"):
        for size in meta.get(field) or []:
            _number(size, what)
    _number(meta.get("storage_offset", {"as_int": 0}), what)


def _number(value, what: str) -> None:
    """A size given as a number, not as an expression (sympy would evaluate one)."""
    if not (isinstance(value, dict) and set(value) == {"as_int"} and isinstance(value["as_int"], int)):
        raise NotData(f"{what} has a symbolic size")


def _model(program) -> None:
    if not isinstance(program, dict):
        raise NotData("its model is not a JSON object")
    if program.get("guards_code"):
        raise NotData("it carries guard code (Python torch would compile)")
    if program.get("range_constraints"):
        raise NotData("it carries symbolic shape ranges")
    for name in program.get("verifiers") or []:
        if not _IDENTIFIER.fullmatch(str(name)):
            raise NotData(f"verifier {name!r}")
    module = _dict(program, "graph_module")
    if module.get("metadata") or module.get("treespec_namedtuple_fields"):
        raise NotData("its module carries metadata or named tuples")
    _graph(_dict(module, "graph"))
    signature = _dict(module, "signature")
    for spec in signature.get("input_specs") or []:
        _one_of(spec, _INPUT_SPECS, "input")
    for spec in signature.get("output_specs") or []:
        _one_of(spec, _OUTPUT_SPECS, "output")
    for entry in module.get("module_call_graph") or []:
        call = entry.get("signature") if isinstance(entry, dict) else None
        if call is None:
            continue
        for key in ("in_spec", "out_spec"):
            _treespec(call.get(key))
        for arg in (call.get("inputs") or []) + (call.get("outputs") or []):
            _argument(arg, "the module call graph")


def _graph(graph: dict) -> None:
    for key in ("sym_int_values", "sym_bool_values", "sym_float_values", "custom_obj_values"):
        if graph.get(key):
            raise NotData(f"its graph has {key}")
    for name, meta in (graph.get("tensor_values") or {}).items():
        _tensor_meta(meta, f"value {name!r}")
    for arg in (graph.get("inputs") or []) + (graph.get("outputs") or []):
        _argument(arg, "the graph's inputs and outputs")
    for node in graph.get("nodes") or []:
        target = str(node.get("target"))
        if not _TARGET.fullmatch(target) or _NOT_DATA.search(target):
            raise NotData(f"node {node.get('name')!r} calls {target[:80]!r}, not a tensor operator")
        for named in node.get("inputs") or []:
            _argument(named.get("arg"), f"node {node.get('name')!r}")
        for out in node.get("outputs") or []:
            _argument(out, f"node {node.get('name')!r}")
        _metadata(node.get("metadata") or {}, node.get("name"))


def _argument(arg, where: str) -> None:
    if not isinstance(arg, dict) or len(arg) != 1:
        raise NotData(f"{where} has a malformed argument")
    (kind, value), = arg.items()
    if kind in _LITERAL_ARGS or kind in _TENSOR_ARGS:
        return
    if kind == "as_string_to_argument" and isinstance(value, dict):
        for inner in value.values():
            _argument(inner, where)
        return
    if kind in ("as_sym_int", "as_sym_ints"):
        for item in value if isinstance(value, list) else [value]:
            _number(item, where)
        return
    raise NotData(f"{where} takes {kind.removeprefix('as_').replace('_', ' ')} (only literals and tensors are data)")


def _one_of(spec, allowed: set[str], what: str) -> None:
    kinds = set(spec) if isinstance(spec, dict) else set()
    if len(kinds) != 1 or not kinds <= allowed:
        raise NotData(f"its signature has an {what} of kind {', '.join(sorted(kinds)) or '?'}")


def _metadata(metadata: dict, node) -> None:
    for key, value in metadata.items():
        if key not in _METADATA or not isinstance(value, str):
            raise NotData(f"node {node!r} has metadata {key!r}")
    for item in filter(None, metadata.get("source_fn_stack", "").split(";")):
        target = item.rsplit(",", 1)[-1]
        if not _IDENTIFIER.fullmatch(target):
            raise NotData(f"node {node!r} names {target[:80]!r} as its source")


def _treespec(text) -> None:
    if text is None:
        return
    spec = json.loads(text)
    todo = [spec[1] if isinstance(spec, list) and len(spec) == 2 else spec]
    while todo:
        node = todo.pop()
        if not isinstance(node, dict) or node.get("type") not in _TREESPEC_TYPES:
            raise NotData(f"its input or output structure has type "
                          f"{str(node.get('type') if isinstance(node, dict) else node)[:60]!r}")
        todo += node.get("children_spec") or []
