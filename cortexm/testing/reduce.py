"""`cortexm reduce`: a failing case cut down to its first failing call, as a case file of its own.

    cortexm reduce CASE -t cortex-m55 -t cortex-m7 -o reduced/

runs CASE (a built-in case, one a --cases file registers, or FILE.py:FACTORY) on each core,
takes the first failing call on the first core (the earliest call a failure line names),
extracts the model nodes it was made from with the input that reached it and the original's
quantization (cortexm.testing.piece), and checks that the piece fails at the same stage in a
call of the same operator; if it does not, it takes the calls that produce the call's inputs
too, up to MAX_LEVELS. It then shrinks the piece (channels, spatial size) while it still
fails that way, as `cortexm sweep` shrinks its samples, runs the result on every core beside
the original, and writes it: reduced-NAME.py (a case file: `cortexm test --cases`), its
arrays as .npy beside it, and test_reduced_NAME.py in the style of ExecuTorch's
backends/cortex_m/test/ops.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cortexm.base import writes
from cortexm.base.errors import CortexmError
from cortexm.report.results import Status
from cortexm.testing import piece as pieces
from cortexm.testing.piece import Failure, Piece

MAX_LEVELS = 2  # producing calls taken in when the call alone does not fail the same way
SCRATCH = ".candidates"  # candidates, under the output folder, removed once judged


# The stages whose failure a kernel's call alone can show: its arguments refused, the run
# stopped, memory written outside a buffer, outputs other than the reference.
KERNEL_STAGES = ("verify", "run", "memory", "compare")


@dataclass(frozen=True)
class CCall:
    """Where the C program of a failing call is built and run."""

    cmsis_nn: Path  # the CMSIS-NN tree the runner is built from
    sim: str = "qemu"
    fvp: str | None = None


@dataclass
class Verdict:
    status: str
    failure: Failure | None  # the first
    others: list[Failure] = field(default_factory=list)  # every failure, the first too

    def fails_as(self, failure: Failure) -> bool:
        """Among its failures, one at the same stage in a call of the same operator (left in
        float for the same reason, at the lowering)."""
        return any(f.kind == failure.kind and f.reason == failure.reason for f in self.others)

    def line(self) -> str:
        return f"{self.status}" + (f" {self.failure.describe()}" if self.failure else "")


@dataclass
class Reduction:
    case: str
    core: str
    failure: Failure
    original: dict[str, Verdict]  # core -> the original's verdict
    reduced: dict[str, Verdict] = field(default_factory=dict)  # core -> the reproducer's
    reduced_results: dict = field(default_factory=dict)  # core -> the reproducer's CaseResult
    piece: Piece | None = None
    levels: int = 0
    steps: list[str] = field(default_factory=list)  # the shrinking steps taken
    files: list[Path] = field(default_factory=list)
    lines: int = 0  # of the case file
    calls: int = 0  # kernel calls of the reproducer's program
    note: str = ""  # what the upstream-style test could not have
    c_file: Path | None = None  # the failing call as a C program calling CMSIS-NN (cortexm.testing.cmsis_call)
    c_outcomes: dict = field(default_factory=dict)  # core -> its cmsis_call.Outcome
    c_note: str = ""  # why there is no C program, or what it could not show
    node: str = ""  # the model node the export stopped at, for a failure before any program

    @property
    def c_same(self) -> bool:
        """The C program fails on the first core and passes where the original passes."""
        first = self.c_outcomes.get(self.core)
        if first is None or first.passed:
            return False
        return all(_failed(self.original[c].status) == (not o.passed) for c, o in self.c_outcomes.items())

    @property
    def same(self) -> bool:
        """The reproducer fails where the original fails, the same way on the first core, and
        passes where the original passes."""
        first = self.reduced.get(self.core)
        if first is None or not first.fails_as(self.failure):
            return False
        return all(_failed(self.original[c].status) == _failed(v.status) for c, v in self.reduced.items())


def _failed(status: str) -> bool:
    return status in (Status.FAIL, Status.XFAIL, Status.ERROR, Status.XPASS)


class Runner:
    """Runs cases on cores the way `cortexm test` does (export cached, checked, simulated)."""

    def __init__(self, options) -> None:
        self.options = options

    def run(self, name: str, cores, case_file: Path | None = None) -> dict[str, tuple]:
        """core -> (CaseResult, sidecar calls) of case `name`."""
        from cortexm import cases
        from cortexm.pte.bundle import Bundle
        from cortexm.testing import app, exports

        if case_file is not None:
            app.load_case_file(case_file)
        case = cases.get(name)
        pairs = [(name, core) for core in cores]
        exported = exports.export_all(pairs, self.options, lambda _: None)
        results = app._check_all([(case, core) for core in cores], exported, self.options)
        out = {}
        for core, result in zip(cores, results, strict=True):
            calls: list = []
            if result.pte:
                try:
                    sidecar = Bundle.open(result.pte).sidecar
                    calls = (sidecar.calls if sidecar else None) or []
                except (CortexmError, OSError):
                    calls = []
            out[core.name] = (result, calls)
        return out


def verdict(result, calls) -> Verdict:
    failing = result.failed or result.status == Status.XFAIL
    found = pieces.failures(result, calls) if failing else []
    return Verdict(str(result.status), found[0] if found else None, found)


def original_case(spec: str, folder: Path) -> tuple[str, Path | None]:
    """The case to run for `spec`: a registered case's name, or for FILE.py:FACTORY a case file
    (in `folder`) that registers the factory under the name `cortexm export` gives it."""
    from cortexm import cases
    from cortexm.lowering import modelsource

    modelsource.check_spec(spec)
    if ":" not in spec or not spec.rsplit(":", 1)[0].endswith(".py"):
        cases.get(spec)
        return spec, None
    path_text, factory = spec.rsplit(":", 1)
    name = modelsource.name_of(spec)
    wrapper = folder / SCRATCH / f"original-{name}.py"
    wrapper.parent.mkdir(parents=True, exist_ok=True)
    writes.atomic(wrapper, (
        "# The factory `cortexm reduce` was given, as a case.\nfrom pathlib import Path\n\n"
        "from cortexm.cases.registry import register\nfrom cortexm.lowering import modelsource\n\n\n"
        f"@register({name!r}, {spec!r})\ndef _():\n"
        f"    bundle = modelsource.load({str(Path(path_text).resolve()) + ':' + factory!r})\n"
        "    return bundle.module, bundle.example_inputs, bundle.calibration\n"))
    return name, wrapper


def reduce(spec: str, cores, folder: Path, runner: Runner, shrink_steps: int = 12,
           progress: Callable[[str], None] = lambda _: None, upstream_test: bool = True,
           c_call: CCall | None = None) -> Reduction:
    """Reduce `spec`'s first failing call on cores[0]; write the reproducer into `folder`, and
    with `c_call` the failing call as a C program calling CMSIS-NN."""
    from cortexm.lowering import modelsource
    from cortexm.pte.bundle import Bundle

    name, wrapper = original_case(spec, folder)
    progress(f"running {name} on {', '.join(c.name for c in cores)}")
    original = runner.run(name, cores, wrapper)
    result, calls = original[cores[0].name]
    verdicts = {c: verdict(*rc) for c, rc in original.items()}
    first = verdicts[cores[0].name].failure
    if first is None:
        raise CortexmError(f"{name} passes on {cores[0].name}: nothing to reduce")
    reduction = Reduction(name, cores[0].name, first, verdicts)
    built = modelsource.load(name) if wrapper is None else modelsource.load(_factory_spec(spec))
    stopped = pieces.handled(first.line) if first.stage == "export" else None
    if stopped is not None:
        # No program: the export stopped at a node. Cut it out of the float model, fed with the
        # float values that reach it (there may be no quantized model to take them from).
        floating = _float_graph(built)
        calls = [{"instruction": k, "node": n.name} for k, n in enumerate(floating.graph.nodes) if n.op == "call_function"]
        at = next((c["instruction"] for c in calls if c["node"] == stopped[1]), None)
        if at is None:
            raise CortexmError(f"{name} on {cores[0].name}: the export stopped at node {stopped[1]}, which the float "
                               f"model does not have ({first.describe()})")
        first = Failure(first.stage, first.line, at, first.op)
        instruction = at
        quantized, example = floating, tuple(built.example_inputs)
        reduction.node = stopped[1]
    elif first.instruction is None or not result.pte:
        raise CortexmError(f"{name} on {cores[0].name} fails naming no call ({first.describe()}): reduce cuts out a call")
    else:
        instruction = first.instruction
        floating, quantized, example = _models(Bundle.open(result.pte))
        # The program's input values, in the strides the model was given them (channels-last with a
        # size-1 dim is a layout only the strides tell).
        example = tuple(_strided(x, given) for x, given in zip(example, built.example_inputs, strict=False))
    reduction.failure = first
    progress(f"first failing call: {first.op}#{first.instruction}: {first.describe()}")
    calibration = built.calibration

    def fails_same(candidate: Piece) -> tuple[bool, Verdict]:
        got = _try(candidate, cores[0], folder, runner)
        return got.fails_as(first), got

    piece = None
    for levels in range(MAX_LEVELS + 1):
        try:
            candidate = pieces.cut_out(floating, quantized, calls, instruction, example, calibration, levels)
        except CortexmError as e:
            raise CortexmError(f"{name}: {e}") from None
        candidate.data = "beyond" if built.data == "beyond" else "uniform"
        ok, got = fails_same(candidate)
        progress(f"{len(candidate.nodes)} operators ({candidate.describe()}): {got.line()}")
        if ok:
            piece, reduction.levels = candidate, levels
            break
    if piece is None:
        raise CortexmError(f"{name}: the call's model nodes, with up to {MAX_LEVELS} producing calls, do not fail "
                           f"the way the original does ({first.describe()})")
    for _ in range(shrink_steps):
        for what, candidate in pieces.smaller(piece):
            ok, got = fails_same(candidate)
            if ok:
                progress(f"  smaller and still failing: {what}")
                piece = candidate
                reduction.steps.append(what)
                break
        else:
            break
    reduction.piece = piece
    _write(reduction, folder, runner, cores, progress, upstream_test)
    if c_call is not None:
        _write_c(reduction, folder, cores, c_call, progress)
    scratch = folder / SCRATCH
    if scratch.is_dir():
        writes.remove_tree(scratch)
    return reduction


def _models(bundle):
    """The float and the quantized model of the export, and its example inputs as the model takes them."""
    from cortexm.pte.tensors import logical
    from cortexm.semantic import program

    models = (bundle.sidecar.semantic or {}).get("models") or {}
    if "quantized" not in models or "float" not in models:
        raise CortexmError(f"{bundle.pte.name}: its export saved no models to cut a call out of")
    inputs = [np.array(logical(bundle.read(e.file), e)) for e in bundle.sidecar.inputs]
    return (program._load(bundle, models["float"]), program._load(bundle, models["quantized"]),
            program._model_inputs(inputs, bundle.sidecar))


def _float_graph(built):
    """The float model as torch.export has it (a GraphModule): what an export's saved float model is."""
    import torch

    from cortexm.lowering.quantize import quiet_loggers

    quiet_loggers()
    try:
        return torch.export.export(built.module, tuple(built.example_inputs), strict=True).module(check_guards=False)
    except Exception as e:  # noqa: BLE001 - torch.export raises whatever tracing meets
        raise CortexmError(f"torch.export of the float model fails ({type(e).__name__}): there is no graph to cut") from None


