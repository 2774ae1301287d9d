"""A bundle is data, and a verdict is for the content that was built and lowered.

A bundle (a .pte, its sidecar and the files it names) may come from elsewhere: nothing in it
runs (a saved model is read as data, cortexm.pte.pt2), every name in its sidecar stays in its
folder, every file is used only as its manifest records it (cortexm.pte.bundle). A runner
built elsewhere is used only for the trees it was built from, and a tree edited while a
runner is built or a case exported leaves nothing cached (cortexm.base.errors.InputsChanged).
"""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import re
import shutil
import zipfile
from pathlib import Path

import pytest

from conftest import MISSING, backend_only_tree, run_cli


def _bundle(exported, tmp_path: Path, case: str = "add") -> Path:
    """A copy of `case`'s M7 bundle in tmp_path, as a colleague would send it."""
    source = exported(case, "cortex-m7")
    for file in source.parent.glob(f"{case}.*"):
        shutil.copy(file, tmp_path / file.name)
    return tmp_path / f"{case}.pte"


def _rewrite(pte: Path, name: str, data: bytes) -> None:
    """Replace the bundle's file `name`, and its manifest entry as the author of a crafted
    bundle would: the hashes agree, the content is hostile."""
    (pte.parent / name).write_bytes(data)
    sidecar_file = pte.with_suffix(".json")
    sidecar = json.loads(sidecar_file.read_text())
    sidecar["written"][name] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    sidecar_file.write_text(json.dumps(sidecar))


def _with_records(data: bytes, replace: dict[str, bytes]) -> bytes:
    """The .pt2 archive `data` with records replaced or added, stored as torch stores them."""
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as target:
        for info in source.infolist():
            if info.filename not in replace:
                target.writestr(info, source.read(info.filename))
        for name, content in replace.items():
            target.writestr(name, content)
    return out.getvalue()


class _Touch:
    """Unpickling this creates the file it names: code run by loading data."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def _pickled_weight(data: bytes, marker: Path) -> bytes:
    """`data` (a .pt2) with a weight stored as a pickle that creates `marker` when loaded."""
    config = {"config": {"w": {"path_name": "weight_0", "is_param": False, "use_pickle": True, "tensor_meta": None}}}
    return _with_records(data, {"archive/data/weights/model_weights_config.json": json.dumps(config).encode(),
                                "archive/data/weights/weight_0": pickle.dumps(_Touch(marker))})


def _model_json(data: bytes, edit) -> bytes:
    archive = zipfile.ZipFile(io.BytesIO(data))
    model = json.loads(archive.read("archive/models/model.json"))
    edit(model)
    return _with_records(data, {"archive/models/model.json": json.dumps(model).encode()})


def _one_error(result, *fragments: str) -> None:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-800:]
    assert lines[-1].startswith("error: ") and all(f in lines[-1] for f in fragments), lines[-1]


# --- a saved model is data ---------------------------------------------------------------------

def test_a_saved_model_of_cortexm_is_data(exported):
    from cortexm.pte import pt2

    pte = exported("add", "cortex-m7")
    for kind in ("quantized", "float"):
        pt2.check((pte.parent / f"add.{kind}.pt2").read_bytes(), kind)  # raises if not


@pytest.mark.parametrize("what, craft", [
    ("pickled", lambda data, tmp: _pickled_weight(data, tmp / "marker")),
    ("sample inputs (a pickle)",
     lambda data, tmp: _with_records(data, {"archive/data/sample_inputs/model.pt": pickle.dumps((1,))})),
    ("guard code", lambda data, tmp: _model_json(data, lambda m: m.update(guards_code=["__import__('os').getpid()"]))),
    ("not a tensor operator", lambda data, tmp: _model_json(
        data, lambda m: m["graph_module"]["graph"]["nodes"][0].update(target="torch.os.system"))),
    ("symbolic size", lambda data, tmp: _model_json(
        data, lambda m: next(iter(m["graph_module"]["graph"]["tensor_values"].values()))["sizes"].__setitem__(
            0, {"as_expr": {"expr_str": "__import__('os').getpid()"}}))),
    ("not one cortexm's exports write",
     lambda data, tmp: _with_records(data, {"archive/data/aotinductor/model/m.so": b"\x7fELF"})),
    ("is compressed", lambda data, tmp: _recompressed(data)),
    ("takes custom obj", lambda data, tmp: _model_json(
        data, lambda m: m["graph_module"]["graph"]["nodes"][0]["inputs"][0].update(
            arg={"as_custom_obj": {"name": "x", "class_fqn": "os.system"}}))),
])
def test_a_saved_model_holding_more_than_data_is_refused(exported, tmp_path, what, craft):
    from cortexm.pte import pt2

    data = craft((exported("add", "cortex-m7").parent / "add.quantized.pt2").read_bytes(), tmp_path)
    with pytest.raises(pt2.NotData, match=re.escape(what)):
        pt2.check(data, "X.quantized.pt2")
    assert not (tmp_path / "marker").exists()


def _recompressed(data: bytes) -> bytes:
    source, out = zipfile.ZipFile(io.BytesIO(data)), io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            target.writestr(info.filename, source.read(info.filename))
    return out.getvalue()


def test_a_deep_or_huge_model_record_is_refused_in_linear_time(tmp_path):
    from cortexm.pte import pt2

    deep = b"[" * 200_000 + b"]" * 200_000
    archive = _with_records(_minimal_archive(), {"archive/models/model.json": deep})
    with pytest.raises(pt2.NotData):
        pt2.check(archive, "deep.pt2")


def _minimal_archive() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for name, content in (("archive/archive_format", b"pt2"),
                              ("archive/data/weights/model_weights_config.json", b'{"config": {}}'),
                              ("archive/data/constants/model_constants_config.json", b'{"config": {}}')):
            z.writestr(name, content)
    return out.getvalue()


# --- run on a bundle from elsewhere ------------------------------------------------------------

needs_firmware = pytest.mark.skipif(MISSING is not None, reason=f"firmware tests need: {MISSING}")


@needs_firmware
def test_run_on_a_crafted_bundle_runs_no_code(exported, runners, tmp_path):
    """The crafted-.pt2 attack: `cortexm run X.pte -i IN` judges the program against the
    bundle's saved model; a pickle in it that creates a file must never be unpickled."""
    pte = _bundle(exported, tmp_path)
    marker = tmp_path / "written-by-the-bundle"
    _rewrite(pte, "add.quantized.pt2", _pickled_weight((tmp_path / "add.quantized.pt2").read_bytes(), marker))
    result = run_cli("run", str(pte), "-t", "cortex-m7", "-i", str(tmp_path / "add.input-0.bin"),
                     "-i", str(tmp_path / "add.input-1.bin"))
    assert not marker.exists(), "loading the bundle's model ran code from it"
    _one_error(result, "add.quantized.pt2", "pickled")


