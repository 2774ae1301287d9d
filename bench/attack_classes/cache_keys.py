"""Attacks: Cache keys: a cached export is reused only when nothing it depends on changed."""

from __future__ import annotations

import json

from attack_classes.lab import Result, attack


def _case_file_run(lab, folder: str, body: str, files: dict[str, str]) -> tuple[Result, dict | None]:
    """`test --cases cases.py --sim none` in `folder` (its own export cache), after writing `files`."""
    d = lab.folder(folder)
    (d / "cases.py").write_text("import torch\nfrom cortexm.cases import register\n\n"
                                "@register('helped', 'a case whose model comes from a helper')\n"
                                f"def _():\n{body}\n")
    for name, text in files.items():
        if text is None:
            (d / name).unlink(missing_ok=True)
        else:
            (d / name).write_text(text)
    report = d / "report.json"
    report.unlink(missing_ok=True)
    r = lab.cli("test", "--cases", "cases.py", "-t", "cortex-m7", "--sim", "none", "--json", str(report),
                timeout=900, env={"CORTEXM_EXPORT_CACHE": str(d / "exports")}, cwd=d)
    try:
        row = json.loads(report.read_text())["results"][0]
    except (OSError, ValueError, KeyError, IndexError):
        row = None
    return r, row


def _two_runs(lab, folder, body, before, after, fragment) -> str | None:
    first, row = _case_file_run(lab, folder, body, before)
    if row is None:
        return f"the first run gave no report (exit {first.rc}: {first.err.strip()[-120:]})"
    again, row = _case_file_run(lab, folder, body, after)
    if row is None:
        return f"the second run gave no report (exit {again.rc}: {again.err.strip()[-120:]})"
    return None if fragment(row) else f"second run: {row['status']} {row['reason'][:100]!r}"


@attack("cache keys", "a case file's helper module changed")
def a_case_file_s_helper_module_changed(lab):
    body = "    import helper\n    return helper.model(), (torch.rand(1, 8) - 0.5,)"
    ok = "import torch\ndef model():\n    return torch.nn.ReLU()\n"
    broken = "def model():\n    raise ValueError('helper v2 is broken')\n"
    problem = _two_runs(lab, "key-helper", body, {"helper.py": ok}, {"helper.py": broken},
                        lambda row: row["status"] == "FAIL" and "helper v2" in row["reason"])
    return "cortexm test --cases cases.py (imports helper.py), helper.py changed, test again", \
        problem and f"the stale program was tested: {problem}"


def _transient(lab, folder: str, needs: str, file: str, what: str) -> tuple[str, str | None]:
    """A case that fails while `file` is missing, then `file` is made: the case exports."""
    body = f"    {needs}\n    return torch.nn.ReLU(), (torch.rand(1, 8) - 0.5,)"
    problem = _two_runs(lab, folder, body, {file: None}, {file: "1\n"}, lambda row: row["status"] == "NOT RUN")
    return (f"cortexm test --cases cases.py ({what}), {file} added, test again",
            problem and f"the failure was kept: {problem}")


_TRANSIENT = (  # (attack, folder, what the case needs, the file that provides it, what it is)
    ("a failed export when a data file was missing", "key-data", "open('weights.txt').read()", "weights.txt",
     "its data file missing"),
    ("a failed export when a module was not installed", "key-module", "import not_yet_installed",
     "not_yet_installed.py", "imports a missing module"),
)
for _name, *_args in _TRANSIENT:
    attack("cache keys", _name)(lambda lab, args=tuple(_args): _transient(lab, *args))
