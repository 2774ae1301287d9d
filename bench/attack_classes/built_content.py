"""Attacks (round 4): a verdict is for the content that was built."""

from __future__ import annotations

import shutil
from pathlib import Path

from attack_classes.caches import _built_m7
from attack_classes.lab import attack


@attack("verdicts", "$CORTEXM_RUNNERS and --executorch-src of a mutated tree")
def stale_prebuilt_runner(lab):
    from cortexm import sources

    _r, elf = _built_m7(lab)
    built = {"elf": str(elf)} if elf is not None else None
    tree = sources.locate(sources.EXECUTORCH).path
    if built is None or tree is None:
        return "-", "SKIPPED: no M7 runner or ExecuTorch tree here"
    mutated = lab.folder("mutated-tree")
    for rel in ("backends/cortex_m/ops/operators.yaml", "backends/cortex_m/ops/op_quantized_add.cpp"):
        (mutated / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(tree / rel, mutated / rel)
    (mutated / "backends/cortex_m/ops/op_quantized_add.cpp").write_text(
        (tree / "backends/cortex_m/ops/op_quantized_add.cpp").read_text() + "\n// one line changed\n")
    prebuilt = str(Path(built["elf"]).parent)
    r = lab.cli("build", "-t", "cortex-m7", "--executorch-src", str(mutated), "--json", timeout=60,
                env={"CORTEXM_RUNNERS": prebuilt, "CORTEXM_TOOLCHAIN_PREFIX": str(lab.root / "no-toolchain-")})
    if r.rc == 0 and built["elf"] in r.out:
        return "CORTEXM_RUNNERS=R cortexm build --executorch-src MUTATED", "the prebuilt runner served another tree"
    return "CORTEXM_RUNNERS=R cortexm build --executorch-src MUTATED", r.one_error_line("not found")