@needs_firmware
@pytest.mark.parametrize("outside", ["../elsewhere.pt2", "ABSOLUTE"])
def test_a_sidecar_names_only_files_in_its_bundle(exported, runners, tmp_path, outside):
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    pte = _bundle(exported, bundle)
    shutil.copy(bundle / "add.quantized.pt2", tmp_path / "elsewhere.pt2")
    name = str(tmp_path / "elsewhere.pt2") if outside == "ABSOLUTE" else outside
    sidecar = json.loads(pte.with_suffix(".json").read_text())
    sidecar["semantic"]["models"]["quantized"] = name
    pte.with_suffix(".json").write_text(json.dumps(sidecar))
    result = run_cli("run", str(pte), "-t", "cortex-m7", "-i", str(bundle / "add.input-0.bin"),
                     "-i", str(bundle / "add.input-1.bin"))
    _one_error(result, "not a file name in its folder")


@needs_firmware
def test_a_changed_reference_is_named_not_blamed_on_the_kernel(exported, runners, tmp_path):
    pte = _bundle(exported, tmp_path)
    reference = tmp_path / "add.reference-0.bin"
    data = bytearray(reference.read_bytes())
    data[0] ^= 0x40  # one element of a float output
    reference.write_bytes(bytes(data))
    _one_error(run_cli("run", str(pte), "-t", "cortex-m7"), "add.reference-0.bin changed since add.json was written")


def test_files_of_another_program_are_not_used(exported, tmp_path):
    from cortexm.base.errors import CortexmError
    from cortexm.pte.bundle import Bundle

    pte = _bundle(exported, tmp_path)
    pte.write_bytes(exported("relu", "cortex-m7").read_bytes())  # the sidecar now sits beside another program
    with pytest.raises(CortexmError, match="add.pte is not the program add.json was written for"):
        Bundle.open(pte).read("add.reference-0.bin")


@pytest.mark.parametrize("field, value, said", [("outputs", 5, "its outputs is an integer, not an array"),
                                                ("inputs", ["x"], "its inputs are not all objects"),
                                                ("qtol", "1", "its qtol is a string, not an integer"),
                                                ("source", {"case": 1}, "its source.case is an integer, not a string")])
