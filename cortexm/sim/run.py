"""Running a .pte on a simulated core and reading back its outputs.

    result = run_pte("conv2d.pte", "cortex-m7")              # QEMU, the sidecar's inputs
    result = run_pte("kws.pte", "cortex-m7", ["mfcc_yes.h"]) # inputs: .bin, .npy, C headers
    result.outputs[0]          # numpy, the model's dtype and shape, laid out in its dim order
    result.instructions        # execute()'s instruction count (QEMU)
    result.max_diff_lsb        # against the sidecar's reference, in quantization steps
    ran = run_program(Bundle.open("conv2d.pte"), core("cortex-m7"))  # the run alone, no verdict

The runner is the suite's when it registers every operator the program calls,
else one built for this program alone. A failed run raises RunError, whose
message is the runner's first failure line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cortexm import sim
from cortexm.base import writes
from cortexm.base.errors import CortexmError
from cortexm.base.targets import Core
from cortexm.base.targets import core as core_named
from cortexm.firmware import Runner, build_runner, suite_ops
from cortexm.firmware.ops import program_ops
from cortexm.pte.bundle import Bundle
from cortexm.pte.program import ExecutionPlan, TensorValue
from cortexm.pte.sidecar import read_sidecar
from cortexm.pte.tensors import DTYPES, OutputDiff, compare_outputs, reference_outputs, to_logical
from cortexm.sim.inputs import read_input

# Bytes of a non-tensor input or output as the runner reads and writes it.
_SCALARS = {bool: (1, np.bool_), int: (8, np.int64), float: (8, np.float64)}


class RunError(CortexmError):
    """The model ran and failed; `result` has the simulator's whole log."""

    def __init__(self, message: str, result: sim.SimResult) -> None:
        super().__init__(message)
        self.result = result


@dataclass
class RunResult:
    pte: Path
    core: Core
    simulator: str
    runner: Runner
    outputs: list[np.ndarray]
    sim_result: sim.SimResult
    # Per output, against the sidecar's reference (empty without one, and from run_program, which
    # only runs): max |diff| in quantization steps, how many elements differ, the worst ones.
    diffs: list[OutputDiff] = field(default_factory=list)
    qtol: int | None = None  # the sidecar's allowed difference, in steps
    warnings: list[str] = field(default_factory=list)
    # The program against the quantized model on these inputs (cortexm.semantic), None when the
    # export saved no model; and every departure from it, (line, details).
    semantic: dict | None = None
    departures: list[tuple[str, str]] = field(default_factory=list)

    @property
    def instructions(self) -> int | None:
        return self.sim_result.instructions

    @property
    def log(self) -> str:
        return self.sim_result.log

    @property
    def max_diff_lsb(self) -> float | None:
        return max((d.max_lsb for d in self.diffs), default=None)

    @property
    def within_tolerance(self) -> bool | None:
        """All outputs within the sidecar's qtol of the reference (None: nothing to compare)."""
        worst = self.max_diff_lsb
        if worst is None or self.qtol is None:
            return None
        return worst <= self.qtol

    @property
    def means_the_model(self) -> bool | None:
        """The program is within every operator's tolerance of the quantized model (None: no model)."""
        return None if self.semantic is None else not self.departures


def run_pte(pte: str | Path | Bundle, core: Core | str, sim_name: str = "qemu", inputs: list[str | Path] | None = None,
            **how: Any) -> RunResult:
    """Runs `pte` on `core` as run_program does (`how`: its keyword arguments: the runner, the
    trees, the time-out...) and judges the outputs (`judged`): against the references of these
    inputs, computed before anything runs (a damaged bundle costs nothing).

    Every input is read once: the program's bytes (`pte` may be a Bundle already read), its
    sidecar and its input files are read here, at the start, and what is judged, run and
    audited is those bytes, whatever happens to the files meanwhile."""
    bundle = pte if isinstance(pte, Bundle) else Bundle.open(Path(pte))
    core = core_named(core) if isinstance(core, str) else core
    raw_inputs = input_bytes(bundle, bundle.program().plan(), inputs)  # a bad input says so before a runner is built
    references, semantic = expected(bundle, core, inputs, raw_inputs)
    run = run_program(bundle, core, sim_name, inputs, raw_inputs=raw_inputs, **how)
    return judged(run, bundle, references, semantic)


