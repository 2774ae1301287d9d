"""Accuracy on the inputs the model will see (issue 39): the example inputs and an evaluation
set, the saturation of every quantization point on them, and a calibration that does not cover
them failing with the point (cortexm.semantic.realinputs, .saturation, .evalset).

One `cortexm test` run of two small MLPs from a test-local case file (one calibrated on inputs
fifty times narrower than its example input, one on inputs like it) with an .npz evaluation set
and labels; the figures it reports are checked against what the test computes from the
program's own input quantization and the float model run here, not from the record judged.
"""

from __future__ import annotations

import json
import re
import sys

import numpy as np
import pytest

from conftest import assert_one_line_error, run_cli

CASES = '''
import torch
from cortexm.cases import register


def mlp(calibration_width, samples):
    torch.manual_seed(0)  # the same weights and data here and in the test that reads this file
    g = torch.Generator().manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    example = (torch.rand(1, 8, generator=g) * 2 - 1,)
    calibration = [(torch.rand(1, 8, generator=g) * 2 * calibration_width - calibration_width,) for _ in range(samples)]
    return model, example, calibration


@register("narrow_mlp", "calibrated on [-0.02, 0.02], its example input in [-1, 1]")
def narrow_mlp():
    return mlp(0.02, 64)


# Calibrated on 8 such samples, the last linear's range was too narrow for the evaluation set
# (7 of its 48 values clipped, 10.8 dB against the float model there, 43 dB on the draw).
@register("wide_mlp", "calibrated on [-1, 1], like its example input, with 64 samples")
def wide_mlp():
    return mlp(1.0, 64)
'''

SAMPLES = 12


def _eval_set() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(39)
    return (rng.random((SAMPLES, 8)) * 2 - 1).astype(np.float32), rng.integers(0, 4, SAMPLES)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """(report rows by case, the case file's module, the folder) of `cortexm test --eval set.npz`."""
    folder = tmp_path_factory.mktemp("real-inputs")
    (folder / "mlps.py").write_text(CASES)
    x, y = _eval_set()
    np.savez(folder / "set.npz", x=x, y=y)
    result = run_cli("test", "--cases", "mlps.py", "-t", "cortex-m7", "--sim", "none", "--eval", "set.npz",
                     "--json", "r.json", cwd=folder)
    assert result.returncode == 1, result.stdout + result.stderr  # the narrow case fails
    rows = {r["case"]: r for r in json.loads((folder / "r.json").read_text())["results"]}
    from cortexm.cases.registry import REGISTRY

    registered = dict(REGISTRY)
    sys.path.insert(0, str(folder))
    try:
        import mlps  # the case file, for its models and example inputs
    finally:
        sys.path.remove(str(folder))
        REGISTRY.clear()  # its cases are the run's, not this process's (another test lists the built-in ones)
        REGISTRY.update(registered)
    return rows, mlps, folder, result.stdout


def _input_quant(row) -> dict:
    """The program's own input quantization (its sidecar, from the lowered program's quantize)."""
    from pathlib import Path

    return json.loads(Path(row["pte"]).with_suffix(".json").read_text())["inputs"][0]["quant"]


def _clipped(x: np.ndarray, quant: dict) -> int:
    q = np.round(x.astype(np.float32) * np.float32(1.0 / quant["scale"])) + quant["zero_point"]
    return int(((q < quant["qmin"]) | (q > quant["qmax"])).sum())


def test_a_calibration_narrower_than_the_example_input_fails_naming_the_point(run):
    rows, mlps, _, _ = run
    row = rows["narrow_mlp"]
    assert row["status"] == "FAIL"
    quant = _input_quant(row)
    low, high = (quant["qmin"] - quant["zero_point"]) * quant["scale"], (quant["qmax"] - quant["zero_point"]) * quant["scale"]
    example = mlps.narrow_mlp()[1][0].numpy()
    clipped = _clipped(example, quant)
    assert clipped > example.size // 2  # the calibration covers a fiftieth of the input's range
    line = row["reason"]
    assert line.startswith("the calibrated range does not cover the example inputs: call 0 cortex_m::quantize_per_tensor "
                           "(quantize_per_tensor: input "), line
    assert f"clips {clipped} of {example.size} values" in line and f"to its range [{low:.4g}, {high:.4g}]" in line, line
    # The accuracy on the real inputs is held to the floor too, and the drawn inputs do not fail it.
    lines = [text for stage, text in row["failures"] if stage == "accuracy"]
    assert any(text.startswith("SQNR against the float model") and "over the example inputs (1 sample)" in text
               for text in lines), lines
    assert not any("drawn like the calibration data" in text for text in lines) and row["accuracy_db"] > 30


