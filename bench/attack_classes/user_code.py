"""Attacks (round 5, classes 2 and 3): a factory whose inputs the key misses (a data file, an
environment variable, a module found on a path it adds itself), and a factory that ends its
process, never returns, leaves global state or a thread behind; a case file edited while
`test -j 2` runs."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from attack_classes.lab import attack

_HEAD = '''
import importlib, os, sys, threading, time
import torch
from cortexm.cases.registry import register
HERE = os.path.dirname(os.path.abspath(__file__))
def _linear(n):
    return torch.nn.Linear(n, 4).eval(), (torch.rand(1, n),)
'''


def _cases(lab, name: str, body: str) -> Path:
    folder = lab.folder(name)
    (folder / "cases.py").write_text(_HEAD + body)
    cache = folder / "cache"
    cache.mkdir(mode=0o700, exist_ok=True)
    return folder


def _test(lab, folder: Path, *extra: str, env: dict | None = None, timeout: float = 900):
    report = folder / "report.json"
    report.unlink(missing_ok=True)
    r = lab.cli("test", "--sim", "none", "-t", "cortex-m7", "--cases", str(folder / "cases.py"), "--json", str(report),
                *extra, env={"CORTEXM_EXPORT_CACHE": str(folder / "cache"), **(env or {})}, timeout=timeout)
    rows = {row["case"]: row for row in json.loads(report.read_text())["results"]} if report.is_file() else {}
    return r, rows


def _inputs_of(row: dict) -> list | None:
    from cortexm.pte.bundle import Bundle

    if not row.get("pte"):
        return None
    return [list(e.shape) for e in Bundle.open(row["pte"]).sidecar.inputs]


@attack("user code", "a factory that reads a data file, an environment variable and a module it finds itself")
def a_factory_whose_reads_change(lab):
    folder = _cases(lab, "factory-reads", '''
@register("from_file", "width in width.txt")
def _():
    return _linear(int(open(os.path.join(HERE, "width.txt")).read()))
@register("from_env", "width in $ATTACK_WIDTH")
def _():
    return _linear(int(os.environ.get("ATTACK_WIDTH", "4")))
@register("from_module", "width in a module on a path it adds")
def _():
    sys.path.insert(0, os.path.join(HERE, "elsewhere"))
    return _linear(importlib.import_module("attack_width").WIDTH)
''')
    (folder / "elsewhere").mkdir(exist_ok=True)
    (folder / "width.txt").write_text("4")
    (folder / "elsewhere" / "attack_width.py").write_text("WIDTH = 4\n")
    _test(lab, folder, env={"ATTACK_WIDTH": "4"})
    (folder / "width.txt").write_text("6")
    (folder / "elsewhere" / "attack_width.py").write_text("WIDTH = 8\n")
    r, rows = _test(lab, folder, env={"ATTACK_WIDTH": "5"})
    wanted = {"from_file": 6, "from_env": 5, "from_module": 8}
    stale = [f"{case} tested with width {(_inputs_of(rows[case]) or [[0, 0]])[0][1]}, not {n}"
             for case, n in wanted.items() if case in rows and _inputs_of(rows[case]) != [[1, n]]]
    missing = [case for case in wanted if case not in rows]
    return ("cortexm test --cases cases.py, after width.txt, $ATTACK_WIDTH and a module it imports changed",
            "; ".join(stale + [f"{c}: no result" for c in missing]) or None)


@attack("user code", "a factory that calls os._exit(0)")
def a_factory_that_exits(lab):
    folder = _cases(lab, "factory-exits", '''
@register("exits", "ends its process")
def _():
    os._exit(0)
''')
    r, rows = _test(lab, folder)
    row = rows.get("exits")
    problem = None
    if r.rc in (0, None) or row is None or row["status"] != "ERROR" or "exit" not in (row.get("reason") or ""):
        problem = f"exit {r.rc}, verdict {row and row['status']}: {row and row.get('reason')}"
    return "cortexm test --cases cases.py (its factory calls os._exit(0))", problem


@attack("user code", "a factory that never returns")
def a_factory_that_hangs(lab):
    folder = _cases(lab, "factory-hangs", '''
@register("hangs", "never returns")
def _():
    while True:
        time.sleep(0.05)
''')
    r, rows = _test(lab, folder, "--timeout", "10", timeout=300)
    row = rows.get("hangs")
    if r.rc is None:
        return "cortexm test --timeout 10 (a factory that never returns)", f"hung ({r.seconds:.0f} s)"
    ok = r.rc == 1 and row is not None and row["status"] == "ERROR" and "longer than 10 s" in (row.get("reason") or "")
    return ("cortexm test --timeout 10 (a factory that never returns)",
            None if ok else f"exit {r.rc}, verdict {row and row['status']}: {row and row.get('reason')}")


@attack("user code", "one factory sets torch's default dtype, the next one needs float32")
def a_factory_that_leaks_state(lab):
    folder = _cases(lab, "factory-leaks", '''
@register("sets_dtype", "leaves float64 the default")
def _():
    torch.set_default_dtype(torch.float64)
    return torch.nn.Linear(4, 4).float().eval(), (torch.rand(1, 4, dtype=torch.float32),)
@register("needs_float32", "built after it")
def _():
    if torch.get_default_dtype() != torch.float32:
        raise RuntimeError("another case's default dtype leaked into this one")
    return _linear(4)
''')
    r, rows = _test(lab, folder, "-j", "1")
    row = rows.get("needs_float32")
    return ("cortexm test -j 1 --cases cases.py (sets_dtype, then needs_float32)",
            None if row and row["status"] == "NOT RUN" else f"needs_float32: {row and row['status']}: "
                                                          f"{row and row.get('reason')}")


@attack("user code", "a factory that leaves a thread running")
def a_factory_that_leaves_a_thread(lab):
    folder = _cases(lab, "factory-thread", '''
threading.Thread(target=time.sleep, args=(3600,)).start()  # at import, in cortexm's own process too
@register("thread", "starts a thread that never ends")
def _():
    threading.Thread(target=time.sleep, args=(3600,)).start()
    return _linear(4)
''')
    r, rows = _test(lab, folder, timeout=300)
    return ("cortexm test --cases cases.py (threads that never end)",
            f"cortexm did not exit ({r.seconds:.0f} s)" if r.rc is None else
            None if rows.get("thread", {}).get("status") == "NOT RUN" else f"exit {r.rc}")


@attack("user code", "a case file edited while test -j 2 runs")
def a_case_file_edited_during_the_run(lab):
    body = "".join(f'''
@register("edited_{k}", "width in its source")
def _():
    time.sleep(2)
    return _linear(WIDTH)
''' for k in range(4))
    folder = _cases(lab, "edited-during", "WIDTH = 3\n" + body)
    source = folder / "cases.py"

    def edit() -> None:  # once cortexm has read it, before the workers import it
        time.sleep(4)
        source.write_text(source.read_text().replace("WIDTH = 3", "WIDTH = 7"))

    editor = threading.Thread(target=edit)
    editor.start()
    r, rows = _test(lab, folder, "-j", "2")
    editor.join()
    # What each program was exported from must be what its key says: run again on the file as
    # it is now; a program cached under the new content's key must have width 7.
    again, rows = _test(lab, folder, "-j", "2")
    wrong = [case for case, row in rows.items() if _inputs_of(row) not in (None, [[1, 7]])]
    return ("cortexm test -j 2, the case file edited 4 s in, then run again",
            f"{', '.join(wrong)}: a program of the old content under the new content's key" if wrong else None)
