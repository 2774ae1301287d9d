"""The lowered graph of every built-in case, per core, against its golden file.

A difference means the lowering changed: look at the diff, and if the change is
intended, regenerate with
`cortexm dialect --all -t cortex-m7 -t cortex-m55 --goldens tests/goldens --update-goldens --lowering installed`.
"""

from __future__ import annotations

import pytest

from conftest import GOLDENS
from cortexm.cases import all_cases
from cortexm.lowering import dialect

CORES = ["cortex-m7", "cortex-m55"]


@pytest.mark.parametrize("core_name", CORES)
@pytest.mark.parametrize("case", [c.name for c in all_cases(grid="default")])
def test_golden(exported, case, core_name):
    from cortexm.cases import get

    known = get(case).fails_at("export", core_name)
    if known:
        from cortexm.base.errors import CortexmError

        with pytest.raises(CortexmError) as failure:
            exported(case, core_name)
        assert known.explains("export", str(failure.value)), f"fails differently from {known.name}: {failure.value}"
        pytest.xfail(f"{known.name}: {known.reason}")
    pte = exported(case, core_name)
    text = (pte.parent / f"{case}.dialect.txt").read_text()
    diff = dialect.compare(text, dialect.golden_path(GOLDENS, core_name, case))
    assert diff is None, diff


def test_no_stale_goldens():
    names = {c.name for c in all_cases(grid="default")}
    for core_name in CORES:
        stale = {p.stem for p in (GOLDENS / core_name).glob("*.txt")} - names
        assert not stale, f"goldens without a case in {core_name}: {sorted(stale)}"
