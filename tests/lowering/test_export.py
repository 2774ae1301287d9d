"""export: deterministic bundles whose sidecar describes the program's real inputs and outputs."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re

import numpy as np
import pytest

from conftest import run_cli
from cortexm.pte import load
from cortexm.pte.sidecar import Sidecar


def test_bundle_matches_program(exported):
    pte = exported("keyword_spotting", "cortex-m7")
    sidecar = json.loads(pte.with_suffix(".json").read_text())
    plan = load(pte).plan()
    assert sidecar["target"] == "cortex-m7" and sidecar["backend"] == "DSP"
    assert sidecar["pte_sha256"] == hashlib.sha256(pte.read_bytes()).hexdigest()
    assert sidecar["executorch"]["git_version"]
    # One schema: every key written is a field the readers know, in the order the class gives.
    written = [f.name for f in dataclasses.fields(Sidecar) if f.name in sidecar]
    assert list(sidecar) == written, set(sidecar) - set(written)
    # The records read (inputs, outputs, versions...) write the same JSON again, key for key.
    read = Sidecar.of(sidecar)
    again = Sidecar.made(**{name: getattr(read, name) for name in written})
    assert json.dumps(again.raw) == json.dumps(sidecar) and again.outputs[0].file == sidecar["outputs"][0]["reference"]
    for entries, indices, key in ((sidecar["inputs"], plan.inputs, "file"), (sidecar["outputs"], plan.outputs, "reference")):
        assert len(entries) == len(indices)
        for entry, index in zip(entries, indices, strict=True):
            tensor = plan.values[index]
            assert entry["shape"] == list(tensor.sizes) and entry["dim_order"] == list(tensor.dim_order)
            assert (pte.parent / entry[key]).stat().st_size == tensor.nbytes
    out = sidecar["outputs"][0]
    assert out["quant"]["dtype"] == "int8" and out["quant"]["scale"] > 0
    reference = np.fromfile(pte.parent / out["reference"], dtype=np.float32)
    # Reference outputs sit on the output's quantisation grid.
    steps = reference / out["quant"]["scale"] + out["quant"]["zero_point"]
    assert np.allclose(steps, np.round(steps), atol=1e-3)


def test_export_is_deterministic(tmp_path):
    for n in (1, 2):
        result = run_cli("export", "depthwise_conv2d", "--target", "cortex-m55", "-o", str(tmp_path / f"run{n}" / "dw.pte"))
        assert result.returncode == 0, result.stderr
    assert (tmp_path / "run1/dw.pte").read_bytes() == (tmp_path / "run2/dw.pte").read_bytes()
    assert (tmp_path / "run1/dw.reference-0.bin").read_bytes() == (tmp_path / "run2/dw.reference-0.bin").read_bytes()


def test_the_program_does_not_depend_on_the_machines_float_kernels_or_threads():
    """torch's float kernels round differently by CPU (AVX2, AVX-512, the portable loops) and by
    thread count; the lowering runs on the portable ones, single-threaded, so what the
    environment asks for changes nothing (without that, keyword_spotting's weights and
    requantize multipliers differed between this machine's AVX2 and portable kernels)."""
    import os
    import subprocess
    import sys

    def lowered(**env) -> str:
        done = subprocess.run([sys.executable, "-m", "cortexm", "dialect", "keyword_spotting", "-t", "cortex-m7",
                               "--lowering", "installed"], capture_output=True, text=True, timeout=600,
                              env={**os.environ, **env})
        assert done.returncode == 0, done.stderr
        return done.stdout

    first = lowered(OMP_NUM_THREADS="1", ATEN_CPU_CAPABILITY="default", ONEDNN_MAX_CPU_ISA="SSE41")
    assert lowered(OMP_NUM_THREADS="2", ATEN_CPU_CAPABILITY="avx2", ONEDNN_MAX_CPU_ISA="AVX2") == first


def test_user_model_file(tmp_path):
    model = tmp_path / "tiny.py"
    model.write_text(
        "import torch\n\n"
        "def make():\n"
        "    m = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU()).eval()\n"
        "    x = torch.rand(1, 8)\n"
        "    return m, (x,), [(torch.rand(1, 8),) for _ in range(4)]\n"
    )
    result = run_cli("export", f"{model}:make", "--target", "cortex-m7", "-o", str(tmp_path / "out" / "tiny.pte"))
    assert result.returncode == 0, result.stderr
    sidecar = json.loads((tmp_path / "out/tiny.json").read_text())
    assert sidecar["source"] == {"file": str(model), "factory": "make"}
    ops = {c["operator"]
           for c in json.loads(run_cli("inspect", "--json", str(tmp_path / "out/tiny.pte")).stdout)["methods"][0]["calls"]}
    assert "cortex_m::quantized_linear.out" in ops


def test_list_prints_case_names():
    from cortexm.cases import all_cases

    result = run_cli("export", "--list")
    assert result.returncode == 0
    assert result.stdout.split() == [c.name for c in all_cases()]


def test_solved_data_is_placed_once_for_every_core(exported):
    """Data solved from the program (cortexm.cases.solve) is placed from one lowering, so
    every core gets the same inputs; the sidecar says which call it was solved for and how
    many targets the inputs meet."""
    sidecars, inputs = [], []
    for core in ("cortex-m7", "cortex-m55"):
        pte = exported("conv2d_midpoints", core)
        sidecars.append(json.loads(pte.with_suffix(".json").read_text()))
        inputs.append((pte.parent / sidecars[-1]["inputs"][0]["file"]).read_bytes())
    placed = sidecars[0]["data_targets"]
    assert [p["call"].split()[-1] for p in placed["inputs"]] == ["cortex_m::quantized_conv2d"] and placed["met"] > 0
    assert placed == sidecars[1]["data_targets"] and inputs[0] == inputs[1]


def test_a_sidecar_field_nobody_reads_cannot_be_written():
    made = Sidecar.made(cortexm={"format": 1}, name="m", qtol=1)
    assert made.raw == {"cortexm": {"format": 1}, "name": "m", "qtol": 1} and made.replaced(name="n").name == "n"
    with pytest.raises(TypeError, match="not a sidecar field: colour"):
        Sidecar.made(name="m", colour="red")


def test_a_sidecar_record_is_typed_as_it_is_read():
    """A record of the sidecar is checked field by field where it is read: a wrong type, or a
    field it needs left out, is one line naming it."""
    from cortexm.base.errors import CortexmError

    entry = {"dtype": "int8", "shape": [1, 4], "dim_order": [0, 1], "quant": None, "reference": "m.reference-0.bin"}
    [output] = Sidecar.of({"outputs": [entry]}).outputs
    assert (output.file, output.shape, output.quant) == ("m.reference-0.bin", (1, 4), None)
    assert list(output.json()) == list(entry)  # an output's reference is written last
    for field, value, said in (("shape", [1, "4"], "outputs[0].shape[1] is a string, not an integer"),
                               ("quant", {"scale": "1"}, "outputs[0].quant.scale is a string, not a number"),
                               ("dtype", None, "outputs[0].dtype is missing")):
        with pytest.raises(CortexmError, match=rf"^m.json: its {re.escape(said)}$"):
            Sidecar.of({"outputs": [{**entry, field: value}]}, "m.json")

