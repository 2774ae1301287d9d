"""A program call by call: where execute()'s instructions go (`cortexm profile`, `run --profile`,
`test --profile`).

What enters: the program (its plan and sidecar: each call's operator and the model's module it
came from, cortexm.lowering.provenance), one run of it timed call by call (the runner's
`--calls`, cortexm.sim.protocol), the core. What leaves: per call its operator, module,
instructions and share, MACs (cortexm.checking.macs), instructions per MAC against the core's
best MAC instruction, the tensor bytes it reads, writes, reads from the program's constants and
takes as scratch; the same summed per module; a total equal to the run's execute() count.

The counts are QEMU's instructions (-icount), not cycles: a board's time also depends on its
pipeline, caches and memory wait states, which QEMU does not model, so no time is shown.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from cortexm.pte.program import ExecutionPlan, KernelCall, OtherInstruction, TensorValue

NOT_CYCLES = ("simulator instructions (QEMU -icount), not cycles: a board's time also depends on its pipeline, caches "
              "and memory wait states, which the simulator does not model; no time is estimated")
NOT_CYCLES_TICKS = ("ticks of the run's counter (SysTick of the simulated clock on the FVP, nanoseconds on the host "
                    "build), not a board's cycles; no time is estimated")
# The instruction that bounds a core's int8 MAC rate, as the limit's line names it.
_MAC_INSTRUCTION = {"DSP": "SMLAD, 2 int8 MACs an instruction", "MVE": "VMLADAVA, 16 int8 MACs an instruction"}
BAR = 24  # characters of the widest share's bar
_TOP_LEVEL = "(model)"  # the module of calls the model's own forward made


@dataclass
class CallCost:
    instruction: int
    op: str  # "cortex_m::quantized_conv2d.out"; other instructions by kind: "(move)"
    module: str  # the model's module that made it ("" the model itself, or not known)
    node: str
    count: int  # instructions (or ticks)
    share: float  # of the total
    macs: int | None = None
    per_mac: float | None = None  # instructions per MAC
    of_limit: float | None = None  # the core's limit / per_mac: 1.0 is the best the core can do
    read: int = 0  # bytes of the tensors it takes in, the program's constants left out
    written: int = 0  # bytes of its out tensors
    constants: int = 0  # bytes of the constant tensors it takes in (weights, biases, multipliers)
    scratch: int = 0  # bytes of the scratch tensors it is given


@dataclass
class ModuleCost:
    module: str
    calls: int
    count: int
    share: float
    macs: int
    per_mac: float | None
    of_limit: float | None
    read: int
    written: int
    constants: int
    scratch: int


@dataclass
class Profile:
    program: str
    core: str
    simulator: str
    board: str
    unit: str  # "instructions" or "ticks"
    total: int  # execute()'s count as the runner reported it: the calls' counts sum to it
    mac_limit: float | None  # instructions per MAC at the core's best MAC instruction
    calls: list[CallCost] = field(default_factory=list)
    depth: int = 1

    @property
    def note(self) -> str:
        return NOT_CYCLES if self.unit == "instructions" else NOT_CYCLES_TICKS

    def modules(self) -> list[ModuleCost]:
        """The calls summed per module (`depth` levels of its path), most expensive first."""
        groups: dict[str, list[CallCost]] = {}
        for c in self.calls:
            groups.setdefault(module_at(c.module, self.depth), []).append(c)
        found = []
        for name, calls in groups.items():
            count, macs = sum(c.count for c in calls), sum(c.macs or 0 for c in calls)
            # Instructions per MAC of the MAC-counted calls alone: a module's adds do no MACs.
            mac_count = sum(c.count for c in calls if c.macs)
            per_mac = mac_count / macs if macs else None
            found.append(ModuleCost(name, len(calls), count, count / self.total if self.total else 0.0, macs, per_mac,
                                    _of_limit(self.mac_limit, per_mac), sum(c.read for c in calls),
                                    sum(c.written for c in calls), sum(c.constants for c in calls),
                                    sum(c.scratch for c in calls)))
        return sorted(found, key=lambda m: -m.count)

    def top(self, n: int = 3) -> list[CallCost]:
        return sorted(self.calls, key=lambda c: -c.count)[:n]

    @classmethod
    def from_dict(cls, record: dict) -> Profile:
        """A profile as as_dict wrote it (a test report's)."""
        return cls(record["program"], record["core"], record["simulator"], record["board"], record["unit"],
                   record["total"], record["mac_limit"], [CallCost(**c) for c in record["calls"]], record["depth"])

    def as_dict(self) -> dict:
        return {"program": self.program, "core": self.core, "simulator": self.simulator, "board": self.board,
                "unit": self.unit, "counted": self.note, "total": self.total, "mac_limit": self.mac_limit,
                "calls": [asdict(c) for c in self.calls], "depth": self.depth,
                "modules": [asdict(m) for m in self.modules()],
                "top": [c.instruction for c in self.top()]}


def module_at(path: str, depth: int) -> str:
    """`stacks.0.body.3` at depth 1 -> `stacks.0` (an index stays with its container); "" -> (model)."""
    if not path:
        return _TOP_LEVEL
    parts: list[str] = []
    for part in path.split("."):
        if part.isdigit() and parts:
            parts[-1] += f".{part}"
        else:
            parts.append(part)
    return ".".join(parts[:depth])


def _of_limit(limit: float | None, per_mac: float | None) -> float | None:
    return limit / per_mac if limit and per_mac else None


def profile(bundle, core, sim_result, board: str, simulator: str, depth: int = 1) -> Profile:
    """The profile of one run (`sim_result`, cortexm.sim.SimResult, of a run with the runner's
    --calls) of `bundle`'s program on `core`."""
    from cortexm.base.errors import CortexmError
    from cortexm.checking.macs import MAC_LIMIT, plan_macs
    from cortexm.firmware.paths import board_cpu_hz
    from cortexm.sim.protocol import call_instructions
    from cortexm.sim.qemu import ICOUNT_SHIFT

    plan = bundle.program().plan()
    unit = "instructions" if sim_result.instructions is not None else "ticks"
    total = sim_result.instructions if unit == "instructions" else sim_result.ticks
    ticks = sim_result.call_ticks
    if total is None or not ticks:
        raise CortexmError(f"{bundle.pte.name}: the run was not timed call by call (no `I call N` lines in its log)")
    counts = ticks
    if unit == "instructions":
        hz = board_cpu_hz(board)
        counts = call_instructions(ticks, hz, ICOUNT_SHIFT) if hz and simulator == "qemu" else sim_result.calls
    if sum(counts.values()) != total:
        raise CortexmError(f"{bundle.pte.name}: its calls sum to {sum(counts.values()):,} {unit}, execute() took "
                           f"{total:,}: the counts cannot be shared out")
    provenance = {c.get("instruction"): c for c in (bundle.sidecar.calls if bundle.sidecar else None) or []
                  if isinstance(c, dict)}
    macs = plan_macs(plan)
    limit = MAC_LIMIT.get(core.name)
    calls = []
    for n in sorted(counts):
        where = provenance.get(n) or {}
        count = counts[n]
        call = CallCost(n, _op(plan, n), str(where.get("module") or ""), str(where.get("node") or ""), count,
                        count / total if total else 0.0)
        if macs.get(n):
            call.macs = macs[n]
            call.per_mac = count / macs[n]
            call.of_limit = _of_limit(limit, call.per_mac)
        _tensor_bytes(plan, n, call)
        calls.append(call)
    return Profile(bundle.pte.name, core.name, simulator, board, unit, total, limit, calls, depth)


def _op(plan: ExecutionPlan, n: int) -> str:
    if n >= len(plan.instructions):
        return "(not in the plan)"
    ins = plan.instructions[n]
    if isinstance(ins, KernelCall):
        return plan.operators[ins.op_index].qualified_name
    if isinstance(ins, OtherInstruction):
        return f"({ins.kind})"
    return f"({type(ins).__name__})"


def _tensor_bytes(plan: ExecutionPlan, n: int, call: CallCost) -> None:
    """The bytes of the tensors a kernel call takes, by the role its schema gives each: `out`
    written, `*scratch` scratch, the rest read (constants apart). Without a schema the last
    argument is the out one. A tensor passed twice counts once."""
    from cortexm.checking import library

    ins = plan.instructions[n] if n < len(plan.instructions) else None
    if not isinstance(ins, KernelCall):
        return
    names = library.arguments_for(plan.operators[ins.op_index].qualified_name, len(ins.args), library.installed())
    # The call's arguments; its last value is the one it returns (the out tensor again).
    args = list(ins.args[:-1]) if names else list(ins.args)
    roles = list(names) if names else ["in"] * (len(args) - 1) + ["out"]
    seen: set[int] = set()
    for index, name in zip(args, roles, strict=False):
        for value_index, value in _tensors(plan, index):
            if value_index in seen:
                continue
            seen.add(value_index)
            if re.search(r"scratch", name):
                call.scratch += value.nbytes
            elif name == "out":
                call.written += value.nbytes
            elif value.is_constant:
                call.constants += value.nbytes
            else:
                call.read += value.nbytes


def _tensors(plan: ExecutionPlan, index: int) -> list[tuple[int, TensorValue]]:
    from cortexm.pte.program import ListValue

    if not 0 <= index < len(plan.values):
        return []
    value = plan.values[index]
    if isinstance(value, TensorValue):
        return [(index, value)]
    found = []
    for i in value.items if isinstance(value, ListValue) else ():
        item = plan.values[i] if 0 <= i < len(plan.values) else None
        if isinstance(item, TensorValue):
            found.append((i, item))
    return found


def limit_line(profile: Profile, backend: str) -> str:
    if profile.mac_limit is None:
        return "no MAC limit known for this core"
    what = _MAC_INSTRUCTION.get(backend)
    return f"limit: {profile.mac_limit:g} instructions per MAC" + (f" ({what})" if what else "")


def bar(share: float) -> str:
    """A share as a bar of BAR characters at 100 %, to an eighth of a character."""
    eighths = round(max(0.0, min(share, 1.0)) * BAR * 8)
    return "█" * (eighths // 8) + ("", "▏", "▎", "▍", "▌", "▋", "▊", "▉")[eighths % 8]


def print_profile(profile: Profile, backend: str) -> None:
    """The profile as text: the totals, what is counted, every call with a bar, the modules,
    the three most expensive calls."""
    from cortexm.report import console, table

    out = console()
    unit = profile.unit
    out.print(f"{profile.program} on {profile.core} ({profile.simulator} {profile.board}): execute() took "
              f"{profile.total:,} {unit} in {len(profile.calls)} calls", markup=False)
    out.print(f"counted: {profile.note}", markup=False)
    out.print(limit_line(profile, backend) + "; of limit: the limit / the call's instructions per MAC", markup=False)
    table(["#", "operator", "module", unit, "share", "", "MACs", f"{unit[:5]}/MAC", "of limit", "read B",
           "written B", "const B", "scratch B"],
          [[c.instruction, _short(c.op), c.module or _TOP_LEVEL, f"{c.count:,}", f"{c.share:.1%}", bar(c.share),
            _n(c.macs), _f(c.per_mac), _p(c.of_limit), _n(c.read), _n(c.written), _n(c.constants), _n(c.scratch)]
           for c in profile.calls], title="per call, in program order")
    modules = profile.modules()
    table(["module", "calls", unit, "share", "", "MACs", f"{unit[:5]}/MAC", "of limit", "read B", "written B",
           "const B", "scratch B"],
          [[m.module, m.calls, f"{m.count:,}", f"{m.share:.1%}", bar(m.share), _n(m.macs), _f(m.per_mac),
            _p(m.of_limit), _n(m.read), _n(m.written), _n(m.constants), _n(m.scratch)] for m in modules]
          + [["total", len(profile.calls), f"{profile.total:,}", "100.0%", "", _n(sum(m.macs for m in modules)),
              "", "", "", "", _n(sum(m.constants for m in modules)), ""]],
          title=f"per module (depth {profile.depth}), most expensive first")
    for k, c in enumerate(profile.top(), 1):
        limit = f", {_f(c.per_mac)} {unit} per MAC: {_p(c.of_limit)} of the limit" if c.per_mac else ""
        out.print(f"most expensive {k}: call {c.instruction} {_short(c.op)} ({c.module or _TOP_LEVEL}) "
                  f"{c.count:,} {unit} ({c.share:.1%}){limit}", markup=False)


def print_profiles(results) -> None:
    """`test --profile`: each simulated result's run call by call (its record in `r.run.profile`)."""
    import click

    from cortexm.base.targets import core

    for r in results:
        found = r.run.profile if r.run else None
        if not found:
            continue
        click.echo()
        if "error" in found:
            click.echo(f"{r.case} {r.core}: no profile: {found['error']}")
            continue
        print_profile(Profile.from_dict(found), core(r.core).backend)


def _short(op: str) -> str:
    return op.removeprefix("cortex_m::").removesuffix(".out")


def _n(value: int | None) -> str:
    return f"{value:,}" if value else "-"


def _f(value: float | None) -> str:
    return f"{value:.3f}" if value is not None else "-"


def _p(value: float | None) -> str:
    return f"{value:.1%}" if value is not None else "-"
