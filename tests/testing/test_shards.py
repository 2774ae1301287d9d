"""`cortexm test --shard K/N` and `cortexm report merge`: N shards together are the unsharded run."""

from __future__ import annotations

import json
import re

import pytest

from conftest import MISSING, run_cli
from cortexm.base.errors import CortexmError
from cortexm.testing import shards

needs_firmware = pytest.mark.skipif(MISSING is not None, reason=f"firmware tests need: {MISSING}")
PATTERN = "add"  # the built-in add cases and add's grid cases: a handful, with cross-core checks
N = 3


def _comparable(row: dict) -> dict:
    """A result's verdict, without what depends on the caches the run found: its seconds, whether
    its run came from the run store, and whether its program was exported again since another
    lowering of the case (the test session's other tests share the caches)."""
    return {k: v for k, v in row.items() if k not in ("seconds", "remembered", "edit")}


def _junit_without_times(text: str) -> str:
    return re.sub(r' time="[0-9.]+"', "", text)


def test_every_case_is_in_exactly_one_shard():
    from cortexm.cases import all_cases

    names = [c.name for c in all_cases(grid="full")]
    for n in (1, 2, 5):
        owners = {name: [k for k in range(1, n + 1) if shards.belongs(name, (k, n))] for name in names}
        assert all(len(o) == 1 for o in owners.values())
    sizes = [sum(shards.belongs(name, (k, 4)) for name in names) for k in range(1, 5)]
    assert min(sizes) > 0.6 * len(names) / 4, sizes  # a hash spreads them


@pytest.mark.parametrize("text", ["0/3", "4/3", "a/b", "3", ""])
def test_bad_shard_is_refused(text):
    with pytest.raises(CortexmError, match="expected K/N"):
        shards.parse(text)


@needs_firmware
def test_shards_merge_to_the_unsharded_run(runners, tmp_path):
    common = ["test", "-t", "cortex-m7", "-t", "cortex-m55", "-k", PATTERN]
    whole = run_cli(*common, "--json", str(tmp_path / "whole.json"), "--junit", str(tmp_path / "whole.xml"))
    assert whole.returncode in (0, 1), whole.stderr
    parts = []
    for k in range(1, N + 1):
        part = tmp_path / f"shard-{k}.json"
        done = run_cli(*common, "--shard", f"{k}/{N}", "--json", str(part))
        assert done.returncode in (0, 1), done.stderr
        parts.append(str(part))
    merged = run_cli("report", "merge", *parts, "--json", str(tmp_path / "merged.json"), "--junit", str(tmp_path / "merged.xml"))
    assert merged.returncode == whole.returncode, merged.stdout + merged.stderr

    unsharded, joined = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("whole", "merged"))
    assert len(unsharded["results"]) >= 8
    by_key = lambda report: {(r["case"], r["core"]): _comparable(r) for r in report["results"]}  # noqa: E731
    assert by_key(joined) == by_key(unsharded)
    assert sorted(map(json.dumps, joined["cross_core"])) == sorted(map(json.dumps, unsharded["cross_core"]))
    assert joined["grid_coverage"] == unsharded["grid_coverage"]
    merged, whole = ((tmp_path / name).read_text() for name in ("merged.xml", "whole.xml"))
    assert _junit_without_times(merged) == _junit_without_times(whole)

    # Shards that do not belong together are refused, each with one line.
    overlap = run_cli("report", "merge", parts[0], parts[0])
    assert overlap.returncode == 2 and "the shards overlap" in overlap.stderr
    other = json.loads(open(parts[1]).read())
    other["meta"]["cores"] = ["cortex-m7"]
    (tmp_path / "other.json").write_text(json.dumps(other))
    mixed = run_cli("report", "merge", parts[0], str(tmp_path / "other.json"))
    assert mixed.returncode == 2 and "its cores" in mixed.stderr
