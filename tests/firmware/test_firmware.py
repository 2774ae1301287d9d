"""The firmware path for real: runner builds with the cross compiler, runs on QEMU.

Needs the ExecuTorch and CMSIS-NN trees (--executorch-src style: $CORTEXM_EXECUTORCH_SRC /
$CORTEXM_CMSIS_NN_SRC, or the default location), arm-none-eabi-gcc, cmake and
qemu-system-arm; without them these tests are skipped with a reason saying how to
provide them.

The M7 and M55 runners are built from scratch once per session, into a fresh build
cache (about two minutes on two cores); set CORTEXM_TEST_REUSE_BUILDS=1 to take them
from the user's cache instead while iterating.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time

import pytest

from conftest import MISSING, run_cli
from cortexm.base.errors import CortexmError
from cortexm.base.targets import core
from cortexm.firmware import BuildOptions, build_runner, model_ops, suite_ops
from cortexm.firmware.tools import toolchain_prefix
from cortexm.sim.run import RunError, run_pte

needs_firmware = pytest.mark.skipif(MISSING is not None, reason=f"firmware tests need: {MISSING}")

CORES = ("cortex-m7", "cortex-m55")


@pytest.fixture(scope="session")
def suite_exports():
    """(case, core) -> .pte of every built-in case for the M7 and the M55, or why its export failed.

    Exported through the test app, so they come from its cache when nothing changed."""
    from cortexm.cases import all_cases
    from cortexm.testing.app import Options, export_all

    cores = [core(name) for name in CORES]
    return export_all([(case.name, c) for case in all_cases(grid="default") for c in cores], Options(cores=cores), lambda _: None)


def _objdump(elf) -> str:
    out = subprocess.run([toolchain_prefix() + "objdump", "-d", "-m", "armv8.1-m.main", str(elf)],
                         capture_output=True, text=True, check=True)
    return out.stdout


def _mnemonics_by_function(disassembly: str) -> dict[str, set[str]]:
    functions: dict[str, set[str]] = {}
    current = None
    for line in disassembly.splitlines():
        header = re.match(r"^[0-9a-f]+ <(\S+)>:$", line)
        if header:
            current = functions.setdefault(header.group(1), set())
            continue
        parts = line.split("\t")
        if current is not None and len(parts) >= 3 and re.match(r"^\s*[0-9a-f]+:$", parts[0]):
            current.add(parts[2].strip().split()[0] if parts[2].strip() else "")
    return functions



# --- the operator set of the default runner -------------------------------------------

def test_suite_ops_are_what_the_exported_suite_calls(suite_exports):
    from cortexm.cases import get

    used: set[str] = set()
    for (case, core_name), pte in suite_exports.items():
        if isinstance(pte, str):
            assert get(case).fails_at("export", core_name), f"{case} for {core_name} did not export: {pte}"
            continue
        used |= set(model_ops(pte))
    listed = set(suite_ops())
    assert used - listed == set(), "kernels/suite_ops.txt misses operators the suite calls"
    assert listed - used == set(), "kernels/suite_ops.txt lists operators no case calls"


# --- builds ------------------------------------------------------------------------------

@needs_firmware
@pytest.mark.parametrize("name", CORES)
def test_runner_builds(runners, name):
    runner = runners[name]
    assert runner.elf.is_file() and runner.map_file.is_file()
    assert runner.ops == suite_ops()
    if os.environ.get("CORTEXM_TEST_REUSE_BUILDS") != "1":
        assert not runner.cached  # built from scratch in this session's empty cache


@needs_firmware
def test_second_build_is_instant(runners):
    started = time.monotonic()
    again = build_runner("cortex-m7")
    assert again.cached and again.elf == runners["cortex-m7"].elf
    assert time.monotonic() - started < 5


@needs_firmware
def test_m55_runner_runs_mve_code_and_m7_runner_dsp_code(runners):
    """CMSIS-NN was built for each core's own extension: MVE on the M55, DSP on the M7."""
    m55 = _mnemonics_by_function(_objdump(runners["cortex-m55"].elf))
    m7 = _mnemonics_by_function(_objdump(runners["cortex-m7"].elf))
    mve = {"vldrb.s32", "vldrb.u8", "vmlava.s8", "wlstp.8", "letp"}
    dsp = {"smlad", "sxtb16"}
    cmsis = lambda functions: set().union(*(m for f, m in functions.items() if f.startswith("arm_")))  # noqa: E731
    assert mve <= cmsis(m55), f"MVE instructions missing from the M55 runner's CMSIS-NN: {mve - cmsis(m55)}"
    assert dsp <= cmsis(m7), f"DSP instructions missing from the M7 runner's CMSIS-NN: {dsp - cmsis(m7)}"
    every_m7 = set().union(*m7.values())
    assert not {"vmlava.s8", "wlstp.8", "letp", "vldrb.u8"} & every_m7, "MVE instructions in the M7 runner"


