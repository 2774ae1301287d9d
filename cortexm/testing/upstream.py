"""ExecuTorch's own cortex_m test suite (backends/cortex_m/test) on this project's runners.

What enters: the suite of the installed executorch or of an ExecuTorch tree, and cores.
What leaves: per core, pytest's own verdicts (JUnit), what the upstream xfail marks
cover here, the runners used and where the time went.

Upstream's implementation tests run a program on a Corstone-300 FVP through two hooks of
the Arm backend's test harness: `get_elf_path` (which runner ELF) and `run_corstone`
(write the program and inputs, run the simulator with the semihosting protocol, read the
outputs back). `route(core)` replaces both inside one pytest session: the runner is this
project's for the core (the operators upstream's build_test_runner.sh registers plus the
suite's; a program calling one more gets a runner with it too), the simulator QEMU (or
the FVP), the protocol upstream's own, so its input encoding and output reading are used
as they are. The pytest plugin (cortexm.testing.pytest_plugin) turns it on with
`--cortexm-core CORE`; `cortexm upstream-tests` runs one such session per core.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

from cortexm.base import writes
from cortexm.base.errors import CortexmError

if TYPE_CHECKING:
    from cortexm.firmware.build import Runner

# Where the session reports (one JSON per core: timing, runners, xfail outcomes).
STATS_ENV = "CORTEXM_UPSTREAM_STATS"
# Where a routed session writes "DONE TOTAL" as its tests finish (pytest_plugin), for the
# parent's progress per core.
PROGRESS_ENV = "CORTEXM_UPSTREAM_PROGRESS"
SIM_ENV = "CORTEXM_UPSTREAM_SIM"
# Test modules that need packages upstream lists only as optional, with the install hint.
OPTIONAL_MODULES = {"torchvision": "pip install torchvision", "torchaudio": "pip install torchaudio",
                    "timm": "pip install timm", "transformers": "pip install transformers"}


def runner_ops(executorch_src: Path) -> tuple[str, ...]:
    """upstream's test-runner operator list (build_test_runner.sh) and the suite's."""
    from cortexm.firmware.ops import suite_ops

    script = Path(executorch_src) / "backends" / "cortex_m" / "test" / "build_test_runner.sh"
    listed: set[str] = set()
    if script.is_file():
        block = re.search(r"ops_list=\((.*?)\)", script.read_text(), re.S)
        listed = set(block.group(1).split()) if block else set()
    return tuple(sorted(listed | set(suite_ops())))


class Routing:
    """The state of one routed session: the core, its runners by operator set, the times."""

    def __init__(self, core_name: str, sim_name: str) -> None:
        from cortexm import sources
        from cortexm.base.targets import core

        self.core = core(core_name)
        self.sim_name = sim_name
        self.tree = sources.require(sources.EXECUTORCH)
        self.ops = set(runner_ops(self.tree))
        self.runners: dict[str, Runner] = {}  # by ELF path
        self.current: Runner | None = None  # the runner with every operator needed so far
        self.seconds = {"simulation": 0.0, "runner builds": 0.0}
        self.programs = 0
        self.started = time.perf_counter()

    def runner(self, ops: set[str]) -> Runner:
        from cortexm.firmware import build_runner

        started = time.perf_counter()
        wanted = self.ops | ops
        try:
            built = build_runner(self.core, ops=sorted(wanted))
        finally:
            self.seconds["runner builds"] += time.perf_counter() - started
        # Only now: an operator the tree has no kernel for fails its own test, not every later one.
        self.ops = wanted
        self.runners[str(built.elf)] = self.current = built
        return built

    def report(self) -> dict:
        latest = max(self.runners.values(), key=lambda r: len(r.ops), default=None)
        return {"core": self.core.name, "programs": self.programs, "seconds": self.seconds,
                "wall": time.perf_counter() - self.started,
                "runner": str(latest.elf) if latest else None, "ops": sorted(self.ops)}


def route(core_name: str, sim_name: str = "qemu") -> Routing:
    """Send the Arm test harness's FVP runs of this process to `core_name`'s runner."""
    import executorch.backends.arm.test.runner_utils as runner_utils
    import executorch.backends.arm.test.tester.serialize as serialize

    routing = Routing(core_name, sim_name)
    first = routing.runner(set())

    def get_elf_path(target_board, use_portable_ops=False, build_dir_suffix=""):
        return str(first.elf)

    def run_corstone(executorch_program_manager, inputs, intermediate_path, target_board, elf_path, timeout=120):
        return _run(routing, executorch_program_manager, inputs, Path(intermediate_path), timeout, runner_utils)

    serialize.get_elf_path = get_elf_path
    runner_utils.get_elf_path = get_elf_path
    runner_utils.run_corstone = run_corstone
    return routing


def _run(routing: Routing, manager, inputs, folder: Path, timeout: float, runner_utils) -> list:
    """upstream's run_corstone with this project's runner and simulator."""
    from cortexm import sim
    from cortexm.firmware import model_ops

    folder.mkdir(parents=True, exist_ok=True)
    pte = folder / sim.protocol.PROGRAM
    writes.atomic(pte, manager.buffer)
    exported = manager.exported_program()
    names = []
    for k, path in enumerate(runner_utils.save_inputs_to_file(exported, inputs, folder)):
        short = folder / f"i{k}.bin"
        if Path(path).resolve() != short.resolve():
            writes.atomic(short, Path(path).read_bytes())
        names.append(short.name)
    # A program lowered for another CMSIS-NN variant runs wrong, or stops on a scratch check:
    # say what it is before running it (cortexm verify's audit for this core).
    from cortexm.checking.verify import verify_file

    audit = [f for f in verify_file(pte, None, routing.core, name="program", lowering=False) if f.is_problem]
    if audit:
        raise RuntimeError(f"Corstone simulation failed. Problems: 1 found:\n{audit[0].line()} "
                           f"(lowered for another CMSIS-NN variant than {routing.core.name}'s, not run)")
    needed = set(model_ops(pte))
    current = routing.current  # route() built the first
    runner = current if current is not None and needed <= set(current.ops) else routing.runner(needed)
    simulator = sim.for_core(routing.core, routing.sim_name)
    started = time.perf_counter()
    result = simulator.run(runner.elf, routing.core, folder, sim.command_line(names), timeout)
    routing.seconds["simulation"] += time.perf_counter() - started
    routing.programs += 1
    if not result.ok:
        # upstream's wording, so its tests and their xfail reasons read the same.
        raise RuntimeError(f"Corstone simulation failed. Problems: 1 found:\n{result.failure_line}")
    return runner_utils.get_output_from_file(exported, folder, sim.protocol.OUTPUT_BASE)


def write_stats(routing: Routing, xfails: list[dict]) -> None:
    path = os.environ.get(STATS_ENV)
    if path:
        writes.atomic(Path(path), json.dumps({**routing.report(), "xfail": xfails}, indent=1) + "\n")


def test_folder(executorch_src: Path | None) -> Path:
    """backends/cortex_m/test of the tree whose Python lowers, else of the installed wheel."""
    from cortexm.sources import backend_source

    folder: Path | None
    if executorch_src is not None:
        folder = Path(executorch_src) / "backends" / "cortex_m" / "test"
    else:
        wheel = backend_source.lowering_file("backends/cortex_m/test/tester.py")
        folder = wheel.parent if wheel else None
    if folder is None or not (folder / "tester.py").is_file():
        raise CortexmError(f"no backends/cortex_m/test with tester.py in {executorch_src or 'the installed executorch'}")
    return folder


# --- the command: one pytest session per core, in parallel -----------------------------------

def run_suite(folder: Path, cores: list[str], sim_name: str, pattern: str | None, out_dir: Path,
              progress=None) -> dict[str, dict]:
    """core -> {junit: path, stats: dict, returncode, seconds}, running upstream's suite in
    `folder` once per core at the same time (each session lowers and simulates on its own)."""
    import contextlib
    import subprocess
    import sys

    from cortexm.base import children
    from cortexm.base import progress as progress_mod

    out_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict] = {}
    with contextlib.ExitStack() as stack:  # one session failing to start, or Ctrl-C, stops them all
        sessions = {}
        for core in cores:
            junit, stats, log = out_dir / f"{core}.xml", out_dir / f"{core}.json", out_dir / f"{core}.log"
            counted = out_dir / f"{core}.progress"
            writes.remove(counted)
            command = [sys.executable, "-m", "pytest", str(folder), "--rootdir", str(folder), "-p", "no:cacheprovider",
                       "-q", "--cortex-m-target", core, "--cortexm-core", core, "--cortexm-sim", sim_name,
                       "--junitxml", str(junit), "-o", "junit_family=xunit2", *(["-k", pattern] if pattern else [])]
            env = {**os.environ, STATS_ENV: str(stats), PROGRESS_ENV: str(counted)}
            handle = stack.enter_context(writes.stream(log))
            process = stack.enter_context(children.started(command, stdout=handle, stderr=subprocess.STDOUT,
                                                           stdin=subprocess.DEVNULL, env=env))
            sessions[core] = (process, junit, stats, log, time.perf_counter())
        # Tests done of those collected, per core, with an ETA (the sessions write their counts).
        tasks = {core: progress_mod.task(progress, f"{core}: ExecuTorch's cortex_m tests") for core in cores}
        while len(results) < len(sessions):
            for core, (process, junit, stats, log, started) in sessions.items():
                if core in results:
                    continue
                done, total = session_progress(out_dir / f"{core}.progress")
                if total:
                    tasks[core].update(completed=done, total=total)
                returncode = process.poll()
                if returncode is not None:
                    tasks[core].done()
                    results[core] = {"junit": junit, "log": log, "returncode": returncode,
                                     "seconds": time.perf_counter() - started,
                                     "stats": json.loads(stats.read_text()) if stats.is_file() else {}}
            time.sleep(0.5)
    return results


def session_progress(path: Path) -> tuple[int, int]:
    """(tests done, tests collected) a routed session last wrote; (0, 0) before it collected."""
    try:
        done, total = path.read_text().split()
        return int(done), int(total)
    except (OSError, ValueError):
        return 0, 0


def count_progress(done: int, total: int) -> None:
    """In a routed session: write how far it is, for the parent's progress (run_suite)."""
    path = os.environ.get(PROGRESS_ENV)
    if not path:
        return
    writes.atomic(Path(path), f"{done} {total}\n")


