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
        lines = [l for l in self.err.splitlines() if l.strip() and not l.startswith(("library:", "warning:", "note:"))]
        if "Traceback" in self.err + self.out:
            return f"exit {self.rc} with a traceback"
        if self.rc != 2 or len(lines) != 1 or not lines[0].startswith("error: "):
            return f"exit {self.rc}: {(lines or ['(nothing)'])[-1][:120]}"
        missing = [f for f in fragments if f not in lines[0]]
        return f"says {lines[0][:120]!r}" if missing else None


class Lab:
    def __init__(self, root: Path) -> None:
        self.root = root

    def cli(self, *args: str, timeout: float = TIMEOUT, env: dict | None = None) -> Result:
        started = time.monotonic()
        process = subprocess.Popen([sys.executable, "-m", "cortexm", *args], cwd=self.root, text=True,
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
def _(lab):
    d = lab.folder("own1")
    (d / "X.pte").write_text("mine\n")
    r = lab.cli("export", "relu", "-t", "cortex-m7", "-o", str(d / "X.pte"))
    return "cortexm export relu -t cortex-m7 -o d/X.pte", _unchanged(d / "X.pte", "mine\n") or r.one_error_line()


@attack("user files", "export over the user's X.dialect.txt and X.input-0.bin (no X.json)")
def _(lab):
    d = lab.folder("own2")
    for name in ("X.dialect.txt", "X.input-0.bin"):
        (d / name).write_text("mine\n")
    r = lab.cli("export", "relu", "-t", "cortex-m7", "-o", str(d / "X.pte"))
    return ("cortexm export relu -t cortex-m7 -o d/X.pte",
            _unchanged(d / "X.dialect.txt", "mine\n") or _unchanged(d / "X.input-0.bin", "mine\n") or r.one_error_line())


@attack("user files", "run --keep DIR holding the user's program.pte")
def _(lab):
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
def _(lab):
    def flip(folder):
        pte = folder / "relu.pte"
        data = bytearray(pte.read_bytes())
        data[len(data) // 2] ^= 0x01
        pte.write_bytes(bytes(data))
    return _damaged_export(lab, flip, "one bit flipped in relu.pte")


@attack("caches", "truncated cached reference")
def _(lab):
    def truncate(folder):
        ref = next(folder.glob("*.reference-0.bin"))
        ref.write_bytes(ref.read_bytes()[:7])
    return _damaged_export(lab, truncate, "relu.reference-0.bin cut to 7 B")


@attack("caches", "bit-flipped cached sidecar")
def _(lab):
    def edit(folder):
        sidecar = folder / "relu.json"
        sidecar.write_text(sidecar.read_text().replace('"qtol": 0', '"qtol": 9'))
    return _damaged_export(lab, edit, "relu.json's qtol edited")


@attack("caches", "temporary folder of a killed run")
def _(lab):
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
def _(lab):
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
def _(lab):
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
def _(lab):
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
def _(lab):
    fifo = lab.root / "fifo.pte"
    if not fifo.exists():
        os.mkfifo(fifo)
    return "cortexm inspect fifo.pte", lab.cli("inspect", str(fifo), timeout=20).one_error_line()


@attack("special files", "verify /dev/zero")
def _(lab):
    return "cortexm verify /dev/zero", lab.cli("verify", "/dev/zero", timeout=20).one_error_line()


@attack("special files", "inspect /dev/urandom")
def _(lab):
    return "cortexm inspect /dev/urandom", lab.cli("inspect", "/dev/urandom", timeout=20).one_error_line()


@attack("special files", "inspect a 3 GiB file")
def _(lab):
    big = lab.root / "big.pte"
    with open(big, "wb") as f:
        f.truncate(3 << 30)  # sparse: costs no disk
    r = lab.cli("inspect", str(big), timeout=20)
    big.unlink()
    slow = f" after {r.seconds:.1f} s" if r.seconds > 5 else ""
    return "cortexm inspect big.pte (3 GiB)", (r.one_error_line() or "") + slow or None


@attack("special files", "run a directory")
def _(lab):
    return "cortexm run DIR -t cortex-m7", lab.cli("run", str(lab.folder("adir")), "-t", "cortex-m7").one_error_line("directory")


# --- exit 2, not 3 ----------------------------------------------------------------------------

@attack("bad input", "-o somefile/x.pte")
def _(lab):
    (lab.root / "somefile").write_text("mine\n")
    r = lab.cli("export", "relu", "-t", "cortex-m7", "-o", str(lab.root / "somefile" / "x.pte"))
    slow = f"; answered after {r.seconds:.0f} s" if r.seconds > 20 else ""
    return "cortexm export relu -t cortex-m7 -o somefile/x.pte", ((r.one_error_line() or "") + slow) or None


@attack("bad input", "a 300-character output name")
def _(lab):
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
def _(lab):
    kws = _kws()
    if kws is None:
        return "cortexm run KeywordSpotting/model.pte -i mfcc_yes.h", "no ExecuTorch tree with the Arduino example here"
    r = lab.cli("run", str(kws / "model.pte"), "-t", "cortex-m7", "-i", str(kws / "mfcc_yes.h"),
                "--labels", str(kws / "KeywordSpotting.ino"), timeout=900)
    return ("cortexm run model.pte -t cortex-m7 -i mfcc_yes.h --labels KeywordSpotting.ino",
            None if r.rc == 0 and "top 3: 2 yes" in r.out else f"exit {r.rc}: {(r.err or r.out).strip()[-120:]}")


@attack("everyday use", "run with a .npy input and --save")
def _(lab):
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
def _(lab):
    d = lab.folder("bare")
    shutil.copyfile(lab.exported("conv2d"), d / "conv.pte")  # no sidecar: the core it was lowered for is unknown
    r = lab.cli("verify", str(d / "conv.pte"))
    return ("cortexm verify conv.pte (lowered for the M7, no sidecar)",
            None if r.rc == 1 and "cortex-m55" in r.out else f"exit {r.rc}: {r.out.strip()[-160:]}")


@attack("everyday use", "run a program planned for another core: refused before the build")
def _(lab):
    r = lab.cli("run", str(lab.exported("conv2d")), "-t", "cortex-m55", "--executorch-src", str(lab.folder("no-tree")))
    problem = r.one_error_line("scratch", "--no-audit")
    return "cortexm run conv-m7.pte -t cortex-m55", problem + f" ({r.seconds:.0f} s)" if problem else None


@attack("everyday use", "model.pte files are named by their folder")
def _(lab):
    d = lab.folder("kws-small")
    shutil.copyfile(lab.relu(), d / "model.pte")
    r = lab.cli("verify", str(d / "model.pte"), "-t", "cortex-m7")
    return "cortexm verify kws-small/model.pte -t cortex-m7", None if "kws-small" in r.out else f"named: {r.out.strip()[:80]}"


@attack("everyday use", "the simulator time limit is an option with its default")
def _(lab):
    helps = [lab.cli(cmd, "--help").out for cmd in ("run", "test", "sweep")]
    return "cortexm run/test/sweep --help", None if all("--timeout" in h and "120" in h for h in helps) else "no --timeout"


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
        for group, name, fn in ATTACKS:
            if args.only and args.only not in f"{group} {name}":
                continue
            started = time.monotonic()
            try:
                command, problem = fn(lab)
            except Exception as e:  # an attack that breaks is reported, the others still run
                command, problem = "-", f"the attack itself failed: {type(e).__name__}: {e}"
            verdict = "HELD" if problem is None else "FAILED"
            rows.append({"group": group, "attack": name, "command": command, "verdict": verdict,
                         "seen": problem or "", "seconds": round(time.monotonic() - started, 1)})
            print(f"{verdict:6} {group:13} {name:68} {problem or ''}", flush=True)
    held = sum(r["verdict"] == "HELD" for r in rows)
    print(f"\n{held} of {len(rows)} attacks held")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
