"""Attacks: Parsers: linear time on any input."""

from __future__ import annotations

from attack_classes.lab import attack


@attack("parsers", "a C header input with a 100 KB line")
def a_c_header_input_with_a_100_kb_line(lab):
    evil = lab.root / "evil.h"
    evil.write_text("a " * 50_000 + "\n")
    r = lab.cli("run", str(lab.relu()), "-t", "cortex-m7", "-i", str(evil), timeout=60)
    return "cortexm run relu.pte -i evil.h ('a ' * 50000)", r.one_error_line("evil.h")


@attack("parsers", "an .ino labels file with a 100 KB line")
def an_ino_labels_file_with_a_100_kb_line(lab):
    evil = lab.root / "evil.ino"
    evil.write_text('const char* kLabels[] = {"a"' + " " * 100_000 + "\n")
    r = lab.cli("run", str(lab.relu()), "-t", "cortex-m7", "--labels", str(evil), timeout=60)
    return "cortexm run relu.pte --labels evil.ino ('{\"a\"' and 100000 spaces)", r.one_error_line("evil.ino")