def verdicts(junit: Path) -> tuple[dict[str, int], list[tuple[str, str, str]]]:
    """Counts by outcome and (test id, outcome, first line) of every test that did not pass."""
    import xml.etree.ElementTree as ET

    counts = {"passed": 0, "failed": 0, "errors": 0, "xfailed": 0, "skipped": 0}
    problems = []
    if not junit.is_file():
        return counts, [("(session)", "error", f"no report: pytest did not get as far as writing {junit.name}")]
    for case in ET.parse(junit).getroot().iter("testcase"):
        test = f"{case.get('classname', '').replace('.', '/')}::{case.get('name')}"
        child = next(iter(case), None)
        kind = child.tag if child is not None and child.tag in ("failure", "error", "skipped") else "passed"
        if kind == "skipped" and child is not None and "xfail" in (child.get("type") or ""):
            kind = "xfailed"
        key = {"failure": "failed", "error": "errors"}.get(kind, kind)
        text = (child.get("message") or child.text or "").strip() if child is not None else ""
        if key == "failed" and text.startswith("[XPASS(strict)]"):
            key = "xpassed"  # marked to fail upstream (a kernel its runner lacks, say), passes here
        counts[key] = counts.get(key, 0) + 1
        if key in ("failed", "errors"):
            # upstream's "Corstone simulation failed. Problems: N found:" puts what happened next.
            lines = [line.strip() for line in text.splitlines() if line.strip()] or [""]
            line = lines[0] + (f" {lines[1]}" if len(lines) > 1 and lines[0].endswith("found:") else "")
            problems.append((test, key, line[:300]))
    return counts, problems


