"""Which Python lowers and what sizes its scratch buffers: the trees the runner is built from.

cortexm.sources.backend_source puts a chosen tree's backends/cortex_m Python in place; this
module makes the choice, building CMSIS-NN's buffer-size module from the CMSIS-NN tree
(cortexm.firmware.helper) first. The build happens here, where a caller asks for it, never
as a side effect of a lookup below the lowering: the lowering itself only activates what was
chosen (cortexm.sources.backend_source.activate_from_environment), so the export cache's key
holds no build code.
"""

from __future__ import annotations

from pathlib import Path

from cortexm.base.errors import CortexmError
from cortexm.sources import backend_source


def choose(executorch_src: str | Path | None = None, cmsis_nn_src: str | Path | None = None, progress=None) -> None:
    """Lower with the trees the runner is built from (flag, environment variable, default
    location; cortexm.sources): the ExecuTorch tree's backends/cortex_m Python, and CMSIS-NN's
    buffer-size module built from the CMSIS-NN tree; the wheel's own where there is no tree.
    A CMSIS-NN tree whose module cannot be built stops the lowering (never the wheel's bundled
    module instead: scratch would be planned by another CMSIS-NN than the runner's)."""
    from cortexm import sources
    from cortexm.firmware.helper import build_helper

    tree = sources.locate(sources.EXECUTORCH, executorch_src).path
    cmsis_nn = sources.locate(sources.CMSIS_NN, cmsis_nn_src).path
    helper = None
    if cmsis_nn is not None:
        try:
            helper = build_helper(cmsis_nn, progress)
        except CortexmError as e:
            raise CortexmError(f"cannot size scratch with the CMSIS-NN at {cmsis_nn}: {e} "
                               "(--lowering installed lowers with the executorch wheel's own CMSIS-NN module)") from None
    backend_source.activate(tree, helper)

