"""The contributor's loop, timed: what one edit of backends/cortex_m costs before the suite has
judged it, for this cortexm and (with --before) an older checkout of it, side by side with
upstream's own flow for the same edit.

    python bench/loop.py --executorch-src TREE [--before CHECKOUT] [-t CORE ...] [-k PATTERN]
        [--no-upstream] [--work DIR] [--json OUT]

In: an ExecuTorch tree (only read; copied once to WORK as bench/mutants.py copies it). For each
cortexm (this one, and the one in CHECKOUT, run as `python -m cortexm` from there), with runner
builds warm (built once before anything is timed, so the loop's own rebuild is what is timed):

  cold        `cortexm test --executorch-src WORK -t CORE...` with an empty export cache
  warm        the same again, nothing changed
  comment edit  a comment appended to passes/aten_to_cortex_m_pass.py, the same command (the
              export key counts the lowering's Python by its syntax tree: nothing is lowered)
  python edit a statement appended to that file (a real change of its code, which changes no
              program), the same command: every case lowered again, and no simulator run for
              a program that came out the same bytes (cortexm.sim.memo)
  conv edit   the TODO's narrower depthwise rule in that file (a depthwise convolution whose
              channel multiplier is not 1, or that is dilated, is lowered as a regular one): the
              programs of those convolutions change and no other; only they are run again, and
              the report names them (`changed`), every other program `unchanged by the edit`
  c++ edit    a comment appended to ops/op_quantized_conv2d.cpp, the same command (an
              incremental runner rebuild, then every run)
  all cores   `cortexm test --all-cores --sim none` with an empty export cache: the lowering
              for five cores

The warm run and the edits that change no program (all but the conv edit) of this cortexm
also pass `--baseline` (the cold run's report) with `--max-slowdown 0`: what the runner
executes is what it executed, so any SLOWER or FASTER among their statuses is a false report
of the performance gate.

and upstream's flow (`cortexm upstream-tests -t CORE -k test_implementation` on WORK, which
lowers every program afresh on every run, edit or not) once per core. Out: a table of wall
seconds, export seconds and seconds per program per step, and what each run came to. Exit
status 0: a benchmark.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutants import default_work, prepare_work  # the same working copy as the mutation benchmark

PY_EDIT = "backends/cortex_m/passes/aten_to_cortex_m_pass.py"
CPP_EDIT = "backends/cortex_m/ops/op_quantized_conv2d.cpp"
# step -> (the file it edits, the text replaced ("": the end of the file), its replacement)
EDITS = {"comment edit": (PY_EDIT, "", "\n# bench/loop.py: an edit of a comment\n"),
         "python edit": (PY_EDIT, "", "\n_BENCH_LOOP_EDIT = 1  # bench/loop.py: an edit of the code\n"),
         "conv edit": (PY_EDIT, "use_depthwise_conv = is_depthwise and (batch_size == 1)\n",
                       "use_depthwise_conv = is_depthwise and (batch_size == 1) and (\n"
                       "        (in_channels == out_channels and list(dilation) == [1, 1]) or in_channels == 1)\n"),
         "c++ edit": (CPP_EDIT, "", "\n// bench/loop.py: an edit\n")}
# The edits after which the runner executes what it executed in the cold run.
SAME_PROGRAMS = ("warm", "comment edit", "python edit", "c++ edit")


class Version:
    """One cortexm to time: its command, where it runs, its caches."""

    def __init__(self, label: str, checkout: Path | None, root: Path, gates: bool, builds: Path | None = None) -> None:
        self.label = label
        self.gates = gates  # has --baseline: its later runs are compared with its cold one
        self.command = [sys.executable, "-m", "cortexm"]
        self.cwd = checkout  # None: this one, as installed
        self.builds = builds or root / f"{label}-builds"
        self.exports = root / f"{label}-exports"
        self.runs = root / f"{label}-runs"

    def run(self, args: list[str], report: Path | None = None, fresh_exports: bool = False) -> dict:
        if fresh_exports:
            shutil.rmtree(self.exports, ignore_errors=True)
            shutil.rmtree(self.runs, ignore_errors=True)
        env = {**os.environ, "CORTEXM_BUILD_CACHE": str(self.builds), "CORTEXM_EXPORT_CACHE": str(self.exports),
               "CORTEXM_RUN_CACHE": str(self.runs)}
        env.pop("CORTEXM_LOWERING_TREE", None)
        extra = ["--json", str(report)] if report else []
        started = time.perf_counter()
        done = subprocess.run(self.command + args + extra, cwd=self.cwd, env=env, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL)
        wall = time.perf_counter() - started
        data = json.loads(report.read_text()) if report and report.is_file() else {}
        results = data.get("results", [])
        statuses: dict[str, int] = {}
        for r in results:
            statuses[r["status"]] = statuses.get(r["status"], 0) + 1
        tail = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()][-1:] or [""]
        return {"wall": round(wall, 1), "exit": done.returncode, "programs": len(results),
                "export": round(sum(r.get("seconds", {}).get("export", 0.0) for r in results), 1),
                "statuses": statuses, "remembered": sum(bool(r.get("remembered")) for r in results),
                "changed": sum(r.get("edit") == "changed" for r in results),
                "unchanged": sum(r.get("edit") == "unchanged" for r in results),
                "last": tail[0][:160]}


@contextlib.contextmanager
def edited(work: Path, step: str):
    """WORK with the edit of `step` (EDITS) made, its file restored after."""
    rel, old, new = EDITS[step]
    path = work / rel
    before = path.read_bytes()
    if old and before.count(old.encode()) != 1:
        sys.exit(f"bench: {rel} of this tree does not have the line the {step} replaces: {old.strip()}")
    path.write_bytes(before.replace(old.encode(), new.encode(), 1) if old else before + new.encode())
    try:
        yield
    finally:
        path.write_bytes(before)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executorch-src", required=True, type=Path)
    parser.add_argument("--before", type=Path, help="an older cortexm checkout to time side by side")
    parser.add_argument("-t", "--target", action="append", help="core (repeatable; default cortex-m7 and cortex-m55)")
    parser.add_argument("-k", dest="pattern", help="only cases whose name contains PATTERN")
    parser.add_argument("--no-upstream", action="store_true")
    parser.add_argument("--work", type=Path, help="the working copy (default: the mutation benchmark's)")
    parser.add_argument("--json", type=Path, help="write the numbers here")
    parser.add_argument("--builds", type=Path, help="the runner build cache of this cortexm (default: a fresh one; "
                        "runners are built before anything is timed either way)")
    parser.add_argument("--steps", help="only these steps, comma-separated (default: all): cold, warm, "
                        + ", ".join(EDITS) + ", all cores")
    args = parser.parse_args()
    chosen = [s.strip() for s in args.steps.split(",")] if args.steps else None
    known = ["cold", "warm", *EDITS, "all cores"]
    if chosen and not set(chosen) <= set(known):
        parser.error(f"--steps: choose among {', '.join(known)}")
    cores = args.target or ["cortex-m7", "cortex-m55"]
    tree, work = args.executorch_src.resolve(), (args.work or default_work()).resolve()
    print(f"working copy {work}: {prepare_work(tree, work)}", flush=True)
    root = Path(tempfile.mkdtemp(prefix="cortexm-loop-"))
    versions = [Version("after", None, root, True, args.builds)] + (
        [Version("before", args.before.resolve(), root, False)] if args.before else [])
    test = ["test", "--executorch-src", str(work), *[a for c in cores for a in ("-t", c)],
            *(["-k", args.pattern] if args.pattern else [])]
    rows = []
    try:
        for v in versions:
            # Runners first, untimed: the loop's own rebuild is what the C++ step times.
            for core in cores:
                done = subprocess.run(v.command + ["build", "-t", core, "--executorch-src", str(work)], cwd=v.cwd,
                                      env={**os.environ, "CORTEXM_BUILD_CACHE": str(v.builds)}, capture_output=True)
                if done.returncode != 0:
                    sys.exit(f"bench: building the {core} runner for {v.label} failed: {done.stderr.decode()[-300:]}")
            steps = [("cold", test, True), ("warm", test, False),
                     *((name, test, False) for name in EDITS),
                     ("all cores", ["test", "--executorch-src", str(work), "--all-cores", "--sim", "none",
                                    *(["-k", args.pattern] if args.pattern else [])], True)]
            steps = [s for s in steps if chosen is None or s[0] in chosen]
            cold = root / f"{v.label}-cold.json"
            for name, command, fresh in steps:
                report = root / f"{v.label}-{name.replace(' ', '-')}.json"
                if v.gates and name in SAME_PROGRAMS:
                    # Nothing the runner executes changed since the cold run: the performance
                    # gate at 0 % must report nothing (SLOWER/FASTER in the statuses if it does).
                    command = [*command, "--baseline", str(cold), "--max-slowdown", "0"]
                if name in EDITS:
                    with edited(work, name):
                        row = v.run(command, report, fresh)
                else:
                    row = v.run(command, report, fresh)
                rows.append({"cortexm": v.label, "step": name, **row})
                print_row(rows[-1])
        if not args.no_upstream:
            v = versions[0]
            for core in cores:
                report = root / f"upstream-{core}.json"
                row = v.run(["upstream-tests", "--executorch-src", str(work), "-t", core, "-k", "test_implementation",
                             "--out", str(root / f"upstream-{core}")], report)
                data = json.loads(report.read_text()) if report.is_file() else {}
                counts = (data.get("cores") or {}).get(core, {})
                lowered = sum(counts.get(k, 0) for k in ("passed", "failed", "errors", "xfailed", "xpassed"))
                rows.append({"cortexm": "upstream", "step": f"any edit, {core}", **row, "programs": lowered})
                print_row(rows[-1])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


def print_row(row: dict) -> None:
    per = f"{row['wall'] / row['programs']:.2f}" if row.get("programs") else "-"
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(row.get("statuses", {}).items())) or row.get("last", "")
    print(f"{row['cortexm']:9} {row['step']:22} wall {row['wall']:7.1f} s  export {row.get('export', 0):7.1f} s  "
          f"{row.get('programs', 0):4d} programs  {per:>6} s/program  {row.get('remembered', 0):4d} runs remembered  "
          f"{row.get('changed', 0):3d} changed / {row.get('unchanged', 0):3d} unchanged by the edit  "
          f"exit {row['exit']}  {statuses}", flush=True)


if __name__ == "__main__":
    main()
