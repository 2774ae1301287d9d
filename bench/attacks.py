"""Attacks on the command line, as a careful user (or a careless disk) makes them.

    python bench/attacks.py [--only TEXT] [--json OUT]
    PYTHONPATH=/path/to/older/cortexm python bench/attacks.py    # the same attacks on another version

Each attack sets up a folder, runs the real `cortexm` (`python -m cortexm` of whatever cortexm is
importable) and judges what happened: HELD (one `error:` line and exit 2, user files intact,
damaged caches rebuilt with a note, no hang) or FAILED, with what was seen. It prints one line per
attack and the count. Attacks that need a runner build or a simulator use the user's caches and
trees as `cortexm` finds them (a first run builds the M7 runner); a damaged cache entry an attack
makes is removed afterwards whatever the version did with it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

TIMEOUT = 120  # seconds: an attack that takes longer hung


@dataclass
class Result:
    rc: int | None  # None: it hung and was killed
    out: str
    err: str
    seconds: float

    def one_error_line(self, *fragments: str) -> str | None:
        """What is wrong with this as a bad-input answer (None: nothing)."""
        if self.rc is None:
            return f"hung ({self.seconds:.0f} s)"
        lines = [l for l in self.err.splitlines()
                 if l.strip() and not l.startswith(("library:", "warning:", "note:", "  "))]  # "  ": progress
        if "Traceback" in self.err + self.out:
            return f"exit {self.rc} with a traceback"
        if self.rc != 2 or len(lines) != 1 or not lines[0].startswith("error: "):
            return f"exit {self.rc}: {(lines or ['(nothing)'])[-1][:120]}"
        missing = [f for f in fragments if f not in lines[0]]
        return f"says {lines[0][:120]!r}" if missing else None


class Lab:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.mounts: list[Path] = []  # small disks the attacks mounted, unmounted at the end

    def cli(self, *args: str, timeout: float = TIMEOUT, env: dict | None = None, cwd: Path | None = None) -> Result:
        started = time.monotonic()
        process = subprocess.Popen([sys.executable, "-m", "cortexm", *args], cwd=cwd or self.root, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **(env or {})},
                                   start_new_session=True)
        try:
            out, err = process.communicate(timeout=timeout)
            return Result(process.returncode, out, err, time.monotonic() - started)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            out, err = process.communicate()
            return Result(None, out, err, time.monotonic() - started)

    def folder(self, name: str) -> Path:
        path = self.root / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def exported(self, case: str) -> Path:
        """`case` exported for the M7, with its sidecar (made once per lab)."""
        out = self.root / "exported" / f"{case}.pte"
        if not out.is_file():
            out.parent.mkdir(exist_ok=True)
            r = self.cli("export", case, "-t", "cortex-m7", "-o", str(out), timeout=600)
            if r.rc != 0:
                raise SystemExit(f"attacks: exporting {case} failed: {r.err.strip()[-300:]}")
        return out

    def relu(self) -> Path:
        return self.exported("relu")


Attack = Callable[[Lab], tuple[str, str | None]]  # -> (command, what failed or None)
ATTACKS: list[tuple[str, str, Attack]] = []


def attack(group: str, name: str):
    def register(fn: Attack) -> Attack:
        ATTACKS.append((group, name, fn))
        return fn
    return register


def _unchanged(path: Path, text: str) -> str | None:
    if not path.exists():
        return f"{path.name} was deleted"
    return None if path.read_text(errors="replace") == text else f"{path.name} was overwritten"


# --- user files ---------------------------------------------------------------------------

@attack("user files", "export over the user's X.pte")
def export_over_the_user_s_x_pte(lab):
    d = lab.folder("own1")
    (d / "X.pte").write_text("mine\n")
    r = lab.cli("export", "relu", "-t", "cortex-m7", "-o", str(d / "X.pte"))
    return "cortexm export relu -t cortex-m7 -o d/X.pte", _unchanged(d / "X.pte", "mine\n") or r.one_error_line()


@attack("user files", "export over the user's X.dialect.txt and X.input-0.bin (no X.json)")
def export_over_the_user_s_x_dialect_txt_and_x_input_0_bin_no_x(lab):
    d = lab.folder("own2")
    for name in ("X.dialect.txt", "X.input-0.bin"):
        (d / name).write_text("mine\n")
    r = lab.cli("export", "relu", "-t", "cortex-m7", "-o", str(d / "X.pte"))
    return ("cortexm export relu -t cortex-m7 -o d/X.pte",
            _unchanged(d / "X.dialect.txt", "mine\n") or _unchanged(d / "X.input-0.bin", "mine\n") or r.one_error_line())


@attack("user files", "run --keep DIR holding the user's program.pte")
def run_keep_dir_holding_the_user_s_program_pte(lab):
    d = lab.folder("own3")
    (d / "program.pte").write_text("mine\n")
    r = lab.cli("run", str(lab.relu()), "-t", "cortex-m7", "--keep", str(d), timeout=600)
    return "cortexm run relu.pte -t cortex-m7 --keep DIR", _unchanged(d / "program.pte", "mine\n") or r.one_error_line()


# --- damaged caches -------------------------------------------------------------------------

def _export_cache(lab) -> Path:
    """An export cache of the lab's own: the relu entry in it is the one `test -k relu` uses."""
    return lab.folder("exports")


def _cache_of_relu(lab) -> Path | None:
    """The export cache folder of the relu case for the M7 (after a `test -k relu` made it)."""
    found = list(_export_cache(lab).glob("**/relu.pte"))
    return found[0].parent if len(found) == 1 else None


def _test_relu(lab) -> Result:
    return lab.cli("test", "-t", "cortex-m7", "-k", "relu", "--grid", "none", "--json", str(lab.root / "relu-report.json"),
                   timeout=900, env={"CORTEXM_EXPORT_CACHE": str(_export_cache(lab))})


def _relu_result(lab) -> dict | None:
    try:
        rows = json.loads((lab.root / "relu-report.json").read_text())["results"]
    except (OSError, ValueError, KeyError):
        return None
    return next((r for r in rows if r["case"] == "relu"), None)


