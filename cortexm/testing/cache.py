"""Exports cached by content: what went into them decides whether they are reused.

The key covers the case (its name, a sweep sample's operator and parameters, and for a user's
case file the text of every file of its own that its imports reach, and whether each module
it imports is installed), the core and layout, the cortexm code that shapes an export
(cortexm.lowering, the cases, and the integer reference cortexm.oracle, whose outputs are
stored with the program), the installed torch and ExecuTorch, and the content of every file
of the cortex_m backend the lowering reads (an ExecuTorch tree's, or the wheel's: see
cortexm.sources.backend_source), so a change in a contributor's tree re-exports, and the
evaluation set an export measured accuracy on (`evaluation`: its digest,
cortexm.semantic.evalset; an export without one keys as before). A second `cortexm test` with
nothing changed reads every .pte from here without importing torch.

A failed export is cached only when the lowering itself failed, for a reason the key covers:
never when the case's model could not be built (its code may read files, or import what is
not installed yet), nor for a missing module, a full disk or memory running out.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from functools import cache
from importlib import metadata
from pathlib import Path

from cortexm.base import entries, files, imports, locks, manifest, trust, writes
from cortexm.base.errors import InputsChanged, storage_error
from cortexm.sources import backend_source, cache_dir
from cortexm.testing import reads

# The export job and what it imports: the lowering, the cases, the integer reference whose
# outputs an export stores, the memory plan of its isolated program (cortexm.base.imports).
_EXPORT_ROOTS = ("cortexm.lowering.export", "cortexm.lowering.writer", "cortexm.lowering.modelsource", "cortexm.cases")


_PACKAGE = Path(__file__).resolve().parent.parent  # cortexm/


def code_files() -> list[Path]:
    """This package's source files that shape a cached export."""
    modules = imports.modules(_PACKAGE)
    shaping = imports.closure(_PACKAGE, [*_EXPORT_ROOTS, "cortexm.testing.exports"])
    return sorted({modules[m] for m in shaping})


@cache
def _code_fingerprint(lowering_tree: Path | None, helper: Path | None) -> str:
    h = _cortexm_and_torch()
    h.update(backend_source.fingerprint.__wrapped__(lowering_tree, helper).encode())
    return h.hexdigest()


@cache
def _quantization_fingerprint(lowering_tree: Path | None) -> str:
    """What a quantized model depends on besides its case: as _code_fingerprint, but of the
    backend only the files whose code quantizes (cortexm.sources.quantizer_files), and not
    the CMSIS-NN module (scratch is sized later)."""
    h = _cortexm_and_torch()
    h.update(backend_source.quantization_fingerprint(lowering_tree).encode())
    return h.hexdigest()


def unchanged(entry_key: str, case: str, core: str | None, layout: str, case_file: Path | None,
              evaluation: str | None = None) -> None:
    """Raises InputsChanged when the files `entry_key` was computed from (cortexm's code, the
    lowering's backend files, the case file) are no longer what they were: an export made
    meanwhile may hold either content, and is not cached under the key."""
    backend_source.activate_from_environment()
    tree = backend_source.active_tree()
    if core is None:
        now = _quantized_key(_quantization_fingerprint.__wrapped__(tree), case, layout, case_file, fresh=True)
    else:
        now = _key(_code_fingerprint.__wrapped__(tree, backend_source.active_helper()), case, core, layout, case_file,
                   fresh=True, evaluation=evaluation)
    if now != entry_key:
        where = f"cortexm's code, backends/cortex_m of {tree}" if tree else "cortexm's code, the lowering's backend files"
        raise InputsChanged(f"what lowers {case} ({where} or its case file) changed while it was exported: nothing "
                            "lowered from them was cached, and no verdict is given for either content; run again")


