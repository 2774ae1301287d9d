"""Attacks: User files."""

from __future__ import annotations

from attack_classes.lab import _unchanged, attack


@attack("user files", "export over the user's X.pte")
def export_over_the_user_s_x_pte(lab):
    d = lab.folder("own1")
    (d / "X.pte").write_text("mine\n")
    r = lab.cli("export", "relu", "-t", "cortex-m7", "-o", str(d / "X.pte"))
    return "cortexm export relu -t cortex-m7 -o d/X.pte", _unchanged(d / "X.pte", "mine\n") or r.one_error_line()


@attack("user files", "export over the user's X.dialect.txt and X.input-0.bin (no X.json)")
def export_over_the_user_s_x_dialect_txt_and_x_input_0_bin_no_x(lab):
    d = lab.folder("own2")
    for name in ("X.dialect.txt", "X.input-0.bin"):
        (d / name).write_text("mine\n")
    r = lab.cli("export", "relu", "-t", "cortex-m7", "-o", str(d / "X.pte"))
    return ("cortexm export relu -t cortex-m7 -o d/X.pte",
            _unchanged(d / "X.dialect.txt", "mine\n") or _unchanged(d / "X.input-0.bin", "mine\n") or r.one_error_line())


@attack("user files", "run --keep DIR holding the user's program.pte")
def run_keep_dir_holding_the_user_s_program_pte(lab):
    d = lab.folder("own3")
    (d / "program.pte").write_text("mine\n")
    r = lab.cli("run", str(lab.relu()), "-t", "cortex-m7", "--keep", str(d), timeout=600)
    return "cortexm run relu.pte -t cortex-m7 --keep DIR", _unchanged(d / "program.pte", "mine\n") or r.one_error_line()