def test_a_well_calibrated_model_still_passes(run):
    rows, _, _, _ = run
    row = rows["wide_mlp"]
    assert row["status"] == "NOT RUN" and row["failures"] == [], row["reason"]
    assert "accuracy" in row["stages"]
    assert row["accuracy_real"]["example"]["sqnr_db"] > row["accuracy_real"]["example"]["floor_db"]


def test_an_npz_evaluation_set_with_labels_is_measured(run):
    import torch

    rows, mlps, _, stdout = run
    x, y = _eval_set()
    for case in ("narrow_mlp", "wide_mlp"):
        entry = rows[case]["accuracy_real"]["evaluation"]
        assert entry["name"] == "set.npz" and entry["samples"] == SAMPLES
        model = getattr(mlps, case)()[0].eval()
        with torch.no_grad():
            floats = model(torch.from_numpy(x)).argmax(dim=1).numpy()
        assert entry["labels"]["of"] == SAMPLES and entry["labels"]["float"] == int((floats == y).sum())
        assert 0 <= entry["labels"]["program"] <= SAMPLES
    narrow = [text for stage, text in rows["narrow_mlp"]["failures"] if "the evaluation set set.npz" in text]
    assert narrow and narrow[0].startswith("the calibrated range does not cover the evaluation set set.npz: call 0 ")
    assert "evaluation set set.npz" in stdout and "labels: program, float" in stdout  # the table of the summary


def test_the_saturation_of_every_point_is_in_the_json_report(run):
    rows, mlps, _, _ = run
    x, _ = _eval_set()
    for case, row in rows.items():
        quant = _input_quant(row)
        for key, inputs in (("example", getattr(mlps, case)()[1][0].numpy()), ("evaluation", x)):
            points = row["accuracy_real"][key]["saturation"]
            # The input, the first linear with its ReLU, the second linear: each with its range and figures.
            assert [p["op"] for p in points] == ["cortex_m::quantize_per_tensor", "cortex_m::quantized_linear",
                                                 "cortex_m::quantized_linear"], points
            assert all(p["of"] > 0 and 0 <= p["clipped"] <= p["of"] and p["range"][0] <= 0 <= p["range"][1] for p in points)
            assert points[0]["of"] == inputs.size and points[0]["clipped"] == _clipped(inputs, quant), (case, key)


# --- reading an evaluation set ------------------------------------------------------------------

def test_a_folder_of_npy_files_with_labels_is_read_in_name_order(tmp_path):
    import torch

    from cortexm.semantic import evalset

    rows = np.arange(24, dtype=np.float32).reshape(3, 8)
    np.save(tmp_path / "b.npy", rows[1:])  # a stack of two samples, the batch of one left out
    np.save(tmp_path / "a.npy", rows[:1].reshape(1, 8))  # one sample, the example's shape
    np.save(tmp_path / "labels.npy", np.array([2, 0, 1]))
    (tmp_path / "notes.txt").write_text("not a sample")
    found = evalset.read(tmp_path)
    assert found.name == tmp_path.name and found.labels.tolist() == [2, 0, 1]
    samples = evalset.samples(found, (torch.zeros(1, 8),))
    assert [s[0].tolist() for s in samples] == [[r.tolist()] for r in rows]
    assert evalset.read(tmp_path).digest == found.digest
    np.save(tmp_path / "labels.npy", np.array([2, 0, 3]))
    assert evalset.read(tmp_path).digest != found.digest  # the export cache keys on it
    with pytest.raises(Exception, match=r"input 0: an array of shape \[1, 8\]; the model's input 0 is \[1, 3, 2, 2\]"):
        evalset.samples(found, (torch.zeros(1, 3, 2, 2),))