def _factory_spec(spec: str) -> str:
    path_text, factory = spec.rsplit(":", 1)
    return f"{Path(path_text).resolve()}:{factory}"


def _strided(value, given):
    import torch

    if tuple(value.shape) != tuple(given.shape):
        return value
    return torch.empty_strided(tuple(given.shape), given.stride(), dtype=value.dtype).copy_(value)


def _stem(piece: Piece, prefix: str) -> str:
    digest = zlib.crc32(repr([(n.target, n.args) for n in piece.nodes]).encode())
    for array in pieces.arrays(piece).values():
        digest = zlib.crc32(array.tobytes(), zlib.crc32(str(array.shape).encode(), digest))
    return f"{prefix}_{digest:08x}"


def _try(candidate: Piece, core, folder: Path, runner: Runner) -> Verdict:
    """The candidate's verdict on `core`, from a case file of its own under folder/.candidates."""
    stem = _stem(candidate, "candidate")
    scratch = folder / SCRATCH
    scratch.mkdir(parents=True, exist_ok=True)
    path = scratch / f"{stem}.py"
    if not path.exists():
        pieces.write(candidate, scratch, stem, {path.name: pieces.case_file(candidate, stem, stem, "reduce: a candidate")})
    got = runner.run(stem, [core], path)[core.name]
    return verdict(*got)


