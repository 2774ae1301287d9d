"""The semantic tolerance table, measured: how far each cortex_m operator's results depart
from the quantized model's, over every case of one or more `cortexm test --json` reports.

    cortexm test -t cortex-m7 -t cortex-m55 --grid full --sim none --json full.json
    python bench/tolerances.py full.json [more.json ...] [--markdown]

In: the reports' per-point records (CaseResult.semantic_points: operator, largest difference,
histogram of differences in LSB, as cortexm.semantic.model records them; each point measures
one call, the program's inputs to it forced into the model). Out: per operator and core, the
points and elements measured, the share of elements at 0, 1, 2 and more LSB, the largest
difference, and the tolerance cortexm.semantic.judge allows, flagged where the measurement
exceeds it (a real departure, or a tolerance that is wrong). Exit status 0: a benchmark.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def allowed(op: str, core_name: str) -> float:
    """The semantic reference's tolerance for `op` on that core's CMSIS-NN variant, in LSB."""
    from cortexm.base.targets import core
    from cortexm.semantic.judge import tolerance

    return tolerance(op, core(core_name).backend).lsb


def measure(reports: list[dict]) -> dict[tuple[str, str], dict]:
    """(operator, core) -> points, elements, histogram, largest difference, cases over it."""
    table: dict[tuple[str, str], dict] = defaultdict(lambda: {"points": 0, "elements": 0, "histogram": defaultdict(int),
                                                                "max": 0.0, "over": []})
    for report in reports:
        for result in report["results"]:
            for point in result.get("semantic_points") or []:
                op = point.get("op") or "(unmapped)"
                row = table[(op, result["core"])]
                row["points"] += 1
                for lsb, count in (point.get("histogram") or {}).items():
                    row["histogram"][lsb] += count
                    row["elements"] += count
                row["max"] = max(row["max"], point["max_lsb"])
                if point["max_lsb"] > allowed(op, result["core"]):
                    row["over"].append(result["case"])
    return dict(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown (for docs/commands.md)")
    args = parser.parse_args()
    table = measure([json.loads(p.read_text()) for p in args.reports])
    header = ["operator", "core", "points", "elements", "0 LSB", "1 LSB", "2 LSB", "more", "max", "tolerance", "over"]
    rows = []
    for (op, core), row in sorted(table.items()):
        hist, n = row["histogram"], max(row["elements"], 1)
        more = sum(c for k, c in hist.items() if k not in ("0", "1", "2"))
        share = lambda c, n=n: f"{100 * c / n:.2f} %"  # noqa: E731
        rows.append([op.removeprefix("cortex_m::"), core, row["points"], row["elements"], share(hist.get("0", 0)),
                     share(hist.get("1", 0)), share(hist.get("2", 0)), share(more), f"{row['max']:g}",
                     allowed(op, core), ", ".join(sorted(set(row["over"]))[:4]) or "-"])
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + " --- |" * len(header))
        for r in rows:
            print("| " + " | ".join(str(c) for c in r) + " |")
    else:
        widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=True)]
        for r in [header, *rows]:
            print("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)))


if __name__ == "__main__":
    main()