def merge_junit(reports: dict[str, Path]) -> str:
    """One JUnit document with each core's suite renamed after the core."""
    import xml.etree.ElementTree as ET

    merged = ET.Element("testsuites", name="executorch cortex_m tests")
    for core, path in reports.items():
        if not path.is_file():
            continue
        root = ET.parse(path).getroot()
        for suite in ([root] if root.tag == "testsuite" else list(root)):
            suite.set("name", core)
            merged.append(suite)
    ET.indent(merged)
    return ET.tostring(merged, encoding="unicode", xml_declaration=True) + "\n"

# --- what the sessions said -----------------------------------------------------------------

def summarize(runs: dict[str, dict], folder: Path, lowering: str) -> tuple[dict, list[list], list[tuple]]:
    """The JSON report of `run_suite`'s sessions, a table row per core, and every failed or
    erroring test as (core, test, kind, line)."""
    from cortexm import __version__

    rows: list[list] = []
    failures: list[tuple] = []
    report: dict = {"cortexm": __version__, "tests": str(folder), "lowering": lowering, "cores": {}}
    for core, run in runs.items():
        counts, problems = verdicts(run["junit"])
        stats = run["stats"]
        seconds = stats.get("seconds", {})
        sim_s, build_s = seconds.get("simulation", 0.0), seconds.get("runner builds", 0.0)
        rows.append([core, counts["passed"], counts["failed"], counts["errors"], counts["xfailed"], counts.get("xpassed", 0),
                     counts["skipped"],
                     stats.get("programs", "-"), f"{run['seconds']:.0f} s",
                     f"{max(run['seconds'] - sim_s - build_s, 0):.0f} / {sim_s:.0f} / {build_s:.0f} s"])
        failures += [(core, *p) for p in problems]
        report["cores"][core] = {**counts, "wall": run["seconds"], "stats": stats, "problems": problems,
                                 "junit": str(run["junit"]), "log": str(run["log"])}
    return report, rows, failures


def judge_failures(failures: list[tuple], report: dict) -> tuple[list[str], list[str]]:
    """A line per failed test, XFAIL where a known defect of upstream's tests explains it
    (cortexm.cases.defects.UPSTREAM_TEST_DEFECTS, recorded in `report`); and the tests none explains."""
    from cortexm.cases import defects

    locate = defects.default_locators()
    lines, unexplained = [], []
    for core, test, kind, line in failures:
        known = defects.explaining(defects.UPSTREAM_TEST_DEFECTS, core, "upstream-test", f"{test}: {line}", locate)
        if known:
            lines.append(f"XFAIL {core} {test}: {known.name}: {line}")
            report["cores"][core].setdefault("known", []).append({"test": test, "defect": known.name})
        else:
            lines.append(f"{kind.upper().rstrip('S')} {core} {test}: {line}")
            unexplained.append(test)
    return lines, unexplained
