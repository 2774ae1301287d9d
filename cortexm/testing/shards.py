"""Splitting a run over machines, and putting its reports back together.

    shard = parse("2/4")                       # --shard K/N
    mine = [c for c in cases if belongs(c.name, shard)]
    merged = merge([json.loads(p.read_text()) for p in reports])   # the unsharded report

A case belongs to one shard by a hash of its name, with every core it runs on, so each
shard's cross-core checks are whole and N shards together run each case exactly once. The
hash, not the position in the list, keeps a case in its shard when cases are added (a CI
cache per shard stays warm).
"""

from __future__ import annotations

import re
import zlib

from cortexm.errors import CortexmError

Shard = tuple[int, int]  # (K, N), 1 <= K <= N


def parse(text: str) -> Shard:
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
    if not m or not 1 <= int(m[1]) <= int(m[2]):
        raise CortexmError(f"--shard {text}: expected K/N with 1 <= K <= N, e.g. 2/4")
    return int(m[1]), int(m[2])


def belongs(name: str, shard: Shard | None) -> bool:
    if shard is None:
        return True
    k, n = shard
    return zlib.crc32(name.encode()) % n == k - 1


def merge(reports: list[dict], names: list[str] | None = None) -> tuple[list, list, dict]:
    """(results, cross-core checks, meta) of the union of shard reports (`cortexm test --json`),
    refused when they do not belong together (other cores, lowering or cortexm) or overlap.
    `names` name the reports in errors."""
    from cortexm.testing.app import CaseResult
    from cortexm.testing.crosscore import CrossCore

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
