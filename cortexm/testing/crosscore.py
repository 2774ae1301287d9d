"""The cross-core differential check: one case, exported for each core and run on each
core's runner (scalar CMSIS-NN on M3, DSP on M4/M7/M33, MVE on M55), must give
bit-identical outputs.

CMSIS-NN's variants are written to be bit-exact with each other (its unit tests
check every variant against the same expected bytes), and the lowering quantizes
before it looks at the core, so any difference is a defect in one variant or in
a backend-specific lowering — even when every core is within 1 LSB of the
Python reference. A case that differs by design says so (`Case.cross_core`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class CrossCore:
    case: str
    cores: list[str]  # cores whose run succeeded and were compared
    groups: list[list[str]] = field(default_factory=list)  # cores with identical outputs
    first_difference: str = ""  # "output 0[0, 3, 1, 2]: cortex-m7 12, cortex-m55 13"
    expected: str = ""  # why a difference is by design, or the known defect that explains it
    # The cores disagree, but each computes what its own integer reference predicts.
    predicted: bool = False
    mechanism: str = ""  # whether a known mechanism (ExecuTorch's Helium loops) accounts for it

    @property
    def agree(self) -> bool:
        return len(self.groups) <= 1

    @property
    def failed(self) -> bool:
        return not self.agree and not self.expected

    def line(self) -> str:
        if self.agree:
            return f"OK {self.case}: {', '.join(self.cores)} bit-identical"
        split = " | ".join(", ".join(g) for g in self.groups)
        tail = f" (expected: {self.expected})" if self.expected else (
            f" (each core as its own integer reference predicts: the variants compute differently; {self.mechanism})"
            if self.predicted else "")
        return f"{'DIFF' if self.expected else 'FAIL'} {self.case}: cores disagree [{split}]; first at {self.first_difference}{tail}"


def check(case: str, outputs: dict[str, list[np.ndarray]], expected: str = "") -> CrossCore:
    """Compare the outputs each core produced for one case."""
    cores = list(outputs)
    result = CrossCore(case, cores, expected=expected)
    for core in cores:
        for group in result.groups:
            if _same(outputs[group[0]], outputs[core]):
                group.append(core)
                break
        else:
            result.groups.append([core])
    if not result.agree:
        a, b = result.groups[0][0], result.groups[1][0]
        result.first_difference = _first_difference(outputs[a], outputs[b], a, b)
    return result


def _same(x: list[np.ndarray], y: list[np.ndarray]) -> bool:
    return len(x) == len(y) and all(a.shape == b.shape and a.tobytes() == np.ascontiguousarray(b).tobytes()
                                    for a, b in zip((np.ascontiguousarray(v) for v in x), y))


def _first_difference(x: list[np.ndarray], y: list[np.ndarray], a: str, b: str) -> str:
    for k, (u, v) in enumerate(zip(x, y)):
        if u.shape != v.shape:
            return f"output {k} shape: {a} {list(u.shape)}, {b} {list(v.shape)}"
        diff = np.argwhere(u != v)
        if len(diff):
            index = tuple(int(i) for i in diff[0])
            return f"output {k}{list(index)}: {a} {u[index]:.6g}, {b} {v[index]:.6g} ({len(diff)} elements differ)"
    return "output count"
