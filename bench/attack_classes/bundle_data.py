"""Attacks (round 4): a bundle is data."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from attack_classes.lab import attack


def _bundle_copy(lab, folder: str, case: str = "add") -> Path:
    """A copy of `case`'s M7 bundle in its own folder: what a colleague sends."""
    source = lab.exported(case)
    d = lab.folder(folder)
    for file in source.parent.glob(f"{case}.*"):
        shutil.copy(file, d / file.name)
    return d / f"{case}.pte"


def _rewritten(pte: Path, name: str, data: bytes) -> None:
    """The bundle's file `name` replaced, its manifest entry updated to match (a hostile author)."""
    import hashlib

    (pte.parent / name).write_bytes(data)
    sidecar = json.loads(pte.with_suffix(".json").read_text())
    if isinstance(sidecar.get("written"), dict):
        sidecar["written"][name] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    pte.with_suffix(".json").write_text(json.dumps(sidecar))


def _inputs_of(pte: Path) -> list[str]:
    sidecar = json.loads(pte.with_suffix(".json").read_text())
    return [a for e in sidecar["inputs"] for a in ("-i", str(pte.parent / e["file"]))]


@attack("bundle data", "a .pt2 in the bundle whose pickle writes a file")
def crafted_pt2_runs_no_code(lab):
    import io
    import zipfile

    pte = _bundle_copy(lab, "crafted", "add")
    marker = lab.root / "written-by-the-bundle"
    model = pte.parent / "add.quantized.pt2"
    source, out = zipfile.ZipFile(io.BytesIO(model.read_bytes())), io.BytesIO()
    config = {"config": {"w": {"path_name": "weight_0", "is_param": False, "use_pickle": True, "tensor_meta": None}}}
    payload = b"c__builtin__\nopen\n(V" + str(marker).encode() + b"\nVw\ntR."  # pickle: open(marker, "w")
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as target:
        for info in source.infolist():
            if info.filename != "archive/data/weights/model_weights_config.json":
                target.writestr(info, source.read(info.filename))
        target.writestr("archive/data/weights/model_weights_config.json", json.dumps(config))
        target.writestr("archive/data/weights/weight_0", payload)
    _rewritten(pte, model.name, out.getvalue())
    r = lab.cli("run", str(pte), "-t", "cortex-m7", *_inputs_of(pte), timeout=600)
    if marker.exists():
        return "cortexm run X.pte -i IN (crafted X.quantized.pt2)", "the bundle's pickle ran: it wrote a file"
    return "cortexm run X.pte -i IN (crafted X.quantized.pt2)", r.one_error_line("add.quantized.pt2")


@attack("bundle data", "a sidecar naming a model outside its bundle (../)")
def sidecar_model_outside(lab):
    pte = _bundle_copy(lab, "outside/bundle", "add")
    shutil.copy(pte.parent / "add.quantized.pt2", pte.parent.parent / "elsewhere.pt2")
    sidecar = json.loads(pte.with_suffix(".json").read_text())
    sidecar["semantic"]["models"]["quantized"] = "../elsewhere.pt2"
    pte.with_suffix(".json").write_text(json.dumps(sidecar))
    r = lab.cli("run", str(pte), "-t", "cortex-m7", *_inputs_of(pte), timeout=600)
    return "cortexm run X.pte -i IN (sidecar: ../elsewhere.pt2)", r.one_error_line("not a file name in its folder")


@attack("bundle data", "one changed element of X.reference-0.bin")
def changed_reference(lab):
    pte = _bundle_copy(lab, "changedref", "add")
    reference = pte.parent / "add.reference-0.bin"
    data = bytearray(reference.read_bytes())
    data[0] ^= 0x40
    reference.write_bytes(bytes(data))
    r = lab.cli("run", str(pte), "-t", "cortex-m7", timeout=600)
    return "cortexm run X.pte (a reference element changed)", r.one_error_line("add.reference-0.bin changed since")
