"""Putting the reports of a sharded run (cortexm.testing.shards) back together.

What enters: the `cortexm test --json` reports of the shards of one run. What leaves: the
results, cross-core checks and meta of the unsharded run, or one line saying why the
reports do not belong together.
"""

from __future__ import annotations

from cortexm.base.errors import CortexmError
from cortexm.report.results import CaseResult, CrossCore


def merge_reports(reports: list[dict], names: list[str] | None = None) -> tuple[list, list, dict]:
    """(results, cross-core checks, meta) of the union of shard reports (`cortexm test --json`),
    refused when they do not belong together (other cores, lowering or cortexm) or overlap.
    `names` name the reports in errors."""
    names = names or [f"report {i + 1}" for i in range(len(reports))]
    if not reports:
        raise CortexmError("no reports to merge")
    for name, report in zip(names, reports, strict=True):
        if not isinstance(report, dict) or not {"meta", "results"} <= set(report) or not isinstance(report["meta"], dict):
            raise CortexmError(f"{name}: not a `cortexm test --json` report")
        if report["meta"].get("interrupted"):
            raise CortexmError(f"{name}: its run was interrupted, so it holds only some of its cases; run it again")
    first = reports[0]["meta"]
    for key in ("cores", "sim", "cortexm", "lowering", "run"):
        for name, report in zip(names[1:], reports[1:], strict=True):
            if report["meta"].get(key) != first.get(key):
                raise CortexmError(f"{name}: its {key} ({report['meta'].get(key)!r}) differs from {names[0]}'s "
                                   f"({first.get(key)!r}); shards of one run share it")
    _check_complete(reports, names)
    results: list[CaseResult] = []
    checks: list[CrossCore] = []
    seen: dict[tuple[str, str], str] = {}
    for name, report in zip(names, reports, strict=True):
        for row in report["results"]:
            pair = (row["case"], row["core"])
            if pair in seen:
                raise CortexmError(f"{name}: {row['case']} on {row['core']} is in {seen[pair]} too: the shards overlap")
            seen[pair] = name
            results.append(CaseResult.from_row(row))
        for check in report.get("cross_core", []):
            checks.append(CrossCore(**{k: v for k, v in check.items() if k not in ("agree", "failed")}))
    shards = [r["meta"].get("shard") for r in reports]
    meta = {**first, "shard": None, "merged_from": [s or "whole" for s in shards],
            "seconds": round(sum(r["meta"].get("seconds", 0) for r in reports), 2)}
    return results, checks, meta


def _check_complete(reports: list[dict], names: list[str]) -> None:
    """The reports are one run's shards, each once, none missing (or one unsharded report): a
    merge that lacks a shard would pass the cases it never ran."""
    if any(not r["meta"].get("run") for r in reports):
        name = next(n for n, r in zip(names, reports, strict=True) if not r["meta"].get("run"))
        raise CortexmError(f"{name}: records no run identity (an older cortexm wrote it), so its shards cannot be "
                           "told complete; run it again")
    labels: dict[str, str] = {}
    for name, report in zip(names, reports, strict=True):
        label = report["meta"].get("shard") or "whole"
        if label in labels:
            raise CortexmError(f"{name}: shard {label} is given twice (also {labels[label]}): the shards overlap")
        labels[label] = name
    if "whole" in labels:
        if len(reports) > 1:
            raise CortexmError(f"{labels['whole']} is a whole run's report, not a shard: merge it with nothing")
        return
    shards = {name: tuple(int(x) for x in label.split("/")) for label, name in labels.items()}
    counts = {n for _k, n in shards.values()}
    if len(counts) > 1:
        raise CortexmError(f"the reports are shards of {' and '.join(sorted(map(str, counts)))} parts; "
                           "shards of one run have one count")
    count = counts.pop()
    missing = sorted(set(range(1, count + 1)) - {k for k, _n in shards.values()})
    if missing:
        raise CortexmError(f"shard {', '.join(f'{k}/{count}' for k in missing)} is missing: the merged report would "
                           "leave out the cases it ran")
