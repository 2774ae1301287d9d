"""Which lines, functions and branches of the cortex_m kernels and of CMSIS-NN a run executed.

What enters: runners built with gcov counters (BuildOptions(coverage=True)) after the
runs. What leaves: per core, per file, lines, functions and branches executed, as a table,
as Cobertura XML and lcov files that CI tools read, and the branches never taken (`NEVER`,
with the source line). CMSIS-NN's Include/ counts too: the requantize and its rounding
divide are inline functions there, compiled into each kernel (their counts are summed).

On a Cortex-M core the runner writes its counters at the end of each run into the
run's folder (kernels/runner/coverage.c, one file of records); `absorb` turns them into
.gcda files and merges them into the runner's total with the toolchain's gcov-tool. On
the host, libgcov accumulates them beside the objects itself. Runs of one runner must
not overlap. The toolchain's gcov (its JSON output) gives the counts.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

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
NEVER = "branches-never-taken.txt"  # beside lcov.info: each branch no run took, with its line
WANTED = ("executorch/backends/cortex_m/ops/", "cmsis-nn/Source/", "cmsis-nn/Include/")


def reset(runner) -> None:
    """Counters back to zero before the runs."""
    work = runner.work()
    if work is not None:
        shutil.rmtree(work / TOTAL, ignore_errors=True)
        for gcda in work.rglob("*.gcda"):
            gcda.unlink()


def absorb(runner, records: bytes) -> None:
    """Adds one run's counters (the runner's coverage.bin) to the runner's total."""
    work = runner.work()
    if work is None:
        return
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        run = Path(tmp) / "run"
        name, offset = None, 0
        while offset < len(records):
            tag = records[offset:offset + 1]
            (length,) = struct.unpack_from("<I", records, offset + 1)
            data = records[offset + 5: offset + 5 + length]
            offset += 5 + length
            if tag == b"F":
                name = run / data.decode().lstrip("/")
                name.parent.mkdir(parents=True, exist_ok=True)
                name.write_bytes(b"")
            elif tag == b"D" and name is not None:
                with open(name, "ab") as f:
                    f.write(data)
        total = work / TOTAL
        if not total.exists():
            run.rename(total)
            return
        done = subprocess.run([_arm_tool("gcov-tool"), "merge", str(total), str(run), "-o", str(total)],
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise CortexmError(f"gcov-tool could not merge a run's counters: {(done.stderr.strip().splitlines() or [''])[-1]}")


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
            shutil.copyfile(gcda, target)
    roots = {"executorch": Path(trees["executorch-runtime"]), "cmsis-nn": Path(trees["cmsis-nn"])}
    lines: dict[str, dict[int, int]] = {}
    functions: dict[str, dict[tuple[int, str], int]] = {}
    # path -> line -> the counts of its branch arcs (an inline function's copies summed arc by arc)
    branches: dict[str, dict[int, list[int]]] = {}
    notes = [*(work / "CMakeFiles" / "cortex_m_kernels.dir").rglob("*.gcno"), *(work / "cmsis-nn").rglob("*.gcno")]
    for note in notes:
        # --branch-probabilities: without it gcov's JSON leaves every line's branches empty.
        done = subprocess.run([gcov, "--branch-probabilities", "--json-format", "--stdout", str(note.with_suffix(".gcda"))],
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
    files = [FileCoverage(path, len(lines[path]), sum(1 for c in lines[path].values() if c),
                          len(functions.get(path, {})), sum(1 for c in functions.get(path, {}).values() if c),
                          sum(len(a) for a in branches.get(path, {}).values()),
                          sum(1 for a in branches.get(path, {}).values() for c in a if c))
             for path in sorted(lines)]
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "lcov.info").write_text(_lcov(lines, functions, branches, roots))
    (out_dir / "cobertura.xml").write_text(_cobertura(lines, branches, roots))
    (out_dir / NEVER).write_text(_never_taken(lines, branches, roots))
    return files


def _never_taken(lines: dict, branches: dict, roots: dict[str, Path]) -> str:
    """One line per branch arc no run took, in a line that ran: `path:line arc k of n: source`."""
    out = []
    for path in sorted(lines):
        source = _source_lines(path, roots)
        for number, arcs in sorted(branches.get(path, {}).items()):
            if not lines[path].get(number):
                continue  # the line never ran: the line coverage says so already
            text = source[number - 1].strip() if 0 < number <= len(source) else ""
            out += [f"{path}:{number} arc {k} of {len(arcs)}: {text}" for k, c in enumerate(arcs) if not c]
    return "\n".join(out) + ("\n" if out else "")


def _source_lines(path: str, roots: dict[str, Path]) -> list[str]:
    try:
        return Path(_absolute(path, roots)).read_text(errors="replace").splitlines()
    except OSError:
        return []


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