def _damaged_export(lab, damage: Callable[[Path], None], what: str) -> tuple[str, str | None]:
    first = _test_relu(lab)
    folder = _cache_of_relu(lab)
    if first.rc not in (0, 1) or folder is None:
        return "cortexm test -t cortex-m7 -k relu", f"the first run failed (exit {first.rc}) or cached nothing"
    damage(folder)
    try:
        again = _test_relu(lab)
        row = _relu_result(lab)
        if again.rc is None or "Traceback" in again.err + again.out:
            problem = "hung or printed a traceback"
        elif row is None or row["status"] != "PASS":
            problem = f"relu {row['status'] if row else 'missing'}: {(row or {}).get('reason', again.err.strip()[-120:])[:120]}"
        else:
            problem = None if "damaged" in again.err + again.out else "passed, but said nothing about the damage"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return f"cortexm test -t cortex-m7 -k relu, after {what} in the export cache", problem


@attack("caches", "bit-flipped cached .pte")
def bit_flipped_cached_pte(lab):
    def flip(folder):
        pte = folder / "relu.pte"
        data = bytearray(pte.read_bytes())
        data[len(data) // 2] ^= 0x01
        pte.write_bytes(bytes(data))
    return _damaged_export(lab, flip, "one bit flipped in relu.pte")


@attack("caches", "truncated cached reference")
def truncated_cached_reference(lab):
    def truncate(folder):
        ref = next(folder.glob("*.reference-0.bin"))
        ref.write_bytes(ref.read_bytes()[:7])
    return _damaged_export(lab, truncate, "relu.reference-0.bin cut to 7 B")


@attack("caches", "bit-flipped cached sidecar")
def bit_flipped_cached_sidecar(lab):
    def edit(folder):
        sidecar = folder / "relu.json"
        sidecar.write_text(sidecar.read_text().replace('"qtol": 0', '"qtol": 9'))
    return _damaged_export(lab, edit, "relu.json's qtol edited")


@attack("caches", "temporary folder of a killed run")
def temporary_folder_of_a_killed_run(lab):
    first = _test_relu(lab)
    folder = _cache_of_relu(lab)
    if folder is None:
        return "cortexm test -t cortex-m7 -k relu", f"the first run cached nothing (exit {first.rc})"
    dead = folder.parent / ".tmp-999999999-attack"
    dead.mkdir(exist_ok=True)
    shutil.rmtree(folder)  # so the next run stores an entry
    _test_relu(lab)
    left = dead.exists()
    shutil.rmtree(dead, ignore_errors=True)
    return "cortexm test -k relu, with .tmp-<dead pid>-* in the export cache", "the dead run's folder is still there" if left else None


def _built_m7(lab) -> tuple[Result, Path | None]:
    r = lab.cli("build", "-t", "cortex-m7", "--json", timeout=1800)
    try:
        return r, Path(json.loads(r.out)["elf"])
    except (ValueError, KeyError, TypeError):
        return r, None


@attack("caches", "truncated runner ELF in the build cache")
def truncated_runner_elf_in_the_build_cache(lab):
    r, elf = _built_m7(lab)
    if elf is None:
        return "cortexm build -t cortex-m7", f"no runner to damage (exit {r.rc}: {r.err.strip()[-100:]})"
    good = elf.read_bytes()
    elf.write_bytes(good[:1000])
    again, elf2 = _built_m7(lab)
    ok = elf2 is not None and elf2.is_file() and elf2.read_bytes() == good
    if not ok:
        shutil.rmtree(elf.parent, ignore_errors=True)  # leave no broken entry behind
    return "cortexm build -t cortex-m7, its cached ELF cut to 1000 B", None if ok else "the truncated ELF is used as cached"


@attack("caches", "build.json holding []")
def build_json_holding(lab):
    r, elf = _built_m7(lab)
    if elf is None:
        return "cortexm build -t cortex-m7", f"no runner to damage (exit {r.rc})"
    (elf.parent / "build.json").write_text("[]")
    again, elf2 = _built_m7(lab)
    if elf2 is None:
        shutil.rmtree(elf.parent, ignore_errors=True)
        return "cortexm build -t cortex-m7, its build.json replaced by []", f"exit {again.rc}: {again.err.strip()[-100:]}"
    return "cortexm build -t cortex-m7, its build.json replaced by []", None


@attack("caches", "SIGKILLed build leaves its compiler running")
def sigkilled_build_leaves_its_compiler_running(lab):
    env = {"CORTEXM_BUILD_CACHE": str(lab.folder("kill-builds"))}
    process = subprocess.Popen([sys.executable, "-m", "cortexm", "build", "-t", "cortex-m3"], cwd=lab.root,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **env})
    time.sleep(25)  # into the compile
    process.kill()
    process.wait()
    time.sleep(3)
    left = subprocess.run(["pgrep", "-f", str(lab.root / "kill-builds")], capture_output=True, text=True).stdout.split()
    for pid in left:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    return "kill -9 of cortexm build -t cortex-m3, 25 s in", f"{len(left)} of its processes still ran" if left else None


# --- special files --------------------------------------------------------------------------

@attack("special files", "inspect a FIFO")
def inspect_a_fifo(lab):
    fifo = lab.root / "fifo.pte"
    if not fifo.exists():
        os.mkfifo(fifo)
    return "cortexm inspect fifo.pte", lab.cli("inspect", str(fifo), timeout=20).one_error_line()


@attack("special files", "verify /dev/zero")
def verify_dev_zero(lab):
    return "cortexm verify /dev/zero", lab.cli("verify", "/dev/zero", timeout=20).one_error_line()


@attack("special files", "inspect /dev/urandom")
def inspect_dev_urandom(lab):
    return "cortexm inspect /dev/urandom", lab.cli("inspect", "/dev/urandom", timeout=20).one_error_line()


@attack("special files", "inspect a 3 GiB file")
def inspect_a_3_gib_file(lab):
    big = lab.root / "big.pte"
    with open(big, "wb") as f:
        f.truncate(3 << 30)  # sparse: costs no disk
    r = lab.cli("inspect", str(big), timeout=20)
    big.unlink()
    slow = f" after {r.seconds:.1f} s" if r.seconds > 5 else ""
    return "cortexm inspect big.pte (3 GiB)", (r.one_error_line() or "") + slow or None


@attack("special files", "run a directory")
def run_a_directory(lab):
    return "cortexm run DIR -t cortex-m7", lab.cli("run", str(lab.folder("adir")), "-t", "cortex-m7").one_error_line("directory")


# --- exit 2, not 3 ----------------------------------------------------------------------------

