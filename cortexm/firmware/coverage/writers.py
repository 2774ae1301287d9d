"""lcov and Cobertura files, which CI tools read.

What enters: gcov's counts per source file (path relative to its tree -> line -> count, functions,
branch arcs) and the trees' roots. What leaves: the text of an lcov.info and of a cobertura.xml,
each source named by its absolute path; and the path of a source relative to its tree.
"""

from __future__ import annotations

from pathlib import Path


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
