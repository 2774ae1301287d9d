"""`cortexm test`: report formats, cache, and deliberately broken inputs failing with one-line reasons."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from junitparser import JUnitXml

pytest_plugins = ["pytester"]


def cortexm_test(*args: str, cache: Path, cwd: Path | None = None, sim: str = "none",
                 env: dict | None = None) -> subprocess.CompletedProcess:
    env = dict(env if env is not None else os.environ, CORTEXM_EXPORT_CACHE=str(cache))
    return subprocess.run([sys.executable, "-m", "cortexm", "test", "--sim", sim, *args],
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=900)


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("export-cache")


def test_reports_and_cache(cache, tmp_path):
    junit, report = tmp_path / "junit.xml", tmp_path / "report.json"
    first = cortexm_test("-k", "pool", "--junit", str(junit), "--json", str(report), cache=cache)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "exporting" in first.stderr
    results = json.loads(report.read_text())["results"]
    names = {r["case"] for r in results}
    assert {"avg_pool2d", "max_pool2d", "avg_pool2d_ceil_mode"} <= names
    assert {r["core"] for r in results} == {"cortex-m7", "cortex-m55"}
    # --sim none: checked, never simulated, so never a pass; asked for, so not a failure either.
    assert all(r["status"] == "NOT RUN" and r["verify"] == "ok" and r["dialect"] == "ok" for r in results)

    xml = JUnitXml.fromfile(str(junit))
    suites = {s.name: s for s in xml}
    assert set(suites) == {"cortex-m7", "cortex-m55"}
    assert sum(s.tests for s in suites.values()) == len(results)
    assert all(s.failures == 0 and s.errors == 0 and s.skipped == s.tests for s in suites.values())

    for core in ("cortex-m7", "cortex-m55"):
        # dialect, verify, lowered whole, semantic (with its largest departure in LSB), accuracy, not simulated
        row = next(r for r in results if r["case"] == "avg_pool2d" and r["core"] == core)
        assert (row["dialect"], row["verify"], row["lowering"], row["semantic"], row["sim"]) == \
            ("ok", "ok", "ok", "ok", "not run")
        assert row["semantic_lsb"] is not None and row["accuracy_db"] > 20 and row["instructions"] is None

    again = cortexm_test("-k", "pool", cache=cache)
    assert again.returncode == 0 and "exporting" not in again.stderr  # everything came from the cache


def test_unsimulated_cases_are_not_passes(cache, tmp_path):
    """Simulation asked for but impossible (no source trees, --offline): every result is NOT
    RUN in the table, the JSON and the JUnit report (skipped, with the reason), the summary
    counts them apart, and the exit status is 1."""
    junit, report = tmp_path / "junit.xml", tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if k not in ("CORTEXM_EXECUTORCH_SRC", "CORTEXM_CMSIS_NN_SRC")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "empty-user-cache")  # no trees in the default location
    result = cortexm_test("-k", "relu", "-t", "cortex-m7", "--offline", "--junit", str(junit), "--json", str(report),
                          cache=cache, sim="qemu", env=env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "warning: no executorch source tree" in result.stderr and "(--offline: not downloading it)" in result.stderr
    results = json.loads(report.read_text())["results"]
    relu = next(r for r in results if r["case"] == "relu")
    assert relu["verify"] == "ok" and relu["semantic"] == "ok" and relu["sim"] == "not run" and relu["status"] == "NOT RUN"
    # The summary counts them apart: none passed, none failed.
    assert re.search(rf"; 0 passed, 0 failed, 0 expected failures, {len(results)} not simulated$", result.stdout, re.M)
    assert results and all(r["status"] == "NOT RUN" and r["reason"].startswith("not simulated: no executorch source tree")
                           for r in results)
    [suite] = JUnitXml.fromfile(str(junit))
    assert suite.skipped == suite.tests == len(results) and suite.failures == 0
    assert all(case.result and case.result[0].message.startswith("not simulated: ") for case in suite)


def test_suite_on_qemu_with_report(runners, tmp_path):
    """The test app on the simulators: instruction counts, LSB differences, cross-core, JUnit."""
    junit, report = tmp_path / "junit.xml", tmp_path / "report.json"
    # The session's export cache (conftest) and build cache (the runners fixture) are inherited.
    result = subprocess.run([sys.executable, "-m", "cortexm", "test", "-k", "pool", "--junit", str(junit),
                             "--json", str(report)], capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(report.read_text())
    for core in ("cortex-m7", "cortex-m55"):
        # dialect, verify, lowered whole, no dead constants, semantic (its largest departure: avg
        # pool may round 1 LSB otherwise than the model), accuracy, sim, memory oracle all ok; 0 LSB
        # from the integer reference
        row = next(r for r in data["results"] if r["case"] == "avg_pool2d" and r["core"] == core)
        assert (row["dialect"], row["verify"], row["lowering"], row["semantic"], row["sim"], row["memory"],
                row["status"]) == ("ok", "ok", "ok", "ok", "ok", "ok", "PASS"), row
        assert not row["dead_bytes"] and row["semantic_lsb"] <= 1 and row["accuracy_db"] > 20
        assert row["max_lsb"] == 0 and row["instructions"] > 1000
    cross = next(c for c in data["cross_core"] if c["case"] == "avg_pool2d")
    assert cross["agree"] and sorted(cross["cores"]) == ["cortex-m55", "cortex-m7"]
    suites = {s.name: s for s in JUnitXml.fromfile(str(junit))}
    assert set(suites) == {"cortex-m7", "cortex-m55", "cross-core"}
    assert all(s.failures == 0 and s.errors == 0 for s in suites.values())


def test_the_runners_build_while_the_cases_export(cache, monkeypatch):
    """`cortexm test` starts its runner builds before the exports and waits for them only to run
    the programs: the build below can end only once the exports are written, and the run reports
    what it gave; a build that raised (a full cache) raises in the run, after the exports."""
    import threading

    from cortexm.base.errors import StorageError
    from cortexm.base.targets import core
    from cortexm.testing import app
    from cortexm.testing.simulate import InBackground

    monkeypatch.setenv("CORTEXM_EXPORT_CACHE", str(cache))
    exported = threading.Event()
    real_export_all = app.export_all

    def export_all(*args, **kwargs):
        found = real_export_all(*args, **kwargs)
        exported.set()
        return found

    def build():
        if not exported.wait(600):
            raise AssertionError("the run waited for the build before exporting")
        return {"cortex-m7": "a reason of the build's"}

    monkeypatch.setattr(app, "export_all", export_all)
    options = app.Options(cores=[core("cortex-m7")], pattern="relu", building=InBackground(build))
    results = app.run(options)
    assert options.simulators == {"cortex-m7": "a reason of the build's"} and options.building is None
    assert results and all(r.status == "NOT RUN" and r.reason == "not simulated: a reason of the build's"
                           for r in results), [(r.case, r.status, r.reason) for r in results]

    def full():
        raise StorageError("builds: No space left on device")

    exported.clear()
    with pytest.raises(StorageError, match="No space left on device"):
        app.run(app.Options(cores=[core("cortex-m7")], pattern="relu", building=InBackground(full)))
    assert exported.is_set()  # raised where the run waits for the runners: after the exports


def test_program_lowered_for_the_other_core_fails(cache, exported, tmp_path):
    m55 = exported("avg_pool2d", "cortex-m55")
    junit = tmp_path / "junit.xml"
    result = cortexm_test("--target", "cortex-m7", "--pte", str(m55), "--junit", str(junit), cache=cache)
    assert result.returncode == 1
    line = re.search(r"^FAIL avg_pool2d cortex-m7: (.*)$", result.stdout, re.M).group(1)
    assert re.fullmatch(r"FAIL avg_pool2d cortex_m::quantized_avg_pool2d\.out#\d+: scratch 0 B planned, cortex-m7 \(DSP\) needs "
                        r"\d+ B", line)
    case = next(iter(next(iter(JUnitXml.fromfile(str(junit))))))
    assert case.result[0].message == line


def test_library_with_a_changed_schema_fails(cache, tmp_path):
    from cortexm.checking import library

    yaml = tmp_path / "operators.yaml"
    original = (Path(library._installed_package()) / "backends/cortex_m/ops/operators.yaml").read_text()
    yaml.write_text(original.replace("Tensor input, Tensor lut, *", "Tensor input, Tensor lut, int lut_offset, *"))
    result = cortexm_test("-k", "sigmoid", "--target", "cortex-m7", "--library", str(yaml), cache=cache)
    assert result.returncode == 1
    assert re.search(r"^FAIL sigmoid cortex-m7: FAIL sigmoid cortex_m::quantized_activation\.out: model supplies 4, library "
                     r"expects 5$",
                     result.stdout, re.M), result.stdout


def test_known_failures_and_user_case_files(cache, tmp_path):
    cases = tmp_path / "my_cases.py"
    cases.write_text(
        "import torch\n"
        "from cortexm.cases import register\n\n"
        "@register('my_linear', 'a user case')\n"
        "def _():\n"
        "    return torch.nn.Linear(8, 4).eval(), (torch.rand(1, 8),)\n\n"
        "@register('my_claimed_broken', 'a case wrongly marked as broken', known_failures={'*': 'pretend defect'})\n"
        "def _():\n"
        "    return torch.nn.Linear(4, 4).eval(), (torch.rand(1, 4),)\n"
    )
    report = tmp_path / "report.json"
    result = cortexm_test("--cases", str(cases), "--target", "cortex-m7", "--json", str(report), cache=cache)
    assert result.returncode == 1  # the XPASS fails the run: the "defect" is not there
    mine = next(r for r in json.loads(report.read_text())["results"] if r["case"] == "my_linear")
    # no golden (a user's case), verified, lowered whole, the model meant, not simulated
    assert (mine["dialect"], mine["verify"], mine["lowering"], mine["semantic"], mine["status"]) == \
        ("-", "ok", "ok", "ok", "NOT RUN"), mine
    assert "XPASS my_claimed_broken cortex-m7: expected to fail (pretend defect) but passed" in result.stdout

    for _ in range(2):  # the second run takes the cached failure
        xfail = cortexm_test("-k", "matmul_constant", "--target", "cortex-m55", "--json", str(report), cache=cache)
        assert xfail.returncode == 0
        [row] = [r for r in json.loads(report.read_text())["results"] if r["case"] == "matmul_constant"]
        assert row["status"] == "XFAIL", row
    assert "exporting" not in xfail.stderr  # the failed export is cached too


def test_a_rerun_says_which_programs_an_edit_reached(cache, tmp_path):
    # The case file stands in for any edit a re-export follows (a pass, the quantizer): it is
    # the key of both its cases, and the edit changes one case's weights only.
    cases = tmp_path / "edited_cases.py"
    text = ("import torch\n"
            "from cortexm.cases import register\n\n"
            "@register('edited_same', 'a case the edit leaves as it was')\n"
            "def _():\n"
            "    torch.manual_seed(0)\n"
            "    return torch.nn.Linear(8, 4).eval(), (torch.rand(1, 8),)\n\n"
            "@register('edited_other', 'a case the edit reaches')\n"
            "def _():\n"
            "    torch.manual_seed(1)\n"
            "    return torch.nn.Linear(8, 4).eval(), (torch.rand(1, 8),)\n")
    cases.write_text(text)
    first = cortexm_test("--cases", str(cases), "-k", "edited", "-t", "cortex-m7", cache=cache)
    assert "since an edit" not in first.stdout, first.stdout
    cases.write_text(text.replace("manual_seed(1)", "manual_seed(2)"))
    again = cortexm_test("--cases", str(cases), "-k", "edited", "-t", "cortex-m7", "--json", str(tmp_path / "r.json"),
                         cache=cache)
    assert ("cortex-m7: of 2 programs exported again since an edit, 1 changed (edited_other) and 1 unchanged by "
            "the edit") in again.stdout, again.stdout + again.stderr
    rows = json.loads((tmp_path / "r.json").read_text())["results"]
    assert {r["case"]: r["edit"] for r in rows} == {"edited_same": "unchanged", "edited_other": "changed"}


def test_pytest_fixture(pytester):
    pytester.makepyfile(
        """
        import torch

        def make():
            return torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU()).eval(), (torch.rand(2, 16),)

        def test_mine(cortexm_check):
            result = cortexm_check(make, target="cortex-m55", sim="none")
            assert result.verify.verdict == "ok"
        """
    )
    outcome = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    outcome.assert_outcomes(passed=1)


def test_export_cache_keys_on_the_code_an_export_runs():
    # Read from the import graph, so a module the export starts to use is covered without a
    # list to keep: the integer reference and the isolated memory plan shape what is cached.
    from cortexm.testing.cache import code_files

    package = Path(__import__("cortexm").__file__).resolve().parent
    files = {str(f.relative_to(package)) for f in code_files()}
    for shaping in ("lowering/export.py", "oracle/reference.py", "oracle/conv.py", "oracle/softmax.py",
                    "checking/memory_plan.py", "cases/grid.py", "cases/data.py", "pte/program.py", "testing/exports.py"):
        assert shaping in files
    # Not the checks, the report writers or any build code (the runner's, CMSIS-NN's module's: the
    # module itself is in the key, cortexm.sources.backend_source.fingerprint): editing them
    # re-exports nothing.
    assert not any(f.startswith(("cli/", "sim/", "report/", "firmware/")) for f in files)
    assert not {"testing/app.py", "report/summary.py", "report/writers.py", "firmware/build.py"} & files
