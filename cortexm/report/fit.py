"""Does a program fit a board? Flash and RAM measured from the program and its runner.

What enters: a .pte, the runner built for its operators alone (what a deployment links), and
the log of one run of it on a simulated core, whose last line the runner writes as
`I memory: program .., planned .., method allocator X of .., temp allocator Y of .., ...,
stack S of .., heap H of ..`. What leaves: each need (code, program, static data, heap,
stack, each planned buffer, the method and the temp allocator) in bytes, placed whole on a
board profile's regions (boards.toml, or one given on the command line) whenever they can
be, and else the fewest bytes that find no room.

Code and static data come from the runner's ELF (cortexm.firmware.size); the program is the
.pte's bytes; the planned buffers are the program's own plan; the allocators, the stack and
the heap are what the run used (the stack is painted at reset and read back). The runner's
own copies of the program and its inputs in the simulator's arena are not needs: on a
device the program is in flash and the inputs are written into the planned buffers.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path

from cortexm.base.errors import CortexmError

ROLES = ("code", "program", "data", "heap", "stack", "arena")
# Steps `place` may take per question: a real program's needs take a handful (docs/deployment.md times it).
SEARCH_STEPS = 50_000
_MEMORY = re.compile(r"I memory: program (\d+) B, planned (\d+) B, method allocator (\d+) of \d+ B, "
                     r"temp allocator (\d+) of \d+ B, arena \d+ of \d+ B(?:, stack (\d+) of \d+ B, heap (\d+) of \d+ B)?")


@dataclass(frozen=True)
class Need:
    what: str  # "code", "planned buffer 1", "method allocator", ...
    role: str  # one of ROLES
    nbytes: int


@dataclass
class Region:
    name: str
    nbytes: int
    holds: tuple[str, ...]
    used: int = 0
    placed: list[Need] = field(default_factory=list)


@dataclass(frozen=True)
class Profile:
    name: str
    core: str | None
    about: str
    source: str
    regions: tuple[tuple[str, int, tuple[str, ...]], ...]


@dataclass
class Verdict:
    """Where `place` put each need. `unplaced`: what a placement leaving the fewest bytes without
    room leaves out (the fewest found, if the search stopped), what the board is short of.
    `least`: what is proven, the bytes every placement leaves out at least; below the unplaced
    bytes only if the search stopped, and 0 with needs unplaced if it is not known whether all
    can be placed."""
    profile: Profile
    regions: list[Region]
    unplaced: list[Need]
    least: int

    @property
    def fits(self) -> bool:
        return not self.unplaced

    def line(self) -> str:
        used = "; ".join(f"{r.name} {r.used:,} of {r.nbytes:,} B ({100 * r.used / r.nbytes:.0f} %)" for r in self.regions
                         if r.used)
        if self.fits:
            return f"FITS {self.profile.name}: {used}"
        short = sum(n.nbytes for n in self.unplaced)
        missing = ", ".join(f"{n.what} {n.nbytes:,} B" for n in self.unplaced[:4])
        missing += ", ..." if len(self.unplaced) > 4 else ""
        if not self.least:
            return (f"UNDECIDED {self.profile.name}: the search stopped before it found a placement or proved there is "
                    f"none; the best it found leaves {short:,} B without room ({missing}); {used}")
        stopped = f"; the search stopped: at least {self.least:,} B must" if self.least < short else ""
        return f"DOES NOT FIT {self.profile.name}: {short:,} B find no room ({missing}{stopped}); {used}"


def parse_memory_line(log: str) -> dict[str, int]:
    """The runner's `I memory:` line as numbers (stack and heap absent from older runners)."""
    found = _MEMORY.findall(log)
    if not found:
        raise CortexmError("the runner printed no memory line (an older runner: rebuild it with `cortexm build --fresh`)")
    program, planned, method, temp, stack, heap = found[-1]
    if not stack:
        raise CortexmError("the runner does not measure its stack (an older runner: rebuild it with `cortexm build --fresh`)")
    return {"program": int(program), "planned": int(planned), "method allocator": int(method),
            "temp allocator": int(temp), "stack": int(stack), "heap": int(heap)}


