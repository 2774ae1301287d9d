"""Building the runner ELF for a core, cached by everything that went into it.

A build is identified by its inputs: the ExecuTorch and CMSIS-NN trees (commit and
uncommitted changes, or content hash), the core and board, the build options, the
operators registered, the compiler, flatc and torch (codegen) versions, and the
project's own kernels/ and fvp/ files. The ELF lands in
~/.cache/cortexm/builds/<key>/, so asking again for the same inputs is instant.

CMake works in one folder per core, board, trees and toolchain, shared by builds
that differ only in their operators or options, so a per-model runner recompiles
only what its operators change.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cortexm import sources
from cortexm.base import locks, manifest, trust, writes
from cortexm.base.errors import CortexmError, InputsChanged
from cortexm.base.targets import CORES, Core
from cortexm.base.targets import core as core_named
from cortexm.firmware import paths, tools
from cortexm.firmware.commands import BUILD_CACHE_ENV, _run, build_jobs, builds_dir, first_problem  # noqa: F401
from cortexm.firmware.ops import model_ops, suite_ops
from cortexm.sources import identity

KEY_FORMAT = 1
# The lowering's Python, which no runner build reads: an edit of a pass rebuilds nothing.
LOWERING_ONLY = ("backends/cortex_m/**/*.py",)
ELF_NAME = "executor_runner.elf"
MAP_NAME = "executor_runner.map"


@dataclass(frozen=True)
class BuildOptions:
    method_pool_size: int = 256 * 1024  # bytes of the method allocator pool
    temp_pool_size: int = 64 * 1024  # bytes of the temp allocator pool
    build_type: str = "Release"
    # Extra C sources linked into the runner and link options, e.g. a test's wrapper
    # around one CMSIS-NN function (-Wl,--wrap=...). Their contents are part of the key.
    extra_sources: tuple[str, ...] = ()
    link_options: tuple[str, ...] = ()
    coverage: bool = False  # gcov counters in the cortex_m kernels and CMSIS-NN (cortexm.firmware.coverage)
    value_counters: bool = False  # with coverage on a core: kernels/runner/value_counters.h

    def __post_init__(self) -> None:
        # build.json stores lists; keep options comparable whatever they were read from.
        object.__setattr__(self, "extra_sources", tuple(self.extra_sources))
        object.__setattr__(self, "link_options", tuple(self.link_options))

    def cmake_args(self) -> list[str]:
        return [
            f"-DCORTEXM_METHOD_POOL_SIZE={self.method_pool_size}",
            f"-DCORTEXM_TEMP_POOL_SIZE={self.temp_pool_size}",
            f"-DCMAKE_BUILD_TYPE={self.build_type}",
            f"-DCORTEXM_EXTRA_SOURCES={';'.join(self.extra_sources)}",
            f"-DCORTEXM_EXTRA_LINK_OPTIONS={';'.join(self.link_options)}",
            f"-DCORTEXM_COVERAGE={'ON' if self.coverage else 'OFF'}",
            f"-DCORTEXM_VALUE_COUNTERS={'ON' if self.value_counters else 'OFF'}",
        ]

    def extra_digest(self) -> str:
        """The extra sources and the headers beside them (what they may include)."""
        digest = hashlib.sha256()
        files = {Path(s) for s in self.extra_sources} | {h for s in self.extra_sources for h in Path(s).parent.glob("*.h")}
        for file in sorted(files):
            digest.update(file.name.encode() + b"\0" + file.read_bytes())
        return digest.hexdigest()


@dataclass(frozen=True)
class Runner:
    core: Core
    board: str  # folder under fvp/boards
    elf: Path
    map_file: Path  # the linker map, for `cortexm size`
    build_dir: Path  # where the ELF and build.json are cached
    ops: tuple[str, ...]  # operators registered
    key: str
    cached: bool  # True when nothing was built
    seconds: float  # how long this call built for (0.0 when it found the runner built)
    options: BuildOptions = field(default_factory=BuildOptions)

    def work(self) -> Path | None:
        """The CMake folder it was built in (where a coverage build's counters go)."""
        work = json.loads((self.build_dir / "build.json").read_text()).get("work")
        return self.build_dir.parent / work if work else None  # recorded relative to the cache

    def trees(self) -> dict[str, Path]:
        """The source trees it was built from, as cortexm.cases.defects names the components
        (empty for a runner whose build.json does not record them)."""
        record = json.loads((self.build_dir / "build.json").read_text())
        et, nn = (record.get("trees") or [None, None])[:2]
        return {k: Path(v) for k, v in (("executorch-runtime", et), ("cmsis-nn", nn)) if v}


# Folders (os.pathsep-separated) of runners built elsewhere, e.g. by Nix: one whose core,
# board, operators and options match is used as it is, without trees or toolchain here.
RUNNERS_ENV = "CORTEXM_RUNNERS"


def build_runner(
    core: Core | str,
    *,
    executorch_src: str | Path | None = None,
    cmsis_nn_src: str | Path | None = None,
    model: str | Path | None = None,
    ops: list[str] | tuple[str, ...] | None = None,
    board: str | None = None,
    options: BuildOptions | None = None,
    fresh: bool = False,
    jobs: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> Runner:
    """The runner for `core`: registers `model`'s operators, or `ops`, or the suite's."""
    core = core_named(core) if isinstance(core, str) else core
    board = board or core.board
    if board is None:
        with_boards = ", ".join(c.name for c in CORES if c.board)
        raise CortexmError(f"{core.name} has no board support for a runner (cores with one: {with_boards})")
    paths.require_sources()
    if not (paths.boards() / board / "board.cmake").is_file():
        raise CortexmError(f"no board support {paths.boards() / board}")
    if model is not None and ops is not None:
        raise CortexmError("give a model or an operator list, not both")
    selected = model_ops(model) if model is not None else tuple(sorted(set(ops))) if ops is not None else suite_ops()
    if not selected:
        raise CortexmError(f"{model}: the program calls no operators" if model else "no operators selected")
    options = options or BuildOptions()
    say = progress or (lambda _message: None)
    # A verdict is for the content that was built: the trees as they are now name the build.
    trees = _tree_keys(executorch_src, cmsis_nn_src)
    prebuilt = None if fresh else _prebuilt(core, board, selected, options, trees, say)
    if prebuilt is not None:
        return prebuilt
    et = sources.require(sources.EXECUTORCH, executorch_src)
    nn = sources.require(sources.CMSIS_NN, cmsis_nn_src)
    found = tools.find(core.hosted)

    inputs = {
        "format": KEY_FORMAT,
        "core": core.name,
        "gcc_flags": list(core.gcc_flags),
        "board": board,
        "options": asdict(options),
        "extra_sources": options.extra_digest(),
        "executorch": trees["executorch"],
        "cmsis-nn": trees["cmsis-nn"],
        "gcc": found.gcc_version,
        "flatc": found.flatc_version,
        "torch": found.torch_version,
        "project": trees["project"],
    }
    # One CMake folder serves builds that differ in operators, options, the project's own
    # files or the trees' content (a contributor's edit): ninja rebuilds what those change (it
    # tracks files and command lines). Only where the trees and the project are, and the tools,
    # pick the folder: CMake ties a folder to its source, so another checkout of this project
    # (a clone, a worktree) with other content gets a folder of its own.
    # A test's extra sources and link options only add to the runner's link: the folder is shared too.
    shared = {k: v for k, v in inputs.items()
              if k not in ("project", "options", "extra_sources", "executorch", "cmsis-nn")}
    shared["coverage"] = options.coverage  # compiled otherwise throughout: a folder of its own
    if options.value_counters:  # so are value counters (absent when off: older folders keep their key)
        shared["value_counters"] = True
    work_key = _digest({**shared, "paths": [str(et), str(nn), str(paths.kernels()), str(paths.boards())]})[:12]
    inputs["ops"] = list(selected)
    key = _digest(inputs)[:20]
    out = builds_dir() / key
    work = builds_dir() / "work" / f"{core.short}-{board}-{work_key}"

    if fresh:
        writes.remove_tree(out)
        writes.remove_tree(work)
    cached = _load_cached(out, core, say)
    if cached is not None:
        return cached

    manifest.check_writable(builds_dir(), "runner build cache", folder=True)  # full or read-only: one line now
    work.mkdir(parents=True, exist_ok=True)
    with locks.waiting(work):
        cached = _load_cached(out, core, say)  # another process may have built it meanwhile
        if cached is not None:
            return cached
        say(f"building the {core.name} runner for {board} ({len(selected)} operators) in {work}")
        started = time.monotonic()
        _configure(work, core, board, selected, options, et, nn, found)
        from cortexm.base import progress as progress_mod

        task = progress_mod.task(progress, f"building the {core.name} runner")
        _run(work, [found.cmake, "--build", str(work), "--parallel", str(jobs or build_jobs())], "build.log",
             f"building the {core.name} runner", task)
        task.done()
        _unchanged(inputs, et, nn, core)
        seconds = time.monotonic() - started
        # What was built from what, and nothing of when or where the cache is: two builds of the
        # same inputs write the same bytes (tests/firmware/test_reproducible.py).
        _publish(work, out, {"key": key, "inputs": inputs, "trees": [str(et), str(nn)],
                             "work": str(work.relative_to(builds_dir()))})
    say(f"built {out / ELF_NAME} in {seconds:.0f} s")
    return Runner(core, board, out / ELF_NAME, out / MAP_NAME, out, selected, key, False, seconds, options)


def _digest(data: dict) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def _load_cached(out: Path, core: Core, say: Callable[[str], None], remove: bool = True) -> Runner | None:
    """The runner cached in `out` for `core`, or None. An entry whose build.json or files are
    damaged is skipped with a `say`d note, and removed (`remove`) so that it is built again."""
    if not out.is_dir():
        return None
    try:
        record = json.loads((out / "build.json").read_text())
        inputs = record["inputs"]
        runner = Runner(core, inputs["board"], out / ELF_NAME, out / MAP_NAME, out, tuple(inputs["ops"]),
                        record.get("key", out.name), True, 0.0, BuildOptions(**inputs["options"]))
        problem = (manifest.damage(out, record[manifest.KEY]) if manifest.KEY in record
                   else "an older cortexm built it, without a manifest")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        problem = f"its build.json is unreadable ({type(e).__name__})"
    if problem is not None:
        say(f"note: the runner in {out} is damaged ({problem}); " + ("building it again" if remove else "not using it"))
        if remove:
            writes.remove_tree(out)
        return None
    return runner if inputs.get("core") == core.name else None


def _tree_keys(executorch_src, cmsis_nn_src) -> dict[str, str | None]:
    """The build key's name of each tree as it is now (None: no such tree here)."""
    keys: dict[str, str | None] = {}
    for kind, given, ignore in ((sources.EXECUTORCH, executorch_src, LOWERING_ONLY), (sources.CMSIS_NN, cmsis_nn_src, ())):
        path = sources.locate(kind, given).path
        keys[kind.name] = identity.current(path, ignore).key if path is not None else None
    keys["project"] = _project_digest() if paths.kernels().is_dir() else None
    return keys


def _project_digest() -> str:
    # kernels/cmsis_nn_helper builds the lowering's host module (cortexm.firmware.helper), no runner.
    return identity.files_digest(paths.kernels(), paths.boards(), leave_out=("cmsis_nn_helper",))


def _unchanged(inputs: dict, et: Path, nn: Path, core: Core) -> None:
    """The trees and the project's files are what the build's key says, after the build too:
    an edit during the build would cache one content's runner under another's key."""
    now = {"executorch": identity.current(et, LOWERING_ONLY).key, "cmsis-nn": identity.current(nn).key,
           "project": _project_digest()}
    changed = [name for name, key in now.items() if inputs[name] != key]
    if changed:
        where = {"executorch": et, "cmsis-nn": nn, "project": paths.kernels().parent}
        raise InputsChanged(f"the {changed[0]} tree ({where[changed[0]]}) changed while the {core.name} runner was "
                            "built: it is not cached, and no verdict is given for either content; run again")


def _prebuilt(core: Core, board: str, ops: tuple[str, ...], options: BuildOptions, trees: dict[str, str | None],
              say) -> Runner | None:
    """A runner built elsewhere ($CORTEXM_RUNNERS) for this core, board, operators and options,
    and from the trees found here (where one is found): never one built from other content."""
    for folder in filter(None, os.environ.get(RUNNERS_ENV, "").split(os.pathsep)):
        trust.require_private(folder, f"prebuilt runner folder (${RUNNERS_ENV})",
                              f"leave it out of {RUNNERS_ENV}, or make it yours", make=False)
        runner = _load_cached(Path(folder), core, say, remove=False)  # not ours to remove
        if runner is None or (runner.board, runner.ops, runner.options) != (board, ops, options):
            continue
        built_from = json.loads((runner.build_dir / "build.json").read_text())["inputs"]
        other = [name for name, key in trees.items() if key is not None and built_from.get(name) != key]
        if other:
            say(f"note: the prebuilt {core.name} runner in {folder} was built from another {other[0]} tree than "
                f"the one here ({built_from.get(other[0])}, here {trees[other[0]]}): building from the tree here")
            continue
        return runner
    return None


def _configure(work: Path, core: Core, board: str, ops: tuple[str, ...], options: BuildOptions,
               et: Path, nn: Path, found: tools.Tools) -> None:
    toolchain = ["-DCMAKE_TOOLCHAIN_FILE=" + str(paths.kernels() / "toolchain" / "host-sanitizers.cmake")] if core.hosted else [
        f"-DCMAKE_TOOLCHAIN_FILE={paths.kernels() / 'toolchain' / 'arm-none-eabi-gcc.cmake'}",
        f"-DARM_TOOLCHAIN_PREFIX={found.toolchain_prefix}",
        f"-DCORTEXM_CPU_FLAGS={';'.join(core.gcc_flags)}",
    ]
    command = [
        found.cmake, "-G", found.generator, "-S", str(paths.kernels()), "-B", str(work), *toolchain,
        f"-DCORTEXM_BOARD={board}",
        f"-DCORTEXM_BOARDS_DIR={paths.boards()}",
        f"-DCORTEXM_OPS={';'.join(ops)}",
        f"-DEXECUTORCH_SRC={et}",
        f"-DCMSIS_NN_SRC={nn}",
        f"-DFLATC_EXECUTABLE={found.flatc}",
        f"-DFLATBUFFERS_INCLUDE_DIR={found.flatbuffers_include}",
        f"-DPython3_EXECUTABLE={found.python}",
        *options.cmake_args(),
    ]
    _run(work, command, "configure.log", f"configuring the {core.name} runner build")


def _publish(work: Path, out: Path, record: dict) -> None:
    """Copies the ELF and map into the cache folder, whole or not at all."""
    staging = out.with_name(out.name + ".partial")
    writes.remove_tree(staging)
    staging.mkdir(parents=True)
    for name in (ELF_NAME, MAP_NAME):
        writes.copy(work / name, staging / name)
    record = {**record, manifest.KEY: manifest.of_files(staging, [ELF_NAME, MAP_NAME])}
    writes.atomic(staging / "build.json", json.dumps(record, indent=2) + "\n")  # last: it vouches for the rest
    writes.remove_tree(out)
    writes.move(staging, out)
