"""Which lines, functions and branches of the cortex_m kernels and of CMSIS-NN a run executed.

What enters: runners built with gcov counters (BuildOptions(coverage=True)) after the
runs. What leaves: per core, per file, lines, functions and branches executed, as a table,
as Cobertura XML and lcov files that CI tools read, and the branches never taken (`NEVER`,
with the source line). CMSIS-NN's Include/ counts too: the requantize and its rounding
divide are inline functions there, compiled into each kernel (their counts are summed).

On a Cortex-M core the runner writes its counters at the end of each run into the
run's folder (kernels/runner/coverage.c, one file of records); `absorb` turns them into
.gcda files and merges them into the runner's total with the toolchain's gcov-tool. On
the host, libgcov accumulates them beside the objects itself, so hosted runs of one runner
must not overlap; on a core, runs overlap and `absorb` takes one run of a runner at a time.
The toolchain's gcov (its JSON output) gives the counts.

A runner built with value counters also writes them (kernels/runner/value_counters.h: per
call site of CMSIS-NN's requantize, MVE clamps, MAX and MIN, the values, the exact half steps
met and the values a clamp or MAX/MIN changed, per lane for MVE), where a branch count says
nothing; `absorb` sums them and `values` lists them per site.

A core's runs are also kept one by one (the files each run executed, with its program's
name and size), so `attribute` can say which branch arcs only the exhaustive scope's
programs take, and the smallest program that takes each: the case to add to a quick suite.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import threading
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from cortexm.base import writes
from cortexm.base.errors import CortexmError


@dataclass(frozen=True)
class FileCoverage:
    path: str  # relative to its tree: backends/cortex_m/ops/op_quantized_conv2d.cpp, Source/...
    lines: int
    lines_executed: int
    functions: int
    functions_executed: int
    branches: int = 0  # gcov's branch arcs (each outcome of a condition)
    branches_taken: int = 0


TOTAL = "coverage-total"  # in the runner's build folder: the merged counters of every run so far
RUNS = "coverage-runs"  # beside it: each run's own counters (only the files it executed) and its program
NEVER = "branches-never-taken.txt"  # beside lcov.info: each branch no run took, with its line
VALUES = "value-counters.json"  # beside it: every run's value counters, summed per call site
VALUE_SITES = "value-counters.txt"  # beside lcov.info: each call site's value counters, with its line
VALUE_KINDS = {"R": "requantize", "L": "lower clamp", "U": "upper clamp", "M": "MAX", "N": "MIN"}  # value_counters.h
CHOICES = {"MAX": ">", "MIN": "<"}  # MAX(a, b) counts the times b > a, MIN(a, b) the times b < a
SCOPE_ONLY = "branches-only-the-scope-takes.txt"  # beside it: arcs no case outside the scope took
COUNTER_TAGS = range(0x01A10000, 0x01B10000, 0x20000)  # gcov-io.h: GCOV_TAG_FOR_COUNTER(0..7)
_ABSORBING: defaultdict[Path, threading.Lock] = defaultdict(threading.Lock)  # a runner's folder -> its runs, one at a time
WANTED = ("executorch/backends/cortex_m/ops/", "cmsis-nn/Source/", "cmsis-nn/Include/")


def reset(runner) -> None:
    """Counters back to zero before the runs."""
    work = runner.work()
    if work is not None:
        writes.remove_tree(work / TOTAL)
        writes.remove_tree(work / RUNS)
        writes.remove(work / VALUES)
        for gcda in work.rglob("*.gcda"):
            writes.remove(gcda)


def absorb(runner, records: bytes, program: Path | None = None) -> None:
    """Adds one run's counters (the runner's coverage.bin) to the runner's total, and keeps
    them apart, named by the `program` that ran."""
    work = runner.work()
    if work is None:
        return
    with _ABSORBING[work], writes.temporary_folder(work) as tmp:
        run = Path(tmp) / "run"
        name, offset, values = None, 0, []
        while offset < len(records):
            tag = records[offset:offset + 1]
            (length,) = struct.unpack_from("<I", records, offset + 1)
            data = records[offset + 5: offset + 5 + length]
            offset += 5 + length
            if tag == b"F":
                name = run / data.decode().lstrip("/")
                name.parent.mkdir(parents=True, exist_ok=True)
                writes.atomic(name, b"")
            elif tag == b"D" and name is not None:
                with writes.stream(name, "ab") as f:
                    f.write(data)
            elif tag == b"V":
                values.append(data)
        if values:
            _add_values(work / VALUES, values)
        if program is not None:
            _keep(run, work / RUNS, program)
        total = work / TOTAL
        if not total.exists():
            writes.move(run, total)
            return
        done = subprocess.run([_arm_tool("gcov-tool"), "merge", str(total), str(run), "-o", str(total)],
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise CortexmError(f"gcov-tool could not merge a run's counters: {(done.stderr.strip().splitlines() or [''])[-1]}")


def _add_values(path: Path, records: list[bytes]) -> None:
    """A run's 'V' records (kind, line, five counts, file name) added to the sums in `path`."""
    sums = json.loads(path.read_text()) if path.is_file() else {}
    for data in records:
        kind, line, *counts = struct.unpack_from("<7I", data)
        key = f"{chr(kind)} {data[28:].decode(errors='replace')}:{line}"
        sums[key] = [a + b for a, b in zip(sums.get(key, [0] * 5), counts, strict=False)]
    writes.atomic(path, json.dumps(sums))


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


