"""Checks of a .pte against a kernel library and a core, one line per problem.

First, the program must load: ExecuTorch's loader's checks, run offline
(`cortexm.pte.loader`), each problem an INVALID line naming the value or
instruction (or FAIL, for a well-formed program cortexm's runner cannot load).
A program that does not load gets only those lines. Then three checks, each
catching a failure that otherwise surfaces only at execute time on the device,
naming nothing:

- schema: every operator the program calls is registered (and every delegate's
  backend), and the number of values the call passes equals what the library's
  generated wrapper expects;
- scratch: each cortex_m call's planned scratch buffer is at least what
  CMSIS-NN needs on the core's backend (a .pte lowered for the M55 has MVE
  sizes; run on an M7 the DSP kernels may need more);
- arguments: no call reaches a CMSIS-NN function that refuses its arguments on
  the core's backend (cortexm.checking.arguments: a 1xN convolution whose
  width padding is not half the total returns ARM_CMSIS_NN_FAILURE on MVE and
  runs on DSP);
- backend layout: calls whose constant layout is backend-specific (MVE's
  precomputed kernel_sum in quantized_linear) match the core;
- kernel ranks: the portable kernels the runner registers take the input's rank
  (a Conv3d lowers to aten::convolution.out with a 5-D input, which ExecuTorch's
  portable convolution refuses when it runs);
- lowering: no compute operator is left to compute in float, or on int8 without a cortex_m
  kernel (cortexm.checking.lowering: a model the quantizer did not fully take, an NCHW input, a
  fusion a pass declined); a program nothing quantized is a float program, a NOTE.

The scratch and layout checks are for the core given, else the export's (its
sidecar); a program with neither is audited for every core cortexm has a runner
for, with a verdict line per core.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cortexm.base.targets import CORES, Core
from cortexm.base.targets import core as core_named
from cortexm.checking import arguments, scratch
from cortexm.checking import library as libs
from cortexm.pte import load, loader
from cortexm.pte.program import ExecutionPlan, KernelCall, TensorValue
from cortexm.pte.sidecar import Sidecar, program_name, read_sidecar

# Loader problems shown per program; a badly damaged one has many, the first say enough.
MAX_LOADER_LINES = 10
# What a program with no known core is audited for: the Cortex-M cores with a runner (board
# support). The host build runs the M3's scalar code, so it would only repeat the M3's lines.
RUNNER_CORES = tuple(c for c in CORES if c.board and not c.hosted)


@dataclass(frozen=True)
class Finding:
    # OK, FAIL, MISSING, FLOAT (computes in float), INVALID (the program does not load), SKIP, NOTE (not a problem)
    status: str
    model: str
    text: str = ""

    def line(self) -> str:
        return f"{self.status} {self.model}" + (f" {self.text}" if self.text else "")

    @property
    def is_problem(self) -> bool:
        return self.status in ("FAIL", "MISSING", "FLOAT", "INVALID")


def verify_file(path: Path, library: libs.Library | None, target: Core | None, exporter: libs.Library | None = None,
                name: str | None = None, lowering: bool = True, bundle=None) -> list[Finding]:
    """All findings for one .pte. `exporter` gives argument names (defaults to the installed executorch);
    `name` names the model in the findings (default: the sidecar's name, else the file's stem).
    `target` None: the sidecar's core, else every core of RUNNER_CORES. `lowering`: compute
    operators left in float are findings (FLOAT; the test app judges them as a stage of its own).
    A file that is not a readable program raises CortexmError (one line). `bundle`: the
    program's cortexm.pte.bundle.Bundle, already read (its program and sidecar are not read again)."""
    program = bundle.program(check=False) if bundle is not None else load(path, check=False)
    sidecar = bundle.sidecar if bundle is not None else read_sidecar(path)
    name = name or program_name(path, sidecar)
    if target is None and sidecar:
        target = core_named(sidecar.target) if sidecar.target else None
    findings = check_load(name, program)
    if any(f.status == "INVALID" for f in findings):
        return findings
    plan = program.plans[0]  # the method the runner loads
    if library is not None:
        findings += check_schema(name, plan, library)
    findings += check_ranks(name, plan)
    if lowering:
        findings += check_lowering(name, plan, sidecar)
    exporter = exporter or libs.installed()
    if target is None:
        return findings + check_cores(name, plan, RUNNER_CORES, exporter, library, sidecar)
    findings += check_backend(name, plan, target, exporter, library, sidecar)
    if not any(f.is_problem for f in findings):
        findings.append(Finding("OK", name))
    return findings


def check_load(name: str, program) -> list[Finding]:
    """What ExecuTorch's loader would refuse (cortexm.pte.loader), at most MAX_LOADER_LINES lines."""
    problems = loader.problems(program)
    findings = [Finding(p.status, name, p.text) for p in problems[:MAX_LOADER_LINES]]
    if len(problems) > MAX_LOADER_LINES:
        findings.append(Finding(problems[MAX_LOADER_LINES].status, name,
                                f"... and {len(problems) - MAX_LOADER_LINES} more problems"))
    return findings


def check_schema(name: str, plan: ExecutionPlan, library: libs.Library) -> list[Finding]:
    findings: list[Finding] = []
    for index, backend in enumerate(plan.delegates):
        # method.cpp BackendDelegate::Init: get_backend_class; a kernel library registers none.
        findings.append(Finding("MISSING", name, f"delegate {index} (backend {backend!r}): not registered in the library"))
    seen: set[str] = set()
    for _, op, call in plan.kernel_calls():
        op_name = op.qualified_name
        if op_name in seen:
            continue
        kernel = library.lookup(op_name)
        if kernel is None:
            seen.add(op_name)
            findings.append(Finding("MISSING", name, f"{op_name}: not registered in the library"))
        elif kernel.expects is not None and kernel.expects != len(call.args):
            seen.add(op_name)
            findings.append(Finding("FAIL", name,
                                    f"{op_name}: model supplies {len(call.args)}, library expects {kernel.expects}"))
    return findings