def run_program(
    bundle: Bundle,
    core: Core,
    sim_name: str = "qemu",
    inputs: list[str | Path] | None = None,
    *,
    runner: Runner | None = None,
    executorch_src: str | Path | None = None,
    cmsis_nn_src: str | Path | None = None,
    fvp: str | Path | None = None,
    workdir: str | Path | None = None,
    timeout: float = sim.DEFAULT_TIMEOUT,
    progress=None,
    extra_args: tuple[str, ...] = (),
    remember: bool = False,
    raw_inputs: list[bytes] | None = None,
) -> RunResult:
    """Runs `bundle`'s program on `core` under `sim_name` ("qemu" or "fvp") with `inputs` (files
    cortexm.sim.inputs reads: raw .bin in the program's dim order, .npy, C headers; default: the
    sidecar's; `raw_inputs`: their bytes, read already), on `runner` or the one `runner_for`
    picks. The run alone: the outputs, the counts and the log, no verdict (run_pte adds one; the
    test app judges in stages of its own). `remember`: a run made before with the same program,
    inputs, runner and simulator is answered from cortexm.sim.memo."""
    program = bundle.program()
    plan = program.plan()
    if raw_inputs is None:
        raw_inputs = input_bytes(bundle, plan, inputs)
    simulator = sim.for_core(core, sim_name, fvp)
    simulator.require(core)  # before a build that could not be run anyway
    runner = runner or runner_for(program, core, simulator, executorch_src=executorch_src,
                                  cmsis_nn_src=cmsis_nn_src, progress=progress)
    result, raw = execute(bundle, core, simulator, runner, workdir=workdir, timeout=timeout, extra_args=extra_args,
                          remember=remember, raw_inputs=raw_inputs)
    if not result.ok:
        from cortexm.sim.failure import failure_line

        raise RunError(f"{bundle.pte.name} on {core.name} ({simulator.name} {runner.board}): "
                       f"{failure_line(result, plan, bundle.sidecar, core)}", result)
    outputs = [from_raw(data, plan.values[index], f"output {k}")
               for k, (data, index) in enumerate(zip(raw, plan.outputs, strict=False))]
    run = RunResult(bundle.pte, core, simulator.name, runner, outputs, result)
    mismatch = core_mismatch(bundle, core)
    if mismatch:
        run.warnings.append(mismatch)
    return run


def expected(bundle: Bundle, core: Core, inputs: list | None,
             raw_inputs: list[bytes]) -> tuple[list[np.ndarray] | None, dict | None]:
    """What the outputs must be for these inputs and what the quantized model makes of them
    (cortexm.semantic): the sidecar's for its own inputs, computed again for given ones; None
    for each where there is nothing to compare with."""
    sidecar = bundle.sidecar
    if sidecar and inputs is not None:
        # The sidecar's references are for its example inputs: both are computed again for these.
        from cortexm.semantic.program import references as references_for

        plan = bundle.program().plan()
        logical = [from_raw(data, plan.values[index], f"input {k}")
                   for k, (data, index) in enumerate(zip(raw_inputs, plan.inputs, strict=True))]
        return references_for(bundle, plan, logical, core.backend)
    if sidecar and all(bundle.has(name) for name in bundle.names("references")):
        return reference_outputs(bundle), sidecar.semantic
    return None, None


def judged(run: RunResult, bundle: Bundle, references: list[np.ndarray] | None, semantic: dict | None) -> RunResult:
    """`run` with its verdict: each output against its reference (compare_outputs, the
    comparison the test app's stage `compare` makes) and the departures from the quantized model."""
    run.semantic = semantic
    if references is not None and bundle.sidecar is not None:  # references come from the sidecar
        run.qtol = bundle.sidecar.qtol
        run.diffs = compare_outputs(run.outputs, references, bundle.sidecar.outputs)
    if run.semantic is not None:
        from cortexm.semantic.judge import departures

        run.departures = departures(run.semantic)
    return run


def core_mismatch(pte: Path | Bundle, core: Core) -> str | None:
    """Says so when the sidecar names another core than the one `pte` is run on."""
    sidecar = pte.sidecar if isinstance(pte, Bundle) else read_sidecar(Path(pte))
    name = (pte.pte if isinstance(pte, Bundle) else Path(pte)).name
    if not sidecar or sidecar.target in (None, core.name):
        return None
    return (f"{name} was exported for {sidecar.target} (CMSIS-NN {sidecar.backend}), "
            f"it runs on {core.name} (CMSIS-NN {core.backend})")


def runner_for(program, core: Core, simulator: sim.Simulator, **build_args) -> Runner:
    """The suite's runner when it registers every operator `program` (a parsed Program) calls,
    else one for its operators alone."""
    ops = program_ops(program)
    covered = set(ops) <= set(suite_ops())
    return build_runner(core, board=simulator.board(core), ops=None if covered else ops, **build_args)