@attack("bad input", "-o somefile/x.pte")
def o_somefile_x_pte(lab):
    (lab.root / "somefile").write_text("mine\n")
    r = lab.cli("export", "relu", "-t", "cortex-m7", "-o", str(lab.root / "somefile" / "x.pte"))
    slow = f"; answered after {r.seconds:.0f} s" if r.seconds > 20 else ""
    return "cortexm export relu -t cortex-m7 -o somefile/x.pte", ((r.one_error_line() or "") + slow) or None


@attack("bad input", "a 300-character output name")
def a_300_character_output_name(lab):
    r = lab.cli("export", "relu", "-t", "cortex-m7", "-o", str(lab.root / ("n" * 300 + ".pte")))
    return "cortexm export relu -t cortex-m7 -o nnn...(300).pte", r.one_error_line()


def _pins(lab, edit: Callable[[str], str], what: str) -> tuple[str, str | None]:
    from cortexm.sources import pins

    path = lab.root / f"pins-{abs(hash(what))}.toml"
    path.write_text(edit(pins.pins_path().read_text()))
    r = lab.cli("pins", env={pins.PINS_ENV: str(path)})
    return f"CORTEXM_PINS=<{what}> cortexm pins", r.one_error_line()


_PIN_EDITS = (
    ("pins.toml empty", lambda t: "", "empty file"),
    ("pins.toml without [cmsis-nn]", lambda t: t.replace("[cmsis-nn]", "[cmsis-nn-old]"), "no [cmsis-nn]"),
    ("pins.toml rev = 5", lambda t: t.replace('rev = "dbf45dbfcc515421dd6099037d3e2637b90748c8"', "rev = 5"),
     "cmsis-nn rev = 5"),
    ("pins.toml format = 2", lambda t: t.replace("format = 1", "format = 2"), "format = 2"),
    ("pins.toml wheel sha256 cut short", lambda t: t.replace('sha256 = "274c28c2', 'sha256 = "74c28c2', 1),
     "a 63-digit wheel sha256"),
)
for _name, _edit, _what in _PIN_EDITS:
    attack("bad input", _name)(lambda lab, edit=_edit, what=_what: _pins(lab, edit, what))


def _factory(lab, body: str, what: str) -> tuple[str, str | None]:
    model = lab.root / f"model_{abs(hash(body))}.py"
    model.write_text("import sys\nimport torch\n\nclass Dict(torch.nn.Module):\n    def forward(self, x):\n"
                     f"        return {{'y': x}}\n\ndef make():\n    {body}\n")
    out = lab.root / "factory-out" / "m.pte"
    r = lab.cli("export", f"{model}:make", "-t", "cortex-m7", "-o", str(out))
    problem = r.one_error_line() or ("it wrote files" if out.parent.exists() else None)
    shutil.rmtree(out.parent, ignore_errors=True)
    return f"cortexm export model.py:make ({what})", problem


_FACTORY_BODIES = (
    ("factory: zero-size example input", "return torch.nn.ReLU(), (torch.zeros(1, 0, 4),)", "zero-size input"),
    ("factory: calibration samples 5", "return torch.nn.ReLU(), (torch.zeros(1, 4),), 5", "calibration_samples = 5"),
    ("factory: the model returns a dict", "return Dict(), (torch.zeros(1, 4),)", "forward returns a dict"),
    ("factory: sys.exit(0)", "sys.exit(0)", "calls sys.exit(0)"),
)
for _name, _body, _what in _FACTORY_BODIES:
    attack("bad input", _name)(lambda lab, body=_body, what=_what: _factory(lab, body, what))


# --- everyday use ---------------------------------------------------------------------------

def _kws() -> Path | None:
    from cortexm import sources

    tree = sources.locate(sources.EXECUTORCH).path
    folder = tree / "examples" / "arduino" / "examples" / "KeywordSpotting" if tree else None
    return folder if folder and (folder / "model.pte").is_file() else None


@attack("everyday use", "run upstream's KWS example with its C header input and labels")
def run_upstream_s_kws_example_with_its_c_header_input_and_label(lab):
    kws = _kws()
    if kws is None:
        return "cortexm run KeywordSpotting/model.pte -i mfcc_yes.h", "no ExecuTorch tree with the Arduino example here"
    r = lab.cli("run", str(kws / "model.pte"), "-t", "cortex-m7", "-i", str(kws / "mfcc_yes.h"),
                "--labels", str(kws / "KeywordSpotting.ino"), timeout=900)
    return ("cortexm run model.pte -t cortex-m7 -i mfcc_yes.h --labels KeywordSpotting.ino",
            None if r.rc == 0 and "top 3: 2 yes" in r.out else f"exit {r.rc}: {(r.err or r.out).strip()[-120:]}")


@attack("everyday use", "run with a .npy input and --save")
def run_with_a_npy_input_and_save(lab):
    import numpy as np

    pte = lab.relu()
    sidecar = json.loads(pte.with_suffix(".json").read_text())
    entry = sidecar["inputs"][0]
    raw = np.fromfile(pte.parent / entry["file"], dtype=entry["dtype"])
    order = entry["dim_order"]
    values = raw.reshape([entry["shape"][d] for d in order]).transpose(np.argsort(order))
    np.save(lab.root / "x.npy", values)
    r = lab.cli("run", str(pte), "-t", "cortex-m7", "-i", str(lab.root / "x.npy"), "--save", str(lab.root / "y.npy"),
                timeout=900)
    return ("cortexm run relu.pte -t cortex-m7 -i x.npy --save y.npy",
            None if r.rc == 0 and (lab.root / "y.npy").is_file() else f"exit {r.rc}: {r.err.strip()[-120:]}")


@attack("everyday use", "verify without --target or sidecar audits the cores")
def verify_without_target_or_sidecar_audits_the_cores(lab):
    d = lab.folder("bare")
    shutil.copyfile(lab.exported("conv2d"), d / "conv.pte")  # no sidecar: the core it was lowered for is unknown
    r = lab.cli("verify", str(d / "conv.pte"))
    return ("cortexm verify conv.pte (lowered for the M7, no sidecar)",
            None if r.rc == 1 and "cortex-m55" in r.out else f"exit {r.rc}: {r.out.strip()[-160:]}")


@attack("everyday use", "run a program planned for another core: refused before the build")
def run_a_program_planned_for_another_core_refused_before_the_bu(lab):
    r = lab.cli("run", str(lab.exported("conv2d")), "-t", "cortex-m55", "--executorch-src", str(lab.folder("no-tree")))
    problem = r.one_error_line("scratch", "--no-audit")
    return "cortexm run conv-m7.pte -t cortex-m55", problem + f" ({r.seconds:.0f} s)" if problem else None


