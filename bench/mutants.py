"""Mutation benchmark: does the contributor command notice realistic one-line bugs?
In an ExecuTorch tree's backends/cortex_m, and in the CMSIS-NN its kernels call.

    python bench/mutants.py --executorch-src TREE [--cmsis-nn-src NN] [-t cortex-m7 -t cortex-m55]
        [--only SUBSTRING[,...]] [--kind cpp|python|cmsis_nn] [--work DIR] [--json OUT] [--keep-going]
        [--test-args "--grid exhaustive"]

In: an ExecuTorch tree and, for the cmsis_nn mutants, a CMSIS-NN tree (both only read), and
the mutants in bench/mutants/{cpp,python,cmsis_nn}/NN-name.patch: each one line changed (in
backends/cortex_m for cpp and python, in CMSIS-NN's Source/ and Include/ for cmsis_nn), as a
git diff after header lines `# mutant: what the bug is`, `# kind: cpp|python|cmsis_nn` and, for
a change no test can tell apart, `# equivalent: why`.

What it does: copies each tree it mutates once: the ExecuTorch tree to WORK (default
$XDG_CACHE_HOME/cortexm/mutants/work), the CMSIS-NN tree to WORK/../cmsis-nn-work: a git
checkout is cloned at its HEAD, borrowing the tree's objects (`git clone --shared`;
uncommitted changes of the tree are not taken, and files whose blobs the object store
lacks are left out and marked skip-worktree; unlike `git worktree add`, nothing is written
into the tree's .git); any other folder is copied. It runs

    cortexm test --executorch-src WORK [--cmsis-nn-src NN-WORK] -t CORE... [TEST-ARGS] --json REPORT

on the unmutated copies (the baseline, WORK/../baseline.json), then for each mutant: applies
it to its tree's copy, runs the same command, restores the files it touched, and compares the
report with the baseline. A mutant is KILLED when a (case, core) result gets worse (PASS or XFAIL
becomes FAIL, ERROR, XPASS or NOT RUN; or a result that failed already fails with a line
it did not have), when a cross-core check fails that passed, or when the command ends
without a report or with a worse exit status. A dialect golden diff alone is not a kill:
a contributor who changes the lowering on purpose regenerates the goldens, so a golden
says "changed", never "wrong" (--count-golden-diffs counts it, as before). Each mutant's
line says which kinds of check noticed it: bit-exact (the runner against the integer
reference, across cores, the memory oracle), semantic (the program against the quantized
model, cortexm.semantic), golden (the dialect diff), other (export, verify, the build). A failure the tool itself files as an
expected one (XFAIL) does not count: the command would not have told the contributor. Nor
does the reverse: a known defect is keyed to the content of the file it lives in, so a mutant
of that file un-excuses the defect's own failure ("excuse withdrawn", shown, not a kill).
--rejudge judges the reports of an earlier run again, without running anything.
A runner that no longer compiles counts as killed and is reported as "build broken".

Out: one line per mutant (name, KILLED/SURVIVED, the stages that noticed it, the kinds of
check, seconds, the first case and core that killed it), the kill rate per kind and overall
(mutants marked equivalent left out) with what noticed them per kind of check and stage, the
survivors with their `# equivalent:` reason or "no check noticed it"; --json writes all
of it. Each run's report and output stay in WORK/../mutant-reports/ (the baseline's in
WORK/../baseline.json and baseline.log). The runner builds
and exports of these runs go to caches of their own in WORK/../mutant-cache/ (what a
mutant adds there is removed after it), so the user's caches are neither filled nor
raced. Exit status 0: this is a benchmark, not a check.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

MUTANTS = Path(__file__).resolve().parent / "mutants"
KINDS = ("cpp", "python", "quantizer", "cmsis_nn")
# The tree a kind mutates: quantizer mutants are backends/cortex_m Python too, the code that decides
# how a model quantizes (they leave a self-consistent but less accurate model).
TREE_OF = {"cpp": "executorch", "python": "executorch", "quantizer": "executorch", "cmsis_nn": "cmsis-nn"}
CORES = ("cortex-m7", "cortex-m55")
GOOD = {"PASS", "XFAIL"}  # results that are not a problem for the contributor
# A failure the baseline excused by a known defect, unexcused once the mutant changed the
# defect's file: reported, never counted as a kill.
WITHDRAWN = "excuse withdrawn"
GOLDEN = "dialect"  # the golden diff: a change detector, not a judge
# What kind of check each stage of the test app is.
CHECKS = {"bit-exact": {"compare", "run", "memory", "cross-core", "upstream-reference"},
          "semantic": {"semantic"}, "golden": {GOLDEN}, "float model": {"accuracy", "degraded"},
          "baseline": {"slower", "larger"}}
BUILD_FAILED = re.compile(r"(building|configuring) the \S+ runner failed")


@dataclass
class Mutant:
    name: str  # "cpp/01-conv2d-stride-h-from-w"
    kind: str
    what: str
    equivalent: str | None
    patch: Path
    files: list[str]  # the paths it changes, relative to the tree

    @property
    def tree(self) -> str:
        return TREE_OF[self.kind]

    @classmethod
    def load(cls, patch: Path) -> Mutant:
        text = patch.read_text()
        header = dict(re.findall(r"^# (\w+): (.*)$", text.split("\ndiff ", 1)[0], re.M))
        files = re.findall(r"^\+\+\+ b/(\S+)", text, re.M)
        return cls(f"{patch.parent.name}/{patch.stem}", header.get("kind", patch.parent.name),
                   header.get("mutant", ""), header.get("equivalent"), patch, files)


@dataclass
class Outcome:
    name: str
    kind: str
    what: str
    equivalent: str | None
    verdict: str  # KILLED, SURVIVED, NOT APPLIED
    build_broken: bool = False
    stages: list[str] = field(default_factory=list)  # the stages that noticed it
    checks: list[str] = field(default_factory=list)  # their kinds (CHECKS, or "other")
    evidence: list[list[str]] = field(default_factory=list)  # [stage, case, core, line], the first few
    exit: int | None = None
    seconds: float = 0.0
    report: str = ""


# --- the working copy --------------------------------------------------------------------

def git(folder: Path, *args: str, check: bool = True) -> str:
    # No optional locks: `git status` on the tree must not even refresh its index.
    done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True,
                          env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"})
    if check and done.returncode != 0:
        sys.exit(f"bench: git {' '.join(args)} in {folder} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def is_git_checkout(folder: Path) -> bool:
    return git(folder, "rev-parse", "--show-toplevel", check=False) == str(folder.resolve())


def prepare_work(tree: Path, work: Path) -> str:
    """WORK as an unmodified copy of TREE (reused when it already is one); what it is, one line."""
    if not is_git_checkout(tree):
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(tree, work, symlinks=True)
        return f"a copy of {tree}"
    head = git(tree, "rev-parse", "HEAD")
    dirty = git(tree, "status", "--porcelain", "--untracked-files=no", check=False)
    note = " (the tree's uncommitted changes are not in it)" if dirty else ""
    if is_git_checkout(work) and git(work, "rev-parse", "HEAD") == head and not _changed(work):
        return f"{tree} at {head[:12]}, reused{note}"
    shutil.rmtree(work, ignore_errors=True)
    work.parent.mkdir(parents=True, exist_ok=True)
    git(work.parent, "clone", "--quiet", "--shared", "--no-checkout", str(tree.resolve()), str(work))
    # A snapshot may lack some blobs (large files): checkout then leaves those out and
    # still succeeds; marking them skip-worktree keeps the copy clean for git status.
    git(work, "checkout", "--quiet", "--detach", head, check=False)
    missing = [p for p in git(work, "ls-files", "--deleted", "-z").split("\0") if p]
    if missing and not all(blob_absent(work, head, p) for p in missing):
        sys.exit(f"bench: checking out {tree} at {head[:12]} into {work} failed: {len(missing)} files missing")
    if missing:
        git(work, "update-index", "--skip-worktree", "--", *missing)
    if _changed(work):
        sys.exit(f"bench: the copy {work} of {tree} is not clean after checkout:\n{_changed(work)}")
    left_out = f", {len(missing)} files absent from its object store left out" if missing else ""
    return f"{tree} at {head[:12]}{left_out}{note}"


def blob_absent(work: Path, head: str, path: str) -> bool:
    """The object store lacks PATH's blob (the only reason a checkout may leave a file out)."""
    done = subprocess.run(["git", "-C", str(work), "cat-file", "-e", f"{head}:{path}"], capture_output=True)
    return done.returncode != 0


