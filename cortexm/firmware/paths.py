"""Where the project's firmware sources are: kernels/ and fvp/boards/.

Beside the package in a checkout; $CORTEXM_FIRMWARE_SRC names the folder holding
them when cortexm is installed as a package (the Nix package sets it).
"""

from __future__ import annotations

import os
from pathlib import Path

from cortexm.base.errors import CortexmError

FIRMWARE_SRC_ENV = "CORTEXM_FIRMWARE_SRC"


def root() -> Path:
    return Path(os.environ.get(FIRMWARE_SRC_ENV) or Path(__file__).resolve().parents[2])


def kernels() -> Path:
    return root() / "kernels"


def boards() -> Path:
    return root() / "fvp" / "boards"


def require_sources() -> None:
    for folder in (kernels(), boards()):
        if not folder.is_dir():
            raise CortexmError(f"{folder} not found: runner builds need cortexm's kernels/ and fvp/boards/ "
                               f"(a repository checkout, or ${FIRMWARE_SRC_ENV} naming the folder with them)")


def board_cpu_hz(board: str) -> int | None:
    """The CPU clock a board's counter counts (fvp/boards/BOARD/board.cmake's BOARD_CPU_HZ)."""
    import re

    try:
        text = (boards() / board / "board.cmake").read_text()
    except OSError:
        return None
    m = re.search(r"set\(BOARD_CPU_HZ\s+(\d+)\)", text)
    return int(m.group(1)) if m else None