def execute(pte: Path | Bundle, core: Core, simulator: sim.Simulator, runner: Runner, inputs: list | None = None,
            workdir: str | Path | None = None, timeout: float = sim.DEFAULT_TIMEOUT,
            extra_args: tuple[str, ...] = (), remember: bool = False,
            raw_inputs: list[bytes] | None = None) -> tuple[sim.SimResult, list[bytes]]:
    """One run of `pte` (a path, or a Bundle whose bytes were read already) with upstream's
    protocol: the simulator's result and the raw outputs (empty when the run failed). The
    inputs are `raw_inputs` (bytes, read already), else `inputs` files, else the sidecar's;
    `extra_args` go to the runner (e.g. --guard, --fill); `remember`: as run_pte. What runs is
    the program's bytes as read, written into the run folder: never the file again."""
    from cortexm.sim import memo

    bundle = pte if isinstance(pte, Bundle) else Bundle.open(Path(pte))
    pte = bundle.pte
    plan = bundle.program().plan()
    data = raw_inputs if raw_inputs is not None else input_bytes(bundle, plan, inputs)
    names = [f"i{k}.bin" for k in range(len(data))]
    argv = [*sim.command_line(names), *sim.protocol.CALLS, *extra_args]
    entry = (memo.key(bundle.data, data, runner.elf, core, argv, simulator)
             if remember and workdir is None and not runner.options.coverage and memo.root() else None)
    recalled = memo.recall(entry, timeout) if entry else None
    if recalled is not None:
        return recalled
    folder = Path(workdir) if workdir else writes.new_folder(prefix="cortexm-run-")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        writes.atomic(folder / sim.protocol.PROGRAM, bundle.data)
        for name, raw_input in zip(names, data, strict=True):
            writes.atomic(folder / name, raw_input)
        result = simulator.run(runner.elf, core, folder, argv, timeout)
        raw = [] if not result.ok else [_read_output(sim.output_path(folder, k)) for k in range(len(plan.outputs))]
        if entry:
            memo.remember(entry, result, raw)
        if runner.options.coverage and (folder / "coverage.bin").is_file():
            from cortexm.firmware import coverage

            coverage.absorb(runner, (folder / "coverage.bin").read_bytes(), pte)
    finally:
        if workdir is None:
            writes.remove_tree(folder)
    return result, raw


def input_bytes(bundle: Bundle, plan: ExecutionPlan, given: list | None) -> list[bytes]:
    """The bytes of each input the runner reads: `given` files, else the bundle's (each
    checked against its manifest)."""
    pte = bundle.pte
    if given is None:
        if bundle.sidecar is None:
            raise CortexmError(f"{pte}: no sidecar ({pte.with_suffix('.json').name}) with example inputs; give the inputs")
        names = bundle.names("inputs")
        if len(names) != len(plan.inputs):
            raise CortexmError(f"{pte.name} takes {len(plan.inputs)} inputs, its sidecar names {len(names)}")
        stored = [bundle.read(name) for name in names]
    elif len(given) != len(plan.inputs):
        raise CortexmError(f"{pte.name} takes {len(plan.inputs)} inputs, {len(given)} given")
    data = []
    for k, index in enumerate(plan.inputs):
        raw = stored[k] if given is None else read_input(given[k], plan.values[index], k)
        spec = names[k] if given is None else given[k]
        expected, what = _value_bytes(plan, index)
        if len(raw) != expected:
            raise CortexmError(f"input {k}: {spec} has {len(raw)} B, the program's input {k} is {what} = {expected} B")
        data.append(raw)
    return data


def _value_bytes(plan: ExecutionPlan, index: int) -> tuple[int, str]:
    value = plan.values[index]
    if isinstance(value, TensorValue):
        return value.nbytes, value.describe()
    size, dtype = _SCALARS.get(type(value), (0, None))
    return size, f"a {np.dtype(dtype).name if dtype else type(value).__name__} scalar"


def _read_output(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        raise CortexmError(f"the runner reported success but wrote no {path.name}") from None


def from_raw(data: bytes, value, what: str = "output") -> np.ndarray:
    """Raw bytes in a value's dim order -> array of its logical shape (strides in that order)."""
    if not isinstance(value, TensorValue):
        size, dtype = _SCALARS.get(type(value), (0, None))
        if dtype is None or len(data) != size:
            raise CortexmError(f"{what}: {len(data)} B for a {type(value).__name__} value")
        return np.frombuffer(data, dtype).reshape(())
    if value.dtype not in DTYPES:
        raise CortexmError(f"{what}: {value.dtype} has no numpy type")
    if len(data) != value.nbytes:
        raise CortexmError(f"{what}: {len(data)} B, expected {value.describe()} = {value.nbytes} B")
    return to_logical(data, value.dtype, list(value.sizes), list(value.dim_order))
