"""Which operators a runner registers: the suite's list, or exactly one model's."""

from __future__ import annotations

from pathlib import Path

from cortexm.firmware import paths
from cortexm.pte import load


def suite_ops() -> tuple[str, ...]:
    """The committed operator set of the default runner (kernels/suite_ops.txt)."""
    lines = (line.strip() for line in (paths.kernels() / "suite_ops.txt").read_text().splitlines())
    return tuple(sorted({line for line in lines if line and not line.startswith("#")}))


def model_ops(pte: str | Path) -> tuple[str, ...]:
    """Every operator the program's methods call, e.g. 'cortex_m::quantized_conv2d.out'."""
    return program_ops(load(pte))


def program_ops(program) -> tuple[str, ...]:
    """model_ops of a program parsed already (cortexm.pte.program.Program)."""
    return tuple(sorted({op.qualified_name for plan in program.plans for _, op, _ in plan.kernel_calls()}))