def _changed(work: Path) -> str:
    return git(work, "status", "--porcelain", "--untracked-files=no", check=False)


def apply(mutant: Mutant, work: Path) -> dict[str, bytes | None] | str:
    """Apply the mutant in WORK: the touched files' previous contents, or why it did not apply."""
    saved = {f: (work / f).read_bytes() if (work / f).is_file() else None for f in mutant.files}
    # The ceiling keeps git from finding a repository above a plain copy.
    done = subprocess.run(["git", "apply", str(mutant.patch)], cwd=work, capture_output=True, text=True,
                          env={**os.environ, "GIT_CEILING_DIRECTORIES": str(work.parent)})
    return saved if done.returncode == 0 else (done.stderr.strip().splitlines() or ["git apply failed"])[0]


def revert(saved: dict[str, bytes | None], work: Path) -> None:
    for rel, content in saved.items():
        if content is None:
            (work / rel).unlink(missing_ok=True)
        else:
            (work / rel).write_bytes(content)
    if is_git_checkout(work) and _changed(work):
        sys.exit(f"bench: {work} is not back to its HEAD after a mutant:\n{_changed(work)}")


# --- running the contributor command -----------------------------------------------------

def cortexm() -> list[str]:
    return ["cortexm"] if shutil.which("cortexm") else [sys.executable, "-m", "cortexm"]


