"""Mutated programs, judged by `cortexm verify` and by ExecuTorch's own loader (the runner's
--load-only mode): the two must agree that a program verify accepts loads.

Used by tests/checking/test_verify_loader.py (a bounded, seeded run; `rewrite` makes its edge programs,
and test_verify.py's) and, for a larger measurement, as a script:

    python tests/pte_fuzz.py --count 1200 [--seed 7] [--json out.json]

which exports the cases (cached), builds the host runner (AddressSanitizer and UBSan,
cached), and prints the agreement matrix, the loader's refusals and any sanitizer report.

The runtime is the host build of the runner: the same ExecuTorch loader and operator
registration as the Cortex-M runners, with sanitizers, at ~10 ms a program (QEMU costs
more and would turn a loader's out-of-bounds read into silence or a HardFault). Two
ASAN_OPTIONS model the target: detect_leaks=0 (the runner never frees), and
allocator_may_return_null=1 with max_allocation_size_mb=2048, so a planned buffer over
2 GiB fails to allocate as it would on a Cortex-M instead of being mapped lazily.

Two kinds of mutation: bytes (bit flips, bytes and 32-bit words set to edge values,
truncation) damage the flatbuffer itself; fields (`mutate_fields`) set one field of the
method to an edge value and write the program again with ExecuTorch's own serializer,
so the flatbuffer is sound and only its meaning is wrong (a size, an index, a type).
"""

from __future__ import annotations

import os
import random
import re
import struct
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

# Cases mutated: cortex_m calls with and without scratch, lists of ints, an MVE lowering,
# and a program planned one tensor per buffer (many memory ids and offsets).
CASES = (("conv2d", "cortex-m7", ""), ("add", "cortex-m7", ""), ("avg_pool2d", "cortex-m7", ""),
         ("softmax", "cortex-m7", ""), ("linear", "cortex-m55", ""), ("conv2d", "cortex-m7", "isolated"))

RUNTIME_ENV = {
    "ASAN_OPTIONS": "detect_leaks=0:allocator_may_return_null=1:max_allocation_size_mb=2048",
    "UBSAN_OPTIONS": "print_stacktrace=1",
}
_SANITIZER = re.compile(r"^(SUMMARY: AddressSanitizer: .*|\S+: runtime error: .*)$", re.M)
# The first stack frame in ExecuTorch's runtime (not flatbuffers' headers, not the runner).
_EXECUTORCH_FRAME = re.compile(r"^\s*#\d+ 0x[0-9a-f]+ in (\S+).* (\S*/runtime/\S+:\d+)", re.M)
_INTERESTING32 = (0, 1, 2, 4, 8, 16, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF,
                  0xFFFFFFFE, 0x40000000)


def mutate(data: bytes, rng: random.Random, program_size: int) -> tuple[bytes, str, str]:
    """`data` mutated, two times in five by its fields, else by its bytes: (the mutated bytes,
    "fields" or "bytes", what was done)."""
    if rng.random() < 0.4:
        mutated = mutate_fields(data, rng)
        if mutated is not None:
            return mutated[0], "fields", mutated[1]
    mutated, what = mutate_bytes(data, rng, program_size)
    return mutated, "bytes", what


def mutate_bytes(data: bytes, rng: random.Random, program_size: int) -> tuple[bytes, str]:
    """`data` with one to three random changes inside its flatbuffer (`program_size` bytes), or
    truncated: (the mutated bytes, what was done)."""
    out = bytearray(data)
    done = []
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        kind = rng.random()
        if kind < 0.45:
            pos, bit = rng.randrange(program_size), rng.randrange(8)
            out[pos] ^= 1 << bit
            done.append(f"flip bit {bit} of byte {pos}")
        elif kind < 0.65:
            pos, value = rng.randrange(program_size), rng.randrange(256)
            out[pos] = value
            done.append(f"byte {pos} = {value:#04x}")
        elif kind < 0.9:
            pos = rng.randrange(0, program_size - 3) & ~3
            old = struct.unpack_from("<I", out, pos)[0]
            value = rng.choice(_INTERESTING32 + (old + rng.randint(-8, 8),)) & 0xFFFFFFFF
            struct.pack_into("<I", out, pos, value)
            done.append(f"u32 at {pos} = {value:#x}")
        else:
            cut = rng.randrange(len(out))
            del out[cut:]
            done.append(f"truncated to {cut} bytes")
            break
    return bytes(out), "; ".join(done)


