"""`cortexm verify` against ExecuTorch's own program loader: a seeded, bounded run of
tests/pte_fuzz.py. No mutated program that verify accepts may be refused by the runtime
(the host runner's --load-only: the real Program::load and load_method, with AddressSanitizer
and UBSan), and every damaged file gets findings or one line of error, never a traceback.

The host runner is built once (a few minutes) into the session's build cache, or taken
from the user's with CORTEXM_TEST_REUSE_BUILDS=1; with it cached this file runs in well
under a minute. `python tests/pte_fuzz.py --count 1200` is the larger measurement.
"""

from __future__ import annotations

import os

import pytest

import pte_fuzz
from conftest import session_folder

# Programs judged, and the seed: a run is reproducible, and differs from the script's default.
COUNT = 240
SEED = 13
# Two exports cover a call with scratch (conv2d), an MVE lowering (linear on the M55) and a
# program planned one tensor per buffer (conv2d's isolated variant: many memory ids and offsets).
CASES = (("conv2d", "cortex-m7", ""), ("linear", "cortex-m55", ""), ("conv2d", "cortex-m7", "isolated"))


def _missing() -> str | None:
    """Why the host runner cannot be built here, or None."""
    from cortexm import sources
    from cortexm.base.errors import CortexmError
    from cortexm.firmware import tools

    for kind in (sources.EXECUTORCH, sources.CMSIS_NN):
        if sources.locate(kind).path is None:
            return sources.missing_message(kind)
    try:
        tools.find(hosted=True)
    except CortexmError as e:
        return str(e)
    return None


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    """(the host runner, its registration as a verify library), built as conftest's `runners`
    builds: into the run's build cache unless the session already has one or CORTEXM_TEST_REUSE_BUILDS=1."""
    from cortexm.firmware.build import BUILD_CACHE_ENV

    missing = _missing()
    if missing:
        pytest.skip(f"the loader check needs the host runner: {missing}")
    patch = pytest.MonkeyPatch()
    if os.environ.get("CORTEXM_TEST_REUSE_BUILDS") != "1" and not os.environ.get(BUILD_CACHE_ENV):
        patch.setenv(BUILD_CACHE_ENV, str(session_folder(tmp_path_factory, "builds")))
    try:
        yield pte_fuzz.host_runner_and_library()
    finally:
        patch.undo()


def test_verify_never_accepts_what_the_loader_refuses(host, exported, tmp_path):
    runner, library = host
    sources, targets = pte_fuzz.sources_for(exported, CASES)
    corpus = pte_fuzz.run_corpus(sources, COUNT, SEED, runner.elf, library, targets, tmp_path)
    report = corpus.report()
    assert not corpus.disagreements(), report
    assert not corpus.crashes(), report
    # Not vacuous: both mutation kinds ran, and each side of the matrix's diagonal is reached.
    matrix = corpus.matrix()
    assert matrix[True, True] and matrix[False, False], report
    assert {o.kind for o in corpus.outcomes} == {"bytes", "fields"}, report


def test_the_runner_names_a_planned_buffer_it_cannot_allocate(host, exported, tmp_path):
    """A 4 GiB planned buffer: the runner says so with its size (on a 32-bit core it would
    otherwise wrap to 0 B and fail as `allocator size (0)`), and so does verify."""
    runner, library = host
    pte = tmp_path / "big.pte"
    pte.write_bytes(pte_fuzz.rewrite(exported("conv2d", "cortex-m7").read_bytes(),
                                     lambda p: p.program.execution_plan[0].non_const_buffer_sizes.__setitem__(1, 1 << 32)))
    loaded = pte_fuzz.runtime_verdict(runner.elf, pte)
    assert not loaded.accepted and "planned buffer 0 needs 4294967296 B" in loaded.line, loaded
    verdict = pte_fuzz.verify_verdict(pte, library, None)
    assert not verdict.accepted and "4294967296 B" in verdict.line and verdict.crash is None, verdict


# Programs at the loader's edges, each refused by the runtime: verify must refuse each too. The
# first two load on a 64-bit host only by UBSan's grace (an int32 stride overflows though the
# tensor has no elements); the others are the loader's own checks.
def _tensor(pte, planned: bool):
    from executorch.exir import schema

    return next(v.val for v in pte.program.execution_plan[0].values if isinstance(v.val, schema.Tensor)
                and (v.val.allocation_info is not None) == planned and (planned or v.val.data_buffer_idx > 0))


def _resize(tensor, sizes: list[int]) -> None:
    tensor.sizes, tensor.dim_order = sizes, list(range(len(sizes)))


def _rename_last_operator(pte, length: int) -> None:
    plan = pte.program.execution_plan[0]
    op = plan.operators[plan.chains[0].instructions[-1].instr_args.op_index]
    op.overload = "o" * (length - len(op.name) - 1)


def _tensor_list_first(pte) -> None:
    from executorch.exir import schema

    pte.program.execution_plan[0].values.insert(0, schema.EValue(schema.TensorList([1])))  # shifts every index by one


# edge -> (the change, what verify's first problem says)
EDGES = {
    "planned tensor without elements, stride past int32": (lambda p: _resize(_tensor(p, True), [0, 46341, 46341]),
                                                           "passes an int32"),
    "constant without elements, stride past int32": (lambda p: _resize(_tensor(p, False), [0, 65536, 65536]),
                                                     "passes an int32"),
    "tensor of rank 17": (lambda p: _resize(_tensor(p, True), [1] * 17), "rank 17"),
    "scalar type 30": (lambda p: setattr(_tensor(p, True), "scalar_type", 30), "scalar type 30"),
    "negative planned buffer size": (lambda p: p.program.execution_plan[0].non_const_buffer_sizes.__setitem__(1, -5),
                                     "negative size"),
    "operator name of 100 bytes (the last call's)": (lambda p: _rename_last_operator(p, 100), "name is 100 bytes"),
    "TensorList naming a later value": (_tensor_list_first, "comes after it"),
}


@pytest.mark.parametrize("edge", EDGES)
def test_programs_at_the_loaders_edges(host, exported, tmp_path, edge):
    runner, library = host
    change, said = EDGES[edge]
    pte = tmp_path / "edge.pte"
    pte.write_bytes(pte_fuzz.rewrite(exported("conv2d", "cortex-m7").read_bytes(), change))
    loaded = pte_fuzz.runtime_verdict(runner.elf, pte)
    verdict = pte_fuzz.verify_verdict(pte, library, None)
    assert not loaded.accepted, loaded
    assert not verdict.accepted and said in verdict.line and verdict.crash is None, (verdict, loaded)
