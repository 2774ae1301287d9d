"""pytest plugin: put your own models under the same checks as `cortexm test`.

    def make():
        return MyNet().eval(), (torch.rand(1, 3, 32, 32).to(memory_format=torch.channels_last),)

    def test_mynet_on_m7(cortexm_check):
        result = cortexm_check(make, target="cortex-m7")
        assert result.instructions < 5_000_000

The fixture exports the model for the core, verifies it (scratch and layout
audit), runs it on the simulator and compares with the Python reference; a
problem fails the test with the same one-line reason the test app prints. With
no runner available (no ExecuTorch/CMSIS-NN trees) nothing runs on the core and
the test is skipped with the reason (a result never simulated is not a pass);
`sim="none"` checks the export alone on purpose and returns its NOT RUN result.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def cortexm_check(tmp_path: Path):
    from cortexm import export, modelsource
    from cortexm.cases import Case
    from cortexm.targets import core as core_named
    from cortexm.testing import app, simulate

    def check(factory, target: str = "cortex-m7", qtol: int = 0, sim: str = "qemu", name: str | None = None):
        core = core_named(target)
        bundle = modelsource.from_factory(factory, name=name, qtol=qtol)
        pte = tmp_path / core.name / f"{bundle.name}.pte"
        export.write(export.export(bundle, core), pte)
        simulator = simulate.simulators([core], sim, None, None, progress=lambda _: None)[core.name]
        case = Case(bundle.name, "pytest model", factory, qtol=qtol, program=pte)
        options = app.Options(cores=[core], simulators={core.name: simulator})
        result = app.check(case, core, pte, options)
        if result.failed:
            pytest.fail(f"{result.status} {result.case} {result.core}: {result.reason}\n{result.details}", pytrace=False)
        if result.status == "NOT RUN" and sim != "none":
            # Checked but never run on the core: not a pass (sim="none" asks for no run).
            pytest.skip(f"{result.case} on {result.core}: {result.reason}")
        return result

    return check
