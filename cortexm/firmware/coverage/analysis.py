"""The counts of a runner's runs, read with the toolchain's gcov: per file, per branch, per call site.

What enters: a runner's build folder after its runs (`cortexm.firmware.coverage.records`: the
merged counters, each run's own, the value counters) and its source trees. What leaves: per
file, lines, functions and branches executed (FileCoverage, `totals`), written as lcov and
Cobertura (`cortexm.firmware.coverage.writers`); the branches never taken (NEVER), the arcs
only the scope's programs take (SCOPE_ONLY) and each call site's value counters (VALUE_SITES).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cortexm.base import writes
from cortexm.base.errors import CortexmError
from cortexm.firmware.coverage.records import RUNS, TOTAL, VALUES, _arm_tool
from cortexm.firmware.coverage.writers import _absolute, _cobertura, _lcov, _relative


@dataclass(frozen=True)
class FileCoverage:
    path: str  # relative to its tree: backends/cortex_m/ops/op_quantized_conv2d.cpp, Source/...
    lines: int
    lines_executed: int
    functions: int
    functions_executed: int
    branches: int = 0  # gcov's branch arcs (each outcome of a condition)
    branches_taken: int = 0


NEVER = "branches-never-taken.txt"  # beside lcov.info: each branch no run took, with its line
VALUE_SITES = "value-counters.txt"  # beside lcov.info: each call site's value counters, with its line
VALUE_KINDS = {"R": "requantize", "L": "lower clamp", "U": "upper clamp", "M": "MAX", "N": "MIN"}  # value_counters.h
CHOICES = {"MAX": ">", "MIN": "<"}  # MAX(a, b) counts the times b > a, MIN(a, b) the times b < a
SCOPE_ONLY = "branches-only-the-scope-takes.txt"  # beside it: arcs no case outside the scope took
WANTED = ("executorch/backends/cortex_m/ops/", "cmsis-nn/Source/", "cmsis-nn/Include/")


@dataclass(frozen=True)
class ValueSite:
    kind: str  # a VALUE_KINDS name
    path: str  # relative to its tree, as FileCoverage's
    line: int
    # requantize: values, rounded up, half steps >= 0, < 0; clamp: vectors, per lane changed;
    # MAX(a, b) / MIN(a, b): calls, times b was chosen (b > a / b < a)
    counts: tuple[int, ...]

    def never(self) -> str | None:
        """What this site never did, if anything a boundary case should make it do."""
        if self.kind == "requantize":
            missing = [s for s, n in (("+", self.counts[2]), ("-", self.counts[3])) if not n]
            return f"no {' or '.join(missing)} half step" if missing else None
        if self.kind in CHOICES:
            return None if self.counts[1] else f"never b {CHOICES[self.kind]} a"
        lanes = [str(k) for k, n in enumerate(self.counts[1:]) if not n]
        return f"changed no value in lane {', '.join(lanes)}" if lanes else None

    def describe(self) -> str:
        c = self.counts
        if self.kind == "requantize":
            return f"{c[0]:,} values, {c[1]:,} rounded up, half steps +{c[2]:,} -{c[3]:,}"
        if self.kind in CHOICES:
            return f"{c[0]:,} calls, b {CHOICES[self.kind]} a in {c[1]:,}"
        lanes = "raised" if self.kind == "lower clamp" else "lowered"
        return f"{c[0]:,} vectors, lanes {lanes} " + " ".join(f"{n:,}" for n in c[1:])


def values(runner, out_dir: Path) -> list[ValueSite]:
    """The runner's value counters per call site (empty when it kept none: a hosted core, or a
    runner without counters); written to OUT/VALUE_SITES with each site's source line."""
    work = runner.work()
    if work is None or not (work / VALUES).is_file():
        return []
    roots = _roots(runner.trees())
    sums = json.loads((work / VALUES).read_text())
    lost = sum(counts[0] for key, counts in sums.items() if key.startswith("X "))
    sites = sorted((ValueSite(VALUE_KINDS[key[0]], _relative(Path(where.rsplit(":", 1)[0]), roots),
                              int(where.rsplit(":", 1)[1]), tuple(counts))
                    for key, counts in sums.items() if key[0] in VALUE_KINDS for where in [key[2:]]),
                   key=lambda site: (site.path, site.line, site.kind))
    out = []
    for site in sites:
        text = _line(_source_lines(site.path, roots), site.line)
        never = site.never()
        out.append(f"{site.path}:{site.line} {site.kind}: {site.describe()}{f' ({never})' if never else ''}: {text}")
    if lost:
        out.append(f"(call sites lost in runs whose table was full: {lost})")
    out_dir.mkdir(parents=True, exist_ok=True)
    writes.atomic(out_dir / VALUE_SITES, "\n".join(out) + ("\n" if out else ""))
    return sites


