"""The performance gate: a run against an earlier one's report (`cortexm test --baseline`).

What enters: this run's results (instructions per case and core, and per kernel call: the
runner's --calls), the runners' flash and RAM, an earlier report (JSON, as `--json`
writes it: main's, or a committed file), and a threshold. What leaves: every change beyond
the threshold, either way, as a line naming the case, the core, the ratio and the call that
changed most; results that got slower get the status SLOWER (a failure), faster ones
FASTER (reported, not a failure); a runner that grew beyond the threshold is a failure too.

Counts are QEMU's instructions (-icount): the same program on the same runner counts the
same every run, so any change is the code's. On the FVP and the host they are ticks of a
clock, and a baseline of ticks is compared only with ticks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cortexm.checking.macs import MAC_LIMIT, call_macs
from cortexm.report.results import Status

SLOWER, FASTER = Status.SLOWER, Status.FASTER
DEFAULT_THRESHOLD = 0.05


@dataclass
class Change:
    line: str
    failed: bool  # a slow-down or growth beyond the threshold: the gate fails


def parse_threshold(text: str) -> float:
    """'5%' or '0.05' -> 0.05."""
    from cortexm.base.errors import CortexmError

    try:
        value = float(text[:-1]) / 100 if text.strip().endswith("%") else float(text)
    except ValueError:
        raise CortexmError(f"--max-slowdown {text!r}: give a percentage such as 5%") from None
    if not 0 <= value < 10 or value != value:
        raise CortexmError(f"--max-slowdown {text!r}: give a percentage between 0% and 1000%")
    return value


def load_baseline(path: str | Path) -> dict:
    """An earlier run's --json report, checked enough to compare with: one line if it is not."""
    from cortexm.base import files
    from cortexm.base.errors import CortexmError

    report = files.read_json(path, "JSON report")
    if not isinstance(report, dict) or not isinstance(report.get("results"), list):
        raise CortexmError(f"{path}: not a report of `cortexm test --json` (no results)")
    return report


def gate(results, baseline: dict, threshold: float) -> list[Change]:
    """Compare each result's instructions with the baseline's for the same case and core; mark
    and describe every change beyond `threshold`."""
    before = {(r["case"], r["core"]): r for r in baseline.get("results", [])}
    changes = []
    for result in results:
        old, run = before.get((result.case, result.core)), result.run
        if old is None or not old.get("instructions") or run is None or not run.instructions:
            continue
        ratio = run.instructions / old["instructions"] - 1
        if abs(ratio) <= threshold:
            continue
        slower = ratio > 0
        result.perf = (f"{old['instructions']:,} -> {run.instructions:,} instructions ({ratio:+.1%})"
                       f"{_blame(old.get('calls') or [], run.calls, slower)}")
        if slower:  # recorded whatever the status, as every gate's failure
            result.failures.append(("slower", result.perf))
        if result.status == Status.PASS:
            result.status = SLOWER if slower else FASTER
            if slower:
                result.reason = result.perf
        changes.append(Change(f"{SLOWER if slower else FASTER} {result.case} {result.core}: {result.perf}", slower))
    return changes


def _blame(old: list, new: list, slower: bool) -> str:
    """'; most in call 3 cortex_m::quantized_conv2d: 18,400 -> 24,100 (+31.0 %)': the call that
    changed most the way the whole did. Calls pair by index when the program calls the same
    operators in the same order, else by operator."""
    if not old or not new:
        return ""
    if [c[1] for c in old] == [c[1] for c in new]:
        pairs = [(f"call {n} {op}", before, after) for (_, _, before), (n, op, after) in zip(old, new, strict=True)]
    else:
        by_op_old, by_op_new = _by_op(old), _by_op(new)
        pairs = [(f"{op} (all its calls)", by_op_old.get(op, 0), by_op_new.get(op, 0))
                 for op in dict.fromkeys([*by_op_old, *by_op_new])]
    what, before, after = max(pairs, key=lambda p: (p[2] - p[1]) if slower else (p[1] - p[2]))
    if (after - before) * (1 if slower else -1) <= 0:
        return ""
    change = f" ({after / before - 1:+.1%})" if before else ""
    return f"; most in {what}: {before:,} -> {after:,}{change}"


