"""The memory oracle: a kernel that writes where it must not fails the run, named by call,
argument and bytes, even when its outputs are right; and the known CMSIS-NN overrun is
reported as what it is (a write past the scratch), not as wrong arithmetic."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import MISSING  # noqa: F401  (the runners fixture skips without the firmware path)
from cortexm.testing import app

PERTURBATION = Path(__file__).resolve().parents[1] / "firmware_perturbation" / "one_byte_past_output_add.c"


def _run(pattern: str, simulators: dict, cores) -> list:
    options = app.Options(cores=cores, pattern=pattern, simulators=simulators, grid="none")
    return [r for r in app.run(options) if r.case == pattern]


def test_one_byte_past_the_output_is_caught_with_right_outputs(runners):
    from cortexm.base.targets import core
    from cortexm.firmware import BuildOptions, build_runner
    from cortexm.testing.simulate import RunnerSimulator

    m7 = core("cortex-m7")
    perturbed = BuildOptions(extra_sources=(str(PERTURBATION),), link_options=("-Wl,--wrap=arm_elementwise_add_s8",))
    runner = build_runner(m7, options=perturbed)
    # Built in the suite runner's CMake folder: a wrapper and a link option only relink.
    assert runner.work() == runners["cortex-m7"].work() and runner.key != runners["cortex-m7"].key
    [result] = _run("add", {m7.name: RunnerSimulator(m7, "qemu", runner)}, [m7])
    assert result.compare.max_lsb == 0  # the outputs are right: only the memory oracle sees it
    assert result.status == "FAIL" and result.memory.verdict == "FAIL"
    [(stage, line)] = result.failures
    assert stage == "memory"
    assert re.fullmatch(r"call \d+ cortex_m::quantized_add\.out \(instruction \d+\) wrote 1 bytes past the end of "
                        r"its out \(100 B\)", line), line


def test_the_host_build_catches_it_with_address_sanitizer(host_runner):
    """The same perturbed kernel in the host build: AddressSanitizer on exact-size buffers."""
    from cortexm.base.targets import core
    from cortexm.firmware import BuildOptions, build_runner
    from cortexm.testing.simulate import RunnerSimulator

    host = core("host")
    perturbed = BuildOptions(extra_sources=(str(PERTURBATION),), link_options=("-Wl,--wrap=arm_elementwise_add_s8",))
    runner = build_runner(host, options=perturbed)
    [result] = _run("add", {host.name: RunnerSimulator(host, "qemu", runner)}, [host])
    assert result.status == "FAIL"
    [(stage, line)] = [f for f in result.failures if f[0] != "run"] or result.failures
    assert re.fullmatch(r"AddressSanitizer heap-buffer-overflow in call \d+ cortex_m::quantized_add\.out \(instruction \d+\): "
                        r"write of 1 B 0 B past the end of its out \(100 B\) in __wrap_arm_elementwise_add_s8 .*", line), line


def test_the_host_build_runs_the_suite_clean(host_runner):
    """Unperturbed, the host build passes the memory oracle and matches the integer reference."""
    from cortexm.base.targets import core
    from cortexm.testing.simulate import RunnerSimulator

    host = core("host")
    [result] = _run("conv2d", {host.name: RunnerSimulator(host, "qemu", host_runner)}, [host])
    assert (result.status, result.memory.verdict, result.compare.max_lsb) == ("PASS", "ok", 0)


def test_the_unperturbed_kernel_passes_the_memory_oracle(runners):
    from cortexm.base.targets import core
    from cortexm.testing.simulate import RunnerSimulator

    m7 = core("cortex-m7")
    [result] = _run("add", {m7.name: RunnerSimulator(m7, "qemu", runners["cortex-m7"])}, [m7])
    assert (result.status, result.memory.verdict, result.compare.max_lsb) == ("PASS", "ok", 0)


def test_transposed_conv_scratch_overrun_is_named(runners):
    """CMSIS-NN sizes this scratch with stride.h where the kernel uses stride.w (PR #243):
    on both cores the guard sees the kernel write 64 bytes past its 576-byte scratch."""
    from cortexm.base.targets import core
    from cortexm.testing.simulate import RunnerSimulator

    cores = [core("cortex-m7"), core("cortex-m55")]
    sims = {c.name: RunnerSimulator(c, "qemu", runners[c.name]) for c in cores}
    results = _run("transpose_conv2d_narrow_filter", sims, cores)
    assert len(results) == 2
    for result in results:
        memory = [line for stage, line in result.failures if stage == "memory"]
        assert memory and re.fullmatch(r"call \d+ cortex_m::quantized_transpose_conv2d\.out \(instruction \d+\) wrote "
                                       r"64 bytes past the end of its scratch \(576 B\)", memory[0]), result.failures
        assert result.status == "XFAIL" and result.reason.startswith("CMSIS-NN PR #243")


def _padded_rows_overrun(c: int, k: tuple[int, int], pad: int) -> int:
    """Bytes arm_depthwise_conv_s8_opt's DSP path writes past its scratch for the first output
    row (stride 1), from its source: ker_y_start = pad rows of kernel_w * C int16 zeros, where
    get_buffer_size asked for kernel_h of them."""
    return (pad - k[0]) * k[1] * c * 2


def test_cmsis_nns_depthwise_padded_rows_overrun_is_caught_on_dsp_cores_only(runners):
    """CMSIS-NN's DSP depthwise path writes past its scratch when the padding is taller than the
    kernel (cortexm.cases.defects.CMSIS_NN_DEPTHWISE_PADDED_ROWS): the guard's byte count is the
    one its source predicts, on the M7; the M55's MVE path stays inside."""
    from cortexm.base.targets import core
    from cortexm.cases import defects, space
    from cortexm.testing.simulate import RunnerSimulator

    floors = {"stride": (1, 1), "dilation": (1, 1), "bias": True, "act": "none", "range": (-1.0, 1.0), "seed": 3}
    samples = (("padded_rows_one_channel", "conv2d", dict(floors, h=1, w=1, cin=1, cout=1, k=(1, 1), pad=(3, 0))),
               ("padded_rows_three_channels", "depthwise_conv2d", dict(floors, h=2, w=3, cin=3, mult=1, k=(2, 1), pad=(4, 0))))
    assert all(space.known_defects(op, p) == ("CMSIS_NN_DEPTHWISE_PADDED_ROWS",) for _, op, p in samples)
    cores = [core("cortex-m7"), core("cortex-m55")]
    options = app.Options(cores=cores, samples=samples, grid="none",
                          simulators={c.name: RunnerSimulator(c, "qemu", runners[c.name]) for c in cores})
    results = {(r.case, r.core): r for r in app.run(options)}
    for name, _, p in samples:
        m7, m55 = results[(name, "cortex-m7")], results[(name, "cortex-m55")]
        assert (m7.status, m55.status) == ("XFAIL", "PASS"), (m7.failures, m55.failures)
        assert m7.reason.startswith(defects.CMSIS_NN_DEPTHWISE_PADDED_ROWS.name)
        [(stage, line)] = m7.failures
        written = int(re.search(r"wrote (\d+) bytes past the end of its scratch", line).group(1))
        assert stage == "memory" and written == _padded_rows_overrun(p.get("cin", 1), p["k"], p["pad"][0]), line
        assert m7.compare.max_lsb == 0  # the outputs are right: only the guard sees it
