"""The test app's terminal report: a table per core, then what to look at for each failure."""

from __future__ import annotations

from cortexm.report import console, table
from cortexm.testing.app import grid_coverage


def print_summary(results, checks, options, elapsed: float) -> None:
    from cortexm.lowering import backend_source

    out = console()
    out.print(f"lowered by {backend_source.describe()}", markup=False)
    for core in dict.fromkeys(r.core for r in results):
        rows = [r for r in results if r.core == core]
        sim = options.simulators.get(core)
        sim_name = getattr(sim, "name", None) or "no simulator"
        table(["case", "dialect", "verify", "semantic", "sim", "memory", "max|diff| LSB", "mismatches", "instructions",
               "status"],
              [[r.case, r.dialect, r.verify, _semantic_cell(r), r.sim, r.memory, _num(r.max_lsb), _ratio(r),
                _num(r.instructions), r.status] for r in rows if not r.exhaustive],
              title=f"{core} ({sim_name})")
        _exhaustive_rows([r for r in rows if r.exhaustive], core)
        counts = {s: sum(r.status == s for r in rows)
                  for s in ("PASS", "FAIL", "XFAIL", "XPASS", "ERROR", "NOT RUN", "SLOWER", "FASTER")}
        out.print(f"{core}: " + ", ".join(f"{n} {s.lower()}" for s, n in counts.items() if n))
        if isinstance(sim, str):
            out.print(f"{core}: simulator runs skipped: {sim}")
        out.print()
    if checks:
        exhaustive = {r.case for r in results if r.exhaustive}  # counted below, listed only when they fail
        table(["case", "cores", "cross-core"],
              [[c.case, ", ".join(c.cores), _cross_core_cell(c)] for c in checks if c.case not in exhaustive or c.failed],
              title="cross-core (same case, every core's runner)")
        out.print(f"cross-core: {sum(c.agree for c in checks)} bit-identical, {sum(c.failed for c in checks)} differ"
                  + (f", {sum(not c.agree and not c.failed for c in checks)} differ as expected" if any(c.expected for c in checks) else ""))
        out.print()
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
    not_run = [r for r in results if r.status == "NOT RUN"]
    if not_run:
        reasons = dict.fromkeys(r.reason for r in not_run)
        out.print(f"[bold]NOT RUN[/bold]: {len(not_run)} results were checked but never simulated: " + "; ".join(reasons),
                  markup=True)
    out.print(f"{len(results)} results in {elapsed:.1f} s; {sum(r.status == 'PASS' for r in results)} passed, "
              f"{sum(r.failed for r in results) + sum(c.failed for c in checks)} failed, "
              f"{sum(r.status == 'XFAIL' for r in results)} expected failures, {len(not_run)} not simulated")


def _exhaustive_rows(rows, core: str) -> None:
    """Exhaustive cases (thousands) as one line per operator; failures are listed below as any."""
    if not rows:
        return
    ops = list(dict.fromkeys(r.exhaustive for r in rows))
    statuses = [s for s in ("PASS", "FAIL", "XFAIL", "XPASS", "ERROR", "NOT RUN") if any(r.status == s for r in rows)]
    table(["operator", "cases", "packed programs", *statuses, "max|diff| LSB", "semantic max LSB"],
          [[op, len(mine := [r for r in rows if r.exhaustive == op]), len({r.pack for r in mine if r.pack}),
            *(sum(r.status == s for r in mine) for s in statuses),
            _num(max((r.max_lsb for r in mine if r.max_lsb is not None), default=None)),
            _num(max((r.semantic_lsb for r in mine if r.semantic_lsb is not None), default=None))] for op in ops],
          title=f"{core}: exhaustive cases")


def _cross_core_cell(c) -> str:
    if c.agree:
        return "bit-identical"
    if c.expected:
        return f"differ as expected ({c.expected.split(':')[0]}); first at {c.first_difference}"
    return c.line().split(": ", 1)[1]


def _semantic_cell(r) -> str:
    """The semantic verdict with the largest departure from the model, in LSB."""
    return r.semantic if r.semantic_lsb is None else f"{r.semantic} {r.semantic_lsb:g}"


def _num(v) -> str:
    if v is None:
        return "-"
    return f"{v:g}" if isinstance(v, float) else str(v)


def _ratio(r) -> str:
    return "-" if r.mismatches is None else f"{r.mismatches}/{r.elements}"


def print_changes(changes, baseline: str, threshold: float) -> None:
    """The performance gate's findings (cortexm.testing.perf), or that there were none."""
    out = console()
    if not changes:
        out.print(f"performance: no case or runner changed by more than {threshold:.0%} against {baseline}", markup=False)
        return
    for change in changes:
        out.print(change.line, markup=False)
    failed = sum(c.failed for c in changes)
    out.print(f"performance against {baseline} (threshold {threshold:.0%}): {len(changes)} changes, {failed} of them "
              f"slower or larger", markup=False)


def print_per_mac(rows) -> None:
    """Instructions per MAC of every conv and linear call, per core (cortexm.testing.perf.per_mac)."""
    if not rows:
        return
    table(["core", "case", "operator", "MACs", "instructions", "instr/MAC", "of limit"],
          [[core, case, op, f"{macs:,}", f"{cost:,}", f"{ratio:.3f}", f"{share:.1%}" if share else "-"]
           for core, case, op, macs, cost, ratio, share in rows],
          title="instructions per MAC (limit: 0.5 on DSP cores, 0.0625 on the M55)")
