"""`cortexm test --coverage`: which lines and branches of the cortex_m kernels and CMSIS-NN a
run reached, read from the runner's own gcov counters, as lcov, Cobertura XML and the JSON
report, and the branches never taken."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import run_cli


@pytest.mark.slow
def test_coverage_of_a_conv_run_on_the_m7(runners, tmp_path):
    out, report = tmp_path / "coverage", tmp_path / "report.json"
    result = subprocess.run([sys.executable, "-m", "cortexm", "test", "-t", "cortex-m7", "-k", "conv2d_relu",
                             "--grid", "none", "--coverage", str(out), "--json", str(report)],
                            capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stdout + result.stderr
    files = {f["path"]: f for f in json.loads(report.read_text())["meta"]["coverage"]["cortex-m7"]}
    conv = files["executorch/backends/cortex_m/ops/op_quantized_conv2d.cpp"]
    assert 0 < conv["lines_executed"] <= conv["lines"] and conv["functions_executed"] > 0
    # Only convolutions ran: the softmax kernel is listed, and never reached.
    softmax = files["executorch/backends/cortex_m/ops/op_softmax.cpp"]
    assert softmax["lines"] > 0 and softmax["lines_executed"] == 0
    assert any(path.startswith("cmsis-nn/Source/ConvolutionFunctions/") and f["lines_executed"]
               for path, f in files.items())

    # Branches: the conv's own file took some of its branches and not all (no run had, e.g., a
    # scratch buffer of the wrong size); the requantize's rounding divide, inlined from
    # CMSIS-NN's Include/, ran and is counted too.
    assert 0 < conv["branches_taken"] < conv["branches"]
    support = files["cmsis-nn/Include/arm_nnsupportfunctions.h"]
    assert support["lines_executed"] > 0 and support["branches_taken"] > 0

    lcov = (out / "cortex-m7" / "lcov.info").read_text()
    assert lcov.count("end_of_record") == len(files) and "SF:" in lcov
    assert lcov.count("BRDA:") == sum(f["branches"] for f in files.values())
    cobertura = ET.parse(out / "cortex-m7" / "cobertura.xml").getroot()
    assert int(cobertura.get("lines-valid")) == sum(f["lines"] for f in files.values())
    assert int(cobertura.get("lines-covered")) == sum(f["lines_executed"] for f in files.values())
    assert int(cobertura.get("branches-covered")) == sum(f["branches_taken"] for f in files.values())
    never = (out / "cortex-m7" / "branches-never-taken.txt").read_text().splitlines()
    assert any(line.startswith("executorch/backends/cortex_m/ops/op_quantized_conv2d.cpp:") for line in never)
    assert "lines and branches executed per file" in result.stdout and "branches never taken" in result.stdout


ARC = re.compile(r"^(\S+?):(\d+) arc (\d+) of \d+: ")


@pytest.mark.slow
def test_the_branches_only_the_exhaustive_scope_takes_are_named_with_a_program_that_takes_them(runners, tmp_path):
    """Judged by two more runs: the built-in cases alone never take those arcs, and the
    program named takes each of them (its own coverage run)."""
    # Max pools of 1..3 channels on a 2x2 input: one channel takes a layout check's branch that
    # no built-in max pool case takes.
    scope = [a for s in ("spatial=2", "kernel=2", "stride=1", "padding=0", "channels=1..3", "batch=1", "data=extremes")
             for a in ("--scope", s)]
    common = ["test", "-t", "cortex-m7", "-k", "max_pool", "-j", "1"]
    both, alone, named = tmp_path / "both", tmp_path / "alone", tmp_path / "named"
    done = run_cli(*common, "--grid", "exhaustive", *scope, "--coverage", str(both))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    only = (both / "cortex-m7" / "branches-only-the-scope-takes.txt").read_text().splitlines()
    assert only and "branches only the exhaustive scope took" in done.stdout
    programs = {line.rsplit("<- ", 1)[1].split()[0] for line in only}
    assert all(p.startswith("exh_max_pool2d") for p in programs)
    arcs = {ARC.match(line).groups() for line in only}
    assert not arcs & {ARC.match(line).groups() for line in (both / "cortex-m7" / "branches-never-taken.txt")
                       .read_text().splitlines()}

    run_cli(*common, "--grid", "default", "--coverage", str(alone))
    assert not arcs & _taken(alone / "cortex-m7" / "lcov.info")
    for program in programs:
        run_cli("test", "-t", "cortex-m7", "-k", program, "--grid", "exhaustive", *scope, "--coverage", str(named))
        assert {a for line in only if f"<- {program} " in line for a in [ARC.match(line).groups()]} \
            <= _taken(named / "cortex-m7" / "lcov.info")


def _taken(lcov: Path) -> set[tuple[str, str, str]]:
    """(path under its tree, line, arc) of every branch arc an lcov file counts as taken (its
    SF paths are absolute: the tree's folder name stands in for its root)."""
    taken, source = set(), ""
    for line in lcov.read_text().splitlines():
        if line.startswith("SF:"):
            source = re.sub(r"^.*/(backends/cortex_m/|Source/|Include/)", lambda m: (
                "executorch/" if m.group(1) == "backends/cortex_m/" else "cmsis-nn/") + m.group(1), line[3:])
        elif line.startswith("BRDA:"):
            number, _, arc, count = line[5:].split(",")
            if count not in ("-", "0"):
                taken.add((source, number, arc))
    return taken


def _counted(case: str, out: Path):
    """A case run on the M7 and the M55 with value counters: the run, its JSON report, and the
    data targets the solver met, by name (the same inputs go to every core)."""
    report = out.parent / f"{case}.json"
    done = run_cli("test", "-t", "cortex-m7", "-t", "cortex-m55", "-k", case, "--grid", "none",
                   "--coverage", str(out), "--value-counters", "--json", str(report))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    meta = json.loads(report.read_text())
    result = next(r for r in meta["results"] if r["core"] == "cortex-m7")
    return done, meta, {name: int(met.split("/")[0]) for name, met in result["data_targets"]["inputs"][0]["by"].items()}


@pytest.mark.slow
def test_value_counters_see_the_half_steps_the_solver_placed_and_every_output_requantized(runners, tmp_path):
    """Judged by the case's data targets (Python's solver says which outputs it put exactly on a
    half step) and its shape: on each core, the linear call's requantize met at least those
    half steps in every boot, and on the M7 (one scalar requantize per output) it ran once per
    output per boot."""
    out = tmp_path / "coverage"
    done, meta, placed = _counted("linear_midpoints", out)
    positive, negative = placed["+0.5"] + placed["positive midpoint"], placed["-0.5"] + placed["negative midpoint"]
    assert positive > 0 and negative > 0
    outputs = 32 * 7  # batch 32, 13 -> 7 features
    for core in ("cortex-m7", "cortex-m55"):
        boots = meta["meta"]["boots"][core]  # the run and the memory oracle's
        sites = [s for s in meta["meta"]["value_counters"][core] if s["kind"] == "requantize"]
        assert sites and "value counters:" in done.stdout
        values, _, half_up, half_down = (sum(s["counts"][k] for s in sites) for k in range(4))
        assert half_up >= positive * boots and half_down >= negative * boots, (core, sites)
        assert values == outputs * boots if core == "cortex-m7" else values >= outputs * boots
        assert (out / core / "value-counters.txt").read_text().count(" requantize: ") == len(sites)
    # The MVE clamps ran, each counted per lane; the M7 has none (its clamps are scalar MAX and MIN).
    kinds = {core: {s["kind"] for s in meta["meta"]["value_counters"][core]} for core in ("cortex-m7", "cortex-m55")}
    assert {"lower clamp", "upper clamp"} <= kinds["cortex-m55"]
    assert {"MAX", "MIN"} <= kinds["cortex-m7"] and not {"lower clamp", "upper clamp"} & kinds["cortex-m7"]


@pytest.mark.slow
def test_value_counters_see_each_clamp_the_solver_drove_beyond_a_bound(runners, tmp_path):
    """Judged by the case's data targets (the solver says which outputs it put beyond
    activation_min and beyond activation_max) and its shape: the linear kernel's clamps (scalar
    MAX and MIN; on the M55 also the MVE ones, per lane) raised and lowered at least those
    outputs in every boot, and on the M7 its MAX ran once per output per boot."""
    _, meta, placed = _counted("linear_bounds", tmp_path / "coverage")
    assert placed["beyond min"] > 0 and placed["beyond max"] > 0
    outputs = 24 * 5  # batch 24, 17 -> 5 features
    kernel = "cmsis-nn/Source/NNSupportFunctions/arm_nn_vec_mat_mult_t_s8.c"
    for core in ("cortex-m7", "cortex-m55"):
        boots = meta["meta"]["boots"][core]
        sites = [s for s in meta["meta"]["value_counters"][core] if s["path"] == kernel]
        raised, lowered = (sum(sum(s["counts"][1:]) for s in sites if s["kind"] in kinds)
                           for kinds in (("MAX", "lower clamp"), ("MIN", "upper clamp")))
        assert raised >= placed["beyond min"] * boots and lowered >= placed["beyond max"] * boots, (core, sites)
        if core == "cortex-m7":
            assert sum(s["counts"][0] for s in sites if s["kind"] == "MAX") == outputs * boots, sites


def test_value_counters_see_each_mve_depthwise_clamp_change_a_value_in_every_lane(runners, tmp_path):
    """The M55's depthwise kernel clamps four consecutive pixels at four call sites, four channels
    per vector: judged by the runner's own counters and the case's data targets,
    depthwise_conv2d_bounds makes each of the eight clamps change a value in each lane (with each
    target tied to one pixel position, the upper clamps of the second and the fourth pixel
    changed none), and at least the outputs the solver placed beyond each bound."""
    _, meta, placed = _counted("depthwise_conv2d_bounds", tmp_path / "coverage")
    sites = [s for s in meta["meta"]["value_counters"]["cortex-m55"]
             if s["path"].endswith("/arm_nn_depthwise_conv_nt_t_s8.c") and s["kind"] in ("lower clamp", "upper clamp")]
    assert len(sites) == 8 and all(all(s["counts"][1:]) for s in sites), sites
    boots = meta["meta"]["boots"]["cortex-m55"]
    for kind, target in (("lower clamp", "beyond min"), ("upper clamp", "beyond max")):
        assert sum(sum(s["counts"][1:]) for s in sites if s["kind"] == kind) >= placed[target] * boots, (kind, sites)
