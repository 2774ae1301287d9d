"""bench/repro: the standalone reproducer of the CMSIS-NN transposed-conv row overrun, built
against the CMSIS-NN tree in use (scalar C, guarded output) and run. It must show what the
defect record says while the tree has the defect, and nothing once it is fixed."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import in_checkout
from cortexm import sources
from cortexm.cases import defects

REPRO = Path(__file__).resolve().parents[2] / "bench" / "repro" / "transpose_conv_row_overrun.c"


def test_row_overrun_reproducer(tmp_path):
    in_checkout("bench", "repro", REPRO.name)
    tree = sources.locate(sources.CMSIS_NN).path
    if tree is None:
        pytest.skip(sources.missing_message(sources.CMSIS_NN))
    if shutil.which("cc") is None:
        pytest.skip("no C compiler (Debian/Ubuntu: sudo apt install build-essential)")
    sources_c = [str(p) for p in sorted(tree.glob("Source/*/*.c")) if not re.search(r"_f(16|32)\.c$", p.name)]
    binary = tmp_path / "repro"
    subprocess.run(["cc", "-O1", "-w", f"-I{tree / 'Include'}", str(REPRO), *sources_c, "-o", str(binary)],
                   check=True, timeout=600)
    done = subprocess.run([str(binary)], capture_output=True, text=True, timeout=60)
    has_defect = defects.CMSIS_NN_TRANSPOSE_CONV_ROW_OVERRUN.applies(
        "host", {"cmsis-nn": lambda rel: tree / rel})
    if has_defect:
        assert done.returncode == 1, done.stdout
        assert re.search(r"^batch 1: [1-9]\d* guard bytes after the output changed$", done.stdout, re.M), done.stdout
        assert re.search(r"^batch 2: [1-9]\d* of 180 elements of the second image differ", done.stdout, re.M)
    else:
        assert done.returncode == 0, done.stdout