# Edge values by a field's type: its limits and their neighbours, small counts, ranks and indices,
# the dimension limit (16) and a size whose square overflows an int32 (46341).
_EDGES = {
    "int8": (-128, -1, 0, 1, 2, 11, 29, 30, 127),
    "uint8": (0, 1, 2, 3, 4, 15, 16, 255),
    "int32": (-(1 << 31), -2, -1, 0, 1, 2, 3, 4, 16, 17, 46341, 65536, (1 << 31) - 1),
    "uint32": (0, 1, 2, 3, 64, 1 << 16, (1 << 31) - 1, 1 << 31, (1 << 32) - 1),
    "int64": (-(1 << 63), -(1 << 31) - 1, -1, 0, 1, 2, (1 << 31) - 1, 1 << 31, 1 << 32, (1 << 63) - 1),
}
_LIMITS = {"int8": (-(1 << 7), (1 << 7) - 1), "uint8": (0, (1 << 8) - 1), "int32": (-(1 << 31), (1 << 31) - 1),
           "uint32": (0, (1 << 32) - 1), "int64": (-(1 << 63), (1 << 63) - 1)}


@dataclass
class _Field:
    """One integer field of a deserialized program: what it is, its flatbuffer type, and access."""

    what: str
    kind: str
    get: Callable[[], int]
    set: Callable[[int], None]


def _fields(plan) -> list[_Field]:
    """Every integer field of `plan` (executorch.exir.schema.ExecutionPlan) the loader reads."""
    from executorch.exir import schema

    found: list[_Field] = []

    def attribute(what: str, kind: str, obj, name: str) -> None:
        found.append(_Field(what, kind, lambda: int(getattr(obj, name)), lambda v: setattr(obj, name, v)))

    def items(what: str, kind: str, seq: list) -> None:
        for k in range(len(seq)):
            found.append(_Field(f"{what}[{k}]", kind, lambda k=k: int(seq[k]), lambda v, k=k: seq.__setitem__(k, v)))

    for i, value in enumerate(plan.values):
        v, where = value.val, f"value {i}"
        if isinstance(v, schema.Tensor):
            attribute(f"{where} scalar_type", "int8", v, "scalar_type")
            items(f"{where} sizes", "int32", v.sizes)
            items(f"{where} dim_order", "uint8", v.dim_order)
            attribute(f"{where} data_buffer_idx", "uint32", v, "data_buffer_idx")
            attribute(f"{where} storage_offset", "int32", v, "storage_offset")
            attribute(f"{where} shape_dynamism", "int8", v, "shape_dynamism")
            if v.allocation_info is not None:
                for name in ("memory_id", "memory_offset_low", "memory_offset_high"):
                    attribute(f"{where} {name}", "uint32", v.allocation_info, name)
        elif isinstance(v, schema.Int):
            attribute(f"{where} int_val", "int64", v, "int_val")
        elif isinstance(v, schema.IntList):
            items(f"{where} items", "int64", v.items)
        elif isinstance(v, (schema.TensorList, schema.OptionalTensorList)):
            items(f"{where} items", "int32", v.items)
    items("inputs", "int32", plan.inputs)
    items("outputs", "int32", plan.outputs)
    items("non_const_buffer_sizes", "int64", plan.non_const_buffer_sizes)
    for chain in plan.chains:
        for n, instruction in enumerate(chain.instructions):
            call = instruction.instr_args
            if isinstance(call, schema.KernelCall):
                attribute(f"instruction {n} op_index", "int32", call, "op_index")
                items(f"instruction {n} args", "int32", call.args)
    return found