@attack("everyday use", "model.pte files are named by their folder")
def model_pte_files_are_named_by_their_folder(lab):
    d = lab.folder("kws-small")
    shutil.copyfile(lab.relu(), d / "model.pte")
    r = lab.cli("verify", str(d / "model.pte"), "-t", "cortex-m7")
    return "cortexm verify kws-small/model.pte -t cortex-m7", None if "kws-small" in r.out else f"named: {r.out.strip()[:80]}"


@attack("everyday use", "the simulator time limit is an option with its default")
def the_simulator_time_limit_is_an_option_with_its_default(lab):
    helps = [lab.cli(cmd, "--help").out for cmd in ("run", "test", "sweep")]
    return "cortexm run/test/sweep --help", None if all("--timeout" in h and "120" in h for h in helps) else "no --timeout"


# --- ownership: cortexm removes or replaces only what a manifest of its own lists ----------

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
    return "cortexm report merge r.json --json <the user's file>", _unchanged(mine, "the user's merge-mine.json\n") or r.one_error_line()


@attack("ownership", "sweep --out DIR holding the user's sweep-add-0.py")
def sweep_out_dir_holding_the_user_s_sweep_add_0_py(lab):
    d = lab.folder("own-sweep")
    (d / "sweep-add-0.py").write_text("# mine\n")
    r = lab.cli("sweep", "add", "-t", "cortex-m7", "--count", "1", "--out", str(d), timeout=1800,
                env={"CORTEXM_EXPORT_CACHE": str(_export_cache(lab))})
    return "cortexm sweep add -t cortex-m7 --count 1 --out DIR", _unchanged(d / "sweep-add-0.py", "# mine\n") or r.one_error_line()


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


# --- cache keys: a cached export is reused only when nothing it depends on changed -------------

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


# --- signals: every child dies with cortexm --------------------------------------------------

def _marked(mark: str) -> list[int]:
    """The processes whose environment carries `mark` (cortexm and everything it started)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if mark.encode() in f.read():
                    with open(f"/proc/{pid}/stat") as s:
                        if s.read().rsplit(")", 1)[1].split()[0] != "Z":
                            found.append(int(pid))
        except OSError:
            continue
    return found


def _as_in_a_terminal() -> None:
    """Ctrl-C's default action, which a process started in the background (by a script, by CI)
    inherits as ignored: cortexm then rightly ignores it too."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _signalled(lab, args: list[str], after: float, sig: int, env: dict | None = None, group: bool = False,
               exit_within: float = 15, grace: float = 3) -> str | None:
    """Start `cortexm ARGS`, send `sig` after `after` seconds; what outlived it, or None."""
    if not os.path.isdir("/proc"):
        return "needs /proc"
    mark = f"CORTEXM_ATTACK_MARK={os.getpid()}-{time.monotonic_ns()}"
    key, value = mark.split("=", 1)
    process = subprocess.Popen([sys.executable, "-m", "cortexm", *args], cwd=lab.root, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env={**os.environ, **(env or {}), key: value},
                               start_new_session=True, preexec_fn=_as_in_a_terminal)
    try:
        time.sleep(after)
        if process.poll() is not None:
            return f"cortexm ended by itself before the signal (exit {process.returncode})"
        (os.killpg if group else os.kill)(process.pid, sig)
        try:
            process.wait(timeout=exit_within)
        except subprocess.TimeoutExpired:
            return f"cortexm still ran {exit_within:.0f} s after the signal"
        time.sleep(grace)
        left = _marked(mark)
        if left:
            names = sorted({open(f"/proc/{p}/comm").read().strip() for p in left if os.path.exists(f"/proc/{p}/comm")})
            return f"{len(left)} processes outlived it {grace:.0f} s later ({', '.join(names)[:80]})"
        return None
    finally:
        for pid in _marked(mark):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if process.poll() is None:
            process.kill()
        process.wait()


def _slow_cases(lab) -> Path:
    """Four cases whose build takes 60 s each: the export workers are busy when the signal comes."""
    path = lab.root / "slow_cases.py"
    path.write_text("import time\nimport torch\nfrom cortexm.cases import register\n\n"
                    + "".join(f"@register('slow_{k}', 'a slow build')\ndef _():\n    time.sleep(60)\n"
                              "    return torch.nn.ReLU(), (torch.rand(1, 8),)\n\n" for k in range(4)))
    return path


def _export_signal(lab, sig: int, group: bool = False) -> str | None:
    return _signalled(lab, ["test", "--cases", str(_slow_cases(lab)), "-t", "cortex-m7", "--sim", "none", "-j", "2"],
                      after=25, sig=sig, group=group, env={"CORTEXM_EXPORT_CACHE": str(lab.folder("sig-exports"))})


def _build_signal(lab, sig: int) -> str | None:
    cache = lab.folder(f"sig-builds-{sig}")
    shutil.rmtree(cache, ignore_errors=True)
    return _signalled(lab, ["build", "-t", "cortex-m3"], after=25, sig=sig, grace=1,
                      env={"CORTEXM_BUILD_CACHE": str(cache)})


_SIGNALS = (
    ("SIGTERM of test while exporting", "kill -TERM of cortexm test --cases slow.py -j 2, 25 s in",
     lambda lab: _export_signal(lab, signal.SIGTERM)),
    ("SIGKILL of test while exporting", "kill -KILL of cortexm test --cases slow.py -j 2, 25 s in",
     lambda lab: _export_signal(lab, signal.SIGKILL)),
    ("Ctrl-C of test while exporting", "Ctrl-C (SIGINT to the group) of cortexm test --cases slow.py -j 2, 25 s in",
     lambda lab: _export_signal(lab, signal.SIGINT, group=True)),
    ("SIGTERM of build while compiling", "kill -TERM of cortexm build -t cortex-m3 (empty cache), 25 s in; 1 s later",
     lambda lab: _build_signal(lab, signal.SIGTERM)),
    ("SIGINT of build while compiling", "kill -INT of cortexm build -t cortex-m3 (empty cache), 25 s in; 1 s later",
     lambda lab: _build_signal(lab, signal.SIGINT)),
    ("SIGTERM of upstream-tests", "kill -TERM of cortexm upstream-tests -t cortex-m7 -k conv, 40 s in",
     lambda lab: _signalled(lab, ["upstream-tests", "-t", "cortex-m7", "-k", "conv", "--out",
                                  str(lab.folder("sig-upstream"))], after=40, sig=signal.SIGTERM)),
)
for _name, _command, _run in _SIGNALS:
    attack("signals", _name)(lambda lab, command=_command, run=_run: (command, run(lab)))


