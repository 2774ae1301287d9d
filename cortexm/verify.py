"""Checks of a .pte against a kernel library and a core, one line per problem.

Three checks, each catching a failure that otherwise surfaces only at execute
time on the device, naming nothing:

- schema: every operator the program calls is registered, and the number of
  values the call passes equals what the library's generated wrapper expects;
- scratch: each cortex_m call's planned scratch buffer is at least what
  CMSIS-NN needs on the core's backend (a .pte lowered for the M55 has MVE
  sizes; run on an M7 the DSP kernels may need more);
- backend layout: calls whose constant layout is backend-specific (MVE's
  precomputed kernel_sum in quantized_linear) match the core.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cortexm import library as libs
from cortexm import scratch
from cortexm.export import read_sidecar
from cortexm.pte import load
from cortexm.pte.program import ExecutionPlan, TensorValue
from cortexm.targets import Core, core as core_named


@dataclass(frozen=True)
class Finding:
    status: str  # OK, FAIL, MISSING, SKIP
    model: str
    text: str = ""

    def line(self) -> str:
        return f"{self.status} {self.model}" + (f" {self.text}" if self.text else "")

    @property
    def is_problem(self) -> bool:
        return self.status in ("FAIL", "MISSING")


def verify_file(path: Path, library: libs.Library | None, target: Core | None, exporter: libs.Library | None = None,
                name: str | None = None) -> list[Finding]:
    """All findings for one .pte. `exporter` gives argument names (defaults to the installed executorch);
    `name` names the model in the findings (default: the sidecar's name, else the file's stem)."""
    program = load(path)
    sidecar = read_sidecar(path)
    name = name or (sidecar["name"] if sidecar else Path(path).stem)
    if target is None and sidecar:
        target = core_named(sidecar["target"])
    plan = program.plan()
    findings: list[Finding] = []
    if library is not None:
        findings += check_schema(name, plan, library)
    if target is None:
        findings.append(Finding("SKIP", name, "scratch audit: no target (pass --target, or keep the export's NAME.json beside the .pte)"))
    else:
        findings += check_backend(name, plan, target, exporter or libs.installed(), library)
    if not any(f.is_problem for f in findings):
        findings.append(Finding("OK", name))
    return findings


def check_schema(name: str, plan: ExecutionPlan, library: libs.Library) -> list[Finding]:
    findings: list[Finding] = []
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
            findings.append(Finding("FAIL", name, f"{op_name}: model supplies {len(call.args)}, library expects {kernel.expects}"))
    return findings


def check_backend(name: str, plan: ExecutionPlan, core: Core, exporter: libs.Library, library: libs.Library | None) -> list[Finding]:
    findings: list[Finding] = []
    where = f"{core.name} ({core.backend})"
    for index, op, call in plan.kernel_calls():
        op_name = op.qualified_name
        if not (scratch.has_scratch(op_name) or op_name == "cortex_m::quantized_linear.out"):
            continue
        arg_names = libs.arguments_for(op_name, len(call.args), exporter, library)
        subject = f"{op_name}#{index}"
        if arg_names is None:
            findings.append(Finding("SKIP", name, f"{subject}: argument layout unknown ({len(call.args)} values), not audited"))
            continue
        args = scratch.named_args(plan, call, list(arg_names))
        if op_name == "cortex_m::quantized_linear.out":
            has_sum = isinstance(args.get("kernel_sum"), TensorValue)
            if has_sum and core.backend != "MVE":
                findings.append(Finding("FAIL", name, f"{subject}: kernel_sum present (MVE lowering), {where} ignores it and reads the bias"))
            elif not has_sum and core.backend == "MVE":
                findings.append(Finding("FAIL", name, f"{subject}: no kernel_sum (DSP/scalar lowering), {where} needs it"))
            continue
        for need in scratch.needs(op_name, args, core.backend):
            if need.planned < need.needed:
                label = "scratch" if need.argument == "scratch" else need.argument.replace("_", " ")
                findings.append(Finding("FAIL", name, f"{subject}: {label} {need.planned} B planned, {where} needs {need.needed} B"))
    return findings
