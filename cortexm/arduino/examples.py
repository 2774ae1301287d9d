"""What the library's example sketches ship, read back: the program in model.h and
the inputs their sources hold (KeywordSpotting's mfcc_*.h, AddModel's kInput), so
the shipped models can be run elsewhere with the data a board would see.

An input array holds the values as ETModel::setInput hands them to the runtime:
in the input tensor's dim order, i.e. the raw layout the project's runner reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cortexm.base.errors import CortexmError

_BYTES = re.compile(r"\{(.*?)\};", re.S)
_FLOAT_ARRAY = re.compile(r"static\s+const\s+float\s+(\w+)\s*\[\s*\d*\s*\]\s*=\s*\{(.*?)\};", re.S)
_LABEL = re.compile(r'static\s+const\s+char\s*\*\s*test_label\s*=\s*"([^"]*)"')
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


@dataclass(frozen=True)
class ShippedInput:
    source: str  # file it was read from, e.g. mfcc_yes.h
    array: str  # C array name
    values: np.ndarray  # float32, in the input tensor's dim order
    label: str | None  # the expected class, where the file names one (test_label)

    def raw(self) -> bytes:
        return self.values.astype("<f4").tobytes()


def model_from_header(header: Path) -> bytes:
    """The .pte bytes of a model.h written by pte_to_header.py."""
    m = _BYTES.search(header.read_text())
    if not m:
        raise CortexmError(f"{header}: no byte array")
    return bytes(int(b, 16) for b in re.findall(r"0x([0-9a-fA-F]{2})", m.group(1)))


def shipped_inputs(example: Path) -> list[ShippedInput]:
    """Every float array of the example's sources, with its label if the file names one."""
    found = []
    for path in sorted(p for p in example.iterdir() if p.suffix in (".h", ".ino") and p.name != "model.h"):
        text = path.read_text()
        label = _LABEL.search(text)
        for name, body in _FLOAT_ARRAY.findall(text):
            body = re.sub(r"//[^\n]*|/\*.*?\*/", "", body, flags=re.S)
            values = np.array([float(v) for v in _NUMBER.findall(body)], dtype=np.float32)
            found.append(ShippedInput(path.name, name, values, label.group(1) if label else None))
    return found