def _cortexm_and_torch():
    """A digest started with cortexm's export code and the installed torch and ExecuTorch."""
    h = hashlib.sha256()
    for f in code_files():
        h.update(str(f.relative_to(_PACKAGE)).encode())
        h.update(f.read_bytes())
    for dist in ("torch", "executorch"):
        try:
            h.update(f"{dist}=={metadata.version(dist)}".encode())
        except metadata.PackageNotFoundError:
            h.update(f"{dist} absent".encode())
    try:
        from executorch import version

        h.update(str(version.git_version).encode())
    except ImportError:
        pass
    return h


def fingerprint() -> str:
    """What every cached export depends on besides its case: cortexm's code, torch and
    ExecuTorch, the lowering's backend files."""
    backend_source.activate_from_environment()
    return _code_fingerprint(backend_source.active_tree(), backend_source.active_helper())


def key(case: str, core: str, layout: str, case_file: Path | None = None, evaluation: str | None = None) -> str:
    """`evaluation`: the digest of the evaluation set the export measures accuracy on too."""
    files.check_name(case, "case name")  # it names the entry's files
    return _key(fingerprint(), case, core, layout, case_file, evaluation=evaluation)


def _key(code: str, case: str, core: str, layout: str, case_file: Path | None, fresh: bool = False,
         evaluation: str | None = None) -> str:
    h = hashlib.sha256(code.encode())
    h.update(f"{case}\0{core}\0{layout}".encode())
    h.update(_built_from(case))
    if case_file is not None:
        h.update((case_file_digest.__wrapped__ if fresh else case_file_digest)(case_file).encode())
    if evaluation is not None:  # its accuracy record, and so the verdict, depends on the set
        h.update(f"\0evaluation\0{evaluation}".encode())
    return h.hexdigest()[:24]


def _built_from(case: str) -> bytes:
    """What a case registered from data is built from (a sweep sample's operator and
    parameters: cortexm.cases.registry.Case.spec), which its name does not say; nothing for
    any other case. The sweep's process and the export worker register it alike, so both key it
    the same."""
    from cortexm.cases.registry import REGISTRY

    found = REGISTRY.get(case)
    return f"\0spec\0{found.spec}".encode() if found is not None and found.spec else b""


@cache
def case_file_digest(case_file: Path) -> str:
    """The content of a case file and of every file of the user's its imports reach, and how
    its other imports resolve (cortexm.base.imports.file_closure); read once per process."""
    from cortexm.testing import casefiles

    own, other = imports.file_closure(case_file)
    h = hashlib.sha256()
    for f in own:  # by name and content: the same files elsewhere are the same cases
        h.update(f"{f.name}\0".encode())
        # The case file itself as the run read it once: its workers run those bytes.
        h.update(casefiles.source_of(f) if casefiles.was_read(f) else f.read_bytes())
    h.update("\0".join(other).encode())
    return h.hexdigest()


def root() -> Path:
    return trust.require_private(Path(os.environ.get("CORTEXM_EXPORT_CACHE") or cache_dir() / "exports"),
                                 "export cache", "set CORTEXM_EXPORT_CACHE to a folder of your own")


def check_writable() -> None:
    """Before exports: the cache folder can be written, or one line naming it."""
    manifest.check_writable(root(), "export cache", folder=True)


FAILURE = "export-failed.txt"


def lookup(case: str, core: str, layout: str, case_file: Path | None = None,
           note: Callable[[str], None] | None = None, evaluation: str | None = None) -> Path | str | None:
    """The cached .pte for these inputs, the cached one-line failure of its export, or None. An
    entry that is damaged (a file missing, truncated, changed) is removed, with a `note`."""
    folder = root() / key(case, core, layout, case_file, evaluation)
    written = entries.intact(folder, lambda problem: (note or (lambda _line: None))(
        f"note: the cached export of {case} for {core} is damaged ({problem}); exporting it again"))
    if written is None:
        return None
    moved = _stale(folder, written)
    if moved:
        (note or (lambda _line: None))(f"note: {case} is exported again for {core}: {moved} changed since its last export")
        return None
    pte = folder / f"{case}.pte"
    if pte.name in written:
        return pte
    return (folder / FAILURE).read_text().strip() if FAILURE in written else None