# --- verdicts that cannot be silently green ------------------------------------------------

def _case_file_verdict(lab, name: str, text: str, *args: str, timeout: float = TIMEOUT) -> Result:
    path = lab.root / name
    path.write_text(text)
    return lab.cli("test", "--cases", str(path), "-t", "cortex-m7", "--sim", "none", *args, timeout=timeout,
                   env={"CORTEXM_EXPORT_CACHE": str(_export_cache(lab))})


@attack("verdicts", "a case file that calls sys.exit(0) at import")
def a_case_file_that_calls_sys_exit_0_at_import(lab):
    r = _case_file_verdict(lab, "exiting_cases.py", "import sys\nsys.exit(0)\n")
    return "cortexm test --cases exiting.py (sys.exit(0) at import)", r.one_error_line("sys.exit")


@attack("verdicts", "a case file that loops at import")
def a_case_file_that_loops_at_import(lab):
    r = _case_file_verdict(lab, "looping_cases.py", "while True:\n    pass\n", "--timeout", "10", timeout=90)
    return "cortexm test --cases looping.py --timeout 10 (an endless loop at import)", r.one_error_line("looping_cases.py")


@attack("verdicts", "report merge with a shard missing")
def report_merge_with_a_shard_missing(lab):
    r = lab.cli("report", "merge", str(_shard_report(lab, 1, 2)))
    return "cortexm report merge shard-1-of-2.json (shard 2 missing)", r.one_error_line("2/2")


@attack("verdicts", "report merge of shards of different runs")
def report_merge_of_shards_of_different_runs(lab):
    r = lab.cli("report", "merge", str(_shard_report(lab, 1, 2)), str(_shard_report(lab, 2, 2, pattern="conv")))
    return "cortexm report merge (test -k relu --shard 1/2) (test -k conv --shard 2/2)", r.one_error_line()


@attack("verdicts", "--timeout nan and inf")
def timeout_nan_and_inf(lab):
    for value in ("nan", "inf"):
        r = lab.cli("run", str(lab.relu()), "-t", "cortex-m7", "--timeout", value, timeout=900)
        problem = r.one_error_line("--timeout")
        if problem:
            return f"cortexm run relu.pte -t cortex-m7 --timeout {value}", problem
    return "cortexm run relu.pte -t cortex-m7 --timeout nan|inf", None


@attack("verdicts", "a sidecar name with a newline")
def a_sidecar_name_with_a_newline(lab):
    d = lab.folder("forged")
    for f in lab.relu().parent.glob("relu.*"):
        shutil.copyfile(f, d / f.name)
    sidecar = json.loads((d / "relu.json").read_text())
    sidecar["name"] = "relu\nforged  PASS"
    (d / "relu.json").write_text(json.dumps(sidecar))
    r = lab.cli("test", "--pte", str(d / "relu.pte"), "-t", "cortex-m7", "--sim", "none", timeout=300)
    forged = [l for l in r.out.splitlines() if l.startswith("forged")]
    return "cortexm test --pte relu.pte (its sidecar's name has a newline)", \
        f"a forged line: {forged[0]!r}" if forged else (None if r.rc in (1, 2) else f"exit {r.rc}")


# --- parsers: linear time on any input ------------------------------------------------------

@attack("parsers", "a C header input with a 100 KB line")
def a_c_header_input_with_a_100_kb_line(lab):
    evil = lab.root / "evil.h"
    evil.write_text("a " * 50_000 + "\n")
    r = lab.cli("run", str(lab.relu()), "-t", "cortex-m7", "-i", str(evil), timeout=60)
    return "cortexm run relu.pte -i evil.h ('a ' * 50000)", r.one_error_line("evil.h")


@attack("parsers", "an .ino labels file with a 100 KB line")
def an_ino_labels_file_with_a_100_kb_line(lab):
    evil = lab.root / "evil.ino"
    evil.write_text('const char* kLabels[] = {"a"' + " " * 100_000 + "\n")
    r = lab.cli("run", str(lab.relu()), "-t", "cortex-m7", "--labels", str(evil), timeout=60)
    return "cortexm run relu.pte --labels evil.ino ('{\"a\"' and 100000 spaces)", r.one_error_line("evil.ino")


# --- sweeps: bounded memory, partial results kept --------------------------------------------

@attack("sweeps", "sweep --count 100000000")
def sweep_count_100000000(lab):
    import resource

    limit = 2 << 30
    command = [sys.executable, "-m", "cortexm", "sweep", "add", "-t", "cortex-m7", "--count", "100000000",
               "--out", str(lab.folder("big-sweep"))]
    process = subprocess.Popen(command, cwd=lab.root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True, env={**os.environ, "CORTEXM_EXPORT_CACHE": str(_export_cache(lab))},
                               preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (16 << 30, 16 << 30)))
    peak, started = 0, time.monotonic()
    try:
        while time.monotonic() - started < 90 and process.poll() is None and peak <= limit:
            try:
                rss = next(l for l in open(f"/proc/{process.pid}/status") if l.startswith("VmRSS:"))
                peak = max(peak, int(rss.split()[1]) * 1024)
            except (OSError, StopIteration):
                pass
            time.sleep(0.2)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    return ("cortexm sweep add -t cortex-m7 --count 100000000 (90 s, main process RSS)",
            f"{peak >> 20} MiB resident after {time.monotonic() - started:.0f} s" if peak > limit else None)


@attack("sweeps", "Ctrl-C in a sweep keeps the samples run")
def ctrl_c_in_a_sweep_keeps_the_samples_run(lab):
    report = lab.root / "interrupted-sweep.json"
    report.unlink(missing_ok=True)
    process = subprocess.Popen([sys.executable, "-m", "cortexm", "sweep", "add", "-t", "cortex-m7", "--count", "400",
                                "--out", str(lab.folder("int-sweep")), "--json", str(report)], cwd=lab.root,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                               env={**os.environ, "CORTEXM_EXPORT_CACHE": str(_export_cache(lab))},
                               preexec_fn=_as_in_a_terminal)
    time.sleep(150)
    os.killpg(process.pid, signal.SIGINT)
    try:
        out, err = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return "Ctrl-C of cortexm sweep add --count 400 --json r.json, 150 s in", "still ran 60 s after Ctrl-C"
    try:
        rows = json.loads(report.read_text())["results"]
    except (OSError, ValueError, KeyError):
        rows = []
    return ("Ctrl-C of cortexm sweep add --count 400 --json r.json, 150 s in",
            None if rows and process.returncode != 0 else
            f"exit {process.returncode}, {len(rows)} samples in the report: {(err.strip().splitlines() or [''])[-1][:100]}")


