"""The zoo tier: `cortexm test` on models nobody here wrote for it, every verdict proven.

    python bench/zoo.py [-t cortex-m7 -t cortex-m55] [-k PATTERN] [--report zoo.json]
        [--json proofs.json] [--doc docs/zoo.md]

In: the zoo's case file, bench/zoo/models.py (small models of the public families people
deploy on microcontrollers, written in plain PyTorch). What it does:

  1. runs `cortexm test --cases bench/zoo/models.py -t CORE... --json REPORT` (or reads an
     earlier run's REPORT with --report) and times it: the tier's wall time;
  2. `cortexm fit` of every program cortexm exported, on the core's QEMU board;
  3. for every (model, core), proves the verdict by the path of bench/zoo/proof.py, which
     imports none of cortexm's judges: the model lowered again by upstream's flow, the judged
     program run on the simulator, its outputs against upstream's Python reference of the
     lowered program (ops/operators.py), against the PT2E quantized model and against the float
     model on the model's own example input; for a failure, the failure shown by its own path.

Out: a table (model, core, verdict, reason, proof, SQNR against float on the example input,
fit), the counts of false FAIL (cortexm failed what the proof finds right) and wrong PASS
(cortexm passed what the proof finds wrong), and the tier's wall time; --doc writes the same as
Markdown (docs/zoo.md), --json every piece of evidence. Exit status 1 when either count is not
0 or the test run gave no report.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "bench" / "zoo" / "models.py"
CORTEXM = [sys.executable, "-m", "cortexm"]
# Upstream defects a zoo verdict hits (docs/defects.md): case -> core or "*" -> the entry's title.
DEFECTS: dict[str, dict[str, str]] = {
    "zoo_causal_mixer": {"*": "ExecuTorch cortex_m quantize_per_tensor of -inf"},
    "zoo_hardswish": {"*": "ExecuTorch cortex_m hardswish, its + 3 rounded into a zero point"},
}


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _env() -> dict:
    """cortexm from this checkout, on torch's portable float kernels as cortexm lowers."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    env.update({"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41", "MKL_CBWR": "COMPATIBLE"})
    return env


def run_tier(cores: list[str], pattern: str | None, report: Path) -> float:
    cmd = [*CORTEXM, "test", "--cases", str(MODELS), *[a for c in cores for a in ("-t", c)], "--json", str(report)]
    if pattern:
        cmd += ["-k", pattern]
    print("$ " + " ".join(cmd[2:]), flush=True)
    started = time.perf_counter()
    subprocess.run(cmd, env=_env(), cwd=ROOT)
    return time.perf_counter() - started


def fit(pte: str, core: str) -> str:
    """`cortexm fit` on the core's QEMU board: 'fits, x % flash, y % RAM' or why not."""
    done = subprocess.run([*CORTEXM, "fit", pte, "-t", core, "--json"], capture_output=True, text=True, env=_env(), cwd=ROOT)
    try:
        data = json.loads(done.stdout)
    except json.JSONDecodeError:
        lines = (done.stderr.strip() or done.stdout.strip()).splitlines()
        return f"fit failed: {lines[-1][:120] if lines else done.returncode}"
    return describe_fit(data)


