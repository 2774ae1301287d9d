"""Fetching the pinned trees, without the internet: a real HTTP server on 127.0.0.1 serves a
good archive, a truncated one, one whose content is not the pinned one, an HTML error page
saved under the archive's name, and nothing at all. Each gives its one-line outcome, and
nothing half-written is left where the trees go."""

from __future__ import annotations

import copy
import http.server
import io
import tarfile
import threading
from pathlib import Path

import pytest

from conftest import run_cli
from cortexm import sources
from cortexm.sources import nar, pins, trees

REV = "0123456789abcdef0123456789abcdef01234567"


def _archive(tmp_path: Path, content: bytes = b"int x;\n") -> tuple[bytes, str]:
    """A GitHub-style archive (one top folder) of a small CMSIS-NN tree, and the tree's NAR hash."""
    top = tmp_path / "src" / f"CMSIS-NN-{REV}"
    (top / "Include").mkdir(parents=True)
    (top / "Include" / "arm_nnfunctions.h").write_bytes(content)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(top, arcname=top.name)
    return buffer.getvalue(), nar.nar_hash(top)


class _Server(http.server.BaseHTTPRequestHandler):
    routes: dict[str, tuple[bytes, int | None]] = {}  # path -> (body, Content-Length to claim)

    def do_GET(self):  # the handler's API
        body, length = self.routes.get(self.path, (b"", None))
        if not body:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(length if length is not None else len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Server)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    _Server.routes = {}


@pytest.fixture
def where(tmp_path, monkeypatch, server):
    """The user cache in tmp_path, the archive URL on the local server, and a pin file whose
    cmsis-nn is REV."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(sources.CMSIS_NN.env, raising=False)
    monkeypatch.setenv(trees.ARCHIVE_URL_ENV, f"http://127.0.0.1:{server.server_address[1]}/{{owner}}/{{repo}}/{{rev}}.tar.gz")
    data = copy.deepcopy(pins.load())
    data["cmsis-nn"]["rev"] = REV
    return data


def _serve(path_body_length: tuple[bytes, int | None]) -> None:
    _Server.routes = {f"/ARM-software/CMSIS-NN/{REV}.tar.gz": path_body_length}


def _nothing_left(tmp_path: Path) -> None:
    folder = tmp_path / "cache" / "cortexm" / "sources"
    assert not (folder / "cmsis-nn").exists()
    assert not [p.name for p in folder.iterdir()] if folder.is_dir() else True


def test_good_archive_with_its_pinned_hash(tmp_path, where):
    body, digest = _archive(tmp_path)
    where["cmsis-nn"]["nar_hash"] = digest
    _serve((body, None))
    path, note = trees.ensure(sources.CMSIS_NN, where, None, offline=False)
    assert path == tmp_path / "cache" / "cortexm" / "sources" / "cmsis-nn"
    assert (path / "Include" / "arm_nnfunctions.h").read_bytes() == b"int x;\n"
    assert note == f"fetched cmsis-nn {REV[:12]} into {path}: NAR hash {digest} as pinned"
    # Present now: found, not fetched again.
    assert trees.ensure(sources.CMSIS_NN, where, None, offline=False) == (path, "")


def test_no_hash_pinned_is_reported_as_unverified(tmp_path, where):
    body, digest = _archive(tmp_path)
    where["cmsis-nn"]["nar_hash"] = ""
    _serve((body, None))
    _path, note = trees.ensure(sources.CMSIS_NN, where, None, offline=False)
    assert note.endswith(f"UNVERIFIED: NAR hash {digest}, pins.toml pins no hash to compare with")


def test_truncated_download(tmp_path, where):
    body, digest = _archive(tmp_path)
    where["cmsis-nn"]["nar_hash"] = digest
    _serve((body[: len(body) // 2], len(body)))
    path, note = trees.ensure(sources.CMSIS_NN, where, None, offline=False)
    assert path is None
    assert note.endswith(f"the download stopped at {len(body) // 2} of {len(body)} bytes; nothing installed"), note
    _nothing_left(tmp_path)


def test_content_that_is_not_the_pinned_one(tmp_path, where):
    body, digest = _archive(tmp_path, content=b"int tampered;\n")
    where["cmsis-nn"]["nar_hash"] = "sha256-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
    _serve((body, None))
    path, note = trees.ensure(sources.CMSIS_NN, where, None, offline=False)
    assert path is None
    assert note.endswith(f"NAR hash {digest} differs from the pin sha256-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=; "
                         "nothing installed"), note
    _nothing_left(tmp_path)


def test_html_error_page_saved_as_the_archive(tmp_path, where):
    _serve((b"<!DOCTYPE html><html><body>Sign in to download</body></html>", None))
    path, note = trees.ensure(sources.CMSIS_NN, where, None, offline=False)
    assert path is None
    assert "sent an HTML page, not the archive (it begins b'<!DOCTYPE html>" in note
    _nothing_left(tmp_path)


def _crafted(*members: tuple[str, str, str]) -> bytes:
    """A .tar.gz of (name, kind, value) members: kind "dir", "file" (value: its text) or
    "symlink" (value: its target)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, kind, value in ((f"{TOP}/Include", "dir", ""), *members):
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = len(value)
                tar.addfile(info, io.BytesIO(value.encode()))
                continue
            info.type, info.linkname = (tarfile.DIRTYPE, "") if kind == "dir" else (tarfile.SYMTYPE, value)
            tar.addfile(info)
    return buffer.getvalue()


