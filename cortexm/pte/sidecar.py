"""The sidecar: the JSON cortexm writes beside a .pte it exports (cortexm.lowering.export
says what it holds), read by every stage after the lowering, and how reports name a program.
"""

from __future__ import annotations

from pathlib import Path

from cortexm.base import files

# A sidecar holds names, shapes and a few hundred points: far below this.
MAX_SIDECAR = 64 * 1024 * 1024


def sidecar_path(pte_path: Path) -> Path:
    return pte_path.with_suffix(".json")


# File stems that say nothing about the model (upstream's examples all ship `model.pte`).
GENERIC_STEMS = frozenset({"model", "program", "out", "output", "net", "network", "graph"})


def program_name(pte_path: Path, sidecar: dict | None = None) -> str:
    """How reports name a program: its sidecar's name, else its file stem, else (for a generic
    stem such as model.pte) the folder it is in."""
    if sidecar and isinstance(sidecar.get("name"), str):
        return sidecar["name"]
    path = Path(pte_path)
    if path.stem.lower() in GENERIC_STEMS and path.resolve().parent.name:
        return path.resolve().parent.name
    return path.stem


def read_sidecar(pte_path: Path) -> dict | None:
    """The sidecar beside `pte_path`, or None if there is none."""
    path = sidecar_path(Path(pte_path))
    if not path.is_file():
        return None
    data = files.read_json(path, "sidecar", MAX_SIDECAR)
    if not isinstance(data, dict) or "cortexm" not in data:
        return None
    return data
