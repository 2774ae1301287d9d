"""The lowering by stage: quantized once per case (cached on what quantizes), lowered per core
from a copy of one to_edge. A cached quantized model lowers to the same bytes as a fresh one,
and an edit of a lowering pass keeps the quantization while an edit of what quantizes does not."""

from __future__ import annotations

import json
import shutil

import pytest

from cortexm.base import targets


def test_a_saved_quantized_model_lowers_to_the_same_bundle(tmp_path):
    from cortexm.lowering import export, modelsource, quantize

    fresh = quantize.quantize(modelsource.load("conv2d_relu"))
    quantize.save_quantized(fresh, tmp_path)
    loaded = quantize.load_quantized(tmp_path)
    shared = export.to_edge_program(loaded)
    for core in ("cortex-m7", "cortex-m55"):
        a = export.export(fresh, targets.core(core))
        b = export.export(loaded, targets.core(core), edge=shared)  # one to_edge serves both cores
        assert a.pte == b.pte and a.references == b.references and a.dialect == b.dialect
        assert json.dumps(a.sidecar.raw, sort_keys=True, default=str) == json.dumps(b.sidecar.raw, sort_keys=True, default=str)


@pytest.fixture
def backend_copy(tmp_path):
    """A tree whose backends/cortex_m is a copy of the installed executorch's."""
    from cortexm.sources import backend_source

    wheel = backend_source._wheel_backend()  # the files the lowering reads
    if wheel is None:
        pytest.skip("the executorch wheel has no backends/cortex_m (pip install executorch==1.5.1)")
    shutil.copytree(wheel, tmp_path / "backends" / "cortex_m", ignore=shutil.ignore_patterns("__pycache__", "test"))
    return tmp_path


@pytest.mark.parametrize("edited, quantization_changes", [
    ("passes/aten_to_cortex_m_pass.py", False),  # a lowering pass: only what follows quantization runs again
    ("passes/activation_fusion_pass.py", False),
    ("ops/operators.py", False),
    ("quantizer/quantizer.py", True),  # the quantizer itself
    ("passes/decompose_mean_pass.py", True),  # a pass the quantizer runs for annotation
    ("passes/passes_utils.py", True),  # imported by the quantizer's pattern checks
    ("passes/cortex_m_pass_manager.py", True),  # it lists the annotation passes
])
def test_only_an_edit_of_what_quantizes_requantizes(backend_copy, edited, quantization_changes):
    from cortexm.sources import backend_source

    before = (backend_source.quantization_fingerprint(backend_copy), backend_source.fingerprint(backend_copy))
    path = backend_copy / "backends" / "cortex_m" / edited
    path.write_text(path.read_text() + "\n_AN_EDIT = 1\n")  # code: a comment changes no key (test_keys)
    backend_source.fingerprint.cache_clear()  # read once per process: a tree does not change under a run
    after = (backend_source.quantization_fingerprint(backend_copy), backend_source.fingerprint(backend_copy))
    assert (before[0] != after[0]) == quantization_changes
    assert before[1] != after[1]  # the lowering as a whole changed either way


def test_an_unreadable_pass_list_makes_every_file_count(backend_copy):
    from cortexm.sources import backend_source

    manager = backend_copy / "backends" / "cortex_m" / "passes" / "cortex_m_pass_manager.py"
    manager.write_text(manager.read_text().replace("pass_list_transform_for_annotation", "annotation_passes"))
    before = backend_source.quantization_fingerprint(backend_copy)
    lowering_pass = backend_copy / "backends" / "cortex_m" / "passes" / "aten_to_cortex_m_pass.py"
    lowering_pass.write_text(lowering_pass.read_text() + "\n_AN_EDIT = 1\n")
    assert backend_source.quantization_fingerprint(backend_copy) != before  # no list found: nothing is assumed