def _write(reduction: Reduction, folder: Path, runner: Runner, cores, progress, upstream_test: bool) -> None:
    piece = reduction.piece
    assert piece is not None
    op = reduction.failure.op.split("::")[-1].split(".")[0] or "call"
    name = f"reduced_{reduction.case}_{op}"
    stem = name
    where = (f"node {reduction.node}, where the export stops" if reduction.node
             else f"call {reduction.failure.instruction}")
    header = (f"Reproducer written by `cortexm reduce {reduction.case} -t {reduction.core}`: {where} "
              f"({reduction.failure.op}) of {reduction.case}, model nodes "
              f"{', '.join(piece.model_nodes)}.\nOriginal on {reduction.core}: {reduction.failure.describe()}\n"
              + (f"Shrunk: {'; '.join(reduction.steps)}\n" if reduction.steps else "")
              + f"Run it: cortexm test --cases {stem}.py " + " ".join(f"-t {c.name}" for c in cores))
    case_text = pieces.case_file(piece, name, stem, header)
    files = {f"{stem}.py": case_text}
    reduction.files = pieces.write(piece, folder, stem, files)
    reduction.lines = case_text.count("\n")
    progress(f"running the reproducer on {', '.join(c.name for c in cores)}")
    got = runner.run(name, cores, folder / f"{stem}.py")
    reduction.reduced = {c: verdict(*rc) for c, rc in got.items()}
    reduction.reduced_results = {c: rc[0] for c, rc in got.items()}
    reduction.calls = len(got[reduction.core][1])  # the reproducer's program, call by call
    if upstream_test:
        try:
            before, after = pieces.edge_op_counts(piece, reduction.core)
        except Exception as e:  # noqa: BLE001 - upstream's tester raises whatever its stages raise
            before, after = {}, {}
            reduction.note = f"upstream's tester could not lower it ({type(e).__name__}: {str(e).splitlines()[0][:160]})"
        xfail = reduction.failure.describe()[:200] if reduction.failure.stage in ("run", "verify", "memory", "compare") else ""
        core = reduction.core
        runs = (f"{header.rsplit(chr(10), 1)[0]}\nIn an ExecuTorch checkout it belongs in backends/cortex_m/test/ops/ "
                f"(with its .npy files). Here, upstream's tester with cortexm's runner on QEMU for the implementation test:\n"
                f"  python -m pytest test_{stem}.py -p executorch.backends.cortex_m.test.conftest "
                f"--cortex-m-target {core} --cortexm-core {core} --cortexm-sim qemu")
        test_text = pieces.upstream_test(piece, name, stem, runs, before, after, xfail)
        test_path = folder / f"test_{stem}.py"
        writes.atomic(test_path, test_text, inside=folder)
        reduction.files.append(test_path)


