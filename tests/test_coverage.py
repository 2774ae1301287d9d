"""`cortexm test --coverage`: which lines and branches of the cortex_m kernels and CMSIS-NN a
run reached, read from the runner's own gcov counters, as lcov, Cobertura XML and the JSON
report, and the branches never taken."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET


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
