"""The zoo tier (bench/zoo): every model builds and runs in float as registered, and one
model's verdict is proven end to end by bench/zoo.py's independent path. The whole tier runs
in CI (`python bench/zoo.py`)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import zlib

import pytest

from conftest import in_checkout


def _zoo_cases():
    torch = pytest.importorskip("torch")
    from cortexm.cases.registry import REGISTRY

    path = in_checkout("bench", "zoo", "models.py")
    if not any(name.startswith("zoo_") for name in REGISTRY):
        spec = importlib.util.spec_from_file_location("zoo_models_under_test", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return torch, [c for name, c in REGISTRY.items() if name.startswith("zoo_")]


def test_every_zoo_model_builds_and_runs_in_float():
    torch, cases = _zoo_cases()
    assert len(cases) >= 16
    for case in cases:
        torch.manual_seed(zlib.crc32(case.name.encode()))
        module, example, calibration = case.build()
        assert all(len(s) == len(example) and all(a.shape == b.shape for a, b in zip(s, example, strict=True))
                   for s in calibration), case.name
        with torch.no_grad():
            out = module(*example)
        outputs = out if isinstance(out, tuple) else (out,)
        assert all(torch.isfinite(o).all() and o.numel() for o in outputs), case.name
        assert all(t.dim() != 4 or t.is_contiguous(memory_format=torch.channels_last) for t in example), case.name


def test_one_zoo_verdict_is_proven_end_to_end(runners, tmp_path):
    """The dense autoencoder on the M7: cortexm's verdict, then the proof (the program lowered again
    by upstream's flow and byte-identical, the simulator against operators.py, the PT2E model and
    the float model)."""
    script = in_checkout("bench", "zoo.py")
    done = subprocess.run([sys.executable, str(script), "-t", "cortex-m7", "-k", "zoo_dense_autoencoder", "--no-fit",
                           "--report", str(tmp_path / "report.json"), "--json", str(tmp_path / "proofs.json")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (row,) = json.loads((tmp_path / "proofs.json").read_text())["rows"]
    assert row["status"] == "PASS" and row["proven"], row
    evidence = row["evidence"]
    assert evidence["same"] is True and evidence["runs"] == "" and evidence["dialect_lsb"] <= 1
