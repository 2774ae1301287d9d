"""`cortexm reduce` on every built-in case a known defect stops: the table issue 41 asks for.

    python bench/reduce_defects.py [-k CASE]... [--out DIR]

For each case of the suite that a known defect (cortexm/cases/defects.py) stops on the code under
test (the grid's copies left out), reduce runs on the first core the defect applies to, with the
other core to compare, and the table gives the reproducer's size (calls of its program, lines of
its case file), its failure line next to the original's, whether it fails the same way and passes
where the original passes, and the C program's verdict per core where one is written. Each row is
one `cortexm reduce` command line: run it to see the reproducer.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CORES = ("cortex-m55", "cortex-m7")
ROOT = Path(__file__).resolve().parent.parent


def _cases(only: list[str]) -> list[tuple[str, str, str]]:
    """(case, defect names, the first core it fails on) for the built-in cases a defect stops."""
    from cortexm import cases
    from cortexm.cases.registry import REGISTRY
    from cortexm.lowering import source

    source.choose()
    cases.get("add")  # the built-in registrations
    found = []
    for name, case in REGISTRY.items():
        if name.startswith("grid_") or (only and name not in only):
            continue
        for core in CORES:
            here = case.defects_here(core)
            if here:
                found.append((name, ", ".join(d.name for d in here), core))
                break
    return found


def _line(lines: list[str], prefix: str) -> str:
    return next((x[len(prefix):].strip() for x in lines if x.startswith(prefix)), "-")


def _short(text: str, width: int = 110) -> str:
    text = re.sub(r"\s+", " ", text)
    return text if len(text) <= width else text[:width - 1] + "…"


def _upstream_test(folder: Path, core: str) -> str:
    """The reproducer's upstream-style test run by upstream's tester (its conftest as a plugin),
    the implementation test on cortexm's runner for `core`: pytest's summary line."""
    tests = sorted(folder.glob("test_reduced_*.py"))
    if not tests:
        return "-"
    done = subprocess.run([sys.executable, "-m", "pytest", tests[0].name, "-p", "executorch.backends.cortex_m.test.conftest",
                           "-p", "no:cacheprovider", "-q", "-n", "0", "--cortex-m-target", core, "--cortexm-core", core,
                           "--cortexm-sim", "qemu"], capture_output=True, text=True, cwd=folder)
    summary = [line for line in done.stdout.splitlines() if re.search(r"\d+ (passed|failed|xfailed|error)", line)]
    return _short(summary[-1].strip("= "), 60) if summary else f"exit {done.returncode}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", dest="only", action="append", default=[], help="only this case (repeatable)")
    parser.add_argument("--out", type=Path, help="where the reproducers go (default: a temporary folder)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))  # this checkout's cortexm, as `python -m cortexm` from ROOT runs it
    root = args.out or Path(tempfile.mkdtemp(prefix="reduce-defects-"))
    rows, same = [], 0
    todo = _cases(args.only)
    for case, defect, core in todo:
        other = next(c for c in CORES if c != core)
        out = root / f"{case}-{core}"
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "cortexm", "reduce", case, "-t", core, "-t", other, "-o", str(out)],
                              capture_output=True, text=True, cwd=ROOT)
        seconds = time.monotonic() - started
        lines = done.stdout.splitlines()
        size = _line(lines, "reproducer:").split(": ")[0]
        c_lines = [f"{c}: {_line(lines, f'{c} C:')}" for c in (core, other) if _line(lines, f"{c} C:") != "-"]
        c_note = _line(lines, "C program:") if not c_lines else ""
        ok = done.returncode == 0
        same += ok
        failure = done.stderr.strip().splitlines()[-1] if not ok and done.stderr.strip() else ""
        upstream = _upstream_test(out, core)
        rows.append((case, defect, core, _short(_line(lines, f"{core} original:")),
                     _short(_line(lines, f"{core} reduced:")), size,
                     "yes" if ok else f"NO {_short(failure, 80)}", "; ".join(c_lines) or _short(c_note, 60), upstream,
                     seconds))
        print(f"{case} on {core}: {'same' if ok else 'NOT the same'} ({seconds:.0f} s)", file=sys.stderr, flush=True)
    print("| case | defect | core | original | reproducer | size | same | C program | upstream-style test | s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for case, defect, core, original, reduced, size, ok, c, upstream, seconds in rows:
        print(f"| {case} | {defect} | {core} | {original} | {reduced} | {size} | {ok} | {c} | {upstream} | {seconds:.0f} |")
    print(f"\n{same} of {len(rows)} reduce to a reproducer that fails the same way; reproducers in {root}")
    return 0 if same == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
