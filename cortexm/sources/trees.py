"""The ExecuTorch and CMSIS-NN trees: which are used, whether they match the pins,
and fetching the pinned ones.

`fetch` downloads GitHub's archive of the pinned commit (what Nix's
fetchFromGitHub fetches), checks its NAR hash against pins.toml when one is
pinned, and only then moves it into place, so the default location never holds
a half or wrong tree.
"""

from __future__ import annotations

import os
import tarfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from cortexm import sources
from cortexm.base import writes
from cortexm.base.errors import CortexmError
from cortexm.sources import nar
from cortexm.sources.identity import tree

# $CORTEXM_ARCHIVE_URL, the same template, points at a mirror.
ARCHIVE_URL = "https://github.com/{owner}/{repo}/archive/{rev}.tar.gz"
ARCHIVE_URL_ENV = "CORTEXM_ARCHIVE_URL"
TIMEOUT = 60


@dataclass(frozen=True)
class TreeStatus:
    kind: sources.SourceKind
    path: Path | None
    origin: str  # "flag", "env", "default", or "" when not found
    rev: str | None  # the commit checked out (None: not a git checkout)
    changes: str | None  # digest of uncommitted changes
    nar_hash: str | None  # content hash, when computed
    pin_rev: str
    pin_nar_hash: str

    @property
    def matches(self) -> bool | None:
        """Matches the pin by commit (clean) or content; None when nothing could be compared."""
        if self.path is None:
            return None
        if self.nar_hash and self.pin_nar_hash:
            return self.nar_hash == self.pin_nar_hash
        if self.rev is not None:
            return self.rev == self.pin_rev and self.changes is None
        return None

    def as_dict(self) -> dict:
        return {"name": self.kind.name, "path": str(self.path) if self.path else None, "origin": self.origin,
                "rev": self.rev, "uncommitted_changes": self.changes, "nar_hash": self.nar_hash,
                "pin_rev": self.pin_rev, "pin_nar_hash": self.pin_nar_hash or None, "matches_pin": self.matches}


def status(kind: sources.SourceKind, pins: dict, explicit: str | Path | None = None, content: bool = False) -> TreeStatus:
    """What tree `kind` resolves to; its NAR hash is computed when it is not a git
    checkout, or when `content` asks for it."""
    found = sources.locate(kind, explicit)
    entry = pins[kind.name]
    rev = changes = digest = None
    if found.path is not None:
        ident = tree(found.path)
        rev, changes, digest = ident.rev, ident.changes, ident.nar_hash
        if content and digest is None:
            digest = nar.nar_hash(found.path)
    return TreeStatus(kind, found.path, found.origin, rev, changes, digest, entry["rev"], entry.get("nar_hash", ""))