class Runner:
    """Runs `cortexm test` on the working copies (tree name -> folder) with the benchmark's own caches."""

    def __init__(self, args, works: dict[str, Path]) -> None:
        work = works["executorch"]
        self.works, self.work, self.root = works, work, work.parent
        self.reports = self.root / "mutant-reports"
        self.reports.mkdir(parents=True, exist_ok=True)
        cache = self.root / "mutant-cache"
        self.caches = [cache / "builds", cache / "builds" / "work", cache / "exports"]
        self.env = {**os.environ, "CORTEXM_BUILD_CACHE": str(self.caches[0]),
                    "CORTEXM_EXPORT_CACHE": str(self.caches[2])}
        self.env.pop("CORTEXM_LOWERING_TREE", None)  # the lowering source is --executorch-src, nothing inherited
        command = args.cortexm.split() if args.cortexm else cortexm()
        self.command = command + ["test", "--executorch-src", str(work)] + [a for c in args.target for a in ("-t", c)]
        if "cmsis-nn" in works or args.cmsis_nn_src:
            self.command += ["--cmsis-nn-src", str(works.get("cmsis-nn", args.cmsis_nn_src))]
        self.command += shlex.split(args.test_args or "")
        self.kept: set[Path] = set()
        # The baseline run's report, once there is one: every mutant's run is given it as a
        # contributor gives main's (--baseline): slower, larger or less accurate fails.
        self.baseline: Path | None = None

    def run(self, report: Path) -> tuple[int, dict | None]:
        report.unlink(missing_ok=True)
        against = ["--baseline", str(self.baseline)] if self.baseline else []
        with open(report.with_suffix(".log"), "w") as log:
            rc = subprocess.run(self.command + against + ["--json", str(report)], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=self.env).returncode
        return rc, json.loads(report.read_text()) if report.is_file() else None

    def keep_cached(self) -> None:
        """What is in the caches now (the baseline's builds and exports) stays."""
        self.kept = {p for c in self.caches if c.is_dir() for p in c.iterdir()}

    def prune(self) -> None:
        """Remove what a mutant's run added to the caches: a mutant is never seen again."""
        for c in self.caches:
            for p in c.iterdir() if c.is_dir() else ():
                if p in self.kept or p == self.caches[1]:
                    continue
                if p.is_dir():
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    p.unlink(missing_ok=True)

    def last_line(self, report: Path) -> str:
        lines = [l for l in report.with_suffix(".log").read_text(errors="replace").splitlines() if l.strip()]
        return next((l for l in reversed(lines) if l.startswith("error:")), lines[-1] if lines else "no output")


# --- judging -----------------------------------------------------------------------------

