"""The test app's terminal report: a table per core, then what to look at for each failure."""

from __future__ import annotations

from cortexm.report import console, table


def print_summary(results, checks, options, elapsed: float) -> None:
    out = console()
    for core in dict.fromkeys(r.core for r in results):
        rows = [r for r in results if r.core == core]
        sim = options.simulators.get(core)
        sim_name = getattr(sim, "name", None) or "no simulator"
        table(["case", "dialect", "verify", "sim", "max|diff| LSB", "mismatches", "instructions", "status"],
              [[r.case, r.dialect, r.verify, r.sim, _num(r.max_lsb), _ratio(r), _num(r.instructions), r.status] for r in rows],
              title=f"{core} ({sim_name})")
        counts = {s: sum(r.status == s for r in rows) for s in ("PASS", "FAIL", "XFAIL", "XPASS", "ERROR")}
        out.print(f"{core}: " + ", ".join(f"{n} {s.lower()}" for s, n in counts.items() if n))
        if isinstance(sim, str):
            out.print(f"{core}: simulator runs skipped: {sim}")
        out.print()
    if checks:
        table(["case", "cores", "cross-core"],
              [[c.case, ", ".join(c.cores), "bit-identical" if c.agree else c.line().split(": ", 1)[1]] for c in checks],
              title="cross-core (same case, every core's runner)")
        out.print(f"cross-core: {sum(c.agree for c in checks)} bit-identical, {sum(c.failed for c in checks)} differ"
                  + (f", {sum(not c.agree and not c.failed for c in checks)} differ by design" if any(c.expected for c in checks) else ""))
        out.print()
    for c in checks:
        if c.failed:
            out.print(c.line(), markup=False)
    for r in results:
        if r.failed:
            out.print(f"[bold]{r.status} {r.case} {r.core}[/bold]: {r.reason}")
            if r.details:
                out.print("\n".join("    " + line for line in r.details.splitlines()[:40]), markup=False)
    out.print(f"{len(results)} results in {elapsed:.1f} s; "
              f"{sum(r.failed for r in results) + sum(c.failed for c in checks)} failed, "
              f"{sum(r.status == 'XFAIL' for r in results)} expected failures")


def _num(v) -> str:
    if v is None:
        return "-"
    return f"{v:g}" if isinstance(v, float) else str(v)


def _ratio(r) -> str:
    return "-" if r.mismatches is None else f"{r.mismatches}/{r.elements}"
