"""The test app's terminal report: a table per core, then what to look at for each failure."""

from __future__ import annotations

from cortexm.report import console, table
from cortexm.report.accuracy import print_evaluation
from cortexm.report.results import Accuracy, Compare, Constants, Lowering, Run, Semantic, Status
from cortexm.report.writers import grid_coverage


def print_summary(results, checks, options, elapsed: float) -> None:
    from cortexm.sources import backend_source

    out = console()
    out.print(f"lowered by {backend_source.describe()}", markup=False)
    for core in dict.fromkeys(r.core for r in results):
        rows = [r for r in results if r.core == core]
        sim = options.simulators.get(core)
        sim_name = getattr(sim, "name", None) or "no simulator"
        table(["case", "dialect", "verify", "lowered", "dead", "semantic", "vs float", "sim", "memory", "max|diff| LSB",
               "instructions", "status"],
              [_row(r) for r in rows if not r.exhaustive],
              title=f"{core} ({sim_name})")
        _exhaustive_rows([r for r in rows if r.exhaustive], core)
        counts = {s: sum(r.status == s for r in rows)
                  for s in Status}
        out.print(f"{core}: " + ", ".join(f"{n} {s.lower()}" for s, n in counts.items() if n))
        runs = [r.run for r in rows if r.run]
        remembered = sum(run.remembered for run in runs)
        if remembered:
            out.print(f"{core}: {remembered} of {sum(run.sim != '-' for run in runs)} programs ran before, byte for byte, with "
                      "this runner and inputs (unchanged by any edit since): their runs came from the run store "
                      "(CORTEXM_RUN_CACHE=off runs them again)", markup=False)
        _edit_line(core, rows)
        if isinstance(sim, str):
            out.print(f"{core}: simulator runs skipped: {sim}")
        out.print()
    if checks:
        exhaustive = {r.case for r in results if r.exhaustive}  # counted below, listed only when they fail
        table(["case", "cores", "cross-core"],
              [[c.case, ", ".join(c.cores), _cross_core_cell(c)] for c in checks if c.case not in exhaustive or c.failed],
              title="cross-core (same case, every core's runner)")
        out.print(f"cross-core: {sum(c.agree for c in checks)} bit-identical, {sum(c.failed for c in checks)} differ"
                  + (f", {sum(not c.agree and not c.failed for c in checks)} differ as expected"
                     if any(c.expected for c in checks) else ""))
        out.print()
    _deployments([r for r in results if r.deployment], options)
    _dead_constants(results)
    print_evaluation(results)
    coverage = grid_coverage(results)
    if coverage:
        rows = []
        for op, dims in coverage.items():
            classes = [(d, v) for d, values in dims.items() for v, hit in values.items()]
            missing = [f"{d}={v}" for d, values in dims.items() for v, hit in values.items() if not hit]
            rows.append([op, f"{len(classes) - len(missing)}/{len(classes)}", ", ".join(missing[:6])
                         + (f", ... ({len(missing)})" if len(missing) > 6 else "") or "-"])
        table(["operator", "parameter classes simulated", "not simulated"], rows,
              title="grid coverage (--grid full: every pair of classes)")
        out.print()
    for c in checks:
        if c.failed:
            out.print(c.line(), markup=False)
    for r in results:
        if r.failed:
            out.print(f"[bold]{r.status} {r.case} {r.core}[/bold]: {r.reason}")
            if r.details:
                out.print("\n".join("    " + line for line in r.details.splitlines()[:40]), markup=False)
    not_run = [r for r in results if r.status == Status.NOT_RUN]
    if not_run:
        reasons = dict.fromkeys(r.reason for r in not_run)
        out.print(f"[bold]NOT RUN[/bold]: {len(not_run)} results were checked but never simulated: " + "; ".join(reasons),
                  markup=True)
    out.print(f"{len(results)} results in {elapsed:.1f} s; {sum(r.status == 'PASS' for r in results)} passed, "
              f"{sum(r.failed for r in results) + sum(c.failed for c in checks)} failed, "
              f"{sum(r.status == 'XFAIL' for r in results)} expected failures, {len(not_run)} not simulated")