def fetch(kind: sources.SourceKind, pins: dict, progress=None) -> tuple[Path, str]:
    """Downloads the pinned tree of `kind` into its default location; returns the path and
    how it was verified. Nothing is left behind when it fails: the download goes to a
    `.part` file, the tree to a temporary folder, and only a whole, checked tree is moved
    into place."""
    from cortexm.base import progress as progress_mod

    entry = pins[kind.name]
    owner, repo, rev = entry["owner"], entry["repo"], entry["rev"]
    dest = sources.default_path(kind)
    if dest.exists():
        raise CortexmError(f"{dest} exists already; move it away to fetch {owner}/{repo} at {rev[:12]} again")
    url = (os.environ.get(ARCHIVE_URL_ENV) or ARCHIVE_URL).format(owner=owner, repo=repo, rev=rev)
    how_else = (f"without network, place a checkout of {owner}/{repo} at {rev[:12]} at {dest} "
                f"or give one with {kind.flag} / ${kind.env}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    with writes.temporary_folder(dest.parent, prefix=f".{kind.name}-") as tmp:
        archive = Path(tmp) / "archive.tar.gz.part"
        task = progress_mod.task(progress, f"downloading {kind.name} {rev[:12]}", unit="B")
        _download(url, archive, task, how_else)
        task.done()
        tree = Path(tmp) / "tree"
        try:
            with tarfile.open(archive, "r:gz") as tar:
                _extract(tar, tree, url)
        except (tarfile.TarError, OSError, EOFError) as e:
            if isinstance(e, getattr(tarfile, "FilterError", ())):  # the "data" filter's refusal
                raise CortexmError(f"{url}: {e}; nothing installed") from None
            raise CortexmError(f"{url}: the download is not a whole .tar.gz archive ({e}); nothing installed") from None
        tops = list(tree.iterdir())
        if len(tops) != 1 or not (tops[0] / kind.marker).is_file():  # GitHub archives hold one folder, repo-rev/
            raise CortexmError(f"{url}: the archive holds no {kind.name} tree (no {kind.marker}); nothing installed")
        got = nar.nar_hash(tops[0])
        want = entry.get("nar_hash", "")
        if want and got != want:
            raise CortexmError(f"{url}: NAR hash {got} differs from the pin {want}; nothing installed")
        writes.move(tops[0], dest)
    verified = f"NAR hash {got} as pinned" if want else f"UNVERIFIED: NAR hash {got}, pins.toml pins no hash to compare with"
    return dest, verified


def _extract(tar: tarfile.TarFile, tree: Path, url: str) -> None:
    """Every member of `tar` into `tree`, nothing outside it: the archive is checked against
    its pin only once it is unpacked, so until then it is anybody's. Python's "data" filter
    where this Python has it (3.10.12, 3.11.4 and later); before those, the same refusals here,
    member by member against what is on disk by then (a link unpacked earlier is followed)."""
    def refuse(member: tarfile.TarInfo) -> None:
        problem = _unsafe_member(member, tree)
        if problem:
            raise CortexmError(f"{url}: the archive's member {member.name!r} {problem}; nothing installed")

    writes.unpack(tar, tree, refuse)


def _unsafe_member(member: tarfile.TarInfo, tree: Path) -> str | None:
    """Why unpacking `member` into `tree` now could reach outside it or make what a source
    tree never holds, or None. Paths are resolved as the folder is on disk now."""
    root = os.path.realpath(tree)

    def inside(path: str) -> bool:
        return os.path.commonpath([root, os.path.realpath(os.path.join(root, path))]) == root

    if os.path.isabs(member.name) or not inside(member.name):
        return "is a path outside the folder it unpacks into"
    if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
        return "is a device or a pipe, which no source tree holds"
    target = os.path.join(os.path.dirname(member.name), member.linkname) if member.issym() else member.linkname
    if (member.issym() or member.islnk()) and (os.path.isabs(member.linkname) or not inside(target)):
        return f"links outside the folder it unpacks into ({member.linkname})"
    return None


def _download(url: str, target: Path, task, how_else: str) -> None:
    """`url` into `target`, refusing what is not the archive (an HTML error page saved under
    the archive's name, a short read)."""
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as response, writes.stream(target, "wb") as f:
            total = int(response.headers.get("Content-Length") or 0) or None
            task.update(total=total)
            first = response.read(64 * 1024)
            if not first.startswith(b"\x1f\x8b"):
                kind = "an HTML page" if first.lstrip()[:1] == b"<" else "no gzip archive"
                raise CortexmError(f"{url} sent {kind}, not the archive (it begins {first[:40]!r}); nothing installed")
            f.write(first)
            done = len(first)
            for chunk in iter(lambda: response.read(1 << 20), b""):
                f.write(chunk)
                done += len(chunk)
                task.update(completed=done)
    except (urllib.error.URLError, OSError, TimeoutError) as e:
        reason = getattr(e, "reason", None) or e
        raise CortexmError(f"cannot download {url} ({reason}); {how_else}") from None
    if total is not None and done != total:
        raise CortexmError(f"{url}: the download stopped at {done} of {total} bytes; nothing installed")


def ensure(kind: sources.SourceKind, pins: dict, explicit: str | Path | None, offline: bool,
           progress=None) -> tuple[Path | None, str]:
    """The tree of `kind` to build with, fetching the pinned one when there is none (unless
    `offline`), and one line saying what happened ("" when a tree was there already)."""
    found = sources.locate(kind, explicit)
    if found.path is not None:
        return found.path, ""
    if offline:
        return None, f"{sources.missing_message(kind)} (--offline: not downloading it)"
    try:
        path, verified = fetch(kind, pins, progress)
    except CortexmError as e:
        return None, str(e)
    return path, f"fetched {kind.name} {pins[kind.name]['rev'][:12]} into {path}: {verified}"
