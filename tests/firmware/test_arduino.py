"""`cortexm arduino-lib`: the ExecuTorch Arduino library generated from the pinned trees.

Generated twice, byte for byte the same; its example models verify against its own
registration, and a tree with one cortex_m schema changed fails generation with the
verify line; it meets the Library Manager's rules that can be checked offline; its
sources and sketches compile for the UNO Q's Cortex-M33 with the pinned toolchain
(against tests/arduino_core_stand_in, a stand-in for the board core's Arduino.h);
its models, read back from the model.h files it ships, run on QEMU's Cortex-M33 with
the inputs the examples ship and match the Python reference.

Needs the ExecuTorch and CMSIS-NN trees (skipped, saying how to provide them, without).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import MISSING, run_cli
from cortexm import sources
from cortexm.arduino import lint
from cortexm.arduino.examples import model_from_header, shipped_inputs
from cortexm.arduino.generate import TARGET, generate
from cortexm.arduino.provenance import JSON
from cortexm.arduino.upstream import CORTEX_M_YAML, FOLDER, Upstream
from cortexm.base.errors import CortexmError

STAND_IN = Path(__file__).resolve().parents[1] / "arduino_core_stand_in"
KWS_LABELS = ("silence", "unknown", "yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go")


def _tree(kind: sources.SourceKind) -> Path:
    found = sources.locate(kind)
    if found.path is None:
        pytest.skip(sources.missing_message(kind))
    return found.path


@pytest.fixture(scope="module")
def executorch_tree() -> Path:
    tree = _tree(sources.EXECUTORCH)
    if not (tree / FOLDER / "build_arduino_library.sh").is_file():
        pytest.skip(f"the ExecuTorch tree {tree} has no {FOLDER} (upstream's Arduino generator)")
    _tree(sources.CMSIS_NN)
    for tool in ("cmake",):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not found on PATH (Debian: apt install cmake ninja-build)")
    return tree


@pytest.fixture(scope="module")
def library(executorch_tree, tmp_path_factory):
    return generate(tmp_path_factory.mktemp("first") / "ExecuTorch")


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_generated_twice_is_byte_identical(library, tmp_path):
    again = generate(tmp_path / "second" / "ExecuTorch")
    first, second = _files(library.folder), _files(again.folder)
    assert sorted(first) == sorted(second)
    different = [name for name in first if first[name] != second[name]]
    assert not different, f"{len(different)} files differ, e.g. {different[:5]}"
    # pytest's folders are named test_...: upstream's script would have deleted every .cpp here.
    assert sum(name.endswith(".cpp") for name in second) > 200


def test_regenerates_its_own_folder_and_refuses_others(library, tmp_path):
    foreign = tmp_path / "mine"
    (foreign / "extras").mkdir(parents=True)
    (foreign / "notes.txt").write_text("not a library")
    (foreign / JSON).write_text("")  # an empty provenance file does not make a folder cortexm's
    users_partial = tmp_path / ".mine.partial"
    users_partial.mkdir()
    (users_partial / "draft.txt").write_text("mine too")
    with pytest.raises(CortexmError, match="holds extras/provenance.json, which cortexm did not write"):
        generate(foreign)
    assert (foreign / "notes.txt").is_file() and (users_partial / "draft.txt").is_file()

    again = generate(library.folder)
    assert again.folder == library.folder and (library.folder / JSON).is_file()
    edited = library.folder / "library.properties"
    edited.write_text(edited.read_text() + "# my edit\n")
    with pytest.raises(CortexmError, match="holds library.properties, which cortexm did not write .or which was changed"):
        generate(library.folder)
    generate(library.folder, force=True)
    assert "# my edit" not in edited.read_text()
    assert (users_partial / "draft.txt").is_file()
    assert not list(library.folder.parent.glob(f".{library.folder.name}.*-*")), "staging or replaced folders left"


def test_layout_is_upstreams(library):
    folder = library.folder
    assert {p.name for p in folder.iterdir()} == {"library.properties", "src", "examples", "extras", "executorch_pin.txt",
                                                  "LICENSE"}
    assert (folder / "src/ExecuTorch.h").is_file() and (folder / "src/ETModel.h").is_file()
    assert (folder / "src/executorch/codegen/RegisterCodegenUnboxedKernelsEverything.cpp").is_file()
    assert (folder / "src/executorch/schema/program_generated.h").is_file()
    assert (folder / "src/executorch/runtime/kernel/selected_max_kernel_num.h").is_file()
    assert [p.name for p in (folder / "src/executorch/runtime/platform/default").iterdir()] == ["arduino_pal.cpp"]
    assert (folder / "src/arm_nnfunctions.h").is_file() and (folder / "src/cmsis-nn/Source").is_dir()
    for example in ("AddModel", "HelloExecuTorch", "KeywordSpotting"):
        assert (folder / "examples" / example / f"{example}.ino").is_file()
        assert (folder / "examples" / example / "model.h").is_file()
        assert not list((folder / "examples" / example).glob("*.pt[eh]"))


def test_provenance(library, executorch_tree):
    import json

    data = json.loads((library.folder / JSON).read_text())
    assert data["executorch"]["rev"] or data["executorch"]["nar_hash"]
    assert data["cmsis-nn"]["rev"] or data["cmsis-nn"]["nar_hash"]
    assert data["flatbuffers"]["flatc"].startswith("flatc version")
    assert data["generator"]["follows_sha256"] == Upstream(executorch_tree).script_sha256
    assert data["ops"]["count"] == len(data["ops"]["registered"]) == len(Upstream(executorch_tree).library_ops())
    assert data["examples"] == ["OK AddModel", "OK HelloExecuTorch", "OK KeywordSpotting"]
    # No path of this machine in any file.
    needles = [str(executorch_tree).encode(), str(Path.home()).encode(), str(library.folder.parent).encode()]
    leaks = [name for name, data in _files(library.folder).items() if any(n in data for n in needles)]
    assert not leaks


# Upstream's first two Arduino examples add two float tensors: no quantizer ran on them.
FLOAT_DEMOS = ("AddModel", "HelloExecuTorch")


def test_shipped_models_verify_ok_with_cortexm_verify(library, tmp_path):
    assert [f.line() for f in library.findings] == ["OK AddModel", "OK HelloExecuTorch", "OK KeywordSpotting"]
    for example in sorted((library.folder / "examples").iterdir()):
        pte = tmp_path / f"{example.name}.pte"  # the shipped model, read back from its model.h
        pte.write_bytes(model_from_header(example / "model.h"))
        done = run_cli("verify", str(pte), "--library", str(library.folder), "--target", TARGET)
        if example.name in FLOAT_DEMOS:  # float by design: verify notes it, and nothing is wrong
            assert done.returncode == 0, done.stdout + done.stderr
            lines = done.stdout.splitlines()
            assert lines[0].startswith(f"NOTE {example.name} a float program: no call quantizes or dequantizes")
            assert lines[1:] == [f"OK {example.name}"]
        else:
            assert done.returncode == 0, done.stdout + done.stderr
            assert done.stdout.splitlines() == [f"OK {example.name}"]


def test_the_library_ships_no_prim_ops_and_verify_says_so(library):
    from cortexm.checking import library as libs

    shipped = libs.load(library.folder)
    assert shipped.lookup("cortex_m::quantized_conv2d.out").expects is not None
    # Upstream copies no kernels/prim_ops: a program with dynamic shapes would fail to load.
    assert shipped.lookup("aten::sym_size.int") is None
    assert shipped.lookup("executorch_prim::et_view.default") is None


def _overlay(tree: Path, folder: Path, changed: str, text: str) -> Path:
    """`tree` seen through symlinks, with the one file `changed` holding `text`."""
    parts = Path(changed).parts
    source, target = tree, folder
    for depth in range(len(parts)):
        target.mkdir(parents=True, exist_ok=True)
        for entry in source.iterdir():
            if entry.name not in (parts[depth], ".git"):
                (target / entry.name).symlink_to(entry)
        source, target = source / parts[depth], target / parts[depth]
    target.write_text(text)
    return folder


def test_a_changed_cortex_m_schema_fails_with_the_verify_line(executorch_tree, tmp_path):
    # quantized_avg_pool2d as it was before `scratch` was added: the shipped model passes it.
    schema = (executorch_tree / CORTEX_M_YAML).read_text()
    older = schema.replace("bool ceil_mode, int zero_point, int multiplier, int shift, Tensor scratch, *, Tensor(a!) out",
                           "bool ceil_mode, int zero_point, int multiplier, int shift, *, Tensor(a!) out")
    assert older != schema, "the tree's quantized_avg_pool2d.out schema changed: update this test"
    tree = _overlay(executorch_tree, tmp_path / "executorch", CORTEX_M_YAML, older)
    out = tmp_path / "ExecuTorch"
    with pytest.raises(CortexmError) as failed:
        generate(out, executorch_src=tree)
    assert str(failed.value) == "FAIL KeywordSpotting cortex_m::quantized_avg_pool2d.out: model supplies 11, library expects 10"
    assert not out.exists() and not list(tmp_path.glob(".*.partial*"))


def test_the_cli_reports_the_mismatch_in_one_line(executorch_tree, tmp_path):
    schema = (executorch_tree / CORTEX_M_YAML).read_text()
    older = schema.replace("int shift, Tensor scratch, *, Tensor(a!) out", "int shift, *, Tensor(a!) out")
    tree = _overlay(executorch_tree, tmp_path / "executorch", CORTEX_M_YAML, older)
    done = run_cli("arduino-lib", "--executorch-src", str(tree), "-o", str(tmp_path / "lib"))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "error: FAIL KeywordSpotting cortex_m::quantized_avg_pool2d.out: model supplies 11, library expects 10")


def test_meets_the_library_manager_rules(library):
    assert [p.line() for p in lint.check(library.folder) if p.level == lint.ERROR] == []
    assert library.lint == lint.check(library.folder)


def _write_library(folder: Path, properties: str, sketch: str = "Demo/Demo.ino") -> Path:
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "Demo.h").write_text("#pragma once\n")
    (folder / "library.properties").write_text(properties)
    (folder / "examples" / sketch).parent.mkdir(parents=True)
    (folder / "examples" / sketch).write_text("void setup() {}\nvoid loop() {}\n")
    return folder


GOOD = ("name=Demo\nversion=1.2.3\nauthor=A\nmaintainer=B <b@example.com>\nsentence=Does things.\n"
        "paragraph=More about it.\ncategory=Data Processing\nurl=https://example.com/demo\n"
        "architectures=*\nincludes=Demo.h\n")


def test_lint_passes_a_good_library(tmp_path):
    folder = _write_library(tmp_path / "Demo", GOOD)
    assert [p.rule for p in lint.check(folder)] == ["LD002"]
    (folder / "LICENSE").write_text("terms\n")
    assert lint.check(folder) == []


@pytest.mark.parametrize("change, rule", [
    (("name=Demo", "name=ArduinoDemo"), "LP012"),
    (("name=Demo", "name=Demo/Lib"), "LP011"),
    (("version=1.2.3", "version=v1.2"), "LP020"),
    (("category=Data Processing", "category=Machine Learning"), "LP038"),
    (("includes=Demo.h", "includes=Missing.h"), "LP052"),
    (("author=A\n", ""), "LP023"),
    (("url=https://example.com/demo", "url=example"), "LP041"),
    (("architectures=*", "architectures= "), "LP044"),
])
def test_lint_finds_each_broken_rule(tmp_path, change, rule):
    folder = _write_library(tmp_path / "Demo", GOOD.replace(*change))
    assert rule in {p.rule for p in lint.check(folder) if p.level == lint.ERROR}


def test_lint_finds_a_misnamed_sketch_and_a_symlink(tmp_path):
    folder = _write_library(tmp_path / "Demo", GOOD, sketch="Demo/Other.ino")
    (folder / "src" / "link.h").symlink_to(folder / "src" / "Demo.h")
    assert {"SS001", "LS005"} <= {p.rule for p in lint.check(folder) if p.level == lint.ERROR}


@pytest.mark.slow
def test_compiles_for_the_uno_q_core(library):
    from cortexm.arduino.compile import compile_library
    from cortexm.base.targets import core

    if MISSING:
        pytest.skip(f"compiling needs: {MISSING}")
    if shutil.which("ninja") is None:
        pytest.skip("ninja not found on PATH (Debian: apt install ninja-build)")
    result = compile_library(library.folder, core(TARGET), STAND_IN)
    sources_in_library = [p for p in (library.folder / "src").rglob("*") if p.suffix in (".c", ".cpp")]
    assert result.sources == len(sources_in_library) > 300
    assert result.sketches == 3
    assert all(o.is_file() for o in result.objects)


def test_examples_run_on_qemu_m33_and_match_the_python_reference(library, tmp_path):
    from cortexm.oracle.reference import evaluate, output_scales
    from cortexm.pte import load
    from cortexm.pte.sidecar import Quant, Tensor
    from cortexm.pte.tensors import compare, logical
    from cortexm.sim.run import RunError, run_pte

    if MISSING:
        pytest.skip(f"QEMU runs need: {MISSING}")

    ran = 0
    for example in sorted((library.folder / "examples").iterdir()):
        inputs = shipped_inputs(example)
        if not inputs:
            continue  # HelloExecuTorch only loads its program (the same bytes as AddModel's)
        pte = tmp_path / f"{example.name}.pte"
        pte.write_bytes(model_from_header(example / "model.h"))
        plan = load(pte).plan()
        tensor = plan.values[plan.inputs[0]]
        entry = Tensor(None, tensor.dtype, tensor.sizes, tensor.dim_order, None)
        (scale,) = output_scales(pte)
        for given in inputs:
            raw = tmp_path / f"{example.name}-{given.source}.bin"
            raw.write_bytes(given.raw())
            try:
                result = run_pte(pte, TARGET, "qemu", [raw])
            except RunError as e:
                pytest.fail(f"{example.name} with {given.source}: {e}\n{e.result.log[-2000:]}")
            (reference,) = evaluate(pte, [logical(given.raw(), entry)])
            # compare reads the dtype and the scale only
            out_entry = Tensor(None, "float32", reference.shape, (), Quant(scale, 0, -128, 127, "int8") if scale else None)
            diff = compare(result.outputs[0], reference, out_entry, 0)
            assert diff.max_lsb <= 1, f"{example.name} with {given.source}: {diff}"
            if given.label:
                assert KWS_LABELS[int(result.outputs[0].argmax())] == given.label, given.source
            ran += 1
    assert ran == 11  # AddModel's kInput and KeywordSpotting's ten recordings
