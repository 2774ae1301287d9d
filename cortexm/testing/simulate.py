"""The simulator stage of the test app: a runner per core, built (or taken from the cache) once."""

from __future__ import annotations

from typing import Callable

from cortexm.targets import Core


def simulators(cores: list[Core], sim: str, executorch_src: str | None, cmsis_nn_src: str | None,
               progress: Callable[[str], None]) -> dict[str, object]:
    """core name -> a Simulator, or the one-line reason there is none."""
    if sim == "none":
        return {c.name: "--sim none" for c in cores}
    return {c.name: "the firmware path is not part of this build yet" for c in cores}
