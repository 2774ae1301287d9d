"""Attacks: Ownership: cortexm removes or replaces only what a manifest of its own lists."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from attack_classes.caches import _export_cache
from attack_classes.lab import _unchanged, attack


def _entry(path: Path) -> dict:
    import hashlib

    return {"size": path.stat().st_size, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def _export_beside(lab, folder: str, sidecar: Callable[[Path], dict], victims: list[Path]) -> tuple[str, str | None]:
    """`export relu -o d/X.pte` where d/X.json, not written by this export, names `victims`."""
    d = lab.folder(folder)
    texts = {v: v.read_text() for v in victims}
    (d / "X.json").write_text(json.dumps(sidecar(d)))
    r = lab.cli("export", "relu", "-t", "cortex-m7", "-o", str(d / "X.pte"))
    lost = next((f"{v.name} outside the output folder was deleted or changed" for v in victims
                 if not v.is_file() or v.read_text() != texts[v]), None)
    return lost or (None if r.rc == 0 else r.one_error_line())


def _victim(lab, name: str) -> Path:
    path = lab.root / name
    path.write_text(f"the user's {name}\n")
    return path


@attack("ownership", "a sidecar whose manifest names ../notes.txt")
def a_sidecar_whose_manifest_names_notes_txt(lab):
    notes = _victim(lab, "notes.txt")
    problem = _export_beside(lab, "own-dotdot", lambda d: {"written": {"../notes.txt": _entry(notes)}}, [notes])
    return "cortexm export relu -o d/X.pte (d/X.json lists ../notes.txt)", problem


@attack("ownership", "a sidecar whose manifest names an absolute path")
def a_sidecar_whose_manifest_names_an_absolute_path(lab):
    notes = _victim(lab, "abs-notes.txt")
    problem = _export_beside(lab, "own-abs", lambda d: {"written": {str(notes): _entry(notes)}}, [notes])
    return "cortexm export relu -o d/X.pte (d/X.json lists /abs/notes.txt)", problem


@attack("ownership", "an old-format sidecar naming ../notes.txt as its dialect file")
def an_old_format_sidecar_naming_notes_txt_as_its_dialect_file(lab):
    notes = _victim(lab, "old-notes.txt")
    problem = _export_beside(lab, "own-old", lambda d: {"cortexm": {"format": 1}, "name": "X",
                                                        "dialect": "../old-notes.txt", "inputs": [], "outputs": []}, [notes])
    return "cortexm export relu -o d/X.pte (old-format d/X.json names ../notes.txt)", problem


@attack("ownership", "run --keep DIR --force, then run --keep DIR")
def run_keep_dir_force_then_run_keep_dir(lab):
    d = lab.folder("own-keep")
    (d / "mine.txt").write_text("mine\n")
    first = lab.cli("run", str(lab.relu()), "-t", "cortex-m7", "--keep", str(d), "--force", timeout=900)
    second = lab.cli("run", str(lab.relu()), "-t", "cortex-m7", "--keep", str(d), timeout=900)
    command = "cortexm run relu.pte -t cortex-m7 --keep DIR --force; cortexm run relu.pte -t cortex-m7 --keep DIR"
    if first.rc != 0:
        return command, f"the --force run failed: exit {first.rc}: {first.err.strip()[-120:]}"
    return command, _unchanged(d / "mine.txt", "mine\n") or (None if second.rc in (0, 2) else second.one_error_line())


def _report_over(lab, flag: str, link: bool) -> tuple[str, str | None]:
    """`test ... FLAG PATH` where PATH is the user's file (or a link to one)."""
    d = lab.folder(f"own-report{flag.replace('-', '_')}{'-link' if link else ''}")
    mine = d / "mine.txt"
    mine.write_text("the user's\n")
    target = d / ("report" if link else "mine.txt")
    if link and not target.is_symlink():
        target.symlink_to(mine)
    r = lab.cli("test", "-t", "cortex-m7", "-k", "relu", "--grid", "none", "--sim", "none", flag, str(target),
                timeout=900, env={"CORTEXM_EXPORT_CACHE": str(_export_cache(lab))})
    what = "a link to the user's file" if link else "the user's file"
    return (f"cortexm test -k relu --sim none {flag} <{what}>",
            _unchanged(mine, "the user's\n") or r.one_error_line())


@attack("ownership", "test --junit over the user's file")
def test_junit_over_the_user_s_file(lab):
    return _report_over(lab, "--junit", link=False)


@attack("ownership", "test --json through a symlink to the user's file")
def test_json_through_a_symlink_to_the_user_s_file(lab):
    return _report_over(lab, "--json", link=True)


def _shard_report(lab, k: int, n: int, pattern: str = "relu") -> Path:
    out = lab.root / "shards" / f"{pattern}-{k}-of-{n}.json"
    if not out.is_file():
        out.parent.mkdir(exist_ok=True)
        lab.cli("test", "-t", "cortex-m7", "-k", pattern, "--grid", "none", "--sim", "none", "--shard", f"{k}/{n}",
                "--json", str(out), timeout=900, env={"CORTEXM_EXPORT_CACHE": str(_export_cache(lab))})
    return out


@attack("ownership", "report merge --json over the user's file")
def report_merge_json_over_the_user_s_file(lab):
    mine = _victim(lab, "merge-mine.json")
    r = lab.cli("report", "merge", str(_shard_report(lab, 1, 1)), "--json", str(mine))
    return ("cortexm report merge r.json --json <the user's file>",
            _unchanged(mine, "the user's merge-mine.json\n") or r.one_error_line())


@attack("ownership", "sweep --out DIR holding the user's sweep-add-0.py")
def sweep_out_dir_holding_the_user_s_sweep_add_0_py(lab):
    d = lab.folder("own-sweep")
    (d / "sweep-add-0.py").write_text("# mine\n")
    r = lab.cli("sweep", "add", "-t", "cortex-m7", "--count", "1", "--out", str(d), timeout=1800,
                env={"CORTEXM_EXPORT_CACHE": str(_export_cache(lab))})
    return ("cortexm sweep add -t cortex-m7 --count 1 --out DIR",
            _unchanged(d / "sweep-add-0.py", "# mine\n") or r.one_error_line())


@attack("ownership", "a case named ../../escaped")
def a_case_named_escaped(lab):
    cache = lab.folder("esc/deep/exports")
    cases = lab.root / "escaping_cases.py"
    cases.write_text("import torch\nfrom cortexm.cases import register\n\n"
                     "@register('../../escaped', 'a name that is a path')\n"
                     "def _():\n    return torch.nn.ReLU(), (torch.rand(1, 8) - 0.5,)\n")
    r = lab.cli("test", "--cases", str(cases), "-t", "cortex-m7", "--sim", "none", timeout=900,
                env={"CORTEXM_EXPORT_CACHE": str(cache)})
    outside = [p for p in (lab.root / "esc").rglob("escaped*") if cache not in p.parents]
    return ("cortexm test --cases f.py (a case named ../../escaped)",
            f"wrote {outside[0].relative_to(lab.root)} outside the cache" if outside else r.one_error_line("../../escaped"))