def needs(pte, elf: Path, log: str) -> list[Need]:
    """Every need of `pte` (a path, or the Program parsed already) on the runner `elf`, from the
    run whose log is `log`."""
    from cortexm.firmware.size import RESERVED, footprint
    from cortexm.pte import load

    measured = parse_memory_line(log)
    found = footprint(elf, elf.with_suffix(".map"))
    reserved = sum(c.ram for c in found.components if c.name in set(RESERVED.values()))
    program = load(pte) if isinstance(pte, (str, Path)) else pte
    planned = [size for plan in program.plans[:1] for size in plan.non_const_buffer_sizes[1:]]
    result = [Need("code", "code", found.flash), Need("program", "program", program.file_size),
              Need("static data", "data", found.ram - reserved), Need("heap", "heap", measured["heap"]),
              Need("stack", "stack", measured["stack"])]
    result += [Need(f"planned buffer {k + 1}", "arena", size) for k, size in enumerate(planned) if size]
    result += [Need(name, "arena", measured[name]) for name in ("method allocator", "temp allocator") if measured[name]]
    return result


def place(needs_: list[Need], profile: Profile, steps: int = SEARCH_STEPS) -> Verdict:
    """Each need whole in a region that holds its role and has room, whenever such a placement
    exists; when none does, a placement that leaves the fewest bytes without room.

    Needs go largest first, each tried in the regions in the order the profile lists them, so
    the placement is first fit's wherever first fit finds one; the search (_Search) backs up
    from a choice only when it leaves the rest no room. Each of its two questions (is there a
    placement; which leaves the fewest bytes out) stops after `steps` steps: no realistic
    input comes near, and the verdict says what a stopped search did not prove."""
    order = sorted((n for n in needs_ if n.nbytes), key=lambda n: -n.nbytes)  # a need of 0 B takes no room
    search = _Search(order, profile.regions, steps)
    choice = search.run(limit=1)  # a placement that leaves nothing out
    least = 0
    if choice is None:  # there is none (the search finished), or none was found in time
        none_fits = search.finished
        first_fit = search.first_fit()
        better = search.run(limit=search.left_out(first_fit))
        choice = first_fit if better is None else better
        least = search.left_out(choice) if search.finished else max(search.bound(0, [0] * len(profile.regions)),
                                                                    int(none_fits))
    regions = [Region(name, size, holds) for name, size, holds in profile.regions]
    unplaced = []
    for need, k in zip(order, choice, strict=True):
        if k is None:
            unplaced.append(need)
            continue
        regions[k].used += need.nbytes
        regions[k].placed.append(need)
    return Verdict(profile, regions, unplaced, least)


class _OutOfSteps(Exception):
    pass


