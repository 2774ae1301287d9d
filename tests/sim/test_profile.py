"""`cortexm profile` (and `run --profile`, `test --profile`): a program call by call on real QEMU.

The calls' instructions sum to the execute() count the same run reports, each call within one
instruction of the runner's own per-call count; the MACs match those counted from the torch
model's own layers; no call beats its core's MAC limit; every module a call names is one of
the model's."""

from __future__ import annotations

import json

import pytest
import torch

from tests.conftest import run_cli

CASE = "keyword_spotting"  # convolution, depthwise, pooling and linear calls, each in a module
CORES = ("cortex-m7", "cortex-m55")


def _model_macs() -> tuple[int, set[str]]:
    """MACs of every Conv2d and Linear of the case's float model, from their own output shapes,
    and the names of its modules."""
    from cortexm.cases.registry import REGISTRY

    model, inputs = REGISTRY[CASE].build()[:2]
    macs = []

    def count(layer, _inputs, out):
        per_output = layer.weight[0].numel()  # Cin/groups * kh * kw, or in_features
        macs.append(out.numel() * per_output)

    for layer in model.modules():
        if isinstance(layer, (torch.nn.Conv2d, torch.nn.Linear)):
            layer.register_forward_hook(count)
    with torch.no_grad():
        model(*inputs)
    return sum(macs), {name for name, _ in model.named_modules()}


@pytest.mark.parametrize("core", CORES)
def test_profile_sums_to_the_runs_count_and_matches_the_model(core, runners, exported):
    from cortexm.base.targets import core as core_named
    from cortexm.pte.bundle import Bundle
    from cortexm.report.profile import profile
    from cortexm.sim.run import run_pte

    pte = exported(CASE, core)
    bundle = Bundle.open(pte)
    result = run_pte(bundle, core, runner=runners[core])
    found = profile(bundle, core_named(core), result.sim_result, result.runner.board, "qemu")
    counts = {c.instruction: c.count for c in found.calls}
    # The same run: its execute() count, and the runner's own count of each call.
    assert found.total == result.instructions
    assert sum(counts.values()) == result.instructions
    assert set(counts) == set(result.sim_result.calls)
    assert all(abs(counts[n] - measured) <= 1 for n, measured in result.sim_result.calls.items())
    model_macs, modules = _model_macs()
    assert sum(c.macs or 0 for c in found.calls) == model_macs
    limit = found.mac_limit
    assert limit == (1 / 16 if core == "cortex-m55" else 1 / 2)
    for c in found.calls:
        if c.macs:  # no kernel does better than the core's best MAC instruction
            assert c.count >= c.macs * limit and 0 < c.of_limit <= 1
        assert c.module == "" or c.module in modules
    assert {c.module.split(".")[0] for c in found.calls if c.module} == {"features", "pool", "classifier"}
    by_module = found.modules()
    assert sum(m.count for m in by_module) == found.total and sum(m.calls for m in by_module) == len(found.calls)
    convolutions = [c for c in found.calls if "conv2d" in c.op]
    assert all(c.constants > 0 and c.read > 0 and c.written > 0 for c in convolutions)


def test_profile_command_text_and_json(runners, exported):
    pte = exported(CASE, "cortex-m7")
    text = run_cli("profile", str(pte), "-t", "cortex-m7")
    assert text.returncode == 0, text.stderr
    assert "not cycles" in text.stdout and "no time is estimated" in text.stdout
    assert "most expensive 1: call" in text.stdout and "of the limit" in text.stdout
    assert "█" in text.stdout  # the bars
    both = run_cli("run", str(pte), "-t", "cortex-m7", "--profile", "--json")
    assert both.returncode == 0, both.stderr
    record = json.loads(both.stdout)
    called = record["profile"]
    assert called["total"] == record["instructions"] == sum(c["count"] for c in called["calls"])
    assert called["unit"] == "instructions" and "not cycles" in called["counted"]
    alone = json.loads(run_cli("profile", str(pte), "-t", "cortex-m7", "--json", "--depth", "2").stdout)
    assert [c["count"] for c in alone["calls"]] == [c["count"] for c in called["calls"]]  # QEMU counts exactly
    assert {m["module"] for m in alone["modules"]} >= {"features.0", "classifier"}


def test_test_profile_puts_the_profile_in_the_report(runners, tmp_path):
    report = tmp_path / "r.json"
    done = run_cli("test", "-t", "cortex-m55", "-k", "mlp_autoencoder", "--grid", "none", "--profile",
                   "--json", str(report))
    assert "not cycles" in done.stdout, done.stdout + done.stderr
    [result] = [r for r in json.loads(report.read_text())["results"] if r["case"] == "mlp_autoencoder"]
    assert result["profile"]["total"] == result["instructions"] == sum(c["count"] for c in result["profile"]["calls"])