def _deployments(rows, options) -> None:
    """The deployment line of each real model (cortexm.cases.tiny) on each core: what it costs
    on the board and what it keeps of its float model's accuracy."""
    from pathlib import Path

    from cortexm.checking.macs import call_macs
    from cortexm.firmware.size import RESERVED, footprint

    if not rows:
        return
    runners = {}
    for core, simulator in options.simulators.items():
        runner = getattr(simulator, "runner", None)
        try:
            found = footprint(Path(runner.elf), Path(runner.elf).with_suffix(".map")) if runner else None
        except Exception:  # a host build has no map: no sizes, the rest still shows
            found = None
        if found is not None:
            reserved = sum(c.ram for c in found.components if c.name in set(RESERVED.values()))
            runners[core] = (found.flash, found.ram - reserved)
    table_rows = []
    for r in rows:
        code, static = runners.get(r.core, (None, None))
        use, pte_bytes = (r.run or Run()).memory_use, (r.constants or Constants()).pte_bytes
        instructions = (r.run or Run()).instructions
        ram = (static + sum(use[k] for k in ("planned", "method allocator", "temp allocator", "stack", "heap"))
               if use and static is not None else None)
        macs = sum(call_macs(Path(r.pte)).values()) if r.pte else 0
        table_rows.append([r.case, r.core, _lowered_cell(r), _dead_cell(r), _kib(pte_bytes),
                           _kib(code + pte_bytes if code is not None and pte_bytes else None), _kib(ram),
                           _num(instructions), f"{instructions / macs:.2f}" if macs and instructions else "-",
                           _float_cell(r)])
    table(["model", "core", "lowered", "dead", "program", "flash", "RAM", "instructions", "instr/MAC", "vs float"],
          table_rows, title="deployment (flash: the suite's runner and the program; RAM: its data, heap and stack "
                            "as measured, the planned buffers and both allocators; `cortexm fit` for a board)")


def _dead_constants(results) -> None:
    """The constant bytes no call reads, over every program, and what the known defect
    predicted: where it is in the code under test and no program carries any, though some have
    the calls it leaves constants beside (a convolution), it looks fixed; without such a program
    nothing is claimed."""
    from cortexm.cases import defects

    measured = [(r.core, r.constants) for r in results if r.constants and r.constants.constant_bytes]
    if not measured:
        return
    dead = sum(c.dead_bytes or 0 for _, c in measured)
    total = sum(c.constant_bytes or 0 for _, c in measured)
    known = defects.EXECUTORCH_DEAD_WEIGHTS
    line = f"constants: {dead:,} of {total:,} B ({100 * dead / total:.0f} %) in {len(measured)} programs are read by no call"
    if dead == 0 and any(c.dead_pattern and known.applies(core, defects.default_locators()) for core, c in measured):
        line += f"; {known.name} looks fixed here (update its record in cortexm/cases/defects.py)"
    elif dead:
        line += f" ({sum(1 for _, c in measured if c.dead_bytes)} programs; {known.name}, a known defect)"
    console().print(line, markup=False)


def _kib(n) -> str:
    return "-" if n is None else f"{n / 1024:,.1f} KiB"


def _exhaustive_rows(rows, core: str) -> None:
    """Exhaustive cases (thousands) as one line per operator; failures are listed below as any."""
    if not rows:
        return
    ops = list(dict.fromkeys(r.exhaustive for r in rows))
    statuses = [s for s in (Status.PASS, Status.FAIL, Status.XFAIL, Status.XPASS, Status.ERROR, Status.NOT_RUN)
                if any(r.status == s for r in rows)]
    def line(op: str) -> list:
        mine = [r for r in rows if r.exhaustive == op]
        return [op, len(mine), len({r.pack for r in mine if r.pack}), *(sum(r.status == s for r in mine) for s in statuses),
                _num(max((r.compare.max_lsb for r in mine if r.compare and r.compare.max_lsb is not None), default=None)),
                _num(max((r.semantic.lsb for r in mine if r.semantic and r.semantic.lsb is not None), default=None))]

    table(["operator", "cases", "packed programs", *statuses, "max|diff| LSB", "semantic max LSB"], [line(op) for op in ops],
          title=f"{core}: exhaustive cases")


