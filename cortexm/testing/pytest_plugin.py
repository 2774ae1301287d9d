"""pytest plugin: put your own models under the same checks as `cortexm test`.

    def make():
        return MyNet().eval(), (torch.rand(1, 3, 32, 32).to(memory_format=torch.channels_last),)

    def test_mynet_on_m7(cortexm_check):
        result = cortexm_check(make, target="cortex-m7")
        assert result.run.instructions < 5_000_000

The result holds a record per stage (`result.run`, `result.compare`...); the report's flat
names read through them too (`result.instructions`, `result.max_lsb`), as tests written before
the records did.

The fixture exports the model for the core, verifies it (scratch and layout
audit), runs it on the simulator and compares with the Python reference; a
problem fails the test with the same one-line reason the test app prints. With
no runner available (no ExecuTorch/CMSIS-NN trees) nothing runs on the core and
the test is skipped with the reason (a result never simulated is not a pass);
`sim="none"` checks the export alone on purpose and returns its NOT RUN result.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cortexm.report.results import Status
from cortexm.sources import backend_source

# A session started by `cortexm upstream-tests` lowers with the Python the command chose: in
# place before anything (upstream's conftest included) imports the cortex_m backend.
if os.environ.get(backend_source.ENV) is not None:
    backend_source.activate_from_environment()


@pytest.fixture
def cortexm_check(tmp_path: Path):
    from cortexm.base.targets import core as core_named
    from cortexm.cases import Case
    from cortexm.lowering import export, modelsource, writer
    from cortexm.testing import app, simulate

    def check(factory, target: str = "cortex-m7", qtol: int = 0, sim: str = "qemu", name: str | None = None):
        core = core_named(target)
        bundle = modelsource.from_factory(factory, name=name, qtol=qtol)
        pte = tmp_path / core.name / f"{bundle.name}.pte"
        writer.write(export.export(bundle, core), pte)
        simulator = simulate.simulators([core], sim, None, None, progress=lambda _: None)[core.name]
        case = Case(bundle.name, "pytest model", factory, qtol=qtol, program=pte)
        options = app.Options(cores=[core], simulators={core.name: simulator})
        result = app.check(case, core, pte, options)
        if result.failed:
            pytest.fail(f"{result.status} {result.case} {result.core}: {result.reason}\n{result.details}", pytrace=False)
        if result.status == Status.NOT_RUN and sim != "none":
            # Checked but never run on the core: not a pass (sim="none" asks for no run).
            pytest.skip(f"{result.case} on {result.core}: {result.reason}")
        return result

    return check


# --- running ExecuTorch's own cortex_m tests on this project's runners -----------------------

def pytest_addoption(parser):
    group = parser.getgroup("cortexm")
    group.addoption("--cortexm-core", metavar="CORE",
                    help="Run the Arm test harness's FVP runs (ExecuTorch's backends/cortex_m tests) on cortexm's "
                         "runner for CORE, on QEMU (cortexm.testing.upstream).")
    group.addoption("--cortexm-sim", default="qemu", choices=("qemu", "fvp"),
                    help="The simulator for --cortexm-core (default qemu).")


def pytest_configure(config):
    core = config.getoption("--cortexm-core", None)
    if not core:
        return
    from cortexm.testing import upstream

    if os.environ.get(backend_source.ENV) is None:
        backend_source.activate(None)  # run by hand: upstream's conftest has imported the wheel's backend
    config._cortexm_routing = upstream.route(core, config.getoption("--cortexm-sim"))
    config._cortexm_xfails = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    xfails = getattr(item.config, "_cortexm_xfails", None)
    marker = item.get_closest_marker("xfail")
    if xfails is None or marker is None or call.when != "call":
        return
    report = outcome.get_result()
    actual = ""
    if call.excinfo is not None:
        actual = (str(call.excinfo.value).strip().splitlines() or [call.excinfo.typename])[0][:300]
    xfails.append({"test": item.nodeid, "reason": str(marker.kwargs.get("reason", marker.args[0] if marker.args else "")),
                   "outcome": "xpassed" if report.passed or "XPASS(strict)" in str(report.longrepr)
                   else "xfailed" if hasattr(report, "wasxfail") else report.outcome,
                   "actual": actual})


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """In a routed session, a test module that needs a package upstream lists only as
    optional is a skip saying how to install it, not a collection error."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed or getattr(collector.config, "_cortexm_routing", None) is None:
        return
    from cortexm.testing.upstream import OPTIONAL_MODULES

    text = str(report.longrepr)
    for module, hint in OPTIONAL_MODULES.items():
        if f"No module named '{module}'" in text:
            report.outcome = "skipped"
            report.longrepr = (str(collector.path), 0, f"Skipped: {module} is not installed ({hint})")
            return


# A routed session's [tests done, tests collected], for `cortexm upstream-tests`' progress.
_COUNTS: list[int] = []


def pytest_collection_finish(session):
    if getattr(session.config, "_cortexm_routing", None) is not None:
        from cortexm.testing import upstream

        _COUNTS[:] = [0, len(session.items)]
        upstream.count_progress(*_COUNTS)


def pytest_runtest_logfinish(nodeid, location):
    """A test finished, whatever its outcome: one more done."""
    if _COUNTS:
        from cortexm.testing import upstream

        _COUNTS[0] += 1
        upstream.count_progress(*_COUNTS)


def pytest_unconfigure(config):
    routing = getattr(config, "_cortexm_routing", None)
    if routing is not None:
        from cortexm.testing import upstream

        upstream.write_stats(routing, config._cortexm_xfails)