def judge(base: dict, mutated: dict, work: Path | list[Path]) -> list[list[str]]:
    """[stage, case, core, line] of everything that is worse than in the baseline (`work`: the
    working copies, whose paths are not what failed)."""
    works = [work] if isinstance(work, Path) else list(work)

    def norm(failure) -> tuple[str, str]:  # cache keys and the copies' paths are not what failed
        stage, line = failure
        for w in works:
            line = line.replace(str(w), "<work>")
        return stage, re.sub(r"[0-9a-f]{12,}", "<hex>", line)

    before = {(r["case"], r["core"]): r for r in base["results"]}
    worse = []
    for r in mutated["results"]:
        b = before.get((r["case"], r["core"]))
        if r["status"] in GOOD:
            continue
        known = {norm(f) for f in b["failures"]} if b else set()
        new = [f for f in r["failures"] if norm(f) not in known]
        if b is not None and b["status"] not in GOOD and not new:
            continue  # failed before, and in the same way
        if b is not None and b["status"] == "XFAIL" and r["status"] == "FAIL" and not new:
            # The same failure, no longer excused: a known defect is keyed to the content of the
            # file it is in, and the mutant changed that file. No check noticed the mutant here.
            worse.append([WITHDRAWN, r["case"], r["core"], r["reason"]])
            continue
        for stage, line in new or [(_status_stage(r), r["reason"])]:
            worse.append([stage, r["case"], r["core"], line])
    checks_before = {c["case"]: c for c in base.get("cross_core", [])}
    for c in mutated.get("cross_core", []):
        b = checks_before.get(c["case"])
        if not c["failed"] or (b is not None and b["failed"]):
            continue
        split = " | ".join(", ".join(g) for g in c["groups"])
        excused_before = b is not None and b.get("expected") and b["groups"] == c["groups"]
        worse.append([WITHDRAWN if excused_before else "cross-core", c["case"], "-",
                      f"cores disagree [{split}]; first at {c['first_difference']}"])
    return worse


def _status_stage(row: dict) -> str:
    """What to call a result that got worse without a new failure line."""
    text = f"{row['reason']} {row.get('details', '')}"
    if BUILD_FAILED.search(text):
        return "build"
    return {"XPASS": "xpass", "ERROR": "error"}.get(row["status"], row["status"].lower())  # degraded, slower, larger


def outcome_of(mutant: Mutant, rc: int, report: dict | None, base_rc: int, base: dict, runner: Runner,
               report_path: Path, count_golden: bool = False) -> Outcome:
    out = Outcome(mutant.name, mutant.kind, mutant.what, mutant.equivalent, "SURVIVED", exit=rc,
                  report=str(report_path))
    if report is None:
        worse = [["command", "-", "-", runner.last_line(report_path)]]
    else:
        worse = judge(base, report, list(runner.works.values()))
        if not worse and rc > base_rc:
            worse = [["exit status", "-", "-", f"exit {rc}, baseline {base_rc}"]]
    return _judged(out, worse, count_golden)


def check_kind(stage: str) -> str:
    return next((kind for kind, stages in CHECKS.items() if stage in stages), "other")


def _judged(out: Outcome, worse: list[list[str]], count_golden: bool = False) -> Outcome:
    """`out` with the verdict `worse` (judge's list) gives."""
    if worse:
        uncounted = {WITHDRAWN} if count_golden else {WITHDRAWN, GOLDEN}
        out.verdict = "KILLED" if any(w[0] not in uncounted for w in worse) else "SURVIVED"
        out.stages = list(dict.fromkeys(w[0] for w in worse))
        out.checks = list(dict.fromkeys(check_kind(s) for s in out.stages if s != WITHDRAWN))
        out.build_broken = "build" in out.stages or any(BUILD_FAILED.search(w[3]) for w in worse)
        out.evidence = worse[:5]
    return out


# --- the report --------------------------------------------------------------------------

def one_line(o: Outcome) -> str:
    by = "build broken" if o.build_broken else ", ".join(o.stages)
    line = f"{o.name:<48} {o.verdict:<11} {by:<34} {'/'.join(o.checks) or '-':<26} {o.seconds:5.0f} s"
    return line + (f"  {killer(o)}" if o.verdict == "KILLED" else "")


def killer(o: Outcome) -> str:
    """The first case and core that noticed a killed mutant, and at which stage."""
    stage, case, core, _ = next((w for w in o.evidence if w[0] not in (WITHDRAWN, GOLDEN)), o.evidence[0])
    return f"{case} {core} ({stage})"


def summary(outcomes: list[Outcome]) -> dict:
    rates = {}
    for kind in (*KINDS, "overall"):
        rows = [o for o in outcomes if (kind == "overall" or o.kind == kind) and o.verdict != "NOT APPLIED"]
        scored = [o for o in rows if not o.equivalent]
        killed = [o for o in scored if o.verdict == "KILLED"]
        rates[kind] = {"killed": len(killed), "of": len(scored), "build_broken": sum(o.build_broken for o in killed),
                       "equivalent": len(rows) - len(scored),
                       "rate": round(len(killed) / len(scored), 3) if scored else None,
                       # Of the scored mutants, how many each kind of check and each stage noticed.
                       "by_check": {check: sum(check in o.checks for o in scored) for check in (*CHECKS, "other")},
                       "by_stage": dict(Counter(s for o in scored for s in o.stages if s != WITHDRAWN))}
    return rates


