"""--grid exhaustive (cortexm.cases.exhaustive, cortexm.testing.packs): every combination of
the scope, pruned only where PyTorch refuses, packed within the runner's limits; a packed
case is the case it is alone, and is judged on its own output."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import MISSING, run_cli
from cortexm.base.errors import CortexmError
from cortexm.cases import exhaustive, space

SMALL = ("features_in=3..4", "features_out=2..3", "batch=1", "data=bounds")  # 4 linear cases


def test_every_combination_of_the_scope_is_a_case_or_counted_as_pruned():
    for op in exhaustive.SCOPES:
        found, counts = exhaustive.combinations(op, {})
        total = sum(t["combinations"] - t["refused by PyTorch"] for t in counts.values())
        assert len(found) <= total and all(space.space(op).valid(c.params) for c in found), op
        assert len({c.name for c in found}) == len(found)
    found, _ = exhaustive.combinations("conv2d", exhaustive.parse_scope(["spatial=1..6", "data=midpoints"]))
    assert {c.params["data"] for c in found} == {"midpoints"} and max(max(c.params["h"], c.params["w"]) for c in found) == 6


def test_a_worker_that_registered_the_scope_first_still_finds_the_grid_cases():
    """As an export worker of `--grid exhaustive --scope ...` does (its own process: this one's
    registry stays as it is)."""
    code = ("from cortexm import cases\nfrom cortexm.cases import exhaustive\n"
            "exhaustive.register_all(exhaustive.parse_scope(['spatial=2', 'channels=1..3']))\n"
            "print(cases.get('grid_max_pool2d_00').name)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip() == "grid_max_pool2d_00", done.stderr[-2000:]


@pytest.mark.parametrize("item", ["spatial", "nosuchkey=1", "spatial=4..2", "channels=1..999"])
def test_a_wrong_scope_is_one_line(item):
    with pytest.raises(CortexmError, match="--scope"):
        exhaustive.parse_scope([item])


def test_packs_stay_within_the_runners_inputs_and_outputs():
    from cortexm.cases import registry

    exhaustive.register_all({})
    packs = [c for c in registry.REGISTRY.values() if c.parts]
    assert packs and all(len(c.parts) * c.part_inputs <= exhaustive.PACK_INPUTS for c in packs)
    parts = {p for c in packs for p in c.parts}
    assert all(registry.REGISTRY[p].grid.level == "exhaustive-part" for p in parts)


def test_a_packed_case_is_lowered_as_it_is_alone(exported):
    """The pack's branch j quantizes, gets data and computes as part j alone: the same input
    bytes, quantization and reference output."""
    from cortexm.cases import registry

    exhaustive.register_all(exhaustive.parse_scope(SMALL))
    pack = next(c for c in registry.REGISTRY.values() if c.parts and set(c.parts) <= {
        x.name for x in exhaustive.combinations("linear", exhaustive.parse_scope(SMALL))[0]})
    packed = exported(pack.name, "cortex-m7")
    whole = json.loads(packed.with_suffix(".json").read_text())
    assert whole["data_targets"]["met"] > 0
    for j, part in enumerate(pack.parts[:2]):
        alone = exported(part, "cortex-m7")
        side = json.loads(alone.with_suffix(".json").read_text())
        assert side["inputs"][0]["quant"] == whole["inputs"][j]["quant"]
        assert (alone.parent / side["inputs"][0]["file"]).read_bytes() == \
            (packed.parent / whole["inputs"][j]["file"]).read_bytes()
        assert np.array_equal(np.fromfile(alone.parent / side["outputs"][0]["reference"], np.float32),
                              np.fromfile(packed.parent / whole["outputs"][j]["reference"], np.float32))


@pytest.mark.skipif(bool(MISSING), reason=f"firmware tests need: {MISSING}")
def test_exhaustive_on_qemu_splits_a_passing_pack_and_runs_a_failing_ones_cases_alone(runners, tmp_path):
    args = ("test", "--grid", "exhaustive", *(a for s in SMALL for a in ("--scope", s)), "-k", "exh_linear",
            "-t", "cortex-m7", "-j", "1")
    done = run_cli(*args, "--json", str(tmp_path / "pass.json"))
    report = json.loads((tmp_path / "pass.json").read_text())
    rows = [r for r in report["results"] if r["exhaustive"]]
    assert done.returncode == 0, done.stdout[-2000:]
    assert len(rows) == 4 and {r["status"] for r in rows} == {"PASS"} and len({r["pack"] for r in rows}) == 1
    assert sorted(r["elements"] for r in rows) == [2, 2, 3, 3] and all(r["instructions"] for r in rows)  # its own output
    assert report["meta"]["programs"]["cortex-m7"] == 1 and report["meta"]["exhaustive"]["per_core"]["cortex-m7"]["cases"] == 4
    # A library without the linear kernel: the packed program fails verify, and each case is checked alone.
    (tmp_path / "schema.yaml").write_text("- func: cortex_m::quantize_per_tensor.out(Tensor input, float scale, int "
                                          "zero_point, int quant_min, int quant_max, ScalarType dtype, *, Tensor(a!) out)"
                                          " -> Tensor(a!)\n")
    run_cli(*args, "--library", str(tmp_path / "schema.yaml"), "--json", str(tmp_path / "fail.json"))
    report = json.loads((tmp_path / "fail.json").read_text())
    rows = [r for r in report["results"] if r["exhaustive"]]
    assert len(rows) == 4 and {r["status"] for r in rows} == {"FAIL"} and all(r["pack"] for r in rows)
    assert report["meta"]["programs"]["cortex-m7"] == 5  # the pack, then its 4 cases alone


@pytest.mark.skipif(bool(MISSING), reason=f"firmware tests need: {MISSING}")
def test_a_full_pack_runs_as_one_program_with_the_memory_oracle(runners, tmp_path):
    """16 cases, the runner's 16 inputs: the memory oracle's runs add options to 32 input
    words, and the pack still passes as one program (no case is run alone)."""
    full = ("features_in=3..6", "features_out=2..5", "batch=1", "data=bounds")
    done = run_cli("test", "--grid", "exhaustive", *(a for s in full for a in ("--scope", s)), "-k", "exh_linear",
                   "-t", "cortex-m7", "--json", str(tmp_path / "full.json"))
    report = json.loads((tmp_path / "full.json").read_text())
    rows = [r for r in report["results"] if r["exhaustive"]]
    assert done.returncode == 0, done.stdout[-2000:]
    assert len(rows) == 16 and {r["status"] for r in rows} == {"PASS"} and len({r["pack"] for r in rows}) == 1
    assert report["meta"]["programs"]["cortex-m7"] == 1