# --- runs --------------------------------------------------------------------------------

@needs_firmware
@pytest.mark.parametrize("name", CORES)
@pytest.mark.parametrize("case", ["conv2d", "keyword_spotting"])
def test_case_runs_within_one_lsb(runners, exported, name, case):
    pte = exported(case, name)
    first = run_pte(pte, name, runner=runners[name])
    assert first.diffs and first.max_diff_lsb <= 1, [(d.max_lsb, d.worst) for d in first.diffs]
    assert first.outputs[0].shape == tuple(first.outputs[0].shape) and first.outputs[0].dtype.name == "float32"
    assert first.instructions and first.instructions > 0
    again = run_pte(pte, name, runner=runners[name])
    assert again.instructions == first.instructions, "instruction counts must not depend on the host"


@needs_firmware
@pytest.mark.parametrize("name", CORES)
def test_whole_suite_within_each_cases_tolerance(runners, name):
    """Every case within its tolerance; a case with a known upstream defect must still show it
    (the test app's own check: a pass there is an XPASS, a failure)."""
    from cortexm.testing import app
    from cortexm.testing.simulate import RunnerSimulator

    target = core(name)
    options = app.Options(cores=[target], simulators={name: RunnerSimulator(target, "qemu", runners[name])})
    results = app.run(options)
    differing = [f"{r.case} {r.compare.max_lsb:g} LSB" for r in results if r.compare and r.compare.max_lsb]
    print(f"{name}: cases that differ from the reference: {', '.join(differing) or 'none'}")
    assert [f"{r.case}: {r.status} {r.reason}" for r in results if r.failed] == []


@needs_firmware
def test_m55_runner_on_the_m7_machine_fails_clearly(runners, exported, tmp_path):
    from cortexm.sim import get
    from cortexm.sim.run import execute

    result, outputs = execute(exported("conv2d", "cortex-m7"), core("cortex-m7"), get("qemu"), runners["cortex-m55"],
                              workdir=tmp_path)
    assert not result.ok and outputs == []
    assert result.exit_code == 5
    assert result.failure_line.startswith("F HardFault: undefined instruction"), result.failure_line
    assert re.search(r"CFSR=0x[0-9a-f]{8} HFSR=0x[0-9a-f]{8} MMFAR=0x[0-9a-f]{8} BFAR=0x[0-9a-f]{8} PC=0x[0-9a-f]{8} LR=",
                     result.failure_line)


@needs_firmware
@pytest.mark.parametrize("case", ["avg_pool2d", "keyword_spotting"])
def test_m55_program_on_the_m7_runner_fails_with_the_scratch_message(runners, exported, case):
    pte = exported(case, "cortex-m55")
    with pytest.raises(RunError) as failure:
        run_pte(pte, "cortex-m7", runner=runners["cortex-m7"])
    message = str(failure.value)
    assert "\n" not in message
    assert re.search(r"quantized_\w+_out: scratch buffer size incorrect - actual: \(\d+\) needed: \(\d+\)", message), message
    assert failure.value.result.exit_code == 1


@needs_firmware
def test_cli_run_reports_the_rejection_on_one_line(runners, exported):
    pte = exported("avg_pool2d", "cortex-m55")
    result = run_cli("run", str(pte), "--target", "cortex-m7", "--no-audit")  # the runtime's own refusal
    assert result.returncode == 1
    errors = [l for l in result.stderr.splitlines() if l.startswith("error:")]
    assert len(errors) == 1 and "scratch buffer size incorrect" in errors[0], result.stderr
    assert "exported for cortex-m55" in result.stderr  # the warning says why
    assert "Traceback" not in result.stderr


