"""Writing an export's bundle beside its .pte (the files cortexm.lowering.export lists): never over
a file cortexm did not write, whole or not at all, with a manifest of every file's hash.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cortexm.base import manifest, writes
from cortexm.base.errors import CortexmError, StorageError, storage_error
from cortexm.lowering.quantize import MODEL_KINDS
from cortexm.pte.sidecar import read_sidecar, sidecar_path

if TYPE_CHECKING:
    from cortexm.lowering.export import Export


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
        if sidecar is None or not pte.is_file() or sidecar.pte_sha256 != manifest.sha256(pte):
            return None
        listed = [pte.name, sidecar.dialect, sidecar.isolated]
        listed += [e.file for e in (*sidecar.inputs, *sidecar.outputs)]
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
    # File names follow the .pte's name, not the model's.
    named: dict[str, Any] = {"dialect": f"{stem}.dialect.txt",
                             "inputs": [replace(e, file=f"{stem}.input-{k}.bin") for k, e in enumerate(result.sidecar.inputs)],
                             "outputs": [replace(e, file=f"{stem}.reference-{k}.bin")
                                         for k, e in enumerate(result.sidecar.outputs)]}
    if result.isolated is not None:
        named["isolated"] = f"{stem}.isolated.pte"
    if result.sidecar.semantic:
        named["semantic"] = dict(result.sidecar.semantic,
                                 models={kind: f"{stem}.{kind}.pt2" for kind in result.models},
                                 outputs=[f"{stem}.model-{k}.bin" if data else None
                                          for k, data in enumerate(result.model_outputs)])
    sidecar = result.sidecar.replaced(**named)
    sidecar_file = sidecar_path(pte_path)
    before = _owned(sidecar_file) or {}
    files: list[tuple[Path, bytes]] = [(pte_path, result.pte)]
    files.append((folder / named["dialect"], result.dialect.encode()))
    if result.isolated is not None:
        files.append((folder / named["isolated"], result.isolated))
    files += [(folder / e.file, data) for e, data in zip(named["inputs"], result.inputs, strict=True)]
    files += [(folder / e.file, data) for e, data in zip(named["outputs"], result.references, strict=True)]
    if "semantic" in named:
        files += [(folder / name, result.models[kind]) for kind, name in named["semantic"]["models"].items()]
        files += [(folder / name, data)
                  for name, data in zip(named["semantic"]["outputs"], result.model_outputs, strict=True) if name]
    sidecar = sidecar.replaced(**{manifest.KEY: manifest.of_data({p.name: data for p, data in files})})
    _atomic_write(files + [(sidecar_file, (json.dumps(sidecar.raw, indent=2) + "\n").encode())])
    for stale in set(before) - {p.name for p, _ in files} - {sidecar_file.name}:
        if manifest.matches(folder / stale, before[stale]):
            writes.remove(folder / stale)
    return [p for p, _ in files] + [sidecar_file]


def _atomic_write(files: list[tuple[Path, bytes]]) -> None:
    """The bundle whole, or no file of it changed (cortexm.base.writes.atomic_all)."""
    try:
        writes.atomic_all(files)
    except OSError as e:
        if storage_error(e) is None:
            raise
        raise StorageError(f"{files[0][0].parent}: the export could not be written ({e.strerror})") from None
