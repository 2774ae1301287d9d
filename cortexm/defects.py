"""Known upstream defects, each tied to the revisions that have it.

A case that hits one is an expected failure only while the component it lives in
is at a revision known to have it: bump the pin past the fix and the case is
expected to pass again, so the suite turns green exactly then (and red if a bump
does not fix it). A revision is given as a git commit or as a tree's NAR hash,
matching how cortexm identifies trees (cortexm.firmware.identity).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KnownDefect:
    reason: str  # what fails, and the upstream fix when there is one
    # "cmsis-nn" (the kernels tree), "executorch" (the installed lowering) or
    # "executorch-runtime" (the runtime tree); None: applies whatever the revisions.
    component: str | None = None
    broken: tuple[str, ...] = ()  # git commits (or prefixes) and NAR hashes known to have it
    stage: str = "any"  # "export", or "run" for a defect only a simulator run can show
    cores: tuple[str, ...] = ()  # empty: every core

    def applies(self, core: str, identities: dict[str, str | None], ran: bool) -> bool:
        if self.cores and core not in self.cores:
            return False
        if self.stage == "run" and not ran:
            return False
        if self.component is None:
            return True
        identity = identities.get(self.component)
        # Unknown revision: the defect may be there; expect it rather than call a pass a surprise.
        return identity is None or any(b in identity for b in self.broken)


CMSIS_NN_TRANSPOSE_CONV_ROWS = KnownDefect(
    "CMSIS-NN arm_transpose_conv_s8 misaligns output rows when pad_h % stride_h != 0; fixed by "
    "ARM-software/CMSIS-NN 4a8f5b5d (#233), after the pinned dbf45dbf",
    component="cmsis-nn",
    broken=("dbf45dbfcc515421dd6099037d3e2637b90748c8", "sha256-FOr7DevJxroGAOmnqKK9/suXjOeaZYQFlFIrYmU19WQ="),
    stage="run",
)

CMSIS_NN_TRANSPOSE_CONV_NARROW_FILTER = KnownDefect(
    "CMSIS-NN arm_transpose_conv_s8 (the path for <= 16 input channels) computes wrong outputs for some "
    "filters narrower than the stride, e.g. 4x1 with stride (1, 2), 1x1 with stride (2, 3); found by cortexm "
    "sweep, present in the pinned dbf45dbf and in 4a8f5b5d, no upstream fix yet",
    component="cmsis-nn",
    broken=("dbf45dbfcc515421dd6099037d3e2637b90748c8", "sha256-FOr7DevJxroGAOmnqKK9/suXjOeaZYQFlFIrYmU19WQ=",
            "4a8f5b5d"),
    stage="run",
)

EXECUTORCH_MATMUL_CONSTANT = KnownDefect(
    "ExecuTorch MatmulToBmmPass calls .to_tensor() on a constant matmul operand during CortexMQuantizer "
    "annotation (AttributeError); in executorch 1.5.1 and main cff6f4dd, no upstream fix yet",
    component="executorch",
    broken=("3b60683923245cf472b7323426920e15623ba361",),
    stage="export",
)


EXECUTORCH_DEGENERATE_DIM_ORDER = KnownDefect(
    "ExecuTorch gives tensors with size-1 channel and height dims different dim orders across an un-fused "
    "activation (quantized_mul then aten::clamp on [1,1,1,2]): the runtime's portable clamp rejects the "
    "program at execute (tensors_have_same_dim_order); found by cortexm sweep, lowering of executorch 1.5.1, "
    "no upstream fix yet",
    component="executorch",
    broken=("3b60683923245cf472b7323426920e15623ba361",),
    stage="run",
)


def installed_identities() -> dict[str, str | None]:
    """Identities known without a runner: the installed lowering."""
    try:
        from executorch import version

        return {"executorch": f"git:{version.git_version}"}
    except ImportError:
        return {}
