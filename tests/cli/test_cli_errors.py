"""Every command on bad input: one clear `error:` line, a non-zero exit, no traceback, no damage."""

from __future__ import annotations

import pytest

from conftest import assert_one_line_error, run_cli


@pytest.fixture(scope="module")
def damaged(tmp_path_factory, exported):
    """A folder of bad .pte files made from a real one."""
    good = exported("conv2d", "cortex-m7").read_bytes()
    root = tmp_path_factory.mktemp("damaged")
    (root / "text.pte").write_text("this is not a program\n")
    (root / "empty.pte").write_bytes(b"")
    (root / "truncated.pte").write_bytes(good[: len(good) // 2])
    flipped = bytearray(good)
    flipped[4] ^= 0x10  # inside the file identifier
    (root / "flipped.pte").write_bytes(bytes(flipped))
    return root


@pytest.mark.parametrize("command", [["inspect"], ["verify"], ["verify", "--target", "cortex-m7"]])
@pytest.mark.parametrize("name, fragment", [
    ("missing.pte", "no such file"),
    ("text.pte", "not an ExecuTorch program"),
    ("empty.pte", "not an ExecuTorch program"),
    ("truncated.pte", "truncated"),
    ("flipped.pte", "not an ExecuTorch program"),
])
def test_bad_pte(damaged, command, name, fragment):
    assert_one_line_error(run_cli(*command, str(damaged / name)), name, fragment)


def test_unknown_target(exported):
    assert_one_line_error(run_cli("verify", str(exported("conv2d", "cortex-m7")), "--target", "cortex-m99"),
                           "unknown target 'cortex-m99'")
    assert_one_line_error(run_cli("export", "conv2d", "--target", "arm7"), "unknown target 'arm7'")


def test_unknown_case_and_missing_arguments(tmp_path):
    assert_one_line_error(run_cli("export", "no_such_case", "--target", "cortex-m7"), "no built-in case 'no_such_case'")
    assert_one_line_error(run_cli("export", "conv2d"), "missing --target")
    assert_one_line_error(run_cli("verify"), "PTES")
    assert_one_line_error(run_cli("frobnicate"), "No such command")


def test_an_option_without_the_one_it_qualifies():
    assert_one_line_error(run_cli("test", "--value-counters", "-k", "conv2d"), "--value-counters applies to --coverage")
    assert_one_line_error(run_cli("test", "--scope", "spatial=2", "-k", "conv2d"), "--scope applies to --grid exhaustive")


def test_model_file_that_raises(tmp_path):
    model = tmp_path / "bad_model.py"
    model.write_text("import torch\n\ndef make():\n    raise ValueError('weights file not found')\n")
    assert_one_line_error(run_cli("export", f"{model}:make", "--target", "cortex-m7", "-o", str(tmp_path / "x.pte")),
                           "make() raised ValueError: weights file not found", "(line 4)")
    broken = tmp_path / "syntax.py"
    broken.write_text("def make(:\n")
    assert_one_line_error(run_cli("export", f"{broken}:make", "--target", "cortex-m7"), "SyntaxError")
    assert_one_line_error(run_cli("export", f"{model}:nothing", "--target", "cortex-m7"), "no function 'nothing'")
    assert_one_line_error(run_cli("export", f"{tmp_path / 'absent.py'}:make", "--target", "cortex-m7"), "no such model file")


def test_case_file_that_is_not_python(tmp_path):
    cases = tmp_path / "cases.txt"
    cases.write_text("x = 1\n")
    assert_one_line_error(run_cli("test", "--cases", str(cases)), "cases.txt: not a Python file")
    assert_one_line_error(run_cli("test", "--cases", str(tmp_path / "absent.py")), "no such case file")


def test_export_never_overwrites_foreign_files(tmp_path):
    precious = tmp_path / "model.json"
    precious.write_text('{"my": "settings"}')
    assert_one_line_error(run_cli("export", "relu", "--target", "cortex-m7", "-o", str(tmp_path / "model.pte")),
                           "was not written by cortexm")
    assert precious.read_text() == '{"my": "settings"}'
    source = tmp_path / "model.py"
    source.write_text("print('mine')\n")
    assert_one_line_error(run_cli("export", "relu", "--target", "cortex-m7", "-o", str(source)), "must be a .pte")
    assert source.read_text() == "print('mine')\n"


def test_bad_library(exported, tmp_path):
    pte = str(exported("conv2d", "cortex-m7"))
    assert_one_line_error(run_cli("verify", pte, "--library", str(tmp_path / "nowhere")), "no such library")
    assert_one_line_error(run_cli("verify", pte, "--library", str(tmp_path)), "neither an ExecuTorch tree")


def test_dialect_golden_mismatch_shows_a_diff(tmp_path):
    golden = tmp_path / "cortex-m7" / "relu.txt"
    golden.parent.mkdir()
    golden.write_text("# cortexm dialect 1\n# an older lowering\n")
    result = run_cli("dialect", "relu", "--target", "cortex-m7", "--goldens", str(tmp_path))
    assert result.returncode == 1
    assert result.stdout.startswith(f"FAIL relu cortex-m7: lowered graph differs from {golden}")
    assert "\n-# an older lowering\n" in result.stdout and "\n+%0 = cortex_m.quantize_per_tensor" in result.stdout