def _write_c(reduction: Reduction, folder: Path, cores, c_call: CCall, progress) -> None:
    """The reproducer's failing call as a C program (cortexm.testing.cmsis_call), built and run
    on every core; its verdicts in `reduction`."""
    from cortexm.pte.bundle import Bundle
    from cortexm.pte.tensors import logical
    from cortexm.testing import cmsis_call

    failure = reduction.failure
    if failure.stage not in KERNEL_STAGES:
        reduction.c_note = f"no C program: the failure ({failure.stage}) is not a kernel's"
        return
    if not cmsis_call.supports(failure.op):
        reduction.c_note = f"no C program: {failure.op} is not one CMSIS-NN call"
        return
    first = reduction.reduced.get(reduction.core)
    same = next((f for f in (first.others if first else []) if f.kind == failure.kind and f.instruction is not None), None)
    result = reduction.reduced_results.get(reduction.core)
    if same is None or same.instruction is None or result is None or not result.pte:
        reduction.c_note = "no C program: the reproducer's program does not fail at a call of the operator"
        return
    calls = {}  # backend -> the call as that core's program makes it, the failing core's first
    makers: list[str] = []
    for target in sorted(cores, key=lambda c: c.name != reduction.core):
        got = reduction.reduced_results.get(target.name)
        if target.backend in calls or got is None or not got.pte:
            continue
        bundle = Bundle.open(got.pte)
        assert bundle.sidecar is not None  # the reproducer's programs are written with their sidecar
        inputs = [np.array(logical(bundle.read(e.file), e)) for e in bundle.sidecar.inputs]
        try:
            captured = cmsis_call.capture(bundle.pte, inputs, target.backend, same.instruction)
        except CortexmError:
            continue
        if captured.op.split(".")[0] == failure.op.split(".")[0]:
            calls[target.backend] = captured
            makers.append(f"{target.name} ({target.backend})")
    if not calls:
        reduction.c_note = "no C program: the integer reference does not reach the call"
        return
    stem = next(p.stem for p in reduction.files if p.name.startswith("reduced_") and p.suffix == ".py")
    header = (f"Written by `cortexm reduce {reduction.case} -t {reduction.core}`: call {same.instruction} "
              f"({failure.op}) of {stem}.py, as the programs for {', '.join(makers)} make it.\n"
              f"Original on {reduction.core}: {failure.describe()}")
    path = folder / f"{stem}.c"
    writes.atomic(path, cmsis_call.c_source(calls, header), inside=folder)
    reduction.files.append(path)
    reduction.c_file = path
    for target in cores:
        progress(f"the CMSIS-NN call in C on {target.name}")
        try:
            reduction.c_outcomes[target.name] = cmsis_call.run(path, target, c_call.cmsis_nn,
                                                                folder / SCRATCH / f"c-{target.short}", c_call.sim, c_call.fvp)
        except CortexmError as e:
            reduction.c_outcomes[target.name] = cmsis_call.Outcome(target.name, False, [f"FAIL not run: {e}"])
    if not reduction.c_outcomes[reduction.core].passed and not reduction.c_same:
        reduction.c_note = "the C program does not pass where the original passes"
    elif reduction.c_outcomes[reduction.core].passed:
        reduction.c_note = (f"the CMSIS-NN call alone passes on {reduction.core}: the failure is not CMSIS-NN's "
                            "(the kernel, the program or the lowering)")