def collect(runner, out_dir: Path) -> list[FileCoverage]:
    """The runner's counters read with its toolchain's gcov (JSON): writes OUT/lcov.info and
    OUT/cobertura.xml and returns the per-file summary of the cortex_m kernels and CMSIS-NN
    (files that never ran included, at 0)."""
    work = runner.work()
    trees = runner.trees()
    if work is None or not trees:
        raise CortexmError(f"{runner.elf}: no build folder recorded, so no coverage counters to read")
    gcov = "gcov" if runner.core.hosted else _arm_tool("gcov")
    total = work / TOTAL
    if total.is_dir():  # a core's merged counters go where gcov looks for them: beside the objects
        for gcda in total.rglob("*.gcda"):
            target = Path("/") / gcda.relative_to(total)
            target.parent.mkdir(parents=True, exist_ok=True)
            writes.copy(gcda, target)
    roots = _roots(trees)
    notes = [*(work / "CMakeFiles" / "cortex_m_kernels.dir").rglob("*.gcno"), *(work / "cmsis-nn").rglob("*.gcno")]
    lines, functions, branches = _read(gcov, [note.with_suffix(".gcda") for note in notes], work, roots)
    files = [FileCoverage(path, len(lines[path]), sum(1 for c in lines[path].values() if c),
                          len(functions.get(path, {})), sum(1 for c in functions.get(path, {}).values() if c),
                          sum(len(a) for a in branches.get(path, {}).values()),
                          sum(1 for a in branches.get(path, {}).values() for c in a if c))
             for path in sorted(lines)]
    out_dir.mkdir(parents=True, exist_ok=True)
    writes.atomic(out_dir / "lcov.info", _lcov(lines, functions, branches, roots))
    writes.atomic(out_dir / "cobertura.xml", _cobertura(lines, branches, roots))
    writes.atomic(out_dir / NEVER, _never_taken(lines, branches, roots))
    return files


def _roots(trees: dict) -> dict[str, Path]:
    return {"executorch": Path(trees["executorch-runtime"]), "cmsis-nn": Path(trees["cmsis-nn"])}


def _read(gcov: str, gcdas: list[Path], work: Path, roots: dict[str, Path]) -> tuple[dict, dict, dict]:
    """gcov's counts of the given .gcda files (each beside its .gcno): per wanted source file,
    line -> count, (line, function) -> count, and line -> the counts of its branch arcs (an
    inline function's copies summed arc by arc)."""
    lines: dict[str, dict[int, int]] = {}
    functions: dict[str, dict[tuple[int, str], int]] = {}
    branches: dict[str, dict[int, list[int]]] = {}
    for gcda in gcdas:
        # --branch-probabilities: without it gcov's JSON leaves every line's branches empty.
        done = subprocess.run([gcov, "--branch-probabilities", "--json-format", "--stdout", str(gcda)],
                              cwd=work, capture_output=True, text=True, timeout=120)
        if done.returncode != 0 or not done.stdout.strip():
            continue
        for report in _json_documents(done.stdout):
            for f in report.get("files", []):
                path = _relative(Path(f["file"]), roots)
                if not path.startswith(WANTED):
                    continue
                file_lines = lines.setdefault(path, {})
                file_branches = branches.setdefault(path, {})
                for line in f["lines"]:
                    number = line["line_number"]
                    file_lines[number] = file_lines.get(number, 0) + line["count"]
                    arcs = [b["count"] for b in line.get("branches", []) if not b.get("throw")]
                    if arcs:
                        known = file_branches.setdefault(number, [0] * len(arcs))
                        known.extend([0] * (len(arcs) - len(known)))
                        for k, count in enumerate(arcs):
                            known[k] += count
                file_functions = functions.setdefault(path, {})
                for fn in f["functions"]:
                    key = (fn["start_line"], fn.get("demangled_name", fn["name"]))
                    file_functions[key] = file_functions.get(key, 0) + fn["execution_count"]
    return lines, functions, branches