class _Search:
    """Branch and bound for the fewest bytes left without room. A node is the next need (largest
    first) and each region's load; its children put that need in each region that holds its
    role and has room, in the profile's order, then leave it out. A node is cut when the bytes
    already left out plus a lower bound on what the rest must leave out reach the best
    placement's. The bound is Hall's theorem in deficiency form: the needs that only a set U of
    regions may hold leave out at least their bytes less U's free bytes (the exact answer if
    needs could be split), for every U the needs' roles make. What a finished node taught is
    kept by its loads, and a region the same as an earlier one (size, roles and load) is not
    tried again."""

    def __init__(self, needs: list[Need], regions: tuple[tuple[str, int, tuple[str, ...]], ...], steps: int):
        self.sizes = [n.nbytes for n in needs]
        self.capacity = [size for _, size, _ in regions]
        self.allowed = [[k for k, (_, _, holds) in enumerate(regions) if n.role in holds] for n in needs]
        self.twins = [[j for j in range(k) if regions[j][1:] == regions[k][1:]] for k in range(len(regions))]
        unions = {sum(1 << k for k in allowed) for allowed in self.allowed}
        while more := {a | b for a in unions for b in unions} - unions:
            unions |= more
        self.bounds = []  # U's regions, and for each i the bytes of needs i.. that only U may hold less U's size
        for union in sorted(unions):
            inside = [k for k in range(len(regions)) if union >> k & 1]
            only = [size if all(union >> k & 1 for k in allowed) else 0
                    for size, allowed in zip(self.sizes, self.allowed, strict=True)]
            excess = list(accumulate(reversed(only), initial=-sum(self.capacity[k] for k in inside)))[::-1]
            self.bounds.append((inside, excess))
        self.budget = steps
        self.known: dict[tuple[int, tuple[int, ...]], int] = {}  # node -> bytes its rest leaves out at least
        self.best, self.steps, self.finished = 0, 0, True
        self.best_choice: list[int | None] | None = None

    def first_fit(self) -> list[int | None]:
        """Each need in the first region that holds it and has room (None: none has)."""
        loads = [0] * len(self.capacity)
        choice: list[int | None] = []
        for size, allowed in zip(self.sizes, self.allowed, strict=True):
            k = next((k for k in allowed if loads[k] + size <= self.capacity[k]), None)
            if k is not None:
                loads[k] += size
            choice.append(k)
        return choice

    def run(self, limit: int) -> list[int | None] | None:
        """Each need's region (None: left out) in a placement that leaves out fewer than `limit`
        bytes and the fewest it can, or None if there is none; `finished` says whether the
        search ran to its end (if not, the answer is the best found, and None proves nothing)."""
        self.best, self.best_choice, self.steps, self.finished = limit, None, 0, True
        try:
            self._visit(0, [0] * len(self.capacity), 0, [])
        except _OutOfSteps:
            self.finished = False
        return self.best_choice

    def left_out(self, choice: list[int | None]) -> int:
        return sum(size for size, k in zip(self.sizes, choice, strict=True) if k is None)

    def bound(self, i: int, loads: list[int]) -> int:
        """Bytes that needs i.. leave without room at least, with the regions so loaded."""
        return max([0] + [excess[i] + sum(map(loads.__getitem__, inside)) for inside, excess in self.bounds])

    def _visit(self, i: int, loads: list[int], out: int, choice: list[int | None]) -> None:
        key = (i, tuple(loads))
        bound = max(self.known.get(key, 0), self.bound(i, loads))
        if out + bound >= self.best:
            return
        if i == len(self.sizes):
            self.best, self.best_choice = out, list(choice)
            return
        self.steps += 1
        if self.steps > self.budget:
            raise _OutOfSteps
        size = self.sizes[i]
        for k in self.allowed[i]:
            if loads[k] + size > self.capacity[k] or any(loads[j] == loads[k] for j in self.twins[k]):
                continue
            loads[k] += size
            choice.append(k)
            self._visit(i + 1, loads, out, choice)
            choice.pop()
            loads[k] -= size
            if out + bound >= self.best:
                break
        else:
            choice.append(None)
            self._visit(i + 1, loads, out + size, choice)
            choice.pop()
        self.known[key] = max(self.known.get(key, 0), self.best - out)


def profiles() -> dict[str, Profile]:
    """The board profiles in boards.toml."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib

    data = tomllib.loads((Path(__file__).parent / "boards.toml").read_text())
    return {name: Profile(name, entry.get("core"), entry.get("about", ""), entry.get("source", ""),
                          tuple((r["name"], int(r["bytes"]), tuple(r["holds"])) for r in entry["regions"]))
            for name, entry in data.items()}


_DEFAULT_HOLDS = {"flash": ("code", "program"), "ram": ("data", "heap", "stack", "arena")}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMG]i?)?B?", re.I)


def given_profile(specs: list[str]) -> Profile:
    """A profile from `--memory NAME=SIZE[:ROLE,ROLE]` options (flash and ram have default roles)."""
    regions = []
    for spec in specs:
        name, _, rest = spec.partition("=")
        size_text, _, roles_text = rest.partition(":")
        match = _SIZE.fullmatch(size_text.strip())
        roles = tuple(r.strip() for r in roles_text.split(",") if r.strip()) or _DEFAULT_HOLDS.get(name.strip().lower(), ())
        if not name.strip() or match is None:
            raise CortexmError(f"--memory {spec!r}: give NAME=SIZE[:ROLES], e.g. flash=1M or sram=320K:arena")
        if not roles or any(r not in ROLES for r in roles):
            raise CortexmError(f"--memory {spec!r}: roles are {', '.join(ROLES)} (flash and ram have defaults)")
        unit = {"": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}[(match.group(2) or "").lower()[:1]]
        regions.append((name.strip(), int(float(match.group(1)) * unit), roles))
    return Profile("given memory", None, "--memory " + " ".join(specs), "the command line", tuple(regions))