# --- disk full, unwritable folders ----------------------------------------------------------

def _small_disk(lab, name: str, free: int = 0, read_only: bool = False) -> Path | None:
    """A tmpfs of 1 MiB mounted at lab/name, filled to `free` bytes (None: cannot mount here)."""
    path = lab.folder(name)
    if os.path.ismount(path):
        return path
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return None
    options = "size=1M" + (",ro" if read_only else "")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True).returncode:
        return None
    lab.mounts.append(path)
    if not read_only:
        with open(path / ".filler", "wb") as f:
            try:
                f.write(b"\0" * ((1 << 20) - free))
                f.flush()
            except OSError:
                pass
    return path


def _disk_attack(lab, name, command, run, fragment="", read_only=False, free=0) -> tuple[str, str | None]:
    disk = _small_disk(lab, name, free=free, read_only=read_only)
    if disk is None:
        return command, "SKIPPED: mounting a small tmpfs needs root"
    r = run(disk)
    return command, r.one_error_line(str(disk))


@attack("disk full", "the export cache on a full disk")
def the_export_cache_on_a_full_disk(lab):
    return _disk_attack(lab, "full-cache", "CORTEXM_EXPORT_CACHE=<full disk> cortexm test -k relu --sim none",
                        lambda disk: lab.cli("test", "-t", "cortex-m7", "-k", "relu", "--grid", "none", "--sim", "none",
                                             timeout=900, env={"CORTEXM_EXPORT_CACHE": str(disk / "exports")}))


@attack("disk full", "the export cache on a read-only disk")
def the_export_cache_on_a_read_only_disk(lab):
    return _disk_attack(lab, "ro-cache", "CORTEXM_EXPORT_CACHE=<read-only> cortexm test -k relu --sim none",
                        lambda disk: lab.cli("test", "-t", "cortex-m7", "-k", "relu", "--grid", "none", "--sim", "none",
                                             timeout=900, env={"CORTEXM_EXPORT_CACHE": str(disk / "exports")}),
                        read_only=True)


@attack("disk full", "test --json on a full disk: refused before the run")
def test_json_on_a_full_disk_refused_before_the_run(lab):
    command = "cortexm test -k relu --sim none --json <full disk>/r.json"
    disk = _small_disk(lab, "full-report")
    if disk is None:
        return command, "SKIPPED: mounting a small tmpfs needs root"
    r = lab.cli("test", "-t", "cortex-m7", "-k", "relu", "--grid", "none", "--sim", "none", "--json", str(disk / "r.json"),
                timeout=900, env={"CORTEXM_EXPORT_CACHE": str(lab.folder("report-exports"))})
    ran = "exporting" in r.err or any((lab.root / "report-exports").iterdir())
    return command, r.one_error_line(str(disk)) or ("it ran the cases first" if ran else None)


@attack("disk full", "test --json no/such/dir/r.json")
def test_json_no_such_dir_r_json(lab):
    target = lab.root / "no" / "such" / "dir" / "r.json"
    r = lab.cli("test", "-t", "cortex-m7", "-k", "relu", "--grid", "none", "--sim", "none", "--json", str(target),
                timeout=900, env={"CORTEXM_EXPORT_CACHE": str(_export_cache(lab))})
    return "cortexm test -k relu --sim none --json no/such/dir/r.json", \
        None if target.is_file() or (r.rc == 2 and not r.one_error_line()) else r.one_error_line() or "no report written"


@attack("disk full", "export onto a full disk, then again with space")
def export_onto_a_full_disk_then_again_with_space(lab):
    command = "cortexm export relu -o <disk with 8 KiB free>/X.pte; free the disk; the same again"
    disk = _small_disk(lab, "full-export", free=8 << 10)
    if disk is None:
        return command, "SKIPPED: mounting a small tmpfs needs root"
    r = lab.cli("export", "relu", "-t", "cortex-m7", "-o", str(disk / "out" / "X.pte"))
    problem = r.one_error_line(str(disk))
    (disk / ".filler").unlink()
    again = lab.cli("export", "relu", "-t", "cortex-m7", "-o", str(disk / "out" / "X.pte"))
    return command, problem or (None if again.rc == 0 else f"the rerun: {again.one_error_line()}")


@attack("disk full", "a runner build on a full disk")
def a_runner_build_on_a_full_disk(lab):
    return _disk_attack(lab, "full-builds", "CORTEXM_BUILD_CACHE=<full disk> cortexm build -t cortex-m3",
                        lambda disk: lab.cli("build", "-t", "cortex-m3", timeout=900,
                                             env={"CORTEXM_BUILD_CACHE": str(disk / "builds")}))


# --- round 4: a bundle is data ----------------------------------------------------------------

def _bundle_copy(lab, folder: str, case: str = "add") -> Path:
    """A copy of `case`'s M7 bundle in its own folder: what a colleague sends."""
    source = lab.exported(case)
    d = lab.folder(folder)
    for file in source.parent.glob(f"{case}.*"):
        shutil.copy(file, d / file.name)
    return d / f"{case}.pte"


def _rewritten(pte: Path, name: str, data: bytes) -> None:
    """The bundle's file `name` replaced, its manifest entry updated to match (a hostile author)."""
    import hashlib

    (pte.parent / name).write_bytes(data)
    sidecar = json.loads(pte.with_suffix(".json").read_text())
    if isinstance(sidecar.get("written"), dict):
        sidecar["written"][name] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    pte.with_suffix(".json").write_text(json.dumps(sidecar))


def _inputs_of(pte: Path) -> list[str]:
    sidecar = json.loads(pte.with_suffix(".json").read_text())
    return [a for e in sidecar["inputs"] for a in ("-i", str(pte.parent / e["file"]))]