TOP = f"CMSIS-NN-{REV}"
DEEP = f"{TOP}/d1/d2/d3"
# An archive that writes outside the folder it unpacks into (TOP's parent, in a temporary
# folder beside where the tree goes), to where the test sees it (the cache, in tmp_path).
ESCAPES = {
    "a dotted path": [(f"{TOP}/../../../escaped.txt", "file", "x")],
    "through a link to an absolute folder": [(f"{TOP}/out", "symlink", str(Path(__file__).parent)),
                                             (f"{TOP}/out/escaped.txt", "file", "x")],
    # Each link's target is inside as text (DEEP/top/../../../.. is TOP), but `top` is TOP
    # itself, three folders up: through it, `..` leaves the tree.
    "through a link to a link": [(f"{TOP}/d1", "dir", ""), (f"{TOP}/d1/d2", "dir", ""), (DEEP, "dir", ""),
                                 (f"{DEEP}/top", "symlink", "../../.."), (f"{DEEP}/up", "symlink", "top/../../../.."),
                                 (f"{DEEP}/up/escaped.txt", "file", "x")],
}


@pytest.mark.parametrize("python", ["this Python's filter", "without the data filter (before 3.10.12)"])
@pytest.mark.parametrize("how", sorted(ESCAPES))
def test_an_archive_that_writes_outside_its_folder_is_refused(tmp_path, where, monkeypatch, how, python):
    """The archive is checked against its pin only once it is unpacked: until then it is
    anybody's, and unpacking it may write nothing outside the temporary folder."""
    if python.startswith("without"):
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    elif not hasattr(tarfile, "data_filter"):
        pytest.skip("this Python has no tarfile data filter (3.10.12, 3.11.4 and later have it)")
    where["cmsis-nn"]["nar_hash"] = "sha256-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
    _serve((_crafted(*ESCAPES[how]), None))
    path, note = trees.ensure(sources.CMSIS_NN, where, None, offline=False)
    assert path is None and note.endswith("; nothing installed"), note
    assert "not a whole" not in note, note  # says what the archive holds
    assert not list(tmp_path.rglob("escaped.txt")) and not (Path(__file__).parent / "escaped.txt").exists()
    _nothing_left(tmp_path)


def test_unreachable_says_how_to_provide_the_tree(tmp_path, where, monkeypatch):
    monkeypatch.setenv(trees.ARCHIVE_URL_ENV, "http://127.0.0.1:9/{owner}/{repo}/{rev}.tar.gz")  # discard port
    path, note = trees.ensure(sources.CMSIS_NN, where, None, offline=False)
    assert path is None
    assert note.startswith("cannot download http://127.0.0.1:9/ARM-software/CMSIS-NN/")
    assert note.endswith(f"at {sources.default_path(sources.CMSIS_NN)} or give one with --cmsis-nn-src / $CORTEXM_CMSIS_NN_SRC")
    _nothing_left(tmp_path)


def test_offline_does_not_download(tmp_path, where):
    path, note = trees.ensure(sources.CMSIS_NN, where, None, offline=True)
    assert path is None and note.endswith("(--offline: not downloading it)")


def test_the_command_line_says_it_in_one_line(tmp_path, where, monkeypatch):
    """`cortexm sources --fetch` with the HTML page: one error line, exit 2, no traceback."""
    _serve((b"<html>Not Found</html>", None))
    pin_file = tmp_path / "pins.toml"
    pin_file.write_text(pins.pins_path().read_text().replace(pins.load()["cmsis-nn"]["rev"], REV))
    monkeypatch.setenv(pins.PINS_ENV, str(pin_file))
    executorch = tmp_path / "executorch"  # found, so only CMSIS-NN is fetched
    (executorch / sources.EXECUTORCH.marker).parent.mkdir(parents=True)
    (executorch / sources.EXECUTORCH.marker).write_text("")
    result = run_cli("sources", "--fetch", "--executorch-src", str(executorch))
    assert result.returncode == 2, result.stderr
    assert [line for line in result.stderr.splitlines() if line.startswith("error:")] == [
        f"error: http://127.0.0.1:{where_port(where)}/ARM-software/CMSIS-NN/{REV}.tar.gz sent an HTML page, not the "
        "archive (it begins b'<html>Not Found</html>'); nothing installed"]
    assert "Traceback" not in result.stderr
    _nothing_left(tmp_path)


def where_port(_where) -> str:
    import os

    return os.environ[trees.ARCHIVE_URL_ENV].split(":")[2].split("/")[0]
