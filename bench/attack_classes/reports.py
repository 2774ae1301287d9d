"""Attacks (round 4): reports well-formed whatever the data."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from attack_classes.lab import attack


@attack("reports", "test --baseline of other cases: nothing compared")
def baseline_compares_nothing(lab):
    base = lab.folder("reports") / "other.json"
    base.write_text(json.dumps({"results": [{"case": "elsewhere", "core": "cortex-m3", "instructions": 5}]}))
    r = lab.cli("test", "-t", "cortex-m7", "-k", "relu", "--grid", "none", "--sim", "none", "--baseline", str(base),
                timeout=600)
    if r.rc == 1 and "NOTHING COMPARED" in r.out:
        return "cortexm test --baseline OTHER.json", None
    return "cortexm test --baseline OTHER.json", f"exit {r.rc}: {(r.out.strip().splitlines() or [''])[-1][:100]}"


@attack("reports", "--json r.json --junit ./r.json")
def same_report_two_spellings(lab):
    d = lab.folder("spellings")
    r = lab.cli("test", "-t", "cortex-m7", "-k", "relu", "--grid", "none", "--sim", "none", "--json", "r.json",
                "--junit", "./r.json", timeout=600, cwd=d)
    return "cortexm test --json r.json --junit ./r.json", r.one_error_line("given to both")


@attack("reports", "run --save into a missing folder")
def save_into_missing_folder(lab):
    target = lab.root / "missing" / "deeper" / "out.npy"
    r = lab.cli("run", str(lab.relu()), "-t", "cortex-m7", "--save", str(target), timeout=300)
    return "cortexm run X.pte --save missing/deeper/out.npy", None if r.rc == 0 and target.is_file() else \
        f"exit {r.rc}: {(r.err.strip().splitlines() or [''])[-1][:100]}"


@attack("reports", "a folder name with a terminal escape sequence")
def escape_sequence_in_a_path(lab):
    d = lab.folder("x\x1b[2Ky")
    shutil.copy(lab.relu(), d / "relu.pte")
    r = subprocess.run(["script", "-qc", f"{sys.executable} -m cortexm inspect '{d / 'relu.pte'}'", "/dev/null"],
                       capture_output=True, text=True, cwd=lab.root, timeout=60)
    if "\x1b[2K" in r.stdout.replace("\\x1b", ""):
        return "cortexm inspect 'x<ESC>[2Ky/relu.pte' (on a terminal)", "the escape sequence reached the terminal raw"
    return "cortexm inspect 'x<ESC>[2Ky/relu.pte' (on a terminal)", None if "\\x1b[2K" in r.stdout else \
        f"the name is not shown escaped: {r.stdout[:100]!r}"