def print_summary(outcomes: list[Outcome]) -> dict:
    rates = summary(outcomes)
    print("\nkill rate (mutants marked equivalent left out):")
    for kind, r in rates.items():
        if r["of"] or r["equivalent"]:
            pct = f"{100 * r['rate']:.0f} %" if r["rate"] is not None else "-"
            print(f"  {kind:<8} {r['killed']:>3} of {r['of']:<3} killed  {pct:>5}   "
                  f"({r['build_broken']} build broken, {r['equivalent']} equivalent); noticed by "
                  + ", ".join(f"{check} {n}" for check, n in r["by_check"].items())
                  + "; by stage: " + (", ".join(f"{stage} {n}" for stage, n in r["by_stage"].items()) or "-"))
    survivors = [o for o in outcomes if o.verdict == "SURVIVED"]
    if survivors:
        print("survivors:")
        for o in survivors:
            why = (f"equivalent: {o.equivalent}" if o.equivalent else "no check noticed it")
            if o.stages == [WITHDRAWN]:
                why += f" (only a known defect's excuse was withdrawn: {o.evidence[0][1]} {o.evidence[0][2]})"
            print(f"  {o.name}: {why}")
    for o in outcomes:
        if o.verdict == "KILLED" and o.equivalent:
            print(f"  note: {o.name} is marked equivalent but was killed: {o.evidence[0]}")
        if o.verdict == "NOT APPLIED":
            print(f"  not applied: {o.name}: {o.evidence[0][3]}")
    return rates


# --- main --------------------------------------------------------------------------------

def prepare_works(args, mutants: list[Mutant], work: Path) -> dict[str, Path]:
    """tree name -> its working copy, made (or reused) for every tree a selected mutant mutates;
    the ExecuTorch copy always (the runner is built from it)."""
    trees = {"executorch": args.executorch_src.resolve()}
    works = {"executorch": work}
    if any(m.tree == "cmsis-nn" for m in mutants):
        if not args.cmsis_nn_src:
            sys.exit("bench: the cmsis_nn mutants need --cmsis-nn-src TREE (the CMSIS-NN to mutate)")
        trees["cmsis-nn"] = Path(args.cmsis_nn_src).resolve()
        works["cmsis-nn"] = work.parent / "cmsis-nn-work"
        if not (trees["cmsis-nn"] / "Source").is_dir() or not (trees["cmsis-nn"] / "Include").is_dir():
            sys.exit(f"bench: {trees['cmsis-nn']} is not a CMSIS-NN tree (no Source/ and Include/)")
    for name, tree in trees.items():
        copy = works[name]
        if copy == tree or tree in copy.parents:
            sys.exit(f"bench: the working copy {copy} must be outside the tree {tree}")
        if name in {m.tree for m in mutants} or name == "executorch":
            print(f"working copy {copy}: {prepare_work(tree, copy)}", flush=True)
    return works


def default_work() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cortexm" / "mutants" / "work"


def select(only: str | None, kind: str | None) -> list[Mutant]:
    mutants = [Mutant.load(p) for k in KINDS for p in sorted((MUTANTS / k).glob("*.patch"))]
    wanted = only.split(",") if only else None
    return [m for m in mutants if (kind is None or m.kind == kind) and (wanted is None or any(w in m.name for w in wanted))]