def test_a_sidecar_field_of_another_type_is_one_line(exported, tmp_path, field, value, said):
    """A sidecar is read into named fields of the types the stages use (cortexm.pte.sidecar.Sidecar):
    one of another type is named where the sidecar is read, by every command."""
    pte = _bundle(exported, tmp_path)
    sidecar = json.loads(pte.with_suffix(".json").read_text())
    sidecar[field] = value
    pte.with_suffix(".json").write_text(json.dumps(sidecar))
    for command in (("inspect", str(pte)), ("verify", str(pte))):
        _one_error(run_cli(*command), f"add.json: {said}")


# --- a verdict is for the content that was built -----------------------------------------------

def _tree_like(source: Path, dest: Path, edit: str | None = None) -> Path:
    """A folder with the marker file of an ExecuTorch tree, and one kernel source (edited)."""
    kernel = "backends/cortex_m/ops/op_quantized_add.cpp"
    for rel in ("backends/cortex_m/ops/operators.yaml", kernel):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source / rel, dest / rel)
    if edit:
        (dest / kernel).write_text((dest / kernel).read_text() + edit)
    return dest


@needs_firmware
def test_a_prebuilt_runner_serves_only_the_trees_it_was_built_from(runners, tmp_path, monkeypatch):
    """The stale-runner attack: with $CORTEXM_RUNNERS set (as `nix run .#test-m7` sets it),
    `--executorch-src TREE` must not get the prebuilt runner of other content. The toolchain
    is hidden, so building from TREE stops at once instead of compiling."""
    from cortexm import sources

    prebuilt = runners["cortex-m7"]
    tree = _tree_like(sources.locate(sources.EXECUTORCH).path, tmp_path / "mutated", "\n// one-line change\n")
    monkeypatch.setenv("CORTEXM_RUNNERS", str(prebuilt.build_dir))
    monkeypatch.setenv("CORTEXM_TOOLCHAIN_PREFIX", str(tmp_path / "no-such-toolchain-"))
    result = run_cli("build", "-t", "cortex-m7", "--executorch-src", str(tree))
    assert str(prebuilt.elf) not in result.stdout + result.stderr, "the prebuilt runner was used for another tree"
    assert "built from another executorch tree" in result.stdout + result.stderr
    _one_error(result, "no-such-toolchain-gcc not found")
    # The same runner still serves its own trees.
    monkeypatch.delenv("CORTEXM_TOOLCHAIN_PREFIX")
    assert str(prebuilt.elf) in run_cli("build", "-t", "cortex-m7").stdout


def test_a_tree_edited_during_a_build_caches_nothing(tmp_path, monkeypatch):
    from cortexm.base.errors import InputsChanged
    from cortexm.firmware import build, tools

    et = tmp_path / "et"
    (et / "backends/cortex_m/ops").mkdir(parents=True)
    (et / "backends/cortex_m/ops/operators.yaml").write_text("# ops\n")
    nn = tmp_path / "nn"
    (nn / "Include").mkdir(parents=True)
    (nn / "Include/arm_nnfunctions.h").write_text("/* */\n")
    monkeypatch.setenv("CORTEXM_BUILD_CACHE", str(tmp_path / "builds"))
    monkeypatch.setattr(tools, "find", lambda hosted=False: tools.Tools("cmake", "Ninja", "", "gcc 0", Path("flatc"),
                                                                        Path("include"), "flatc 0", "python", "0"))

    def configure(work, *args):
        pass

    def compile_and_edit(work, command, log_name, what, task=None):
        (nn / "Include/arm_nnfunctions.h").write_text("/* edited while building */\n")
        for name in (build.ELF_NAME, build.MAP_NAME):
            (work / name).write_bytes(b"built")

    monkeypatch.setattr(build, "_configure", configure)
    monkeypatch.setattr(build, "_run", compile_and_edit)
    with pytest.raises(InputsChanged, match="cmsis-nn tree .* changed while the cortex-m7 runner was built"):
        build.build_runner("cortex-m7", executorch_src=et, cmsis_nn_src=nn, ops=["aten::add.out"])
    assert [p.name for p in (tmp_path / "builds").iterdir()] == ["work"], "a runner was cached"


