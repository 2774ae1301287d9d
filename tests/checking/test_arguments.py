"""The argument audit (cortexm.checking.arguments) against CMSIS-NN itself.

Its conditions are written out by hand from CMSIS-NN's sources; two things hold them to the
code: every quoted condition is in the CMSIS-NN tree, and CMSIS-NN built for the M55 (MVE),
the M7 (DSP) and the M3 (scalar), run on QEMU over a grid of calls (tests/argument_probe),
returns the status and takes the path the audit says, call by call. Then a program CMSIS-NN
refuses only on MVE: verify fails it for the M55 and passes its M7 lowering, the M55 runner
really refuses it, and the run's failure line names the call, its module and the reason.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import MISSING, REPO, session_folder
from cortexm import sources
from cortexm.base.targets import core
from cortexm.checking import arguments
from cortexm.checking.arguments import Call, Dims, Pair

PROBE = REPO / "tests" / "argument_probe"
PROBE_CORES = ("cortex-m55", "cortex-m7", "cortex-m3")  # MVE, DSP, scalar
# Every CMSIS-NN function the wrappers dispatch to: probe.c records each on entry (-Wl,--wrap).
WRAPPED = ("arm_convolve_wrapper_s8", "arm_convolve_1x1_s8_fast", "arm_convolve_1x1_s8", "arm_convolve_1_x_n_s8",
           "arm_convolve_s8", "arm_depthwise_conv_wrapper_s8", "arm_depthwise_conv_3x3_s8", "arm_depthwise_conv_s8_opt",
           "arm_depthwise_conv_s8", "arm_transpose_s8", "arm_transpose_conv_wrapper_s8", "arm_transpose_conv_s8",
           "arm_avgpool_s8", "arm_max_pool_s8")


def _tree() -> Path:
    tree = sources.locate(sources.CMSIS_NN).path
    if tree is None:
        pytest.skip(sources.missing_message(sources.CMSIS_NN))
    return tree


def test_every_condition_is_quoted_from_cmsis_nn():
    """Each Check's condition is in its file as the source writes it (whitespace aside), in a file
    that defines its function: a CMSIS-NN that rewrites a check fails here, not silently."""
    tree = _tree()

    def flat(text: str) -> str:
        return re.sub(r"\s+", " ", text)

    missing = [c for c in arguments.CHECKS
               if flat(c.condition) not in flat((tree / c.file).read_text()) or c.function.split()[0] not in
               (tree / c.file).read_text()]
    assert not missing, "\n".join(f"{c.file} {c.function}: {c.condition}" for c in missing)
    assert len(arguments.CHECKS) > 30


# --- the grid: calls as the cortex_m kernels make them --------------------------------------------------------

@dataclass(frozen=True)
class Point:
    op: str  # the cortex_m operator whose CMSIS-NN entry is called
    line: str  # the probe's grid line (tests/argument_probe/probe.c)
    call: Call  # with buffer/reverse_buffer set from what the probe passed


def _out(size: int, k: int, s: int, p: int, d: int = 1) -> int:
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _conv_points() -> list[tuple[str, Call, int]]:
    points = []
    for h, kh in ((1, 1), (3, 1), (3, 3)):
        for w in (5, 8, 9):
            for c, groups in ((1, 1), (2, 1), (4, 1), (8, 1), (4, 2), (8, 4)):
                for kw in (1, 2, 3):
                    for sw in (1, 2, 3, 4):
                        for pw in (0, 1, 2):
                            for dw in (1, 2) if (kw, sw) == (3, 1) else (1,):
                                ph = 1 if kh == 3 else 0
                                oh, ow = _out(h, kh, 1, ph), _out(w, kw, sw, pw, dw)
                                if ow >= 1 and oh >= 1 and pw < kw * dw:
                                    points.append((Call(Dims(1, h, w, c), Dims(8, kh, kw, c // groups), Dims(1, oh, ow, 8),
                                                        Pair(ph, pw), Pair(1, sw), Pair(1, dw)), -1))
    # A missing buffer on each path; a batch of two on MVE's 1xN path; a damaged filter
    # with more channels than the input (no whole group: arm_convolve_s8's check).
    for pw, kw in ((0, 3), (1, 3), (0, 1), (1, 1)):
        points.append((Call(Dims(1, 1, 8, 4), Dims(8, 1, kw, 4), Dims(1, 1, _out(8, kw, 1, pw), 8), Pair(0, pw),
                            Pair(1, 1)), 0))
    points.append((Call(Dims(1, 3, 6, 4), Dims(8, 3, 3, 4), Dims(1, 3, 6, 8), Pair(1, 1), Pair(1, 1)), 0))
    points.append((Call(Dims(2, 1, 8, 8), Dims(8, 1, 3, 8), Dims(2, 1, 4, 8), Pair(0, 1), Pair(1, 2)), -1))
    points.append((Call(Dims(2, 1, 9, 8), Dims(8, 1, 3, 8), Dims(2, 1, 5, 8), Pair(0, 1), Pair(1, 2)), -1))
    points.append((Call(Dims(1, 3, 6, 4), Dims(8, 3, 3, 8), Dims(1, 3, 6, 8), Pair(1, 1), Pair(1, 1)), -1))
    return [("cortex_m::quantized_conv2d.out", call, scratch) for call, scratch in points]


def _depthwise_points() -> list[tuple[str, Call, int]]:
    points = []
    for n in (1, 2):
        for h, w in ((1, 8), (1, 9), (5, 6)):
            for c, mult in ((1, 1), (1, 4), (3, 1), (4, 1), (4, 2)):
                for kh, kw in ((1, 3), (3, 3), (2, 2)):
                    for ph, pw in ((0, 0), (0, 1), (1, 1), (2, 2)):
                        for sh, sw in ((1, 1), (1, 2), (1, 4), (2, 2)):
                            for dh, dw in ((1, 1), (1, 2)):
                                oh, ow = _out(h, kh, sh, ph, dh), _out(w, kw, sw, pw, dw)
                                if oh < 1 or ow < 1 or ph >= kh * dh or pw >= kw * dw or (n == 2 and (sh, dw) != (1, 1)):
                                    continue
                                call = Call(Dims(n, h, w, c), Dims(1, kh, kw, c * mult), Dims(n, oh, ow, c * mult),
                                            Pair(ph, pw), Pair(sh, sw), Pair(dh, dw), ch_mult=mult)
                                points.append((call, -1))
                                # No buffer; not on MVE's one-input-channel path, which offsets into the buffer
                                # before any check (arm_depthwise_conv_to_conv_s8) and would write near address 0.
                                if c > 1 and n == 1 and (dh, dw) == (1, 1) and (sh, sw) == (1, 1):
                                    points.append((call, 0))
    return [("cortex_m::quantized_depthwise_conv2d.out", call, scratch) for call, scratch in points]


def _transpose_points() -> list[tuple[str, Call, int, int]]:
    points = []
    for c in (2, 17, 20):
        for k in (2, 3):
            for s in (1, 2, 3):
                for p in (0, 1):
                    if s > k or p >= k:  # no stride past the filter: arm_transpose_conv_s8 overruns its scratch there
                        continue
                    o = (4 - 1) * s - 2 * p + k
                    call = Call(Dims(1, 4, 4, c), Dims(6, k, k, c), Dims(1, o, o, 6), Pair(p, p), Pair(s, s))
                    points += [(call, -1, -1), (call, 0, -1), (call, -1, 0)]
    return [("cortex_m::quantized_transpose_conv2d.out", call, a, b) for call, a, b in points]


def _pool_points() -> list[tuple[str, Call, int]]:
    points = []
    for n in (0, 1, 2):
        for c in (1, 4, 20):
            for h, w in ((4, 5), (5, 4)):
                for k in (2, 3):
                    for s in (1, 2):
                        for p in (0, 1):
                            if p > k // 2:
                                continue
                            oh, ow = _out(h, k, s, p), _out(w, k, s, p)
                            for extra in (0, 1, 3):  # windows past the input: a damaged or foreign program
                                call = Call(Dims(n, h, w, c), Dims(1, k, k, 1), Dims(n, oh, ow + extra, c), Pair(p, p),
                                            Pair(s, s))
                                points.append(("cortex_m::quantized_avg_pool2d.out", call, -1))
                                if extra == 0:
                                    points.append(("cortex_m::quantized_avg_pool2d.out", call, 0))
                                    points.append(("cortex_m::quantized_max_pool2d.out", call, -1))
    return points


def _line(op: str, c: Call, scratch: int, reverse: int = -1) -> str:
    i, f, o = c.input, c.filter, c.output
    head = f"{i.n} {i.h} {i.w} {i.c}"
    params = f"{c.padding.h} {c.padding.w} {c.stride.h} {c.stride.w}"
    if "avg_pool" in op or "max_pool" in op:
        kind = "avg" if "avg_pool" in op else "max"
        return f"{kind} {head} {f.h} {f.w} {o.h} {o.w} {params} {scratch}"
    if "transpose" in op:
        return f"tconv {head} {f.n} {f.h} {f.w} {f.c} {o.h} {o.w} {params} 0 0 {scratch} {reverse}"
    kind, last = ("dw", c.ch_mult) if "depthwise" in op else ("conv", f.c)
    return f"{kind} {head} {o.c} {f.h} {f.w} {last} {o.h} {o.w} {params} {c.dilation.h} {c.dilation.w} {scratch}"


def grid() -> list[tuple[str, Call, str]]:
    found = [(op, call, _line(op, call, scratch)) for op, call, scratch in
             _conv_points() + _depthwise_points() + _pool_points()]
    found += [(op, call, _line(op, call, a, b)) for op, call, a, b in _transpose_points()]
    return found


# --- CMSIS-NN on QEMU -----------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def probe(tmp_path_factory):
    """probe(core name) -> tests/argument_probe built for it (CMSIS-NN through its own CMakeLists), once
    per session whichever worker asks first."""
    from cortexm.base import locks
    from cortexm.firmware import paths
    from cortexm.firmware.tools import toolchain_prefix

    if MISSING:
        pytest.skip(f"firmware tests need: {MISSING}")
    tree = _tree()
    paths.require_sources()

    def build(name: str) -> Path:
        target = core(name)
        folder = session_folder(tmp_path_factory, f"argument-probe-{target.short}")
        elf = folder / "cmsis_call.elf"
        with locks.waiting(folder):
            if elf.is_file():
                return elf
            generator = ["-G", "Ninja"] if shutil.which("ninja") else []
            for command in ([
                "cmake", *generator, "-S", str(paths.kernels() / "cmsis_call"), "-B", str(folder),
                f"-DCALL_SOURCE={PROBE / 'probe.c'}", f"-DCALL_LINK_OPTIONS={';'.join('-Wl,--wrap=' + f for f in WRAPPED)}",
                f"-DCMAKE_TOOLCHAIN_FILE={paths.kernels() / 'toolchain' / 'arm-none-eabi-gcc.cmake'}",
                f"-DCORTEXM_BOARDS_DIR={paths.boards()}",
                f"-DARM_TOOLCHAIN_PREFIX={toolchain_prefix()}", f"-DCORTEXM_CPU_FLAGS={';'.join(target.gcc_flags)}",
                f"-DCORTEXM_BOARD={target.board}", f"-DCMSIS_NN_SRC={tree}"],
                    ["cmake", "--build", str(folder), "--target", "cmsis_call"]):
                done = subprocess.run(command, capture_output=True, text=True)
                assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return elf

    return build


def _probe(elf: Path, name: str, lines: list[str], folder: Path) -> dict[int, tuple[int, str, int, int]]:
    """line number -> (status, path, scratch bytes, output scratch bytes), from CMSIS-NN on QEMU."""
    from cortexm.sim.qemu import Qemu

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "grid.txt").write_text("".join(f"{line}\n" for line in lines))
    result = Qemu().run(elf, core(name), folder, ["argument_probe"], timeout=600)
    assert result.exit_code == 0 and "I probe: done" in result.log, result.log[-2000:]
    found = {}
    for m in re.finditer(r"^R (\d+) (-?\d+) (\S+) (\d+) (\d+)$", result.log, re.MULTILINE):
        found[int(m.group(1))] = (int(m.group(2)), m.group(3), int(m.group(4)), int(m.group(5)))
    assert len(found) == len(lines), result.log[-2000:]
    return found


@pytest.mark.parametrize("name", PROBE_CORES)
def test_cmsis_nn_on_qemu_decides_as_the_audit(probe, name, tmp_path):
    """Over the grid, each call's status and path on the real CMSIS-NN for the core equal the audit's;
    and the grid reaches every refusal a program can meet on that core."""
    from dataclasses import replace

    points = grid()
    answers = _probe(probe(name), name, [line for _, _, line in points], tmp_path)
    backend = core(name).backend
    wrong, refused = [], set()
    for number, (op, call, line) in enumerate(points, 1):
        status, path, given, reverse = answers[number]
        decision = arguments.walk(op, replace(call, buffer=given > 0, reverse_buffer=reverse > 0), backend)
        if (decision.status, ">".join(decision.path)) != (status, path):
            wrong.append(f"{line}: CMSIS-NN {status} {path}, the audit {decision.status} {'>'.join(decision.path)}")
        if decision.refusal:
            refused.add(decision.refusal.check)
    assert not wrong, f"{len(wrong)} of {len(points)} calls differ:\n" + "\n".join(wrong[:40])
    a = arguments
    reachable = {a.CONV_1_X_N_ARGS, a.CONVOLVE_BUFFER, a.CONVOLVE_GROUPS, a.TCONV_BUFFER, a.TCONV_REVERSE_BUFFER,
                 a.AVGPOOL_BATCH, a.AVGPOOL_EMPTY_WINDOW, a.MAXPOOL_BATCH}
    reachable |= {a.CONV_1_X_N_PADDING, a.DW_OPT_BUFFER} if backend == "MVE" else set()
    reachable |= {a.DW_OPT_BUFFER, a.AVGPOOL_BUFFER} if backend == "DSP" else set()
    assert reachable <= refused, [f"{c.function}: {c.condition}" for c in reachable - refused]


# --- a program only MVE refuses ------------------------------------------------------------------------------

REFUSED = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        # The second convolution is CMSIS-NN's 1xN case (one input row, 8 channels); its width
        # padding of 1 is not half the padding the output needs (1, rounded down: 0).
        self.features = nn.Sequential(nn.Conv2d(4, 8, 1), nn.ReLU(), nn.Conv2d(8, 8, (1, 3), stride=(1, 2), padding=(0, 1)))

    def forward(self, x):
        return self.features(x)


def make():
    return Net().eval(), ((torch.rand(1, 4, 1, 8) * 2 - 1).to(memory_format=torch.channels_last),)
'''
CONV = "cortex_m::quantized_conv2d.out"
REASON = ("cortex-m55 (MVE) arm_convolve_1_x_n_s8 refuses it with status -3 (ARM_CMSIS_NN_FAILURE): padding [0, 1]: "
          "width padding 1, where the 1xN path takes only 0: half of (out_w 4 - 1) * stride_w 2 + kernel_w 3 - in_w 8 "
          "= 1, truncated [arm_convolve_1_x_n_s8.c: pad_x * 2 + asym_pad != total_pad]")


@pytest.fixture(scope="module")
def refused(tmp_path_factory) -> dict[str, Path]:
    """The model lowered for the M55 and for the M7: core name -> .pte."""
    from cortexm.lowering import export, modelsource, writer

    folder = tmp_path_factory.mktemp("refused")
    (folder / "net.py").write_text(REFUSED)
    found = {}
    for name in ("cortex-m55", "cortex-m7"):
        found[name] = folder / f"net-{name}.pte"
        writer.write(export.export(modelsource.load(f"{folder / 'net.py'}:make"), core(name), "legacy"), found[name])
    return found


def _second_conv(pte: Path) -> int:
    from cortexm.pte import load

    return [i for i, op, _ in load(pte).plan().kernel_calls() if op.qualified_name == CONV][1]


def test_verify_fails_for_the_m55_what_its_cmsis_nn_refuses(refused):
    """The call, its module and the parameter CMSIS-NN refuses; the M7's lowering of the model verifies."""
    from cortexm.checking import library
    from cortexm.checking.verify import verify_file

    m55, m7 = refused["cortex-m55"], refused["cortex-m7"]
    lines = [f.line() for f in verify_file(m55, library.installed(), core("cortex-m55"))]
    assert lines == [f"FAIL net {CONV}#{_second_conv(m55)} (features.2): {REASON}"]
    assert [f.line() for f in verify_file(m7, library.installed(), core("cortex-m7"))] == ["OK net"]