def _keep(run: Path, runs: Path, program: Path) -> None:
    """A copy of the .gcda files a run executed, under RUNS/<sequence>/, with its program."""
    kept = runs / f"{len(list(runs.glob('*'))) if runs.is_dir() else 0:06d}"
    for gcda in run.rglob("*.gcda"):
        if _executed(gcda.read_bytes()):
            target = kept / gcda.relative_to(run)
            target.parent.mkdir(parents=True, exist_ok=True)
            writes.copy(gcda, target)
    kept.mkdir(parents=True, exist_ok=True)
    # NAME.isolated.pte is the memory oracle's build of NAME's program (cortexm.lowering.export).
    name = program.name.removesuffix(".pte").removesuffix(".isolated")
    main = program.with_name(f"{name}.pte")
    size = (main if main.is_file() else program).stat().st_size
    writes.atomic(kept / "program.json", json.dumps({"name": name, "bytes": size}))


def _executed(gcda: bytes) -> bool:
    """Whether a .gcda holds any non-zero counter (GCC 12's format: a 16-byte header, then
    records of tag, length in bytes and data; a counter record of negative length is that
    many zero counters)."""
    offset = 16
    while offset + 8 <= len(gcda):
        tag, length = struct.unpack_from("<Ii", gcda, offset)
        offset += 8
        if length < 0:
            continue
        if tag in COUNTER_TAGS and any(gcda[offset:offset + length]):
            return True
        offset += length
    return False


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


def _absolute(path: str, roots: dict[str, Path]) -> str:
    name, _, rest = path.partition("/")
    return str(roots[name] / rest) if name in roots else path


def _lcov(lines: dict, functions: dict, branches: dict, roots: dict[str, Path]) -> str:
    out = ["TN:cortexm"]
    for path in sorted(lines):
        out.append(f"SF:{_absolute(path, roots)}")
        fns = functions.get(path, {})
        out += [f"FN:{line},{name}" for (line, name) in sorted(fns)]
        out += [f"FNDA:{count},{name}" for (line, name), count in sorted(fns.items())]
        out += [f"FNF:{len(fns)}", f"FNH:{sum(1 for c in fns.values() if c)}"]
        arcs = sorted(branches.get(path, {}).items())
        # lcov: "-" for a branch whose line never ran, else the times it was taken.
        out += [f"BRDA:{n},0,{k},{c if lines[path].get(n) else '-'}" for n, counts in arcs for k, c in enumerate(counts)]
        out += [f"BRF:{sum(len(c) for _, c in arcs)}", f"BRH:{sum(1 for _, c in arcs for x in c if x)}"]
        out += [f"DA:{n},{c}" for n, c in sorted(lines[path].items())]
        out += [f"LF:{len(lines[path])}", f"LH:{sum(1 for c in lines[path].values() if c)}", "end_of_record"]
    return "\n".join(out) + "\n"


