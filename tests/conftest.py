"""Shared fixtures: exports made once per test session, through cortexm's own export."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
GOLDENS = REPO / "tests" / "goldens"


@pytest.fixture(scope="session")
def exported(tmp_path_factory):
    """exported(case, core, layout="legacy") -> path of the .pte bundle, exported once per session."""
    from cortexm import export, modelsource, targets

    root = tmp_path_factory.mktemp("exports")
    done: dict[tuple[str, str, str], Path] = {}

    def get(case: str, core: str, layout: str = "legacy") -> Path:
        key = (case, core, layout)
        if key not in done:
            result = export.export(modelsource.load(case), targets.core(core), layout)
            path = root / layout / core / f"{case}.pte"
            export.write(result, path)
            done[key] = path
        return done[key]

    return get


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The real `cortexm` command, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "cortexm", *args], capture_output=True, text=True, cwd=cwd, timeout=600)
