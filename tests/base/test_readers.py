"""Every reader of a file from elsewhere costs what the file's size does, whatever its shape.

Adversarial shapes (tests/adversarial.py) for each reader: a .pte whose values share one list
(a reader expanding every list did 10^10 steps and took 17 GB for 3 MB), a schema .yaml with a
long line (a backtracking pattern took 13 s for 40 KB), JSON nested 100,000 deep (Python's
parser raises RecursionError). Each gets one line and exit status 2, within a time limit far
above a linear reader's: a hang is a failure.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import adversarial

LIMIT = 60  # seconds; the readers take well under one on these files


def _cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cortexm", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=LIMIT)


def _one_line(result, *fragments: str) -> None:
    lines = [l for l in result.stderr.splitlines() if l.strip() and not l.startswith(("note:", "warning:", "library:"))]
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-600:]
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert all(f in lines[0] for f in fragments), lines[0]


@pytest.fixture(scope="module")
def shared_list(tmp_path_factory):
    path = tmp_path_factory.mktemp("adversarial") / "shared.pte"
    path.write_bytes(adversarial.shared_list_program())
    return path


@pytest.mark.parametrize("command", ["inspect", "verify"])
def test_a_program_whose_values_share_one_list_is_refused_at_its_size(shared_list, command):
    _one_line(_cli(command, str(shared_list)), "10000000000 references", "share their items")


def test_a_schema_with_a_long_line_is_read_in_linear_time(exported, tmp_path):
    schema = tmp_path / "schema.yaml"
    schema.write_text(adversarial.long_line_schema(1_000_000))
    _one_line(_cli("verify", str(exported("relu", "cortex-m7")), "--library", str(schema)), "cannot parse schema")


def test_a_schema_with_deep_parentheses_is_read_in_linear_time(exported, tmp_path):
    schema = tmp_path / "schema.yaml"
    schema.write_text("- func: f(" + "(" * 1_000_000 + ") -> Tensor\n")
    _one_line(_cli("verify", str(exported("relu", "cortex-m7")), "--library", str(schema)), "cannot parse schema")


def test_a_deep_sidecar_is_one_line(exported, tmp_path):
    pte = exported("relu", "cortex-m7")
    copy = tmp_path / "relu.pte"
    copy.write_bytes(pte.read_bytes())
    copy.with_suffix(".json").write_text(adversarial.deep_json())
    _one_line(_cli("verify", str(copy)), "relu.json: not a sidecar (nested deeper than 200)")


@pytest.mark.parametrize("command", [("test", "-t", "cortex-m7", "-k", "relu", "--grid", "none", "--sim", "none",
                                      "--baseline"), ("report", "merge")])
def test_a_deep_report_is_one_line(tmp_path, command):
    report = tmp_path / "deep.json"
    report.write_text(adversarial.deep_json())
    _one_line(_cli(*command, str(report)), "deep.json: not a JSON report (nested deeper than 200)")


def test_a_shallow_report_still_reads(tmp_path):
    """The depth check refuses nothing a report of cortexm's is: brackets in strings do not count."""
    from cortexm.base import files

    tricky = 'x[[[[\\"]' * 300  # brackets and an escaped quote inside a string
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"meta": {"a": [[{"b": [1, tricky]}]]}, "results": []}))
    assert files.read_json(path, "JSON report")["meta"]["a"][0][0]["b"][1] == tricky
