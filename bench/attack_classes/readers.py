"""Attacks (round 4): readers bounded by the file's size."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from attack_classes.lab import attack


def _adversarial():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))  # tests/adversarial.py
    import adversarial

    return adversarial


@attack("readers", "inspect a 3 MB .pte whose 100,000 values share one 100,000-item list")
def shared_list_program(lab):
    path = lab.folder("readers") / "shared.pte"
    path.write_bytes(_adversarial().shared_list_program())
    r = lab.cli("inspect", str(path), timeout=60)
    return "cortexm inspect shared.pte", r.one_error_line("share their items")


@attack("readers", "verify --library a schema with a 120 KB line of spaces")
def long_line_schema(lab):
    schema = lab.folder("readers") / "schema.yaml"
    schema.write_text(_adversarial().long_line_schema(120_000))
    r = lab.cli("verify", str(lab.relu()), "--library", str(schema), timeout=30)
    return "cortexm verify X.pte --library schema.yaml", r.one_error_line("cannot parse schema")


@attack("readers", "a sidecar nested 100,000 deep")
def deep_sidecar(lab):
    d = lab.folder("deep")
    shutil.copy(lab.relu(), d / "relu.pte")
    (d / "relu.json").write_text(_adversarial().deep_json())
    r = lab.cli("verify", str(d / "relu.pte"), timeout=30)
    return "cortexm verify X.pte (X.json nested deep)", r.one_error_line("nested deeper than")