@attack("bundle data", "a .pt2 in the bundle whose pickle writes a file")
def crafted_pt2_runs_no_code(lab):
    import io
    import zipfile

    pte = _bundle_copy(lab, "crafted", "add")
    marker = lab.root / "written-by-the-bundle"
    model = pte.parent / "add.quantized.pt2"
    source, out = zipfile.ZipFile(io.BytesIO(model.read_bytes())), io.BytesIO()
    config = {"config": {"w": {"path_name": "weight_0", "is_param": False, "use_pickle": True, "tensor_meta": None}}}
    payload = b"c__builtin__\nopen\n(V" + str(marker).encode() + b"\nVw\ntR."  # pickle: open(marker, "w")
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as target:
        for info in source.infolist():
            if info.filename != "archive/data/weights/model_weights_config.json":
                target.writestr(info, source.read(info.filename))
        target.writestr("archive/data/weights/model_weights_config.json", json.dumps(config))
        target.writestr("archive/data/weights/weight_0", payload)
    _rewritten(pte, model.name, out.getvalue())
    r = lab.cli("run", str(pte), "-t", "cortex-m7", *_inputs_of(pte), timeout=600)
    if marker.exists():
        return "cortexm run X.pte -i IN (crafted X.quantized.pt2)", "the bundle's pickle ran: it wrote a file"
    return "cortexm run X.pte -i IN (crafted X.quantized.pt2)", r.one_error_line("add.quantized.pt2")


@attack("bundle data", "a sidecar naming a model outside its bundle (../)")
def sidecar_model_outside(lab):
    pte = _bundle_copy(lab, "outside/bundle", "add")
    shutil.copy(pte.parent / "add.quantized.pt2", pte.parent.parent / "elsewhere.pt2")
    sidecar = json.loads(pte.with_suffix(".json").read_text())
    sidecar["semantic"]["models"]["quantized"] = "../elsewhere.pt2"
    pte.with_suffix(".json").write_text(json.dumps(sidecar))
    r = lab.cli("run", str(pte), "-t", "cortex-m7", *_inputs_of(pte), timeout=600)
    return "cortexm run X.pte -i IN (sidecar: ../elsewhere.pt2)", r.one_error_line("not a file name in its folder")


@attack("bundle data", "one changed element of X.reference-0.bin")
def changed_reference(lab):
    pte = _bundle_copy(lab, "changedref", "add")
    reference = pte.parent / "add.reference-0.bin"
    data = bytearray(reference.read_bytes())
    data[0] ^= 0x40
    reference.write_bytes(bytes(data))
    r = lab.cli("run", str(pte), "-t", "cortex-m7", timeout=600)
    return "cortexm run X.pte (a reference element changed)", r.one_error_line("add.reference-0.bin changed since")


# --- round 4: a verdict is for the content that was built --------------------------------------