@needs_firmware
def test_cli_run_prints_outputs_and_instructions(runners, exported):
    pte = exported("conv2d", "cortex-m7")
    result = run_cli("run", str(pte), "--target", "cortex-m7", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    expected = run_pte(pte, "cortex-m7", runner=runners["cortex-m7"])
    assert report["instructions"] == expected.instructions
    assert report["outputs"][0]["shape"] == [1, 8, 8, 8] and report["within_tolerance"] is True


@needs_firmware
def test_run_and_test_count_the_same_instructions(runners, tmp_path):
    """One program, its inputs, one runner: `cortexm run` and `cortexm test` report one count
    (both time each call, as the performance gate needs: the sum of the calls' counts)."""
    report = tmp_path / "report.json"
    done = run_cli("test", "-t", "cortex-m7", "-k", "conv2d_relu", "--grid", "none", "--json", str(report))
    assert report.is_file(), done.stderr[-2000:]
    tested = next(r for r in json.loads(report.read_text())["results"] if r["case"] == "conv2d_relu")
    ran = run_cli("run", tested["pte"], "--target", "cortex-m7", "--json")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["instructions"] == tested["instructions"] > 0


# --- selective builds, pools, footprint ----------------------------------------------------

@needs_firmware
def test_model_runner_registers_only_that_models_operators(runners, exported):
    pte = exported("keyword_spotting", "cortex-m7")
    runner = build_runner("cortex-m7", model=pte)
    assert runner.ops == model_ops(pte) and set(runner.ops) < set(suite_ops())
    suite_elf, model_elf = runners["cortex-m7"].elf.read_bytes(), runner.elf.read_bytes()
    assert b"aten::convolution.out" in suite_elf and b"aten::convolution.out" not in model_elf
    assert len(model_elf) < len(suite_elf)
    result = run_pte(pte, "cortex-m7", runner=runner)
    assert result.max_diff_lsb <= 1


@needs_firmware
def test_too_small_method_pool_is_named_with_its_sizes(runners, exported):
    pte = exported("keyword_spotting", "cortex-m7")
    runner = build_runner("cortex-m7", model=pte, options=BuildOptions(method_pool_size=2048))
    with pytest.raises(RunError) as failure:
        run_pte(pte, "cortex-m7", runner=runner)
    assert re.search(r"E memory: method allocator pool exhausted: \d+ B requested, \d+ of 2048 B free; "
                     r"build with a larger CORTEXM_METHOD_POOL_SIZE", str(failure.value)), str(failure.value)
    assert failure.value.result.exit_code == 3


@needs_firmware
@pytest.mark.parametrize("name", CORES)
def test_size_adds_up_to_the_elf_sections(runners, name):
    from cortexm.firmware.size import footprint

    runner = runners[name]
    result = footprint(runner.elf, runner.map_file)
    names = {c.name for c in result.components}
    assert {"ExecuTorch core", "portable kernels", "cortex_m kernels", "CMSIS-NN", "libc, libstdc++", "board support"} <= names
    # An independent reference: binutils' size (text includes read-only data; flash also holds .data's image).
    out = subprocess.run([toolchain_prefix() + "size", str(runner.elf)], capture_output=True, text=True, check=True)
    text, data, bss = (int(v) for v in out.stdout.splitlines()[1].split()[:3])
    assert result.flash == text + data
    assert result.ram == data + bss
    assert result.arena > 0


@needs_firmware
def test_cli_build_and_size(runners, exported):
    built = run_cli("build", "--target", "cortex-m55")
    assert built.returncode == 0, built.stderr
    assert built.stdout.splitlines()[0] == str(runners["cortex-m55"].elf)
    pte = exported("keyword_spotting", "cortex-m55")
    sized = run_cli("size", "--target", "cortex-m55", "--model", str(pte), "--json")
    assert sized.returncode == 0, sized.stderr
    report = json.loads(sized.stdout)
    assert report["model"]["flash"] == pte.stat().st_size
    assert report["flash"] == sum(c["flash"] for c in report["components"])


@needs_firmware
def test_scalar_inputs_are_read_and_checked(runners, tmp_path):
    """A program with int and float inputs besides a tensor: all are set from their files."""
    import numpy as np
    import torch
    from executorch.exir import to_edge

    class ScaleShift(torch.nn.Module):
        def forward(self, x, n: int, s: float):
            return x * n + s

    x = np.arange(6, dtype=np.float32)
    program = to_edge(torch.export.export(ScaleShift(), (torch.from_numpy(x), 3, 0.5))).to_executorch()
    pte = tmp_path / "scale_shift.pte"
    pte.write_bytes(program.buffer)
    files = [tmp_path / "x.bin", tmp_path / "n.bin", tmp_path / "s.bin", tmp_path / "other-n.bin"]
    x.tofile(files[0])
    np.array(3, dtype=np.int64).tofile(files[1])
    np.array(0.5, dtype=np.float64).tofile(files[2])
    np.array(4, dtype=np.int64).tofile(files[3])

    result = run_pte(pte, "cortex-m7", inputs=files[:3])
    np.testing.assert_array_equal(result.outputs[0], x * 3 + 0.5)
    with pytest.raises(RunError, match="should have the same value as the input_evalue, but got 3 and 4"):
        run_pte(pte, "cortex-m7", inputs=[files[0], files[3], files[2]])


@needs_firmware
def test_prebuilt_runners_are_used_without_trees(runners, monkeypatch, tmp_path):
    """$CORTEXM_RUNNERS (what Nix hands over): a matching runner needs no tree, toolchain or build
    where no tree is found (a tree that is found must be the one it was built from: test_bundles)."""
    monkeypatch.setenv("CORTEXM_RUNNERS", str(runners["cortex-m55"].build_dir))
    for kind in ("EXECUTORCH", "CMSIS_NN"):
        monkeypatch.delenv(f"CORTEXM_{kind}_SRC", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # no trees in the default location
    assert build_runner("cortex-m55").elf == runners["cortex-m55"].elf
    with pytest.raises(CortexmError, match="no executorch source tree"):
        build_runner("cortex-m7")  # no prebuilt runner for this core: it would be built


@needs_firmware
def test_the_cache_key_follows_content_not_location(runners, monkeypatch, tmp_path):
    from cortexm.firmware import paths

    copy = tmp_path / "firmware"
    shutil.copytree(paths.kernels(), copy / "kernels")
    shutil.copytree(paths.boards(), copy / "fvp" / "boards")
    monkeypatch.setenv("CORTEXM_FIRMWARE_SRC", str(copy))
    assert build_runner("cortex-m7").key == runners["cortex-m7"].key
    (copy / "fvp" / "boards" / "README.md").write_text("documentation is not a build input\n")
    assert build_runner("cortex-m7").key == runners["cortex-m7"].key
    monkeypatch.setenv("CORTEXM_FIRMWARE_SRC", str(tmp_path / "elsewhere"))
    with pytest.raises(CortexmError, match="kernels not found"):
        build_runner("cortex-m7")


@needs_firmware
def test_a_command_line_that_does_not_fit_is_refused_not_cut(runners, exported, tmp_path):
    """Words past the runner's limit were dropped, so a packed program's memory-oracle run lost
    its last option's value; now the runner refuses the whole line."""
    from cortexm.sim import get
    from cortexm.sim.run import execute

    result, outputs = execute(exported("conv2d", "cortex-m7"), core("cortex-m7"), get("qemu"), runners["cortex-m7"],
                              workdir=tmp_path, extra_args=tuple(f"--word-{k}" for k in range(64)))
    assert not result.ok and outputs == []
    assert result.failure_line.startswith("E usage: the command line does not fit (at most 64 words"), result.failure_line


@needs_firmware
def test_a_run_is_remembered_by_what_decides_it(runners, exported, tmp_path, monkeypatch):
    """The test app's reruns: the same program, inputs, runner and simulator are answered from
    the run store without a simulator; other inputs, another runner ELF, a limit below the time
    the run took, a damaged entry or a failed run are run again."""
    from cortexm.sim import memo, qemu

    monkeypatch.setenv("CORTEXM_RUN_CACHE", str(tmp_path / "runs"))
    pte, m7 = exported("conv2d", "cortex-m7"), core("cortex-m7")
    first = run_pte(pte, m7, runner=runners["cortex-m7"], remember=True)
    again = run_pte(pte, m7, runner=runners["cortex-m7"], remember=True)
    assert not first.sim_result.remembered and again.sim_result.remembered
    assert again.instructions == first.instructions and again.log == first.log
    assert [o.tobytes() for o in again.outputs] == [o.tobytes() for o in first.outputs]
    assert not run_pte(pte, m7, runner=runners["cortex-m7"]).sim_result.remembered  # `cortexm run` always runs

    entry = next((tmp_path / "runs").iterdir())
    assert memo.recall(entry.name, timeout=first.sim_result.seconds / 2) is None  # it might not finish within this
    inputs = tmp_path / "other.bin"
    inputs.write_bytes(bytes(len((pte.parent / "conv2d.input-0.bin").read_bytes())))
    assert not run_pte(pte, m7, inputs=[inputs], runner=runners["cortex-m7"], remember=True).sim_result.remembered
    elf = tmp_path / "other.elf"
    elf.write_bytes(runners["cortex-m7"].elf.read_bytes() + b"\0")
    argv = ["--program", "x"]
    assert memo.key(pte, [], elf, m7, argv, qemu.Qemu()) != memo.key(pte, [], runners["cortex-m7"].elf, m7, argv, qemu.Qemu())

    (entry / "out-0.bin").write_bytes(b"damaged")
    assert not run_pte(pte, m7, runner=runners["cortex-m7"], remember=True).sim_result.remembered
    with pytest.raises(RunError):
        run_pte(pte, m7, runner=runners["cortex-m7"], remember=True, extra_args=tuple(f"--word-{k}" for k in range(64)))
    assert len(list((tmp_path / "runs").iterdir())) == 2  # the example's run (stored again) and the other inputs'