def store(case: str, core: str, layout: str, case_file: Path | None, write, entry_key: str | None = None,
          evaluation: str | None = None, facts: dict | None = None) -> Path:
    """Run `write(pte_path)` into a fresh folder and move it into the cache atomically
    (`entry_key`: the key, when the caller computed it already), once the key's inputs are
    seen unchanged since (`unchanged`). `facts`: what the case's own code read to make it
    (cortexm.testing.reads), kept with the entry: it stands only while they do.

    An export whose lowering fails with a CortexmError is cached as its message: the same
    inputs fail the same way, and a warm run should not pay for finding out again. A failure
    that may pass by itself (`transient`) is not cached.
    """
    entry_key = entry_key or key(case, core, layout, case_file, evaluation)
    final = root() / entry_key
    # One process makes an entry; another that wants it waits, then takes it.
    with locks.waiting(final):
        written = manifest.read(final / entries.MANIFEST)
        if written and f"{case}.pte" in written and manifest.damage(final, written) is None:
            if not _stale(final, written):
                return final / f"{case}.pte"
        if written is not None or final.exists():
            writes.remove_tree(final)  # an entry whose inputs moved on: made again below
        return _store(case, core, layout, case_file, _with_reads(write, facts), entry_key, final, evaluation)


def _store(case: str, core: str, layout: str, case_file: Path | None, write, entry_key: str, final: Path,
           evaluation: str | None) -> Path:
    from cortexm.base.errors import CortexmError

    try:
        tmp = entries.new(final.parent)
    except OSError as e:
        raise storage_error(e) or e from None
    try:
        try:
            write(tmp / f"{case}.pte")
        except CortexmError as e:
            if not transient(e):
                unchanged(entry_key, case, core, layout, case_file, evaluation)
                writes.new_file(tmp / FAILURE, str(e) + "\n")
                if getattr(write, "facts", None) is not None:
                    writes.new_file(tmp / reads.FILE, json.dumps(write.facts))
                entries.publish(tmp, final)
            raise
        unchanged(entry_key, case, core, layout, case_file, evaluation)
        entries.publish(tmp, final)
    except OSError as e:
        raise storage_error(e) or e from None
    finally:
        if tmp.exists():
            writes.remove_tree(tmp)
    return final / f"{case}.pte"


def _with_reads(write, facts: dict | None):
    """`write`, and what the case's code read beside its program (kept for a failure too)."""
    def written(pte: Path) -> None:
        write(pte)
        if facts is not None:
            writes.new_file(pte.parent / reads.FILE, json.dumps(facts))
    written.facts = facts  # type: ignore[attr-defined]
    return written


def reads_of(folder: Path) -> dict | None:
    """What the case's code read when the entry at `folder` was made (None: nothing recorded)."""
    try:
        return json.loads((folder / reads.FILE).read_text())
    except (OSError, ValueError):
        return None


def _stale(folder: Path, written: dict) -> str | None:
    """What the case's code read for the entry at `folder` and has changed since, or None."""
    if reads.FILE not in written:
        return None
    facts = reads_of(folder)
    return reads.changed(facts) if isinstance(facts, dict) else "its record of what it read"


def transient(error: BaseException) -> bool:
    """Whether a failed export may succeed with the same key: it, or what caused it, is a
    missing module, a file or disk problem, memory running out, or the disk being full."""
    from cortexm.base.errors import StorageError

    seen = set()
    link: BaseException | None = error
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if isinstance(link, (ImportError, OSError, MemoryError, StorageError, InputsChanged)):
            return True
        link = link.__cause__ or link.__context__
    return False


# --- the quantization stage, shared by every core --------------------------------------------

QUANTIZED = "quantized"  # the export cache's folder of quantized models (cortexm.lowering.quantize.Quantized)


