"""Splitting a run over machines (cortexm.testing.merge puts its reports back together).

    shard = parse("2/4")                       # --shard K/N
    mine = [c for c in cases if belongs(c.name, shard)]

A case belongs to one shard by a hash of its name, with every core it runs on, so each
shard's cross-core checks are whole and N shards together run each case exactly once. The
hash, not the position in the list, keeps a case in its shard when cases are added (a CI
cache per shard stays warm).
"""

from __future__ import annotations

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
