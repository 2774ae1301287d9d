"""Putting the reports of a sharded run (cortexm.testing.shards) back together.

What enters: the `cortexm test --json` reports of the shards of one run. What leaves: the
results, cross-core checks and meta of the unsharded run, or one line saying why the
reports do not belong together.
"""

from __future__ import annotations

from cortexm.base.errors import CortexmError
from cortexm.testing.app import CaseResult
from cortexm.testing.crosscore import CrossCore


def merge_reports(reports: list[dict], names: list[str] | None = None) -> tuple[list, list, dict]:
    """(results, cross-core checks, meta) of the union of shard reports (`cortexm test --json`),
    refused when they do not belong together (other cores, lowering or cortexm) or overlap.
    `names` name the reports in errors."""
    names = names or [f"report {i + 1}" for i in range(len(reports))]
    if not reports:
        raise CortexmError("no reports to merge")
    for name, report in zip(names, reports):
        if not isinstance(report, dict) or not {"meta", "results"} <= set(report):
            raise CortexmError(f"{name}: not a `cortexm test --json` report")
    first = reports[0]["meta"]
    for key in ("cores", "sim", "cortexm", "lowering"):
        for name, report in zip(names[1:], reports[1:]):
            if report["meta"].get(key) != first.get(key):
                raise CortexmError(f"{name}: its {key} ({report['meta'].get(key)!r}) differs from {names[0]}'s "
                                   f"({first.get(key)!r}); shards of one run share it")
    results, checks, seen = [], [], {}
    for name, report in zip(names, reports):
        for row in report["results"]:
            key = (row["case"], row["core"])
            if key in seen:
                raise CortexmError(f"{name}: {row['case']} on {row['core']} is in {seen[key]} too: the shards overlap")
            seen[key] = name
            results.append(CaseResult(**row))
        for check in report.get("cross_core", []):
            checks.append(CrossCore(**{k: v for k, v in check.items() if k not in ("agree", "failed")}))
    shards = [r["meta"].get("shard") for r in reports]
    meta = {**first, "shard": None, "merged_from": [s or "whole" for s in shards],
            "seconds": round(sum(r["meta"].get("seconds", 0) for r in reports), 2)}
    return results, checks, meta