@attack("verdicts", "$CORTEXM_RUNNERS and --executorch-src of a mutated tree")
def stale_prebuilt_runner(lab):
    from cortexm import sources

    _r, elf = _built_m7(lab)
    built = {"elf": str(elf)} if elf is not None else None
    tree = sources.locate(sources.EXECUTORCH).path
    if built is None or tree is None:
        return "-", "SKIPPED: no M7 runner or ExecuTorch tree here"
    mutated = lab.folder("mutated-tree")
    for rel in ("backends/cortex_m/ops/operators.yaml", "backends/cortex_m/ops/op_quantized_add.cpp"):
        (mutated / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(tree / rel, mutated / rel)
    (mutated / "backends/cortex_m/ops/op_quantized_add.cpp").write_text(
        (tree / "backends/cortex_m/ops/op_quantized_add.cpp").read_text() + "\n// one line changed\n")
    prebuilt = str(Path(built["elf"]).parent)
    r = lab.cli("build", "-t", "cortex-m7", "--executorch-src", str(mutated), "--json", timeout=60,
                env={"CORTEXM_RUNNERS": prebuilt, "CORTEXM_TOOLCHAIN_PREFIX": str(lab.root / "no-toolchain-")})
    if r.rc == 0 and built["elf"] in r.out:
        return "CORTEXM_RUNNERS=R cortexm build --executorch-src MUTATED", "the prebuilt runner served another tree"
    return "CORTEXM_RUNNERS=R cortexm build --executorch-src MUTATED", r.one_error_line("not found")


# --- round 4: readers bounded by the file's size -----------------------------------------------

def _adversarial():
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    import adversarial

    return adversarial


@attack("readers", "inspect a 3 MB .pte whose 100,000 values share one 100,000-item list")
def shared_list_program(lab):
    path = lab.folder("readers") / "shared.pte"
    path.write_bytes(_adversarial().shared_list_program())
    r = lab.cli("inspect", str(path), timeout=60)
    return "cortexm inspect shared.pte", r.one_error_line("share their items")


@attack("readers", "verify --library a schema with a 120 KB line of spaces")
def long_line_schema(lab):
    schema = lab.folder("readers") / "schema.yaml"
    schema.write_text(_adversarial().long_line_schema(120_000))
    r = lab.cli("verify", str(lab.relu()), "--library", str(schema), timeout=30)
    return "cortexm verify X.pte --library schema.yaml", r.one_error_line("cannot parse schema")


@attack("readers", "a sidecar nested 100,000 deep")
def deep_sidecar(lab):
    d = lab.folder("deep")
    shutil.copy(lab.relu(), d / "relu.pte")
    (d / "relu.json").write_text(_adversarial().deep_json())
    r = lab.cli("verify", str(d / "relu.pte"), timeout=30)
    return "cortexm verify X.pte (X.json nested deep)", r.one_error_line("nested deeper than")


# --- round 4: one ownership rule for every writer ------------------------------------------------

def _keep_run_started(lab, d: Path, until) -> subprocess.Popen:
    """`cortexm run relu --keep d` started in the background, returned once `until()` holds."""
    process = subprocess.Popen([sys.executable, "-m", "cortexm", "run", str(lab.relu()), "-t", "cortex-m7", "--keep", str(d)],
                               cwd=lab.root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not until():
        time.sleep(0.02)
    return process


@attack("writers", "run --keep DIR killed with SIGKILL, then run --keep DIR again")
def killed_keep_then_rerun(lab):
    d = lab.root / "killed-keep"
    process = _keep_run_started(lab, d, lambda: (d / "program.pte").exists())
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    if not (d / "program.pte").exists():
        return "cortexm run --keep DIR (kill -9), again", "SKIPPED: the run never wrote its folder"
    r = lab.cli("run", str(lab.relu()), "-t", "cortex-m7", "--keep", str(d), timeout=300)
    return "cortexm run --keep DIR (kill -9), again", None if r.rc == 0 else f"the rerun: {r.one_error_line() or r.rc}"


@attack("writers", "a file saved into the --keep folder during the run, then a second run")
def saved_during_run_not_adopted(lab):
    d = lab.root / "saved-during"
    process = _keep_run_started(lab, d, d.is_dir)
    (d / "notes.txt").write_text("mine\n") if d.is_dir() else None
    process.wait(timeout=300)
    lab.cli("run", str(lab.relu()), "-t", "cortex-m7", "--keep", str(d), "--force", timeout=300)
    return "cortexm run --keep DIR (a file saved meanwhile), again", _unchanged(d / "notes.txt", "mine\n")


@attack("writers", "sweep --out DIR holding the user's file: the refusal's advice")
def sweep_advice(lab):
    d = lab.folder("sweep-advice")
    (d / "sweep-add-0.py").write_text("mine\n")
    r = lab.cli("sweep", "add", "-t", "cortex-m7", "--count", "1", "--out", str(d), timeout=300)
    if "--force" in r.err:
        return "cortexm sweep add --out DIR", "it advises --force, which sweep does not take"
    return "cortexm sweep add --out DIR", _unchanged(d / "sweep-add-0.py", "mine\n") or r.one_error_line()


@attack("writers", "export -o NAME.pte where NAME fits the limit but NAME.quantized.pt2 does not")
def long_output_name(lab):
    d = lab.folder("long-name")
    r = lab.cli("export", "relu", "-t", "cortex-m7", "-o", str(d / ("n" * 245 + ".pte")), timeout=600)
    leftovers = [p.name for p in d.iterdir()]
    if leftovers:
        return "cortexm export relu -o <245 characters>.pte", f"it left {len(leftovers)} files"
    return "cortexm export relu -o <245 characters>.pte", r.one_error_line("too long")


# --- round 4: one process per output -----------------------------------------------------------

@attack("locks", "two run --keep DIR at once")
def two_runs_one_folder(lab):
    d = lab.root / "two-runs"
    first = _keep_run_started(lab, d, d.is_dir)
    second = lab.cli("run", str(lab.relu()), "-t", "cortex-m7", "--keep", str(d), timeout=300)
    first.wait(timeout=300)
    return "cortexm run --keep DIR, twice at once", second.one_error_line("being written by another cortexm")


# --- round 4: reports well-formed whatever the data -----------------------------------------------

@attack("reports", "test --baseline of other cases: nothing compared")
def baseline_compares_nothing(lab):
    base = lab.folder("reports") / "other.json"
    base.write_text(json.dumps({"results": [{"case": "elsewhere", "core": "cortex-m3", "instructions": 5}]}))
    r = lab.cli("test", "-t", "cortex-m7", "-k", "relu", "--grid", "none", "--sim", "none", "--baseline", str(base),
                timeout=600)
    if r.rc == 1 and "NOTHING COMPARED" in r.out:
        return "cortexm test --baseline OTHER.json", None
    return "cortexm test --baseline OTHER.json", f"exit {r.rc}: {(r.out.strip().splitlines() or [''])[-1][:100]}"


@attack("reports", "--json r.json --junit ./r.json")
def same_report_two_spellings(lab):
    d = lab.folder("spellings")
    r = lab.cli("test", "-t", "cortex-m7", "-k", "relu", "--grid", "none", "--sim", "none", "--json", "r.json",
                "--junit", "./r.json", timeout=600, cwd=d)
    return "cortexm test --json r.json --junit ./r.json", r.one_error_line("given to both")


@attack("reports", "run --save into a missing folder")
def save_into_missing_folder(lab):
    target = lab.root / "missing" / "deeper" / "out.npy"
    r = lab.cli("run", str(lab.relu()), "-t", "cortex-m7", "--save", str(target), timeout=300)
    return "cortexm run X.pte --save missing/deeper/out.npy", None if r.rc == 0 and target.is_file() else \
        f"exit {r.rc}: {(r.err.strip().splitlines() or [''])[-1][:100]}"


@attack("reports", "a folder name with a terminal escape sequence")
def escape_sequence_in_a_path(lab):
    d = lab.folder("x\x1b[2Ky")
    shutil.copy(lab.relu(), d / "relu.pte")
    r = subprocess.run(["script", "-qc", f"{sys.executable} -m cortexm inspect '{d / 'relu.pte'}'", "/dev/null"],
                       capture_output=True, text=True, cwd=lab.root, timeout=60)
    if "\x1b[2K" in r.stdout.replace("\\x1b", ""):
        return "cortexm inspect 'x<ESC>[2Ky/relu.pte' (on a terminal)", "the escape sequence reached the terminal raw"
    return "cortexm inspect 'x<ESC>[2Ky/relu.pte' (on a terminal)", None if "\\x1b[2K" in r.stdout else \
        f"the name is not shown escaped: {r.stdout[:100]!r}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="only attacks whose group or name contains this")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    import cortexm

    print(f"cortexm from {Path(cortexm.__file__).parent.parent}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="cortexm-attacks-") as tmp:
        lab = Lab(Path(tmp))
        try:
            for group, name, fn in ATTACKS:
                if args.only and args.only not in f"{group} {name}":
                    continue
                started = time.monotonic()
                try:
                    command, problem = fn(lab)
                except Exception as e:  # an attack that breaks is reported, the others still run
                    command, problem = "-", f"the attack itself failed: {type(e).__name__}: {e}"
                verdict = ("HELD" if problem is None else
                           "SKIPPED" if problem.startswith("SKIPPED: ") else "FAILED")
                problem = (problem or "").removeprefix("SKIPPED: ")
                rows.append({"group": group, "attack": name, "command": command, "verdict": verdict,
                             "seen": problem, "seconds": round(time.monotonic() - started, 1)})
                print(f"{verdict:7} {group:13} {name:68} {problem}", flush=True)
        finally:
            for mount in lab.mounts:
                subprocess.run(["umount", "-l", str(mount)], capture_output=True)
    held = sum(r["verdict"] == "HELD" for r in rows)
    skipped = sum(r["verdict"] == "SKIPPED" for r in rows)
    print(f"\n{held} of {len(rows) - skipped} attacks held" + (f" ({skipped} skipped: they need root)" if skipped else ""))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    sys.exit(1 if any(r["verdict"] == "FAILED" for r in rows) else 0)


if __name__ == "__main__":
    main()
