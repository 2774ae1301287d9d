"""Output: what a run found (results.py) and its summary, files and merge; terminal tables and the
inspection report (plain when not on a TTY); accuracy against the float model in words
(accuracy.py); a run's kernel coverage (coverage.py); fit.py places a program and its runner on
a board's memory (boards.toml), with the runner's flash and RAM from cortexm.firmware.size."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from cortexm.base.text import raw, visible

_console: Console | None = None


class _Console(Console):
    """Rich writes its own styling codes to the raw stream, so the text it is given is made
    visible first (cortexm.base.text): rich passes escape sequences in text through."""

    def print(self, *objects, **kwargs) -> None:
        super().print(*(visible(o) if isinstance(o, str) else o for o in objects), **kwargs)


def console() -> Console:
    global _console
    if _console is None:
        import sys

        # Off a terminal rich assumes 80 columns and wraps tables; logs and pipes want whole lines.
        width = None if sys.stdout.isatty() else 200
        _console = _Console(highlight=False, soft_wrap=True, width=width, file=raw(sys.stdout))
    return _console


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None) -> None:
    t = Table(*headers, title=visible(title) if title else None, box=None, pad_edge=False, header_style="bold")
    for row in rows:
        t.add_row(*("" if v is None else visible(str(v)) for v in row))
    console().print(t)


def print_inspection(report: dict[str, Any]) -> None:
    out = console()
    segments = report["segment_data_size"]
    out.print(f"{report['file']}: ExecuTorch program (schema {report['schema_version']}), "
              f"{report['file_size']} B = {report['program_size']} B program"
              + (f" + {segments} B segments" if segments else ""))
    exported = report.get("exported")
    if exported:
        et = exported.get("executorch", {})
        out.print(f"exported: {exported['name']} for {exported['target']} (CMSIS-NN {exported['backend']}) "
                  f"by executorch {et.get('version', '?')} ({str(et.get('git_version', '?'))[:12]})")
    for method in report["methods"]:
        planned = method["planned_buffers"]
        out.print(f"method {method['name']}: {sum('operator' in c for c in method['calls'])} kernel calls of "
                  f"{len(method['operators'])} operators; planned memory {sum(planned)} B"
                  + (f" in {len(planned)} buffers" if len(planned) > 1 else "")
                  + f"; constants {method['constant_bytes']} B")
        for kind in ("inputs", "outputs"):
            for k, io in enumerate(method[kind]):
                out.print(f"  {kind[:-1]} {k}: {io['text']}")
        lowering, dead = method["lowering"], method["constants"]
        left: dict[str, int] = {}
        for call in lowering["left"]:
            left[call["op"]] = left.get(call["op"], 0) + 1
        out.print(f"  lowered: {lowering['cortex_m']} of {lowering['calls']} calls are cortex_m kernels"
                  + ("; not lowered: " + ", ".join(f"{n} {op}" for op, n in left.items()) if left else ""), markup=False)
        if method.get("lowering_failure"):
            out.print(f"  FAIL: {method['lowering_failure']}", markup=False)
        if method.get("lowering_note"):
            out.print(f"  note: {method['lowering_note']}", markup=False)
        if dead["dead_bytes"]:
            names = ", ".join(d["name"] or d["tensor"] for d in dead["dead"][:6])
            out.print(f"  constants: {dead['dead_bytes']:,} of {dead['bytes']:,} B read by no call "
                      f"({len(dead['dead'])} buffers: {names}{', ...' if len(dead['dead']) > 6 else ''})", markup=False)
        rows = []
        for c in method["calls"]:
            if "operator" in c:
                sb = c.get("scratch_bytes")
                scratch = "?" if sb is None else " + ".join(f"{b} B" for b in sb)
                rows.append([c["index"], c["operator"], c["values"], scratch])
            elif "delegate" in c:
                rows.append([c["index"], f"delegate {c['delegate']}", c["values"], ""])
            else:
                rows.append([c["index"], c["instruction"], "", ""])
        table(["#", "operator", "values", "scratch"], rows)