def rejudge(mutants: list[Mutant], work: Path, json_path: Path | None, count_golden: bool = False) -> None:
    """The verdicts of an earlier run's reports, judged by this file's rules (exit statuses,
    which the reports do not keep, are left out)."""
    base = json.loads((work.parent / "baseline.json").read_text())
    outcomes = []
    for mutant in mutants:
        path = work.parent / "mutant-reports" / f"{mutant.name.replace('/', '-')}.json"
        if not path.is_file():
            continue
        out = Outcome(mutant.name, mutant.kind, mutant.what, mutant.equivalent, "SURVIVED", report=str(path))
        out = _judged(out, judge(base, json.loads(path.read_text()), [work, work.parent / "cmsis-nn-work"]), count_golden)
        outcomes.append(out)
        print(one_line(out), flush=True)
    rates = print_summary(outcomes)
    if json_path:
        json_path.write_text(json.dumps({"mutants": [asdict(o) for o in outcomes], "kill_rate": rates}, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executorch-src", required=True, type=Path, help="the ExecuTorch tree to mutate (only read)")
    parser.add_argument("--cmsis-nn-src", help="CMSIS-NN tree for the runner build (default: as cortexm finds it); "
                                               "the cmsis_nn mutants mutate a copy of it")
    parser.add_argument("-t", "--target", action="append", help="core (repeatable; default cortex-m7 and cortex-m55)")
    parser.add_argument("--only", help="only mutants whose name (e.g. cpp/01-conv2d-...) contains this (or one of these, "
                                       "comma-separated)")
    parser.add_argument("--kind", choices=KINDS)
    parser.add_argument("--work", type=Path, help="the working copy (default: $XDG_CACHE_HOME/cortexm/mutants/work)")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--keep-going", action="store_true", help="record a mutant that does not apply and go on")
    parser.add_argument("--count-golden-diffs", action="store_true",
                        help="count a dialect golden diff alone as a kill (a contributor regenerates them)")
    parser.add_argument("--cortexm", help="the cortexm command to judge, e.g. 'python -m cortexm' run from another "
                                          "checkout (default: the one installed)")
    parser.add_argument("--test-args", help="more arguments for cortexm test, e.g. '--grid exhaustive'")
    parser.add_argument("--rejudge", action="store_true",
                        help="run nothing: judge the reports an earlier run left in WORK/../mutant-reports again")
    args = parser.parse_args()
    args.target = args.target or list(CORES)
    tree, work = args.executorch_src.resolve(), (args.work or default_work()).resolve()
    if not (tree / "backends" / "cortex_m").is_dir():
        sys.exit(f"bench: {tree} has no backends/cortex_m")
    mutants = select(args.only, args.kind)
    if not mutants:
        sys.exit(f"bench: no mutant in {MUTANTS} matches")

    if args.rejudge:
        rejudge(mutants, work, args.json, args.count_golden_diffs)
        return
    works = prepare_works(args, mutants, work)
    runner = Runner(args, works)
    print(f"command: {' '.join(runner.command)} --json REPORT", flush=True)
    started = time.perf_counter()
    base_path = work.parent / "baseline.json"
    base_rc, base = runner.run(base_path)
    runner.baseline = base_path
    if base is None:
        sys.exit(f"bench: the baseline run wrote no report (exit {base_rc}): {runner.last_line(base_path)}")
    results, checks = base["results"], base.get("cross_core", [])
    if not any(r.get("sim") not in ("not run", "skipped", "-") for r in results):
        sys.exit(f"bench: nothing was simulated in the baseline: {results[0]['reason'] if results else 'no results'}")
    runner.keep_cached()
    statuses = Counter(r["status"] for r in results)
    print(f"baseline: {len(results)} results ({', '.join(f'{n} {s}' for s, n in statuses.items())}), "
          f"{sum(c['failed'] for c in checks)} of {len(checks)} cross-core checks failing, "
          f"exit {base_rc}, {time.perf_counter() - started:.0f} s\n", flush=True)

    outcomes = []
    for mutant in mutants:
        t = time.perf_counter()
        report_path = runner.reports / f"{mutant.name.replace('/', '-')}.json"
        saved = apply(mutant, works[mutant.tree])
        if isinstance(saved, str):
            if not args.keep_going:
                sys.exit(f"bench: {mutant.name} does not apply to its {mutant.tree} tree: {saved} "
                         "(--keep-going records it and goes on)")
            outcome = Outcome(mutant.name, mutant.kind, mutant.what, mutant.equivalent, "NOT APPLIED",
                              evidence=[["apply", "-", "-", saved]])
        else:
            try:
                rc, report = runner.run(report_path)
            finally:
                revert(saved, works[mutant.tree])
                runner.prune()
            outcome = outcome_of(mutant, rc, report, base_rc, base, runner, report_path, args.count_golden_diffs)
        outcome.seconds = round(time.perf_counter() - t, 1)
        outcomes.append(outcome)
        print(one_line(outcome), flush=True)

    rates = print_summary(outcomes)
    if args.json:
        args.json.write_text(json.dumps({
            "tree": str(tree), "work": {name: str(w) for name, w in works.items()}, "cores": args.target,
            "command": runner.command,
            "baseline": {"exit": base_rc, "report": str(base_path)},
            "mutants": [asdict(o) for o in outcomes], "kill_rate": rates,
            "seconds": round(time.perf_counter() - started, 1)}, indent=1))


if __name__ == "__main__":
    main()
