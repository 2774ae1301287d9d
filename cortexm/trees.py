"""The ExecuTorch and CMSIS-NN trees: which are used, whether they match the pins,
and fetching the pinned ones.

`fetch` downloads GitHub's archive of the pinned commit (what Nix's
fetchFromGitHub fetches), checks its NAR hash against pins.toml when one is
pinned, and only then moves it into place, so the default location never holds
a half or wrong tree.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from cortexm import nar, sources
from cortexm.errors import CortexmError
from cortexm.firmware.identity import tree

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


def fetch(kind: sources.SourceKind, pins: dict) -> tuple[Path, str]:
    """Downloads the pinned tree of `kind`; returns its path and how it was verified."""
    entry = pins[kind.name]
    owner, repo, rev = entry["owner"], entry["repo"], entry["rev"]
    dest = sources.default_path(kind)
    if dest.exists():
        raise CortexmError(f"{dest} exists already; move it away to fetch {owner}/{repo} at {rev[:12]} again")
    url = (os.environ.get(ARCHIVE_URL_ENV) or ARCHIVE_URL).format(owner=owner, repo=repo, rev=rev)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=f".{kind.name}-") as tmp:
        archive = Path(tmp) / "archive.tar.gz"
        try:
            with urllib.request.urlopen(url, timeout=TIMEOUT) as response, open(archive, "wb") as f:
                shutil.copyfileobj(response, f)
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", None) or e
            raise CortexmError(
                f"cannot download {url} ({reason}); without network, place a checkout of {owner}/{repo} "
                f"at {rev[:12]} at {dest} or give it with {kind.flag} / ${kind.env}"
            ) from None
        with tarfile.open(archive) as tar:
            # The "data" filter refuses links and paths out of the folder (Python 3.11.4+).
            safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            tar.extractall(Path(tmp) / "tree", **safe)
        (top,) = (Path(tmp) / "tree").iterdir()  # GitHub archives hold one folder, repo-rev/
        got = nar.nar_hash(top)
        want = entry.get("nar_hash", "")
        if want and got != want:
            raise CortexmError(f"{url}: NAR hash {got} differs from the pin {want}; not installed")
        shutil.move(str(top), dest)
    verified = f"NAR hash {got} as pinned" if want else f"NAR hash {got} (no hash pinned to compare with)"
    return dest, verified
