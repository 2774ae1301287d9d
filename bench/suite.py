"""Benchmark of the test app: cold and warm wall time per core and per stage, per program next
to upstream's own flow, and how close the conv/linear cases come to the core's MAC throughput.

    python bench/suite.py [--target cortex-m7 --target cortex-m55] [-k PATTERN] [--no-upstream] [--together]

Each run is a fresh process, as a user's is. Cold: empty export, build and run caches
(temporary folders), so every case is lowered, the runner is built (first, beside CMSIS-NN's
helper and then the exports, as `cortexm test` builds it) and every program is simulated.
Built: empty export and run caches, the runner and CMSIS-NN's helper as the cold run built them:
a first run without the builds. Warm: that run again, nothing changed.
Stage times are summed over cases; export runs in parallel worker processes, so its wall time
is what is shown. Upstream: ExecuTorch's own implementation tests (`-k test_implementation`, the
installed executorch's suite), which lower every program afresh, on the core's runner built in
a build cache of its own (cold, as cortexm's first run is), right after; its lowering time is the
session's wall minus simulation and runner builds.
--together: one cortexm run for all the cores, as the README's main job runs (a case is quantized
and taken through to_edge once for all of them), against upstream's flow once per core (it runs
one core per session), summed.
Instructions per MAC divide a case's whole
execute() count (quantize and dequantize included) by the multiply-accumulates
of its conv/linear calls; the physical limit is 2 int8 MACs per SMLAD on the M7
(0.5 instructions per MAC) and 16 per VMLADAVA on the M55 (0.0625).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from cortexm.checking.macs import MAC_LIMIT as LIMIT  # instructions per int8 MAC at the best MAC instruction

STAGES = ("build", "export", "dialect", "verify", "run")


def run_once(core_names, pattern, jobs, exports, builds, runs, efficiency=False):
    """One `cortexm test` run of the cores `core_names` (run it in a fresh process, see
    in_fresh_process): wall, stage seconds, statuses, programs, and with `efficiency` the MAC
    efficiency rows."""
    os.environ["CORTEXM_EXPORT_CACHE"], os.environ["CORTEXM_BUILD_CACHE"] = exports, builds
    os.environ["CORTEXM_RUN_CACHE"] = runs  # a run remembered from an earlier benchmark is no run
    started = time.perf_counter()
    from cortexm.base.targets import core as core_named
    from cortexm.lowering import source
    from cortexm.testing import app, cache, simulate

    cores = [core_named(name) for name in core_names]
    options = app.Options(cores=cores, pattern=pattern, goldens=app.default_goldens(), jobs=jobs)
    built: dict[str, float] = {}

    def runners():
        found = simulate.simulators(cores, "qemu", None, None, progress=lambda _: None)
        built["at"] = time.perf_counter() - started
        return found

    # As `cortexm test` does: the runner's build first, in the background, then the lowering's
    # trees and CMSIS-NN's buffer-size helper, then the exports.
    options.building = simulate.InBackground(runners)
    source.choose(None)
    helper = time.perf_counter() - started
    results = app.run(options)
    total = time.perf_counter() - started
    for core in cores:
        simulator = options.simulators[core.name]
        if isinstance(simulator, str):
            sys.exit(f"bench: no runner for {core.name}: {simulator}")
    # The app spreads the export phase's wall time over the cases: the sum gives it back. "build":
    # when the runner was ready (the helper's build, then the runner's, beside the exports).
    stages = {"build": built.get("at", helper), "helper": helper}
    for stage in ("export", "dialect", "verify", "run"):
        stages[stage] = sum(r.seconds.get(stage, 0.0) for r in results)
    rows = []
    for r in results if efficiency else ():
        pte = cache.lookup(r.case, r.core, "legacy")
        instructions = r.run.instructions if r.run else None
        n = macs(pte) if isinstance(pte, Path) and instructions else 0
        if n >= 1000:
            rows.append((r.core, r.case, n, instructions, instructions / n))
    return total, stages, dict(Counter(r.status for r in results)), len(results), rows


def in_fresh_process(fn, *args):
    """fn(*args) in a spawned process: imports, the lowering's choice and caches as a user's
    run has them. (A multiprocessing pool's workers are daemons, which may not start the
    export workers; an executor's are not.)"""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


def print_row(core_name, label, total, stages):
    print(f"{core_name:11} {label:5} {total:7.1f} " + " ".join(f"{stages.get(s, 0.0):8.1f}" for s in STAGES))


def upstream_once(core_name, pattern, exports, builds, runs):
    """Upstream's flow on this core (in a fresh process, as run_once): (tests lowered, programs
    simulated, {stage: seconds}, wall, outcome counts)."""
    os.environ["CORTEXM_EXPORT_CACHE"], os.environ["CORTEXM_BUILD_CACHE"] = exports, builds
    os.environ["CORTEXM_RUN_CACHE"] = runs
    from cortexm.lowering import source
    from cortexm.testing import upstream

    source.choose(None)  # as `cortexm upstream-tests` does first: which tree's tests and lowering
    with tempfile.TemporaryDirectory() as out:
        run = upstream.run_suite(upstream.test_folder(None), [core_name], "qemu", pattern, Path(out))[core_name]
        counts, _ = upstream.verdicts(run["junit"])
        log = run["log"].read_text(errors="replace")
    stats = run["stats"]
    seconds = stats.get("seconds", {})
    if not stats or run["returncode"] not in (0, 1):
        tail = "\n".join(log.rstrip().splitlines()[-15:])
        sys.exit(f"bench: upstream's session on {core_name} stopped (exit {run['returncode']}) before reporting:\n{tail}")
    lowered = sum(n for outcome, n in counts.items() if outcome != "skipped")
    build, simulation = seconds.get("runner builds", 0.0), seconds.get("simulation", 0.0)
    stages = {"build": build, "export": run["seconds"] - build - simulation, "run": simulation}
    return lowered, stats.get("programs", 0), stages, run["seconds"], counts


def macs(pte: Path) -> int:
    """Multiply-accumulates of the program's conv, depthwise, transpose-conv and linear calls."""
    from cortexm.checking.macs import call_macs

    return sum(call_macs(pte).values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", "-t", action="append", help="core (repeatable; default cortex-m7 and cortex-m55)")
    parser.add_argument("-k", dest="pattern")
    parser.add_argument("-j", "--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--upstream-k", default="test_implementation",
                        help="which of upstream's tests to time (pytest -k; default: every implementation test)")
    parser.add_argument("--no-upstream", action="store_true", help="skip upstream's flow")
    parser.add_argument("--builds", help="a runner build cache to use (default: a fresh one, whose builds are timed)")
    parser.add_argument("--together", action="store_true",
                        help="one cortexm run for all the cores (as the README's main job), against upstream's per core")
    args = parser.parse_args()

    from cortexm.base.targets import core as core_named

    cores = [core_named(t) for t in (args.target or ["cortex-m7", "cortex-m55"])]
    print(f"{'core':11} {'run':5} {'wall s':>7} " + " ".join(f"{s:>8}" for s in STAGES))
    efficiency, per_program = [], []
    # Each entry: the cores of one cortexm run, and the name its rows go by.
    runs_of = [([c.name for c in cores], "+".join(c.name.removeprefix("cortex-") for c in cores))] if args.together \
        else [([c.name], c.name) for c in cores]
    upstream_runs = []
    for names, label_of_run in runs_of:
        with tempfile.TemporaryDirectory() as exports, tempfile.TemporaryDirectory() as again, \
                tempfile.TemporaryDirectory() as fresh, tempfile.TemporaryDirectory() as upstream_builds, \
                tempfile.TemporaryDirectory() as runs:
            builds = args.builds or fresh
            # cold: nothing cached; built: the runners and the helper cached (what the cold run
            # built), the exports and runs not: a first run's cost without the runner build; warm:
            # all cached. Each run store starts empty with the export cache it goes with.
            stores = {"cold": os.path.join(runs, "cold"), "built": os.path.join(runs, "built"),
                      "warm": os.path.join(runs, "built"), "upstream": os.path.join(runs, "upstream")}
            for store in set(stores.values()):
                os.mkdir(store, 0o700)
            for label, cache in (("cold", exports), ("built", again), ("warm", again)):
                total, stages, statuses, programs, found = in_fresh_process(
                    run_once, names, args.pattern, args.jobs, cache, builds, stores[label], label == "warm")
                print_row(label_of_run, label, total, stages)
                # A benchmark of a run that failed measures nothing: say what the run came to.
                print(f"{label_of_run:11} {label}: " + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())))
                per_program.append((label_of_run, f"cortexm {label}", programs, total, stages))
                efficiency += found
            for name in names if not args.no_upstream else ():
                lowered, simulated, stages, total, counts = in_fresh_process(
                    upstream_once, name, args.upstream_k, exports, args.builds or upstream_builds,
                    stores["upstream"])
                print(f"{name:11} upstream: " + ", ".join(f"{n} {k}" for k, n in counts.items() if n))
                print_row(name, "upstr", total, stages)
                per_program.append((name, f"upstream ({simulated} run)", lowered, total, stages))
                upstream_runs.append((lowered, total, stages))
    if args.together and len(upstream_runs) > 1:  # what checking every core costs in upstream's flow
        per_program.append((runs_of[0][1], "upstream, every core", sum(r[0] for r in upstream_runs),
                            sum(r[1] for r in upstream_runs), {"build": sum(r[2]["build"] for r in upstream_runs)}))
    print()
    # Per program: the whole wall, and the wall without runner builds (one per core either way).
    # cortexm's runner build overlaps its exports, so its "without" is the `built` run's; upstream's
    # builds are timed apart, and taken off its wall.
    print(f"{'core':11} {'flow':22} {'programs':>8} {'s/program':>10} {'without build':>14}")
    for core_name, flow, programs, total, stages in per_program:
        if programs:
            without = (total - stages["build"]) / programs if flow.startswith("upstream") else total / programs \
                if flow == "cortexm built" else None
            print(f"{core_name:11} {flow:22} {programs:8d} {total / programs:10.2f} "
                  + (f"{without:14.2f}" if without is not None else f"{'-':>14}"))
    print()
    print(f"{'core':11} {'case':32} {'MACs':>10} {'instructions':>13} {'instr/MAC':>10} {'limit':>7} {'of limit':>9}")
    for core_name, case, n, instructions, per_mac in efficiency:
        limit = LIMIT.get(core_name)
        share = f"{limit / per_mac:9.1%}" if limit else f"{'-':>9}"
        print(f"{core_name:11} {case:32} {n:10d} {instructions:13d} {per_mac:10.3f} {limit or 0:7.4f} {share}")


if __name__ == "__main__":
    main()