def test_a_case_file_edited_during_an_export_caches_nothing(tmp_path, monkeypatch):
    from cortexm.base.errors import InputsChanged
    from cortexm.testing import cache

    monkeypatch.setenv("CORTEXM_EXPORT_CACHE", str(tmp_path / "exports"))
    cases = tmp_path / "cases.py"
    cases.write_text("# a case file\n")

    def export_and_edit(pte: Path) -> None:
        cases.write_text("# a case file, edited while it was exported\n")
        pte.write_bytes(b"lowered")

    with pytest.raises(InputsChanged, match="what lowers mine .* changed while it was exported"):
        cache.store("mine", "cortex-m7", "legacy", cases, export_and_edit)
    assert cache.lookup("mine", "cortex-m7", "legacy", cases) is None
    assert not [p for p in cache.root().iterdir() if not p.name.startswith(".")], "an export was cached"


def test_one_case_on_one_core_reads_its_program_and_sidecar_once(exported, monkeypatch):
    """The checks of a case on a core share one Bundle: its program is read and parsed once
    (verify, what was left in float, dead constants, the manifest's hash of it), its sidecar
    read once (before, without a simulator: three times and twice; a run added one more parse)."""
    import builtins
    import io

    from cortexm.base.targets import core
    from cortexm.cases import get
    from cortexm.pte.sidecar import sidecar_path
    from cortexm.testing import checks
    from cortexm.testing.results import Options

    pte = exported("conv2d_relu", "cortex-m7")
    watched = {pte.resolve(): "program", sidecar_path(pte).resolve(): "sidecar"}
    reads = {"program": 0, "sidecar": 0}
    real_open = io.open

    def counting_open(file, *args, **kwargs):
        if isinstance(file, (str, Path)) and Path(file).resolve() in watched:
            reads[watched[Path(file).resolve()]] += 1
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(io, "open", counting_open)
    monkeypatch.setattr(builtins, "open", counting_open)
    result = checks.check(get("conv2d_relu"), core("cortex-m7"), pte,
                          Options(cores=[core("cortex-m7")], simulators={"cortex-m7": "--sim none"}))
    assert result.status == "NOT RUN" and result.verify.verdict == "ok", (result.status, result.reason)
    assert reads == {"program": 1, "sidecar": 1}


@needs_firmware
def test_one_case_on_one_core_parses_its_program_once(exported, runners, monkeypatch):
    """Every stage of a case on a core, the run on QEMU included, reads the program the bundle
    parsed: once (the run parsed it twice more before, the memory oracle's isolated plan twice per
    fill). The isolated plan is a program of its own, parsed once for both of its runs."""
    from cortexm.base.targets import core
    from cortexm.cases import get
    from cortexm.pte import read
    from cortexm.pte.sidecar import read_sidecar
    from cortexm.testing import checks
    from cortexm.testing.results import Options
    from cortexm.testing.simulate import RunnerSimulator

    pte = exported("conv2d_relu", "cortex-m7")
    isolated = pte.parent / read_sidecar(pte).isolated
    programs = {"program": pte.read_bytes(), "isolated": isolated.read_bytes()}
    parses = {"program": 0, "isolated": 0}
    real_read = read.read  # what every parse of a program's bytes goes through (read.parse, read.load)

    def counting_read(data, file_size=None):
        [which] = [name for name, whole in programs.items() if whole.startswith(bytes(data))]
        parses[which] += 1
        return real_read(data, file_size)

    monkeypatch.setattr(read, "read", counting_read)
    m7 = core("cortex-m7")
    simulator = RunnerSimulator(m7, "qemu", runners["cortex-m7"])
    result = checks.check(get("conv2d_relu"), m7, pte, Options(cores=[m7], simulators={m7.name: simulator}))
    assert result.status == "PASS" and result.run.sim == "ok" and result.memory.verdict == "ok", (result.status, result.reason)
    assert "compare" in result.stages and result.compare.elements, result.stages
    assert parses == {"program": 1, "isolated": 1}


@needs_firmware
def test_run_with_a_tree_reads_that_trees_backend(exported, runners, tmp_path):
    """`run --executorch-src TREE -i IN` computes what the outputs must be for IN with TREE's
    cortex_m Python (the operators it registers), the tree the runner is built from, not the
    default tree's. A tree whose backend cannot be imported says so, before anything is built."""
    tree = backend_only_tree(tmp_path / "other-executorch")
    pte = _bundle(exported, tmp_path)
    operators = tree / "backends" / "cortex_m" / "ops" / "operators.py"
    operators.write_text("raise ImportError('the operators of this other tree')\n" + operators.read_text())
    result = run_cli("run", str(pte), "-t", "cortex-m7", "--executorch-src", str(tree),
                     "-i", str(tmp_path / "add.input-0.bin"), "-i", str(tmp_path / "add.input-1.bin"))
    _one_error(result, "the operators of this other tree")