def attribute(runner, out_dir: Path, in_scope) -> list[str]:
    """The branch arcs that only programs of the scope took (`in_scope(program name)`), each
    with the smallest such program (fewest bytes), from the runs `absorb` kept; written to
    OUT/SCOPE_ONLY and returned. Empty when no run of the scope was kept (a hosted core's
    counters are not kept run by run)."""
    work = runner.work()
    runs = sorted((work / RUNS).glob("*")) if work is not None and (work / RUNS).is_dir() else []
    programs = {run: json.loads((run / "program.json").read_text()) for run in runs}
    if not any(in_scope(program["name"]) for program in programs.values()):
        return []
    roots, gcov = _roots(runner.trees()), _arm_tool("gcov")
    outside: set[tuple[str, int, int]] = set()
    first: dict[tuple[str, int, int], tuple[int, str]] = {}  # arc -> (bytes, program) of the smallest scope run
    arcs_of: dict[tuple[str, int], int] = {}
    for run, program in programs.items():
        gcdas = []
        for gcda in run.rglob("*.gcda"):
            note = Path("/") / gcda.relative_to(run).with_suffix(".gcno")
            if note.is_file():
                writes.remove(gcda.with_suffix(".gcno"))
                writes.link(note, gcda.with_suffix(".gcno"))  # gcov reads the notes beside the data
                gcdas.append(gcda)
        _, _, branches = _read(gcov, gcdas, work, roots)
        for path, by_line in branches.items():
            for number, counts in by_line.items():
                arcs_of[(path, number)] = max(arcs_of.get((path, number), 0), len(counts))
                for k, count in enumerate(counts):
                    if not count:
                        continue
                    arc = (path, number, k)
                    if not in_scope(program["name"]):
                        outside.add(arc)
                    elif arc not in first or (program["bytes"], program["name"]) < first[arc]:
                        first[arc] = (program["bytes"], program["name"])
    out = []
    for (path, number, k), (size, name) in sorted(first.items()):
        if (path, number, k) in outside:
            continue
        text = _line(_source_lines(path, roots), number)
        out.append(f"{path}:{number} arc {k} of {arcs_of[(path, number)]}: {text}  <- {name} ({size:,} bytes)")
    out_dir.mkdir(parents=True, exist_ok=True)
    writes.atomic(out_dir / SCOPE_ONLY, "\n".join(out) + ("\n" if out else ""))
    return out


def _never_taken(lines: dict, branches: dict, roots: dict[str, Path]) -> str:
    """One line per branch arc no run took, in a line that ran: `path:line arc k of n: source`."""
    out = []
    for path in sorted(lines):
        source = _source_lines(path, roots)
        for number, arcs in sorted(branches.get(path, {}).items()):
            if not lines[path].get(number):
                continue  # the line never ran: the line coverage says so already
            text = _line(source, number)
            out += [f"{path}:{number} arc {k} of {len(arcs)}: {text}" for k, c in enumerate(arcs) if not c]
    return "\n".join(out) + ("\n" if out else "")


def _source_lines(path: str, roots: dict[str, Path]) -> list[str]:
    try:
        return Path(_absolute(path, roots)).read_text(errors="replace").splitlines()
    except OSError:
        return []


def _line(source: list[str], number: int) -> str:
    """Line `number` (from 1) of a source, stripped ("" past its end)."""
    return source[number - 1].strip() if 0 < number <= len(source) else ""


def never_taken(out_dir: Path) -> list[str]:
    """The lines of a collected coverage folder's NEVER file."""
    file = out_dir / NEVER
    return file.read_text().splitlines() if file.is_file() else []


def _json_documents(text: str) -> list[dict]:
    """gcov --stdout prints one JSON document per data file, one per line."""
    return [json.loads(line) for line in text.splitlines() if line.strip().startswith("{")]


def totals(files: list[FileCoverage], prefix: str | tuple[str, ...]) -> tuple[int, int, int, int, int, int]:
    """(lines executed, lines, functions executed, functions, branches taken, branches) of the
    files under `prefix`."""
    picked = [f for f in files if f.path.startswith(prefix)]
    return (sum(f.lines_executed for f in picked), sum(f.lines for f in picked),
            sum(f.functions_executed for f in picked), sum(f.functions for f in picked),
            sum(f.branches_taken for f in picked), sum(f.branches for f in picked))
