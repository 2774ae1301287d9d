"""Attacks: Special files."""

from __future__ import annotations

import os

from attack_classes.lab import attack


@attack("special files", "inspect a FIFO")
def inspect_a_fifo(lab):
    fifo = lab.root / "fifo.pte"
    if not fifo.exists():
        os.mkfifo(fifo)
    return "cortexm inspect fifo.pte", lab.cli("inspect", str(fifo), timeout=20).one_error_line()


@attack("special files", "verify /dev/zero")
def verify_dev_zero(lab):
    return "cortexm verify /dev/zero", lab.cli("verify", "/dev/zero", timeout=20).one_error_line()


@attack("special files", "inspect /dev/urandom")
def inspect_dev_urandom(lab):
    return "cortexm inspect /dev/urandom", lab.cli("inspect", "/dev/urandom", timeout=20).one_error_line()


@attack("special files", "inspect a 3 GiB file")
def inspect_a_3_gib_file(lab):
    big = lab.root / "big.pte"
    with open(big, "wb") as f:
        f.truncate(3 << 30)  # sparse: costs no disk
    r = lab.cli("inspect", str(big), timeout=20)
    big.unlink()
    slow = f" after {r.seconds:.1f} s" if r.seconds > 5 else ""
    return "cortexm inspect big.pte (3 GiB)", (r.one_error_line() or "") + slow or None


@attack("special files", "run a directory")
def run_a_directory(lab):
    return "cortexm run DIR -t cortex-m7", lab.cli("run", str(lab.folder("adir")), "-t", "cortex-m7").one_error_line("directory")
