"""Attacks: Verdicts that cannot be silently green."""

from __future__ import annotations

import json
import shutil

from attack_classes.caches import _export_cache
from attack_classes.lab import TIMEOUT, Result, attack
from attack_classes.ownership import _shard_report


def _case_file_verdict(lab, name: str, text: str, *args: str, timeout: float = TIMEOUT) -> Result:
    path = lab.root / name
    path.write_text(text)
    return lab.cli("test", "--cases", str(path), "-t", "cortex-m7", "--sim", "none", *args, timeout=timeout,
                   env={"CORTEXM_EXPORT_CACHE": str(_export_cache(lab))})


@attack("verdicts", "a case file that calls sys.exit(0) at import")
def a_case_file_that_calls_sys_exit_0_at_import(lab):
    r = _case_file_verdict(lab, "exiting_cases.py", "import sys\nsys.exit(0)\n")
    return "cortexm test --cases exiting.py (sys.exit(0) at import)", r.one_error_line("sys.exit")


@attack("verdicts", "a case file that loops at import")
def a_case_file_that_loops_at_import(lab):
    r = _case_file_verdict(lab, "looping_cases.py", "while True:\n    pass\n", "--timeout", "10", timeout=90)
    return "cortexm test --cases looping.py --timeout 10 (an endless loop at import)", r.one_error_line("looping_cases.py")


@attack("verdicts", "report merge with a shard missing")
def report_merge_with_a_shard_missing(lab):
    r = lab.cli("report", "merge", str(_shard_report(lab, 1, 2)))
    return "cortexm report merge shard-1-of-2.json (shard 2 missing)", r.one_error_line("2/2")


@attack("verdicts", "report merge of shards of different runs")
def report_merge_of_shards_of_different_runs(lab):
    r = lab.cli("report", "merge", str(_shard_report(lab, 1, 2)), str(_shard_report(lab, 2, 2, pattern="conv")))
    return "cortexm report merge (test -k relu --shard 1/2) (test -k conv --shard 2/2)", r.one_error_line()


@attack("verdicts", "--timeout nan and inf")
def timeout_nan_and_inf(lab):
    for value in ("nan", "inf"):
        r = lab.cli("run", str(lab.relu()), "-t", "cortex-m7", "--timeout", value, timeout=900)
        problem = r.one_error_line("--timeout")
        if problem:
            return f"cortexm run relu.pte -t cortex-m7 --timeout {value}", problem
    return "cortexm run relu.pte -t cortex-m7 --timeout nan|inf", None


@attack("verdicts", "a sidecar name with a newline")
def a_sidecar_name_with_a_newline(lab):
    d = lab.folder("forged")
    for f in lab.relu().parent.glob("relu.*"):
        shutil.copyfile(f, d / f.name)
    sidecar = json.loads((d / "relu.json").read_text())
    sidecar["name"] = "relu\nforged  PASS"
    (d / "relu.json").write_text(json.dumps(sidecar))
    r = lab.cli("test", "--pte", str(d / "relu.pte"), "-t", "cortex-m7", "--sim", "none", timeout=300)
    forged = [l for l in r.out.splitlines() if l.startswith("forged")]
    return "cortexm test --pte relu.pte (its sidecar's name has a newline)", \
        f"a forged line: {forged[0]!r}" if forged else (None if r.rc in (1, 2) else f"exit {r.rc}")