def _by_op(calls: list) -> dict[str, int]:
    totals: dict[str, int] = {}
    for _, op, cost in calls:
        totals[op] = totals.get(op, 0) + cost
    return totals


def runner_sizes(simulators: dict) -> dict[str, dict[str, int]]:
    """core -> flash and RAM of the runner it ran on (cortexm.firmware.size)."""
    from cortexm.firmware.size import footprint

    sizes = {}
    for core, simulator in simulators.items():
        runner = getattr(simulator, "runner", None)
        if runner is None:
            continue
        elf = Path(runner.elf)
        try:
            found = footprint(elf, elf.with_suffix(".map"))
        except Exception:  # a host build has no map; a size is not worth a failed run
            continue
        sizes[core] = {"flash": found.flash, "ram": found.ram}
    return sizes


def size_gate(sizes: dict[str, dict[str, int]], baseline: dict, threshold: float) -> list[Change]:
    """Each runner's flash and RAM against the baseline's: growth beyond `threshold` fails."""
    before = (baseline.get("meta") or {}).get("runners") or {}
    changes = []
    for core, now in sizes.items():
        for what in ("flash", "ram"):
            old = (before.get(core) or {}).get(what)
            if not old:
                continue
            ratio = now[what] / old - 1
            if abs(ratio) > threshold:
                changes.append(Change(f"{'LARGER' if ratio > 0 else 'SMALLER'} {core} runner {what}: "
                                      f"{old:,} -> {now[what]:,} B ({ratio:+.1%})", ratio > 0))
    return changes


def program_gate(results, baseline: dict) -> list[Change]:
    """Each program's size against the baseline's for the same case and core: a program that
    grew is LARGER (a failure: it is flash on the device), with its dead constant bytes."""
    before = {(r["case"], r["core"]): r for r in baseline.get("results", [])}
    changes = []
    for result in results:
        old, now = (before.get((result.case, result.core)) or {}).get("pte_bytes"), result.constants
        if not old or now is None or not now.pte_bytes or now.pte_bytes <= old:
            continue
        dead = (before.get((result.case, result.core)) or {}).get("dead_bytes")
        line = (f"program {old:,} -> {now.pte_bytes:,} B ({now.pte_bytes / old - 1:+.1%}); constant bytes no "
                f"call reads {dead if dead is not None else '?'} -> {now.dead_bytes}")
        result.failures.append(("larger", line))
        if result.status in (Status.PASS, Status.FASTER):
            result.status, result.reason = Status.LARGER, line
        changes.append(Change(f"LARGER {result.case} {result.core}: {line}", True))
    return changes


def compared(results, baseline: dict) -> int:
    """How many of this run's results the baseline has a result for: 0 means the gate
    compared nothing, which is a failure of its own (a baseline of other cases or cores)."""
    before = {(r.get("case"), r.get("core")) for r in baseline.get("results", []) if isinstance(r, dict)}
    return sum((r.case, r.core) in before for r in results)


def per_mac(results) -> list[list]:
    """[core, case, operator, MACs, instructions, instructions per MAC, share of the core's
    limit] for every MAC-counted call of the results that were timed per call."""
    rows = []
    for r in results:
        if not r.run or not r.run.calls or not r.pte:
            continue
        macs = call_macs(Path(r.pte))
        for n, op, cost in r.run.calls:
            if macs.get(n):
                limit = MAC_LIMIT.get(r.core)
                rows.append([r.core, r.case, op.removeprefix("cortex_m::"), macs[n], cost, cost / macs[n],
                             limit * macs[n] / cost if limit and cost else None])
    return rows