def _cross_core_cell(c) -> str:
    if c.agree:
        return "bit-identical"
    if c.expected:
        return f"differ as expected ({c.expected.split(':')[0]}); first at {c.first_difference}"
    return c.line().split(": ", 1)[1]


def _row(r) -> list:
    """A case's row of its core's table: each stage's verdict, "-" where the stage did not run."""
    row = r.row()  # the records flat, a stage that did not run as its defaults
    return [r.case, row["dialect"], row["verify"], _lowered_cell(r), _dead_cell(r), _semantic_cell(r), _float_cell(r),
            row["sim"], row["memory"], _diff_cell(r), _num(row["instructions"]), r.status]


def _semantic_cell(r) -> str:
    """The semantic verdict with the largest departure from the model, in LSB."""
    s = r.semantic or Semantic()
    return s.verdict if s.lsb is None else f"{s.verdict} {s.lsb:g}"


def _lowered_cell(r) -> str:
    """The share of kernel calls that are cortex_m kernels (cortexm.checking.lowering)."""
    record = r.lowering or Lowering()
    if not record.lowered:
        return "-"
    lowered, total = record.lowered
    return "all" if lowered == total else f"{lowered}/{total}" + (" FAIL" if record.verdict == "FAIL" else "")


def _dead_cell(r) -> str:
    """The share of constant bytes no call reads (cortexm.checking.constants)."""
    c = r.constants or Constants()
    if not c.constant_bytes:
        return "-"
    return "0" if not c.dead_bytes else f"{100 * c.dead_bytes / c.constant_bytes:.0f}%"


def _float_cell(r) -> str:
    """SQNR against the float model over the drawn inputs, and top-1 agreement."""
    a = r.accuracy or Accuracy()
    if a.db is None:
        return "-" if a.top1 is None else a.top1
    return f"{a.db:.1f} dB" + (f" {a.top1}" if a.top1 else "")


def _diff_cell(r) -> str:
    """The largest difference from the integer reference, with how many elements differ when any do."""
    c = r.compare or Compare()
    if c.max_lsb is None:
        return "-"
    return _num(c.max_lsb) + (f" ({c.mismatches}/{c.elements})" if c.mismatches else "")


def _num(v) -> str:
    if v is None:
        return "-"
    return f"{v:g}" if isinstance(v, float) else str(v)


def print_changes(changes, baseline: str, threshold: float) -> None:
    """The performance gate's findings (cortexm.testing.perf), or that there were none."""
    out = console()
    if not changes:
        out.print(f"against {baseline}: no case or runner changed by more than {threshold:.0%} in instructions or size, "
                  "no program grew, no case lost accuracy", markup=False)
        return
    for change in changes:
        out.print(change.line, markup=False)
    failed = sum(c.failed for c in changes)
    out.print(f"against {baseline} (threshold {threshold:.0%}): {len(changes)} changes, {failed} of them "
              f"failures (slower, larger, less accurate, or nothing compared)", markup=False)


def print_per_mac(rows) -> None:
    """Instructions per MAC of every conv and linear call, per core (cortexm.testing.perf.per_mac)."""
    if not rows:
        return
    table(["core", "case", "operator", "MACs", "instructions", "instr/MAC", "of limit"],
          [[core, case, op, f"{macs:,}", f"{cost:,}", f"{ratio:.3f}", f"{share:.1%}" if share else "-"]
           for core, case, op, macs, cost, ratio, share in rows],
          title="instructions per MAC (limit: 0.5 on DSP cores, 0.0625 on the M55)")


def _edit_line(core: str, rows) -> None:
    """Which programs exported again since an edit the edit reached, and which it left byte for
    byte as they were (a contributor sees where a pass change lands)."""
    again = [r for r in rows if r.edit]
    if not again:
        return
    changed = [r.case for r in again if r.edit == "changed"]
    unchanged = len(again) - len(changed)
    named = ", ".join(changed[:8]) + (f", ... ({len(changed)})" if len(changed) > 8 else "")
    console().print(f"{core}: of {len(again)} programs exported again since an edit, " + (
        f"{len(changed)} changed ({named}) and {unchanged} unchanged by the edit" if changed else
        f"all {unchanged} are unchanged by the edit (byte for byte the programs made before)"), markup=False)

