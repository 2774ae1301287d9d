"""Splitting a run over machines (cortexm.report.merge puts its reports back together).

    shard = parse("2/4")                       # --shard K/N
    mine = [c for c in cases if belongs(c.name, shard)]

A case belongs to one shard by a hash of its name, with every core it runs on, so each
shard's cross-core checks are whole and N shards together run each case exactly once. The
hash, not the position in the list, keeps a case in its shard when cases are added (a CI
cache per shard stays warm).

Each shard's report records the run it is part of (`identity`: what the unsharded run would
run, and with what) and its K/N, so a merge can tell a missing shard or a shard of another run.
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib

from cortexm.base.errors import CortexmError

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


def identity(**run) -> str:
    """The identity of a run, the same for each of its shards: a digest of what it runs (the
    whole, unsharded run's cases and the keys of their exports) and how (cores, simulator,
    lowering, cortexm)."""
    return hashlib.sha256(json.dumps(run, sort_keys=True, default=str).encode()).hexdigest()[:20]


def label(shard: Shard | None) -> str | None:
    """"K/N" as reports record it; None for an unsharded run."""
    return f"{shard[0]}/{shard[1]}" if shard else None
