"""`cortexm test --coverage`: which lines of the cortex_m kernels and CMSIS-NN a run reached,
read from the runner's own gcov counters, as lcov, Cobertura XML and the JSON report."""

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

    lcov = (out / "cortex-m7" / "lcov.info").read_text()
    assert lcov.count("end_of_record") == len(files) and "SF:" in lcov
    cobertura = ET.parse(out / "cortex-m7" / "cobertura.xml").getroot()
    assert int(cobertura.get("lines-valid")) == sum(f["lines"] for f in files.values())
    assert int(cobertura.get("lines-covered")) == sum(f["lines_executed"] for f in files.values())
    assert "lines executed per file" in result.stdout