def test_the_m55_refuses_it_on_qemu_and_the_failure_names_the_call(refused, runners):
    """The runner really stops with CMSIS-NN's status (the kernel's own words), and the failure line goes
    on to name the call, its module and the audit's reason, not ExecuTorch's argument type ids. The M7
    runs the same model's program within the tolerance."""
    from cortexm.sim.run import RunError, run_pte

    with pytest.raises(RunError) as failed:
        run_pte(refused["cortex-m55"], "cortex-m55", runner=runners["cortex-m55"])
    assert "type id" in failed.value.result.log  # what ExecuTorch prints
    line = str(failed.value).split(": ", 1)[1]
    assert re.fullmatch(r"E \[op_quantized_conv2d\.cpp:\d+\] quantized_conv2d_out: arm_convolve_wrapper_s8 failed with "
                        r"status -3, at " + re.escape(f"{CONV}#{_second_conv(refused['cortex-m55'])} (features.2): {REASON}"),
                        line), line
    assert run_pte(refused["cortex-m7"], "cortex-m7", runner=runners["cortex-m7"]).within_tolerance


def test_a_failure_gives_the_reason_only_when_cmsis_nn_returned_its_status(refused):
    """The kernel's scratch-size check stops a call before CMSIS-NN sees it: the line then names the
    call and its module, and does not blame a CMSIS-NN refusal that did not happen."""
    from cortexm.pte import load
    from cortexm.pte.sidecar import read_sidecar
    from cortexm.sim.failure import named

    pte = refused["cortex-m55"]
    plan, sidecar, m55 = load(pte).plan(), read_sidecar(pte), core("cortex-m55")
    index = _second_conv(pte)
    failed = f"E [method.cpp:1483] KernelCall failed at instruction 0:{index} in operator {CONV}: 0x1\n"
    refused_by_cmsis_nn = ("E [op_quantized_conv2d.cpp:221] quantized_conv2d_out: arm_convolve_wrapper_s8 failed "
                           "with status -3\n")
    stopped_before = ("E [op_quantized_conv2d.cpp:195] quantized_conv2d_out: scratch buffer size incorrect - "
                      "actual: (0) needed: (96)\n")
    assert named(refused_by_cmsis_nn + failed, plan, sidecar, m55) == f"{CONV}#{index} (features.2): {REASON}"
    assert named(stopped_before + failed, plan, sidecar, m55) == f"{CONV}#{index} (features.2)"
    assert named(stopped_before, plan, sidecar, m55) is None
