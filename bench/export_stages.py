"""Where a cold export's time goes, stage by stage and judgement by judgement (issue 43).

    python bench/export_stages.py [-t cortex-m7]... [-k PATTERN] [--top 25]

Exports each built-in case of the default suite (or those -k matches) for each core in this one
process, as `cortexm test` does in each worker (quantize once per case, then one export per core),
with no cache, under cProfile; prints the seconds spent in each named step of
cortexm.lowering.export (cumulative, so a step includes what it calls: `lower` also counts the
lowering `place the solved data` makes for the cases whose data is solved) and their share of the
whole, then the functions of cortexm that cost most. Runs in one process: the seconds are CPU
time of one worker, what the parallel export spends per case.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (label, module file suffix, function name): the steps of cortexm.lowering.export.export, in order.
STEPS = (
    ("quantize (torch.export, PT2E calibrate/convert, export again)", "lowering/quantize.py", "quantize"),
    ("place the solved data", "lowering/export.py", "place_solved"),
    ("to_edge (once per case)", "lowering/export.py", "to_edge_program"),
    ("lower (a copy of the edge program, the cortex_m passes)", "lowering/export.py", "lower"),
    ("dialect text", "lowering/dialect.py", "render"),
    ("isolated memory plan (a second to_executorch)", "checking/memory_plan.py", "to_executorch_isolated"),
    ("to_executorch", "executorch/exir/program/_program.py", "to_executorch"),
    ("provenance of the calls", "lowering/provenance.py", "calls"),
    ("integer reference of the program", "lowering/references.py", "reference"),
    ("semantic references", "lowering/references.py", "semantic"),
    ("accuracy against float", "semantic/realinputs.py", "record"),
    ("reference without Helium", "lowering/references.py", "without_helium"),
    ("constant names", "checking/constants.py", "names_of"),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-t", "--target", dest="targets", action="append", default=[])
    parser.add_argument("-k", dest="pattern", default=None)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from cortexm.base.errors import CortexmError
    from cortexm.base.targets import core
    from cortexm.lowering import modelsource, source
    from cortexm.lowering.export import export, to_edge_program
    from cortexm.lowering.quantize import quantize
    from cortexm.testing.app import select_cases
    from cortexm.testing.results import Options

    source.choose()
    cores = [core(t) for t in (args.targets or ["cortex-m7"])]
    # The programs `cortexm test` exports (packed cases too), as it selects them.
    names = [c.name for c in select_cases(Options(cores=cores, pattern=args.pattern))]
    profile = cProfile.Profile()
    started, exported, failed = time.perf_counter(), 0, 0
    for name in names:
        profile.enable()
        try:
            quantized = quantize(modelsource.load(name))
            edge = to_edge_program(quantized)  # once per case, as the test app's export worker does
            for target in cores:
                try:
                    export(quantized, target, edge=edge)
                    exported += 1
                except CortexmError:
                    failed += 1
        except CortexmError:
            failed += 1
        finally:
            profile.disable()
    wall = time.perf_counter() - started
    stats = pstats.Stats(profile)
    table = stats.stats  # type: ignore[attr-defined]  # (file, line, name) -> (cc, nc, tt, ct, callers)

    def cumulative(suffix: str, function: str) -> float:
        return sum(v[3] for (file, _, name), v in table.items() if name == function and file.endswith(suffix))

    total = (cumulative("lowering/export.py", "export") + cumulative("lowering/quantize.py", "quantize")
             + cumulative("lowering/export.py", "to_edge_program"))
    print(f"{len(names)} cases, {exported} programs exported ({failed} failed) for {', '.join(c.name for c in cores)} "
          f"in {wall:.1f} s (under cProfile)\n")
    print("| step | seconds | share | per program |\n| --- | ---: | ---: | ---: |")
    for label, suffix, function in STEPS:
        seconds = cumulative(suffix, function)
        print(f"| {label} | {seconds:.1f} | {100 * seconds / total:.1f} % | {seconds / max(exported, 1):.3f} |")
    print(f"| whole (quantize + export) | {total:.1f} | 100 % | {total / max(exported, 1):.3f} |\n")
    print(f"cortexm's own functions by cumulative seconds (top {args.top}):")
    own = sorted(((v[3], f"{Path(file).relative_to(ROOT) if file.startswith(str(ROOT)) else file}:{name}")
                  for (file, _, name), v in table.items() if file.startswith(str(ROOT / "cortexm"))), reverse=True)
    for seconds, where in own[:args.top]:
        print(f"  {seconds:8.1f} s  {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
