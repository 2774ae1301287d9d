"""Accuracy where it is lost (issue 41): a case below its floor, or DEGRADED against a baseline,
names in its line the quantization point that lost the most, its module, and the SQNR of the
points it reads (before it) and its own (after).

The case is built to lose at one layer: one output channel of `wide` a thousand times the rest,
so the per-tensor quantization of wide's output keeps that channel and rounds the others to
few steps, and `head` reads only the others. Where the loss lands follows from the model, not
from the report: `head`, reading `wide`."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli

CASES = '''
import torch
from cortexm.cases import register


class Outlier(torch.nn.Module):
    def __init__(self, scale):
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Linear(8, 16)
        self.wide = torch.nn.Linear(16, 16)
        self.head = torch.nn.Linear(16, 4)
        with torch.no_grad():
            self.wide.weight[0] *= scale
            self.wide.bias[0] *= scale
            self.head.weight[:, 0] = 0

    def forward(self, x):
        return self.head(torch.relu(self.wide(torch.relu(self.embed(x)))))


def case(scale):
    g = torch.Generator().manual_seed(1)
    calibration = [(torch.rand(1, 8, generator=g) * 2 - 1,) for _ in range(32)]
    return Outlier(scale).eval(), calibration[0], calibration


@register("outlier_mlp", "one channel of wide a thousand times the rest; head reads the rest")
def _():
    return case(1000.0)


@register("even_mlp", "the same model without the outlier")
def _():
    return case(1.0)
'''


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("accuracy-lost")
    (folder / "outlier.py").write_text(CASES)
    done = run_cli("test", "--cases", "outlier.py", "-t", "cortex-m7", "--sim", "none", "--json", "r.json", cwd=folder)
    assert done.returncode == 1, done.stdout + done.stderr  # the outlier case fails its floor
    rows = {r["case"]: r for r in json.loads((folder / "r.json").read_text())["results"]}
    return rows, done.stdout


def test_a_case_below_its_floor_names_the_point_its_module_and_the_db(report):
    rows, stdout = report
    row = rows["outlier_mlp"]
    points = {p["module"]: p for p in row["accuracy_points"]}
    head, wide = points["head"], points["wide"]
    assert head["inputs_db"] == wide["sqnr_db"]  # head reads wide's values, and only those
    assert head["inputs_db"] - head["sqnr_db"] == max(p["inputs_db"] - p["sqnr_db"] for p in row["accuracy_points"]
                                                      if p["inputs_db"] is not None)
    line = (f"lost most at call {head['call']} cortex_m::quantized_linear (module head; {head['node']}: aten.linear): "
            f"{wide['sqnr_db']:g} dB before it, {head['sqnr_db']:g} dB after")
    assert row["status"] == "FAIL" and "below the floor" in row["reason"] and row["reason"].endswith(line)
    assert "FAIL outlier_mlp cortex-m7: " in stdout and line in stdout
    assert rows["even_mlp"]["status"] != "FAIL" and "lost most" not in rows["even_mlp"]["reason"]


def test_degraded_names_the_module_and_the_db_before_and_after(report):
    from cortexm.report.results import CaseResult
    from cortexm.semantic import accuracy

    rows, _ = report
    row = rows["outlier_mlp"]
    # A baseline where head kept its accuracy: the same report, head's point and the output 30 dB better.
    earlier = json.loads(json.dumps(row))
    earlier["accuracy_db"] = row["accuracy_db"] + 30
    for p in earlier["accuracy_points"]:
        if p["module"] == "head":
            p["sqnr_db"] += 30
    result = CaseResult.from_row({**row, "status": "PASS"})
    [change] = accuracy.gate([result], {"results": [earlier]})
    head = next(p for p in row["accuracy_points"] if p["module"] == "head")
    assert result.status == "DEGRADED"
    assert f"(module head; {head['node']}: aten.linear)" in change
    assert change.endswith(f"now {head['inputs_db']:g} dB before it, {head['sqnr_db']:g} dB after")
