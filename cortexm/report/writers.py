"""The test app's results as files: JSON (every field of every result) and JUnit XML (one
testsuite per core, one testcase per case), and which grid parameter classes were simulated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

from cortexm import cases as case_registry
from cortexm.report.results import FAILED, CaseResult, CrossCore, Status


def grid_coverage(results: list[CaseResult]) -> dict[str, dict[str, dict[str, bool]]]:
    """Per grid operator: dimension -> parameter class -> whether a case that was simulated
    (on some core) exercised it."""
    from cortexm.cases import grid

    simulated = {r.case for r in results if r.run and r.run.sim == "ok"}
    ops = {c.grid.op for c in case_registry.all_cases() if c.grid and c.name in {r.case for r in results}}
    return {op: grid.coverage(op, simulated) for op in sorted(ops)}


def to_json(results: list[CaseResult], checks: list[CrossCore], meta: dict) -> str:
    from cortexm.base.text import json_dumps

    rows = [r.row() for r in results]
    return json_dumps({"meta": meta, "results": rows,
                       "cross_core": [dict(asdict(c), agree=c.agree, failed=c.failed) for c in checks],
                       "grid_coverage": grid_coverage(results)}, indent=1, default=str)


def to_junit(results: list[CaseResult], checks: Sequence[CrossCore] = ()) -> str:
    """JUnit XML: one testsuite per core, one testcase per case."""
    import xml.etree.ElementTree as ET

    from cortexm.base.text import xml_safe as x

    suites = ET.Element("testsuites", name="cortexm")
    for core in dict.fromkeys(r.core for r in results):
        rs = sorted((r for r in results if r.core == core), key=lambda r: r.case)  # shards merge to the same file
        suite = ET.SubElement(suites, "testsuite", name=x(core), tests=str(len(rs)),
                              failures=str(sum(r.status in FAILED and r.status != Status.ERROR for r in rs)),
                              errors=str(sum(r.status == Status.ERROR for r in rs)),
                              skipped=str(sum(r.status in (Status.XFAIL, Status.NOT_RUN) for r in rs)),
                              time=f"{sum(sum(r.seconds.values()) for r in rs):.3f}")
        for r in rs:
            row = r.row()
            tc = ET.SubElement(suite, "testcase", classname=x(f"cortexm.{core}"), name=x(r.case),
                               time=f"{sum(r.seconds.values()):.3f}")
            if r.status in FAILED and r.status != Status.ERROR:
                ET.SubElement(tc, "failure", message=x(r.reason)).text = x(r.details)
            elif r.status == Status.ERROR:
                ET.SubElement(tc, "error", message=x(r.reason)).text = x(r.details)
            elif r.status == Status.XFAIL:
                ET.SubElement(tc, "skipped", message=x(f"expected failure: {r.reason}"))
            elif r.status == Status.NOT_RUN:
                ET.SubElement(tc, "skipped", message=x(r.reason))
            props = ET.SubElement(tc, "properties")
            for name in ("dialect", "verify", "sim", "memory", "semantic", "semantic_lsb", "max_lsb", "mismatches",
                         "instructions", "perf"):
                ET.SubElement(props, "property", name=name, value=x(str(row[name])))
    if checks:
        suite = ET.SubElement(suites, "testsuite", name="cross-core", tests=str(len(checks)),
                              failures=str(sum(c.failed for c in checks)), errors="0", skipped="0")
        for c in sorted(checks, key=lambda c: c.case):
            tc = ET.SubElement(suite, "testcase", classname="cortexm.cross-core", name=x(c.case))
            if c.failed:
                ET.SubElement(tc, "failure", message=x(c.line()))
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"