def test_the_export_cache_keys_on_the_evaluation_set():
    from cortexm.testing import cache

    plain = cache.key("relu", "cortex-m7", "legacy")
    assert cache.key("relu", "cortex-m7", "legacy", None, None) == plain
    assert len({plain, cache.key("relu", "cortex-m7", "legacy", None, "a" * 64),
                cache.key("relu", "cortex-m7", "legacy", None, "b" * 64)}) == 3


@pytest.mark.parametrize("make, fragment", [
    (lambda d: np.save(d / "s.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True), "holds Python objects, not numbers"),
    (lambda d: np.savez(d / "s.npz", x=np.zeros((2, 8)), y=np.array([0.5, 1.5])), "labels are class indices (integers)"),
    (lambda d: np.savez(d / "s.npz", x=np.zeros((2, 8)), z=np.zeros(2)), "holds 'z.npy'"),
    (lambda d: np.savez(d / "s.npz", x=np.array([np.nan] * 8)), "holds NaN or infinite values"),
    (lambda d: (d / "s.npz").write_bytes(b"PK\x03\x04 not a zip"), "not a readable .npz file"),
    (lambda d: (d / "s.npy").write_bytes(b"\x93NUMPY garbage"), "not a readable .npy file"),
])
def test_a_bad_evaluation_set_is_one_line(tmp_path, make, fragment):
    from cortexm.base.errors import CortexmError
    from cortexm.semantic import evalset

    folder = tmp_path / "set"
    folder.mkdir()
    make(folder)
    given = folder if (folder / "s.npy").exists() else folder / "s.npz"
    with pytest.raises(CortexmError, match=re.escape(fragment)):
        evalset.read(given)


def test_a_bad_evaluation_set_stops_test_and_export_before_any_work(tmp_path):
    folder = tmp_path / "pickled"
    folder.mkdir()
    np.save(folder / "s.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    assert_one_line_error(run_cli("test", "-k", "relu", "-t", "cortex-m7", "--sim", "none", "--eval", str(folder)),
                           "s.npy: holds Python objects, not numbers")
    out = tmp_path / "out" / "relu.pte"
    assert_one_line_error(run_cli("export", "relu", "-t", "cortex-m7", "-o", str(out), "--eval", str(tmp_path / "none")),
                           "none: no such file")
    assert not out.parent.exists()


def test_example_inputs_placed_outside_the_range_on_purpose_are_measured_not_judged():
    from cortexm.semantic import realinputs

    uncovered = {"node": "quantize_per_tensor", "model_ops": ["input x"], "range": [-0.02, 0.02], "span": [-1.0, 1.0],
                 "clipped": 8, "of": 8, "clip_db": 0.3}
    low = {"samples": 1, "outputs": [{"sqnr_db": 0.1, "top1": None}], "points": [{"node": "quantize_per_tensor"}],
           "saturation": [uncovered]}
    record = {"samples": 16, "outputs": [{"sqnr_db": 45.0, "top1": None}], "points": [], "example": low,
              "evaluation": {**low, "name": "set.npz"}}
    judged = realinputs.failures(record, "uniform")
    assert [line.split(":")[0] for line in judged] == [
        "the calibrated range does not cover the example inputs",
        "SQNR against the float model 0.1 dB over the example inputs (1 sample), below the floor of 20 dB for its 1 "
        "quantization stages",
        "the calibrated range does not cover the evaluation set set.npz",
        "SQNR against the float model 0.1 dB over the evaluation set set.npz (1 sample), below the floor of 20 dB for its 1 "
        "quantization stages"]
    for data in ("beyond", "saturate", "bounds"):  # cortexm.cases.data: their example inputs leave the range by design
        assert realinputs.failures(record, data) == judged[2:]  # the user's evaluation set is judged whatever the case's data
