"""Keys that name what goes in: a runner's key is the content its build reads, however the tree
got here (a git checkout, a copy, a store path), and the lowering's Python is not part of it; an
export's key is the lowering's code, and a comment in it is not."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cortexm.firmware.build import LOWERING_ONLY
from cortexm.sources import identity


def _tree(folder: Path) -> Path:
    for rel, text in (("backends/cortex_m/ops/op_add.cpp", "int add;\n"), ("backends/cortex_m/passes/fuse.py", "x = 1\n"),
                      ("backends/cortex_m/__init__.py", ""), ("CMakeLists.txt", "project(x)\n")):
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    return folder


def test_a_python_edit_keeps_the_runner_key_and_a_cpp_edit_changes_it_on_a_fresh_copy(tmp_path):
    first = _tree(tmp_path / "a")
    key = identity.current(first, LOWERING_ONLY).key
    copy = tmp_path / "b"
    shutil.copytree(first, copy)
    assert identity.current(copy, LOWERING_ONLY).key == key  # the same content elsewhere
    (copy / "backends/cortex_m/passes/fuse.py").write_text("x = 2  # a pass edited\n")
    (copy / "backends/cortex_m/__init__.py").write_text("# edited\n")
    assert identity.current(copy, LOWERING_ONLY).key == key
    (copy / "backends/cortex_m/ops/op_add.cpp").write_text("int add; // edited\n")
    assert identity.current(copy, LOWERING_ONLY).key != key
    assert identity.current(first, ()).key != identity.current(copy, ()).key  # without `ignore`: everything


def test_an_edit_of_comments_keeps_the_export_key_and_an_edit_of_code_changes_it(tmp_path):
    """The programs carry no source line (an export of conv2d and tiny_kws_dscnn with a comment
    and blank lines before every def and class of the passes and the quantizer gave the same
    .pte bytes), so the lowering's Python counts by its syntax tree."""
    from cortexm.sources import backend_source

    tree = _tree(tmp_path / "tree")
    (tree / "backends/cortex_m/passes/cortex_m_pass_manager.py").write_text("")
    fuse = tree / "backends/cortex_m/passes/fuse.py"
    fuse.write_text("def fuse(graph):\n    return graph\n")
    key = backend_source.fingerprint.__wrapped__(tree)
    fuse.write_text("# why it fuses\n\n\ndef fuse(graph):  # a comment\n\n    return (graph)\n")
    assert backend_source.fingerprint.__wrapped__(tree) == key
    fuse.write_text("def fuse(graph):\n    return graph.copy()\n")
    assert backend_source.fingerprint.__wrapped__(tree) != key
    fuse.write_text("def fuse(graph):\n    return graph.copy(\n")  # does not parse: its bytes count
    broken = backend_source.fingerprint.__wrapped__(tree)
    fuse.write_text("def fuse(graph):\n    return graph.copy(  \n")
    assert backend_source.fingerprint.__wrapped__(tree) not in (key, broken)


def test_a_known_defect_is_recognised_until_the_code_it_lives_in_changes(tmp_path):
    # A contributor's comment in a pass file that carries a known defect, or their edit of another
    # part of it, must not turn the defect's expected failures into FAILs (bench/loop.py's comment
    # and python edits: 103 and 105 of them); an edit of the code it lives in withdraws it.
    from cortexm.cases import defects
    from cortexm.sources import backend_source

    rel = "backends/cortex_m/passes/aten_to_cortex_m_pass.py"
    found = backend_source.lowering_file(rel)
    if found is None:
        pytest.skip("no backends/cortex_m here (pip install executorch==1.5.1)")
    defect = defects.EXECUTORCH_DEAD_WEIGHTS
    text = found.read_text()

    def applies(content: str, name: str) -> bool:  # a file per content: digests are read once per process
        copy = tmp_path / name
        copy.write_text(content)
        return defect.applies("cortex-m7", {"lowering": lambda path: copy if path == rel else None})

    rule = "use_depthwise_conv = is_depthwise and (batch_size == 1)\n"  # in _get_convolution_replacement
    assert applies(text, "as-released.py")
    assert applies(text + "\n# a contributor's note\n", "commented.py")
    assert applies(text + "\n_AN_EDIT = 1\n", "edited-elsewhere.py")
    assert applies(text.replace(rule, rule + "    # a note inside\n", 1), "commented-inside.py")
    assert not applies(text.replace(rule, rule.replace("(batch_size == 1)", "(batch_size == 1) and True"), 1), "edited.py")


def test_known_defects_are_recognised_from_two_threads_at_once():
    """The test app checks cases in threads, and each check recognises known defects by the
    syntax trees of the code they live in. CPython (3.11, 3.12) counts the AST constructor's
    recursion per interpreter: a parse interrupted by a thread switch (here a finalizer's
    Python code, run by the garbage collector, with a switch interval of a microsecond) made
    one fail with "SystemError: AST constructor recursion depth mismatch" (a case's ERROR in
    a full run, python/cpython#106905). Every parse now holds one lock."""
    import gc
    import sys
    import threading
    import time

    from cortexm.cases import defects

    source = Path(__file__).resolve().parents[2] / "cortexm" / "lowering" / "export.py"

    class Garbage:
        def __init__(self) -> None:
            self.me = self  # a cycle: only the collector frees it

        def __del__(self) -> None:
            sum(range(50))  # Python code in the middle of a parse: the other thread may run

    errors: list[str] = []
    stop = threading.Event()

    def make_garbage() -> None:
        while not stop.is_set():
            Garbage()
            time.sleep(0)  # and let the parsing threads run

    def recognise() -> None:
        for _ in range(30):
            try:
                defects.symbols_sha256.__wrapped__(source, "export,lower")  # what the cache would keep
                defects.syntax_sha256.__wrapped__(source)
            except SystemError as e:
                errors.append(str(e))

    threshold, interval = gc.get_threshold(), sys.getswitchinterval()
    gc.set_threshold(50)
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=f, daemon=True) for f in (make_garbage, recognise, recognise)]
        for t in threads:
            t.start()
        for t in threads[1:]:
            t.join(timeout=120)
    finally:
        stop.set()
        threads[0].join(timeout=10)
        gc.set_threshold(*threshold)
        sys.setswitchinterval(interval)
    assert not any(t.is_alive() for t in threads), "the parsing threads did not finish in 2 minutes"
    assert errors == [], errors[:1]
