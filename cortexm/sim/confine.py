"""A simulator that can write its run folder and nothing else.

The runner runs under the simulator with semihosting, which opens, writes and removes host
files with the user's rights wherever the firmware asks; the host build runs natively. A
runner from anywhere (a planted ELF, a kernel bug that writes a wild path, a model crafted to
reach one) must not touch the user's files. So every simulator starts confined:

- Landlock (Linux 5.13+, unprivileged): before the simulator is executed, this file, run as a
  script by a bare Python (`-I -S`: nothing of the user's is imported), gives up for itself and
  all it starts every right to write, make, remove, rename or truncate files outside the run
  folder (and /dev/null), and where the kernel can (Landlock ABI 4+, 6+), TCP and signals or
  abstract sockets outside its own group: QEMU also runs with `-nic none`.
- bubblewrap (`bwrap`), where Landlock is missing: the root folder read-only, the run folder
  writable, no network.
- neither: the run is refused with one line, unless CORTEXM_UNCONFINED=1 says the user trusts
  every runner they run.

Reading stays open (QEMU reads its own files, the ELF, the firmware it loads): a runner can read
what the user can, and write it nowhere but its run folder, whose outputs cortexm reads as data.
CORTEXM_CONFINE=landlock|bwrap picks one (the tests use it to prove each).
"""

from __future__ import annotations

import os
import shutil
import sys

UNCONFINED_ENV = "CORTEXM_UNCONFINED"
METHOD_ENV = "CORTEXM_CONFINE"

# Landlock's ABI (include/uapi/linux/landlock.h); its syscalls have one number on every
# architecture (they came after the tables were unified).
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_VERSION = 1  # LANDLOCK_CREATE_RULESET_VERSION
_PATH_BENEATH, _PR_SET_NO_NEW_PRIVS = 1, 38
_WRITE_FILE = 1 << 1
_WRITES = [  # every right that changes a file system, by the ABI that brought it
    (1, _WRITE_FILE | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12)),
    (2, 1 << 13),  # REFER: linking or renaming across folders
    (3, 1 << 14),  # TRUNCATE
]
_TRUNCATE = 1 << 14
_NET_TCP = (1 << 0) | (1 << 1)  # BIND_TCP, CONNECT_TCP (ABI 4)
_SCOPES = (1 << 0) | (1 << 1)  # abstract unix sockets, signals (ABI 6)


def command(argv: list[str], folder: str, network: bool = False, also: tuple[str, ...] = ()) -> list[str]:
    """`argv` wrapped so that it can write only below `folder` and the folders `also` (and, with
    `network`, may use TCP: the FVP listens on ports for its terminals). Raises CortexmError
    where nothing here can confine it and the user has not said CORTEXM_UNCONFINED=1."""
    method = _method()
    folders = [os.path.realpath(f) for f in (folder, *also)]
    if method == "landlock":
        return [sys.executable, "-I", "-S", os.path.abspath(__file__), os.pathsep.join(folders), "1" if network else "0",
                "--", *argv]
    if method == "bwrap":
        share = [] if network else ["--unshare-net"]
        binds = [a for f in folders for a in ("--bind", f, f)]
        return [shutil.which("bwrap") or "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", *binds,
                *share, "--die-with-parent", "--chdir", folders[0], "--", *argv]
    return list(argv)


def _method() -> str | None:
    chosen = os.environ.get(METHOD_ENV)
    if os.environ.get(UNCONFINED_ENV) == "1":
        return None
    if chosen in ("landlock", "bwrap"):
        if (chosen == "landlock" and landlock_abi() < 1) or (chosen == "bwrap" and bwrap_problem()):
            raise _error(f"{METHOD_ENV}={chosen}, which does not work here" +
                         (f" ({bwrap_problem()})" if chosen == "bwrap" else ""))
        return chosen
    if chosen:
        raise _error(f"{METHOD_ENV}={chosen!r} is not landlock or bwrap")
    if landlock_abi() >= 1:
        return "landlock"
    if bwrap_problem() is None:
        return "bwrap"
    raise _error("this kernel has no Landlock (Linux 5.13 or newer with landlock among its security modules) and "
                 f"bubblewrap cannot help ({bwrap_problem()})")


def _error(why: str):
    from cortexm.base.errors import CortexmError

    return CortexmError(f"cannot confine the simulator to its run folder: {why}; a runner runs with your rights "
                        f"(semihosting opens host files), so it is not started ({UNCONFINED_ENV}=1 starts it anyway)")


_BWRAP: list[str | None] = []


def bwrap_problem() -> str | None:
    """Why bubblewrap cannot make a sandbox here (not installed, no user namespaces), or None."""
    if not _BWRAP:
        found = shutil.which("bwrap")
        if found is None:
            _BWRAP.append("bwrap is not installed: apt install bubblewrap")
        else:
            import subprocess

            tried = subprocess.run([found, "--ro-bind", "/", "/", "--unshare-net", "--", "true"], capture_output=True,
                                   text=True, stdin=subprocess.DEVNULL, timeout=30)
            last = (tried.stderr.strip().splitlines() or [f"exit status {tried.returncode}"])[-1]
            _BWRAP.append(None if tried.returncode == 0 else f"bwrap fails here: {last}")
    return _BWRAP[0]


_ABI: list[int] = []


def landlock_abi() -> int:
    """The Landlock ABI version this kernel offers (0: none)."""
    if not _ABI:
        _ABI.append(_abi())
    return _ABI[0]


def _abi() -> int:
    if not sys.platform.startswith("linux"):
        return 0
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        version = libc.syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


def _confine(folders: list[str], network: bool) -> None:
    """Landlock for this process and what it executes: writes only below `folders`."""
    import ctypes

    abi = landlock_abi()
    if abi < 1:
        raise OSError("Landlock is not available")
    libc = ctypes.CDLL(None, use_errno=True)
    writes = 0
    for since, rights in _WRITES:
        if abi >= since:
            writes |= rights

    class Ruleset(ctypes.Structure):
        _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    ruleset = Ruleset(writes, _NET_TCP if abi >= 4 and not network else 0, _SCOPES if abi >= 6 else 0)
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    fd = libc.syscall(_CREATE_RULESET, ctypes.byref(ruleset), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    for path, rights in (*((f, writes) for f in folders), ("/dev/null", _WRITE_FILE | (_TRUNCATE if abi >= 3 else 0))):
        parent = os.open(path, os.O_PATH | os.O_CLOEXEC)
        rule = PathBeneath(rights, parent)
        if libc.syscall(_ADD_RULE, ctypes.c_int(fd), ctypes.c_int(_PATH_BENEATH), ctypes.byref(rule), ctypes.c_uint32(0)):
            raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
        os.close(parent)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0):
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if libc.syscall(_RESTRICT_SELF, ctypes.c_int(fd), ctypes.c_uint32(0)):
        raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    os.close(fd)


def main(argv: list[str]) -> None:
    """`confine.py FOLDER[:FOLDER...] NETWORK -- COMMAND...`: COMMAND executed confined to the folders."""
    folder, network, separator, *rest = argv
    if separator != "--" or not rest:
        raise SystemExit("usage: confine.py FOLDER[:FOLDER...] 0|1 -- COMMAND...")
    try:
        _confine(folder.split(os.pathsep), network == "1")
        os.execvp(rest[0], rest)
    except OSError as e:
        # The runner's failure form (cortexm.sim.protocol): a line starting with F.
        print(f"F cortexm could not confine the simulator to {folder}: {e}", flush=True)
        raise SystemExit(126) from None


if __name__ == "__main__":
    main(sys.argv[1:])
