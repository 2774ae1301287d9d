"""The lowered graph of every built-in case, per core, against its golden file.

A difference means the lowering changed: look at the diff, and if the change is
intended, regenerate with
`cortexm dialect --all -t cortex-m7 -t cortex-m55 --goldens tests/goldens --update-goldens`.
"""

from __future__ import annotations

import pytest

from cortexm import dialect
from cortexm.cases import all_cases

from conftest import GOLDENS

CORES = ["cortex-m7", "cortex-m55"]


@pytest.mark.parametrize("core_name", CORES)
@pytest.mark.parametrize("case", [c.name for c in all_cases()])
def test_golden(exported, case, core_name):
    from cortexm.cases import get

    known = get(case).known_failure(core_name, ran=False)
    if known:
        from cortexm.errors import CortexmError

        with pytest.raises(CortexmError):
            exported(case, core_name)
        pytest.xfail(known)
    pte = exported(case, core_name)
    text = (pte.parent / f"{case}.dialect.txt").read_text()
    diff = dialect.compare(text, dialect.golden_path(GOLDENS, core_name, case))
    assert diff is None, diff


def test_no_stale_goldens():
    names = {c.name for c in all_cases()}
    for core_name in CORES:
        stale = {p.stem for p in (GOLDENS / core_name).glob("*.txt")} - names
        assert not stale, f"goldens without a case in {core_name}: {sorted(stale)}"