# Input ranks of the portable kernels cortexm's runner registers, from their argument checks
# (kernels/portable/cpu/util/kernel_ops_util.cpp): operator -> (ranks, what it is, the check).
PORTABLE_RANKS = {
    "aten::convolution.out": ((3, 4), "convolution", "check_convolution_args"),
    "aten::max_pool2d_with_indices.out": ((3, 4), "max pool", "check_max_pool2d_with_indices_args"),
}


def check_ranks(name: str, plan: ExecutionPlan) -> list[Finding]:
    """Calls whose input (the first argument) has a rank their portable kernel refuses."""
    findings: list[Finding] = []
    for index, op, call in plan.kernel_calls():
        limits = PORTABLE_RANKS.get(op.qualified_name)
        if not limits or not call.args:
            continue
        tensor = plan.tensor(call.args[0])
        if tensor is not None and len(tensor.sizes) not in limits[0]:
            ranks, kind, check = limits
            findings.append(Finding("FAIL", name, f"{op.qualified_name}#{index}: input {tensor.describe()} is "
                                                  f"{len(tensor.sizes)}-D, ExecuTorch's portable {kind} takes "
                                                  f"{' or '.join(f'{r}-D' for r in ranks)} ({check})"))
    return findings


def check_lowering(name: str, plan: ExecutionPlan, sidecar: Sidecar | None) -> list[Finding]:
    """Compute operators left in float (a FLOAT line naming them) or on int8 without a cortex_m
    kernel (a FAIL line; cortexm.checking.lowering); a program nothing quantized, a NOTE."""
    from cortexm.checking import lowering

    note = lowering.float_program(plan, sidecar)
    if note:
        return [Finding("NOTE", name, note)]
    return [Finding("FLOAT" if line.startswith("left in float") else "FAIL", name, line)
            for line in lowering.failure_lines(lowering.survey(plan, sidecar)[2])]


def check_cores(name: str, plan: ExecutionPlan, cores: tuple[Core, ...], exporter: libs.Library,
                library: libs.Library | None, sidecar: Sidecar | None = None) -> list[Finding]:
    """check_backend for each core, with a verdict line `OK NAME CORE (BACKEND)` for each core that
    passes. A line two cores share (an argument CMSIS-NN cannot take) is shown once."""
    findings: list[Finding] = []
    for core in cores:
        found = check_backend(name, plan, core, exporter, library, sidecar)
        findings += [f for f in found if f not in findings]
        if not any(f.is_problem for f in found):
            findings.append(Finding("OK", name, f"{core.name} ({core.backend})"))
    return findings


def call_subject(plan: ExecutionPlan, index: int, sidecar: Sidecar | None = None) -> str:
    """How a finding names a call: `cortex_m::quantized_conv2d.out#2 (features.2)`, the module from
    the sidecar's provenance (cortexm.lowering.provenance) when it has one."""
    call = plan.instructions[index]
    op = plan.operators[call.op_index].qualified_name if isinstance(call, KernelCall) else "call"
    where = next((c for c in (sidecar.calls if sidecar else None) or []
                  if isinstance(c, dict) and c.get("instruction") == index), {})
    module = str(where.get("module") or "")  # "" for the model itself: the operator says enough
    return f"{op}#{index}" + (f" ({module})" if module else "")


def check_backend(name: str, plan: ExecutionPlan, core: Core, exporter: libs.Library, library: libs.Library | None,
                  sidecar: Sidecar | None = None) -> list[Finding]:
    findings: list[Finding] = []
    where = f"{core.name} ({core.backend})"
    for index, op, call in plan.kernel_calls():
        op_name = op.qualified_name
        if not (scratch.has_scratch(op_name) or arguments.audited(op_name) or op_name == "cortex_m::quantized_linear.out"):
            continue
        arg_names = libs.arguments_for(op_name, len(call.args), exporter, library)
        subject = call_subject(plan, index, sidecar)
        if arg_names is None:
            findings.append(Finding("SKIP", name, f"{subject}: argument layout unknown ({len(call.args)} values), not audited"))
            continue
        args = scratch.named_args(plan, call, list(arg_names))
        try:
            audited = scratch.needs(op_name, args, core.backend) if scratch.has_scratch(op_name) else []
            decision = arguments.decide(op_name, args, core.backend) if arguments.audited(op_name) else None
        except scratch.ScratchError as e:
            findings.append(Finding("FAIL", name, f"{subject}: scratch audit: {e}"))
            continue
        if op_name == "cortex_m::quantized_linear.out":
            has_sum = isinstance(args.get("kernel_sum"), TensorValue)
            if has_sum and core.backend != "MVE":
                findings.append(Finding("FAIL", name,
                                        f"{subject}: kernel_sum present (MVE lowering), {where} ignores it and reads the bias"))
            elif not has_sum and core.backend == "MVE":
                findings.append(Finding("FAIL", name, f"{subject}: no kernel_sum (DSP/scalar lowering), {where} needs it"))
            continue
        short = [need for need in audited if need.planned < need.needed]
        for need in short:
            label = "scratch" if need.argument == "scratch" else need.argument.replace("_", " ")
            findings.append(Finding("FAIL", name, f"{subject}: {label} {need.planned} B planned, {where} needs {need.needed} B"))
        refusal = decision.refusal if decision else None
        # A missing buffer the scratch line above already names is not said twice.
        if refusal and not (short and refusal.parameter in ("scratch", "output_scratch")):
            findings.append(Finding("FAIL", name, f"{subject}: {refusal.text(where)}"))
    return findings
