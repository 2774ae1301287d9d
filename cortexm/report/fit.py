"""Does a program fit a board? Flash and RAM measured from the program and its runner.

What enters: a .pte, the runner built for its operators alone (what a deployment links), and
the log of one run of it on a simulated core, whose last line the runner writes as
`I memory: program .., planned .., method allocator X of .., temp allocator Y of .., ...,
stack S of .., heap H of ..`. What leaves: each need (code, program, static data, heap,
stack, each planned buffer, the method and the temp allocator) in bytes, placed on a board
profile's regions (boards.toml, or one given on the command line), and by how much each
region is short where it is.

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
from pathlib import Path

from cortexm.base.errors import CortexmError

ROLES = ("code", "program", "data", "heap", "stack", "arena")
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
    profile: Profile
    regions: list[Region]
    unplaced: list[Need]

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
        return (f"DOES NOT FIT {self.profile.name}: {short:,} B find no room ({missing}"
                f"{', ...' if len(self.unplaced) > 4 else ''}); {used}")


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


def needs(pte: Path, elf: Path, log: str) -> list[Need]:
    """Every need of `pte` on the runner `elf`, from the run whose log is `log`."""
    from cortexm.pte import load
    from cortexm.firmware.size import RESERVED, footprint

    measured = parse_memory_line(log)
    found = footprint(elf, elf.with_suffix(".map"))
    reserved = sum(c.ram for c in found.components if c.name in set(RESERVED.values()))
    program = load(pte)
    planned = [size for plan in program.plans[:1] for size in plan.non_const_buffer_sizes[1:]]
    result = [Need("code", "code", found.flash), Need("program", "program", program.file_size),
              Need("static data", "data", found.ram - reserved), Need("heap", "heap", measured["heap"]),
              Need("stack", "stack", measured["stack"])]
    result += [Need(f"planned buffer {k + 1}", "arena", size) for k, size in enumerate(planned) if size]
    result += [Need(name, "arena", measured[name]) for name in ("method allocator", "temp allocator") if measured[name]]
    return result


def place(needs_: list[Need], profile: Profile) -> Verdict:
    """First fit, largest need first: each need whole in the first region that holds its role
    and has room."""
    regions = [Region(name, size, holds) for name, size, holds in profile.regions]
    unplaced = []
    for need in sorted(needs_, key=lambda n: -n.nbytes):
        region = next((r for r in regions if need.role in r.holds and r.used + need.nbytes <= r.nbytes), None)
        if region is None:
            unplaced.append(need)
            continue
        region.used += need.nbytes
        region.placed.append(need)
    return Verdict(profile, regions, unplaced)


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
