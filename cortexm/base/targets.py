"""The Cortex-M cores cortexm knows: CMSIS-NN backend, compiler flags, simulators.

The CMSIS-NN backend of a core is not decided here: it is what ExecuTorch's
`CortexMTargetConfig` resolves through `cmsis_nn.resolve_backend`. `backend`
below is what this project expects, and `cortexm targets` (and a test) show
both so a change upstream is noticed.
"""

from __future__ import annotations

from dataclasses import dataclass

from cortexm.base.errors import CortexmError


@dataclass(frozen=True)
class Core:
    name: str  # ExecuTorch's target string, e.g. "cortex-m7"
    backend: str  # CMSIS-NN variant: SCALAR, DSP or MVE
    gcc_flags: tuple[str, ...]
    qemu_machine: str | None  # qemu-system-arm -M value
    fvp_model: str | None  # Corstone FVP binary that runs this core's code
    board: str | None  # board support folder under fvp/boards for runner builds
    toolchain: str = "arm-none-eabi"  # kernels/toolchain/<toolchain>*.cmake; "host": the host build
    lowering: str | None = None  # the target string ExecuTorch lowers for, when not `name`

    @property
    def short(self) -> str:
        return self.name.removeprefix("cortex-")

    @property
    def target_string(self) -> str:
        """What CortexMTargetConfig.from_target_string is given for this core."""
        return self.lowering or self.name

    @property
    def hosted(self) -> bool:
        return self.toolchain == "host"


CORES: tuple[Core, ...] = (
    Core("cortex-m0plus", "SCALAR", ("-mcpu=cortex-m0plus", "-mthumb", "-mfloat-abi=soft"), None, None, None),
    Core("cortex-m3", "SCALAR", ("-mcpu=cortex-m3", "-mthumb", "-mfloat-abi=soft"), "mps2-an385", None, "mps2-an385"),
    Core("cortex-m4", "DSP", ("-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"), "mps2-an386", None,
         "mps2-an386"),
    Core("cortex-m7", "DSP", ("-mcpu=cortex-m7", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv5-d16"), "mps2-an500",
         "FVP_Corstone_SSE-300_Ethos-U55", "mps2-an500"),
    Core("cortex-m33", "DSP", ("-mcpu=cortex-m33", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv5-sp-d16"), "mps2-an505", None,
         "mps2-an505"),
    Core("cortex-m55", "MVE", ("-mcpu=cortex-m55", "-mthumb", "-mfloat-abi=hard"), "mps3-an547", "FVP_Corstone_SSE-300_Ethos-U55",
         "mps3-an547"),
    Core("cortex-m85", "MVE", ("-mcpu=cortex-m85", "-mthumb", "-mfloat-abi=hard"), None, "FVP_Corstone_SSE-310", None),
    # Not a Cortex-M: the runner built for this machine with AddressSanitizer and UBSan, running
    # CMSIS-NN's scalar C on programs lowered for the scalar variant (as the M3's): a memory
    # oracle with exact-size buffers, and a fast scalar core for the cross-core check.
    Core("host", "SCALAR", (), None, None, "host", toolchain="host", lowering="cortex-m3"),
)

_BY_NAME = {c.name: c for c in CORES}


def core(name: str) -> Core:
    """The core called `name` ('cortex-m7'; 'm7' and 'M7' are accepted too)."""
    key = name.strip().lower()
    if not key.startswith("cortex-") and key not in _BY_NAME:
        key = "cortex-" + key
    try:
        return _BY_NAME[key]
    except KeyError:
        known = ", ".join(c.name for c in CORES)
        raise CortexmError(f"unknown target {name!r}; known targets: {known}") from None