def _edits(program, rng: random.Random) -> list[tuple[str, Callable[[], None]]]:
    """Changes of shape rather than of one number: a value replaced by another, a tensor's rank
    or placement changed, an operator renamed, a constant cut short."""
    import copy

    from executorch.exir import schema

    plan = program.execution_plan[0]
    n = len(plan.values)
    i, j = rng.randrange(n), rng.randrange(n)
    edits = [(f"value {i} replaced by a copy of value {j}",
              lambda: setattr(plan.values[i], "val", copy.deepcopy(plan.values[j].val)))]
    tensors = [k for k, v in enumerate(plan.values) if isinstance(v.val, schema.Tensor)]
    if tensors:
        k = rng.choice(tensors)
        t = plan.values[k].val
        size = rng.choice((1, 2, 3, 0))
        edits.append((f"value {k} gains a dimension of size {size}",
                       lambda: (t.sizes.append(size), t.dim_order.append(len(t.dim_order)))))
        if t.sizes:
            edits.append((f"value {k} loses its last dimension",
                          lambda: (t.sizes.pop(), t.dim_order.remove(len(t.dim_order) - 1))))
        if t.allocation_info is not None:
            edits.append((f"value {k} loses its memory plan", lambda: setattr(t, "allocation_info", None)))
        else:
            offset = rng.choice((0, 16, 1 << 12))
            edits.append((f"value {k} planned at offset {offset} of buffer 1",
                          lambda: setattr(t, "allocation_info", schema.AllocationDetails(1, offset, 0))))
    if len(plan.operators) > 1:
        a, b = rng.sample(range(len(plan.operators)), 2)
        edits.append((f"operator {a} renamed to operator {b}'s name",
                      lambda: setattr(plan.operators[a], "name", plan.operators[b].name)))
    if program.constant_buffer:
        c = rng.randrange(len(program.constant_buffer))
        buffer = program.constant_buffer[c]
        cut = rng.randrange(len(buffer.storage) + 1) if buffer.storage else 0
        edits.append((f"constant {c} cut to {cut} of {len(buffer.storage)} bytes",
                      lambda: setattr(buffer, "storage", buffer.storage[:cut])))
    return edits


def mutate_fields(data: bytes, rng: random.Random) -> tuple[bytes, str] | None:
    """`data` with one field of its first method set to an edge value (or one of `_edits`), written
    again by ExecuTorch's serializer; None when the serializer refuses what was made."""
    done: list[str] = []

    def edit(pte) -> None:
        if rng.random() < 0.7:
            field_ = rng.choice(_fields(pte.program.execution_plan[0]))
            low, high = _LIMITS[field_.kind]
            old = field_.get()
            value = min(max(rng.choice(_EDGES[field_.kind] + (old - 1, old + 1, old * 2)), low), high)
            field_.set(value)
            done.append(f"{field_.what} = {value} (was {old})")
        else:
            what, change = rng.choice(_edits(pte.program, rng))
            change()
            done.append(what)

    try:
        return rewrite(data, edit), done[0]
    except Exception:  # a value the serializer cannot write: mutate the bytes instead
        return None


def rewrite(data: bytes, edit: Callable) -> bytes:
    """The program `data` read by ExecuTorch's deserializer, changed by `edit` (given the
    PTEFile, whose `.program` is executorch.exir.schema's), and serialized again."""
    from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary

    pte = deserialize_pte_binary(data)
    edit(pte)
    return bytes(serialize_pte_binary(pte))


@dataclass
class Verdict:
    accepted: bool
    line: str  # the runtime's first E/F line or sanitizer line, or verify's first problem
    sanitizer: str | None = None  # the runtime's sanitizer report, if one stopped it
    crash: str | None = None  # verify: an exception other than CortexmError, or a multi-line message


