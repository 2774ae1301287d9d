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
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import attack_classes  # noqa: F401 - registers every attack
from attack_classes.lab import ATTACKS, Lab


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