def _rate(branches: dict) -> tuple[int, int, str]:
    """(taken, total, rate) of branch arcs: line -> counts."""
    total = sum(len(c) for c in branches.values())
    taken = sum(1 for c in branches.values() for x in c if x)
    return taken, total, f"{taken / max(total, 1):.4f}"


def _cobertura(lines: dict, branches: dict, roots: dict[str, Path]) -> str:
    import xml.etree.ElementTree as ET

    valid = sum(len(v) for v in lines.values())
    covered = sum(1 for v in lines.values() for c in v.values() if c)
    taken, total, rate = _rate({(p, n): c for p, b in branches.items() if p in lines for n, c in b.items()})
    root = ET.Element("coverage", {"line-rate": f"{covered / max(valid, 1):.4f}", "branch-rate": rate,
                                   "lines-covered": str(covered), "lines-valid": str(valid),
                                   "branches-covered": str(taken), "branches-valid": str(total), "version": "cortexm",
                                   "timestamp": "0"})
    ET.SubElement(ET.SubElement(root, "sources"), "source").text = "/"
    packages = ET.SubElement(root, "packages")
    for package in sorted({p.rsplit("/", 1)[0] for p in lines}):
        files = {p: v for p, v in lines.items() if p.rsplit("/", 1)[0] == package}
        p_valid, p_covered = sum(len(v) for v in files.values()), sum(1 for v in files.values() for c in v.values() if c)
        package_rate = _rate({(p, n): c for p in files for n, c in branches.get(p, {}).items()})[2]
        element = ET.SubElement(packages, "package", {"name": package, "line-rate": f"{p_covered / max(p_valid, 1):.4f}",
                                                      "branch-rate": package_rate})
        classes = ET.SubElement(element, "classes")
        for path, file_lines in sorted(files.items()):
            hit = sum(1 for c in file_lines.values() if c)
            file_branches = branches.get(path, {})
            cls = ET.SubElement(classes, "class", {"name": path.rsplit("/", 1)[1], "filename": _absolute(path, roots).lstrip("/"),
                                                   "line-rate": f"{hit / max(len(file_lines), 1):.4f}",
                                                   "branch-rate": _rate(file_branches)[2]})
            ET.SubElement(cls, "methods")
            xml_lines = ET.SubElement(cls, "lines")
            for number, count in sorted(file_lines.items()):
                attributes = {"number": str(number), "hits": str(count)}
                arcs = file_branches.get(number)
                if arcs:
                    taken_here = sum(1 for c in arcs if c)
                    attributes.update({"branch": "true", "condition-coverage":
                                       f"{100 * taken_here // len(arcs)}% ({taken_here}/{len(arcs)})"})
                ET.SubElement(xml_lines, "line", attributes)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _relative(path: Path, roots: dict[str, Path]) -> str:
    """'executorch/backends/...' or 'cmsis-nn/Source/...' for a source under one of the trees."""
    for name, root in roots.items():
        for base in (root, root.resolve()):
            try:
                return f"{name}/{path.relative_to(base)}"
            except ValueError:
                continue
    return str(path)


def _arm_tool(name: str) -> str:
    from cortexm.firmware.tools import toolchain_prefix

    tool = toolchain_prefix() + name
    if shutil.which(tool) is None:
        raise CortexmError(f"{tool} not found: the Arm toolchain's {name} reads the Cortex-M counters")
    return tool


def totals(files: list[FileCoverage], prefix: str | tuple[str, ...]) -> tuple[int, int, int, int, int, int]:
    """(lines executed, lines, functions executed, functions, branches taken, branches) of the
    files under `prefix`."""
    picked = [f for f in files if f.path.startswith(prefix)]
    return (sum(f.lines_executed for f in picked), sum(f.lines for f in picked),
            sum(f.functions_executed for f in picked), sum(f.functions for f in picked),
            sum(f.branches_taken for f in picked), sum(f.branches for f in picked))