def runtime_verdict(elf: Path, pte: Path, timeout: float = 20) -> Verdict:
    """The runner's --load-only verdict on `pte` (run in its folder, as the runner expects)."""
    env = {**os.environ, **RUNTIME_ENV}
    try:
        done = subprocess.run([str(elf), "-m", pte.name, "-o", "out", "--load-only", "1"], cwd=pte.parent, env=env,
                              capture_output=True, text=True, errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired:
        return Verdict(False, f"no verdict in {timeout:.0f} s (hang)")
    report = sanitizer_report(done.stderr + done.stdout)
    if report:
        return Verdict(False, report, report)
    lines = done.stdout.splitlines()
    if done.returncode == 0 and "I loaded" in lines:
        return Verdict(True, "I loaded")
    failure = next((l for l in lines if l.startswith(("E ", "F ")) and not l.startswith("E [")), None) or next(
        (l for l in lines if l.startswith(("E ", "F "))), None)
    return Verdict(False, failure
                   or f"exit status {done.returncode}, no E line ({(done.stderr.strip().splitlines() or [''])[-1]})")


def sanitizer_report(output: str) -> str | None:
    """A sanitizer's report in one line: its summary (or UBSan's line), then where in ExecuTorch."""
    found = _SANITIZER.search(output)
    if found is None:
        return None
    line = re.sub(r"\S*/(runtime|flatbuffers|kernels)/", r"\1/", found.group(1))
    frame = _EXECUTORCH_FRAME.search(output)
    if frame and frame.group(2).split("/")[-1] not in line:
        line += f" (from {frame.group(1).split('(')[0]} at {re.sub(r'.*/runtime/', 'runtime/', frame.group(2))})"
    return line


def verify_verdict(pte: Path, library, target) -> Verdict:
    """`cortexm verify`'s verdict, in process. `crash` says where the CLI would not print one
    clear line: an exception other than CortexmError (a traceback), or a multi-line message."""
    import traceback

    from cortexm.base.errors import CortexmError
    from cortexm.checking.verify import verify_file

    try:
        findings = verify_file(pte, library, target)
    except CortexmError as e:
        crash = f"a multi-line error: {e!r}" if "\n" in str(e) else None
        return Verdict(False, f"error: {e}", crash=crash)
    except Exception as e:  # what the test is for
        where = traceback.extract_tb(e.__traceback__)[-1]
        return Verdict(False, f"{type(e).__name__}: {e}", crash=f"{type(e).__name__}: {e} ({where.filename}:{where.lineno})")
    lines = [f.line() for f in findings]
    if any("\n" in line for line in lines):
        return Verdict(False, lines[0], crash=f"a multi-line finding: {lines!r}")
    problems = [f.line() for f in findings if f.is_problem]
    return Verdict(not problems, problems[0] if problems else "OK")


@dataclass
class Outcome:
    case: str
    kind: str  # "bytes" or "fields" (see mutate)
    mutation: str
    verify: Verdict
    runtime: Verdict


@dataclass
class Corpus:
    outcomes: list[Outcome] = field(default_factory=list)

    def matrix(self) -> Counter:
        return Counter((o.verify.accepted, o.runtime.accepted) for o in self.outcomes)

    def disagreements(self) -> list[Outcome]:
        """verify OK, and the runtime refuses: what must never happen."""
        return [o for o in self.outcomes if o.verify.accepted and not o.runtime.accepted]

    def stricter(self) -> list[Outcome]:
        """verify flags what the runtime loads."""
        return [o for o in self.outcomes if not o.verify.accepted and o.runtime.accepted]

    def sanitized(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.runtime.sanitizer]

    def crashes(self) -> list[Outcome]:
        """verify did not answer in one clear line: must be none."""
        return [o for o in self.outcomes if o.verify.crash]

    def report(self) -> str:
        m = self.matrix()
        n = len(self.outcomes)
        out = [f"{n} mutated programs: verify accepts {m[True, True] + m[True, False]}, "
               f"the runtime loads {m[True, True] + m[False, True]}",
               f"  verify OK    & runtime loads   {m[True, True]:5d}",
               f"  verify OK    & runtime refuses {m[True, False]:5d}   (must be 0)",
               f"  verify flags & runtime loads   {m[False, True]:5d}",
               f"  verify flags & runtime refuses {m[False, False]:5d}   "
               f"(of which the runtime stopped on a sanitizer report: {len(self.sanitized())})",
               f"  reader/verify crashes          {len(self.crashes()):5d}   (must be 0)"]
        for kind in ("bytes", "fields"):
            mine = [o for o in self.outcomes if o.kind == kind]
            out.append(f"  mutated by {kind:6}: {len(mine):5d} programs, verify accepts {sum(o.verify.accepted for o in mine)}, "
                       f"the runtime loads {sum(o.runtime.accepted for o in mine)}")
        flagged = [o for o in self.outcomes if not o.verify.accepted]
        for title, outcomes, pick in (
                ("verify crashes", self.crashes(), lambda o: o.verify.crash),
                ("verify OK, runtime refuses", self.disagreements(), lambda o: f"{o.runtime.line} <- {o.case}: {o.mutation}"),
                ("verify flags, runtime loads (by verify's reason)", self.stricter(), lambda o: _reason(o.verify.line)),
                ("verify's first problem, on every program it flags", flagged, lambda o: _reason(o.verify.line)),
                ("runtime sanitizer reports", self.sanitized(), lambda o: o.runtime.sanitizer),
                ("runtime refusals (first E line)", [o for o in self.outcomes if not o.runtime.accepted],
                 lambda o: _reason(o.runtime.line))):
            if outcomes:
                out.append(f"{title}:")
                for reason, count in Counter(pick(o) for o in outcomes).most_common(40):
                    out.append(f"  {count:5d}  {reason}")
        return "\n".join(out)


def _reason(line: str) -> str:
    """A line with its numbers, names and file masked, to count kinds of reasons."""
    line = re.sub(r"^(INVALID|FAIL|MISSING) \S+ ", r"\1 ", line)
    line = re.sub(r"^error: \S+\.pte: ", "error: ", line)
    line = re.sub(r"'[^']*'", "'…'", line)
    return re.sub(r"-?\d+", "N", line)


def run_corpus(sources: list[tuple[str, Path]], count: int, seed: int, elf: Path, library, targets: dict,
               work: Path) -> Corpus:
    """`count` mutated programs, round-robin over `sources` (name, .pte), each judged by verify and
    by the runtime. `targets` maps a source name to its core (the scratch audit's)."""
    from cortexm.pte import parse

    rng = random.Random(seed)
    originals = [(name, path.read_bytes()) for name, path in sources]
    sizes = [parse(data).program_size for _, data in originals]
    corpus = Corpus()
    folder = work / "program"
    folder.mkdir(parents=True, exist_ok=True)
    pte = folder / "program.pte"
    for k in range(count):
        index = k % len(originals)
        name, data = originals[index]
        mutated, kind, what = mutate(data, rng, sizes[index])
        pte.write_bytes(mutated)
        verdict = verify_verdict(pte, library, targets[name])
        corpus.outcomes.append(Outcome(name, kind, what, verdict, runtime_verdict(elf, pte)))
    return corpus


def _export(case: str, core: str) -> Path:
    """The case's .pte through the test app's export cache (the user's, for this script)."""
    from cortexm.base import targets
    from cortexm.base.errors import CortexmError
    from cortexm.lowering import export, modelsource, writer
    from cortexm.testing import cache

    hit = cache.lookup(case, core, "legacy")
    if isinstance(hit, str):
        raise CortexmError(hit)
    return hit or cache.store(case, core, "legacy", None,
                              lambda path: writer.write(export.export(modelsource.load(case), targets.core(core), "legacy"),
                                                        path))


def sources_for(exported, cases=CASES) -> tuple[list[tuple[str, Path]], dict]:
    """(name, .pte) of every case in `cases` (case, core, variant), and each name's core, through
    `exported(case, core)`."""
    from cortexm.base.targets import core as core_named

    sources, targets = [], {}
    for case, core, variant in cases:
        path = exported(case, core)
        if variant:
            path = path.with_name(f"{path.stem}.{variant}.pte")
        name = f"{case}{'.' + variant if variant else ''}-{core}"
        sources.append((name, path))
        targets[name] = core_named(core)
    return sources, targets


def host_runner_and_library():
    """The host runner (built or cached) and its generated registration, as a verify library."""
    from cortexm.checking import library
    from cortexm.firmware import build_runner

    runner = build_runner("host")
    return runner, library.load(str(runner.work() / "registration"))


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json
    import time

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", help="write every outcome here")
    args = parser.parse_args(argv)
    runner, lib = host_runner_and_library()
    sources, targets = sources_for(_export)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as work:
        corpus = run_corpus(sources, args.count, args.seed, runner.elf, lib, targets, Path(work))
    print(f"runner {runner.elf}, seed {args.seed}, {time.monotonic() - started:.0f} s")
    print(corpus.report())
    if args.json:
        Path(args.json).write_text(json.dumps([{"case": o.case, "kind": o.kind, "mutation": o.mutation, "verify": o.verify.line,
                                                "verify_ok": o.verify.accepted, "runtime": o.runtime.line,
                                                "runtime_ok": o.runtime.accepted, "sanitizer": o.runtime.sanitizer}
                                               for o in corpus.outcomes], indent=1))
    return 1 if corpus.disagreements() or corpus.crashes() else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main())