def quantized_key(case: str, layout: str, case_file: Path | None = None) -> str:
    """The key of a case's quantized model: its case, layout and case file as key() has them,
    and of the lowering only what quantizes, so an edit of a lowering pass re-runs the passes
    and not the quantization (about a third of an export), and every core shares one."""
    files.check_name(case, "case name")
    backend_source.activate_from_environment()
    return _quantized_key(_quantization_fingerprint(backend_source.active_tree()), case, layout, case_file)


def _quantized_key(code: str, case: str, layout: str, case_file: Path | None, fresh: bool = False) -> str:
    h = hashlib.sha256(code.encode())
    h.update(f"{case}\0{layout}".encode())
    h.update(_built_from(case))
    if case_file is not None:
        h.update((case_file_digest.__wrapped__ if fresh else case_file_digest)(case_file).encode())
    return h.hexdigest()[:24]


def lookup_quantized(case: str, layout: str, case_file: Path | None = None) -> Path | None:
    """The folder of the cached quantized model, or None; a damaged entry is removed, and one
    made from what the case's code read and has changed since is not used."""
    folder = root() / QUANTIZED / quantized_key(case, layout, case_file)
    written = entries.intact(folder)
    return folder if written is not None and not _stale(folder, written) else None


def store_quantized(case: str, layout: str, case_file: Path | None, write: Callable[[Path], None],
                    facts: dict | None = None) -> None:
    """Run `write(folder)` into a fresh folder and move it into the cache atomically. Only what
    succeeded is stored: a failed quantization is cached as each core's failed export."""
    entry_key = quantized_key(case, layout, case_file)
    final = root() / QUANTIZED / entry_key
    try:
        tmp = entries.new(final.parent)
        try:
            write(tmp)
            if facts is not None:
                writes.new_file(tmp / reads.FILE, json.dumps(facts))
            unchanged(entry_key, case, None, layout, case_file)
            if final.exists() and lookup_quantized(case, layout, case_file) is None:
                writes.remove_tree(final)  # made from inputs that have changed since
            entries.publish(tmp, final)
        finally:
            if tmp.exists():
                writes.remove_tree(tmp)
    except OSError as e:
        raise storage_error(e) or e from None


# --- what an edit reached: the last program made for each case ---------------------------------

PROGRAMS = "programs"  # the export cache's folder of the last program's digest per case, core and layout


def _program_record(case: str, core: str, layout: str, case_file: Path | None) -> Path:
    h = hashlib.sha256(f"{case}\0{core}\0{layout}".encode())
    h.update(_built_from(case))
    if case_file is not None:
        h.update(str(case_file.resolve()).encode())  # where: another file's case of that name is another case
    return root() / PROGRAMS / h.hexdigest()[:24]


def last_program(case: str, core: str, layout: str, case_file: Path | None = None) -> str | None:
    """The digest of the program this cache last made for the case on the core (None: none yet
    or unreadable): what a re-export after an edit is compared with."""
    try:
        text = _program_record(case, core, layout, case_file).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if len(text) == 64 and all(c in "0123456789abcdef" for c in text) else None


def remember_program(case: str, core: str, layout: str, case_file: Path | None, pte: Path,
                     last: str | None = None) -> str:
    """Records `pte` (a cached export) as the last program made for the case on the core
    (`last`: the record's digest now, which needs no writing again); returns its digest, the one
    its entry's manifest holds (lookup and store checked the file against it)."""
    listed = (manifest.read(pte.parent / entries.MANIFEST) or {}).get(pte.name)
    digest = listed.get("sha256") if isinstance(listed, dict) else None
    digest = digest if isinstance(digest, str) else manifest.sha256(pte)
    if digest == last:
        return digest
    record = _program_record(case, core, layout, case_file)
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        writes.atomic(record, (digest + "\n").encode())
    except OSError as e:
        raise storage_error(e) or e from None
    return digest