def describe_fit(data: dict) -> str:
    """Flash (code and program) and RAM (the rest) the program needs, and the boards it fits."""
    flash = sum(n["nbytes"] for n in data["needs"] if n["role"] in ("code", "program"))
    ram = sum(n["nbytes"] for n in data["needs"]) - flash
    fits = [b["board"] for b in data["boards"] if b["fits"]]
    misses = [b["board"] for b in data["boards"] if not b["fits"]]
    return (f"flash {flash / 1024:.0f} KiB, RAM {ram / 1024:.0f} KiB; fits {', '.join(fits) or 'no board'}"
            + (f"; not {', '.join(misses)}" if misses else ""))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-t", "--target", dest="cores", action="append", help="core (default cortex-m7 and cortex-m55)")
    parser.add_argument("-k", dest="pattern", help="only zoo models whose name contains PATTERN")
    parser.add_argument("--report", type=Path, help="judge this earlier `cortexm test` report instead of running the tier "
                        "(where no file is there yet, the tier runs and writes it there)")
    parser.add_argument("--json", type=Path, help="write every verdict and its evidence here")
    parser.add_argument("--doc", type=Path, help="write the table as Markdown here (docs/zoo.md)")
    parser.add_argument("--no-fit", action="store_true", help="skip `cortexm fit`")
    args = parser.parse_args()
    cores = args.cores or ["cortex-m7", "cortex-m55"]

    os.environ.update(_env())  # before torch: the proof lowers as cortexm does
    sys.path.insert(0, str(ROOT))
    report = args.report or Path(tempfile.mkdtemp(prefix="zoo-")) / "report.json"
    wall = None
    timing = report.with_suffix(".seconds")  # the tier's wall time, beside the report it wrote
    if not report.is_file():
        wall = run_tier(cores, args.pattern, report)
        timing.write_text(f"{wall:.1f}\n")
    elif timing.is_file():
        wall = float(timing.read_text())
    if not report.is_file():
        print(f"error: no report at {report}", file=sys.stderr)
        return 1
    results = [r for r in json.loads(report.read_text())["results"] if r["core"] in cores
               and r["case"].startswith("zoo_") and (not args.pattern or args.pattern in r["case"])]

    from cortexm.lowering import source

    source.choose()  # the trees' backends/cortex_m Python and CMSIS-NN, as the test run lowered
    proof = _load(ROOT / "bench" / "zoo" / "proof.py", "zoo_proof")
    _load(MODELS, "zoo_models")
    from cortexm.cases.registry import REGISTRY

    rows = []
    started = time.perf_counter()
    for case in dict.fromkeys(r["case"] for r in results):
        q = proof.quantize(REGISTRY[case])
        for r in (r for r in results if r["case"] == case):
            pte = Path(r["pte"]) if r.get("pte") else None
            judged = {"pte": str(pte), "sidecar": json.loads(pte.with_suffix(".json").read_text())} \
                if pte and pte.is_file() and pte.with_suffix(".json").is_file() else None
            target = next(c for c in _cores() if c.name == r["core"]).target_string
            ev = proof.prove(q, r["core"], target, judged, CORTEXM)
            stages = sorted({f[0] for f in r.get("failures") or []})
            ok, why = proof.proven(r["status"], stages, ev)
            real = (r.get("accuracy_real") or {}).get("example") or {}
            rows.append({"case": case, "core": r["core"], "status": r["status"], "stages": stages,
                         "reason": r.get("reason", ""), "proven": ok, "proof": why, "evidence": asdict(ev),
                         "sqnr_real": real.get("sqnr_db"), "sqnr_proof": ev.float_sqnr,
                         "fit": fit(str(pte), r["core"]) if judged and not args.no_fit else "-",
                         "defect": DEFECTS.get(case, {}).get(r["core"]) or DEFECTS.get(case, {}).get("*", "")})
            print(_line(rows[-1]), flush=True)
    proving = time.perf_counter() - started

    false_fail = sum(1 for x in rows if x["status"] != "PASS" and not x["proven"])
    wrong_pass = sum(1 for x in rows if x["status"] == "PASS" and not x["proven"])
    summary = {"results": len(rows), "pass": sum(x["status"] == "PASS" for x in rows),
               "failed": sum(x["status"] != "PASS" for x in rows), "proven": sum(x["proven"] for x in rows),
               "false_fail": false_fail, "wrong_pass": wrong_pass, "tier_seconds": wall, "proof_seconds": proving}
    print(f"\n{summary['results']} verdicts ({summary['pass']} PASS, {summary['failed']} not), {summary['proven']} proven; "
          f"false FAIL {false_fail}, wrong PASS {wrong_pass}; tier {_secs(wall)}, proofs {_secs(proving)}")
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1, default=str))
    if args.doc:
        args.doc.write_text(markdown(rows, summary, cores))
    return 1 if false_fail or wrong_pass else 0


def _cores():
    from cortexm.base import targets

    return [targets.core(n) for n in ("cortex-m3", "cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55")]


def _secs(value: float | None) -> str:
    if value is None:
        return "-"
    minutes, seconds = divmod(round(value), 60)
    return f"{minutes} min {seconds} s" if minutes else f"{seconds} s"


def _sqnr(value) -> str:
    if value is None:
        return "-"
    return "exact" if value == float("inf") else f"{value:.1f} dB"


def _line(x: dict) -> str:
    return (f"{x['case']:24} {x['core']:11} {x['status']:6} {'proven' if x['proven'] else 'NOT PROVEN':10} "
            f"{_sqnr(x['sqnr_proof']):>9}  {x['proof'][:110]}")


def markdown(rows: list[dict], summary: dict, cores: list[str]) -> str:
    out = ["# The zoo tier", "",
           "Generated by `python bench/zoo.py --doc docs/zoo.md` (README, \"The zoo tier\"). Each row is one",
           "model on one core: cortexm's verdict and reason, what the independent proof (`bench/zoo/proof.py`)",
           "found, the SQNR of the simulator's output against the float model on the model's example input",
           "(cortexm's own measure, then the proof's), and `cortexm fit` on the core's QEMU board.", "",
           f"{summary['results']} verdicts on {', '.join(cores)}: {summary['pass']} PASS, {summary['failed']} not; "
           f"{summary['proven']} proven by the independent path. **False FAIL: {summary['false_fail']}. "
           f"Wrong PASS: {summary['wrong_pass']}.** Tier wall time (`cortexm test` on 2 cores, this run): "
           f"{_secs(summary['tier_seconds'])}; the proofs: {_secs(summary['proof_seconds'])}.", "",
           "| model | core | verdict | reason | proof | SQNR vs float (cortexm / proof) | fit |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for x in rows:
        reason = x["reason"].replace("|", "\\|")[:220] or "-"
        if x["defect"]:
            reason += f" (upstream defect: {x['defect']}, docs/defects.md)"
        proof = ("proven: " if x["proven"] else "**NOT PROVEN**: ") + x["proof"].replace("|", "\\|")[:260]
        out.append(f"| {x['case']} | {x['core']} | {x['status']} | {reason} | {proof} | "
                   f"{_sqnr(x['sqnr_real'])} / {_sqnr(x['sqnr_proof'])} | {x['fit']} |")
    # A document of the project names no folder of the machine it was made on.
    text = re.sub(r"\(log: [^)|]*\)?", "(its build log)", "\n".join(out))
    return text.replace(str(Path.home()), "~") + "\n"


if __name__ == "__main__":
    sys.exit(main())
