"""Attacks: bad input gets one line and exit 2 (not 3, an internal error)."""

from __future__ import annotations

import shutil
from collections.abc import Callable

from attack_classes.lab import attack


@attack("bad input", "-o somefile/x.pte")
def o_somefile_x_pte(lab):
    (lab.root / "somefile").write_text("mine\n")
    r = lab.cli("export", "relu", "-t", "cortex-m7", "-o", str(lab.root / "somefile" / "x.pte"))
    slow = f"; answered after {r.seconds:.0f} s" if r.seconds > 20 else ""
    return "cortexm export relu -t cortex-m7 -o somefile/x.pte", ((r.one_error_line() or "") + slow) or None


@attack("bad input", "a 300-character output name")
def a_300_character_output_name(lab):
    r = lab.cli("export", "relu", "-t", "cortex-m7", "-o", str(lab.root / ("n" * 300 + ".pte")))
    return "cortexm export relu -t cortex-m7 -o nnn...(300).pte", r.one_error_line()


def _pins(lab, edit: Callable[[str], str], what: str) -> tuple[str, str | None]:
    from cortexm.sources import pins

    path = lab.root / f"pins-{abs(hash(what))}.toml"
    path.write_text(edit(pins.pins_path().read_text()))
    r = lab.cli("pins", env={pins.PINS_ENV: str(path)})
    return f"CORTEXM_PINS=<{what}> cortexm pins", r.one_error_line()


_PIN_EDITS = (
    ("pins.toml empty", lambda t: "", "empty file"),
    ("pins.toml without [cmsis-nn]", lambda t: t.replace("[cmsis-nn]", "[cmsis-nn-old]"), "no [cmsis-nn]"),
    ("pins.toml rev = 5", lambda t: t.replace('rev = "dbf45dbfcc515421dd6099037d3e2637b90748c8"', "rev = 5"),
     "cmsis-nn rev = 5"),
    ("pins.toml format = 2", lambda t: t.replace("format = 1", "format = 2"), "format = 2"),
    ("pins.toml wheel sha256 cut short", lambda t: t.replace('sha256 = "274c28c2', 'sha256 = "74c28c2', 1),
     "a 63-digit wheel sha256"),
)
for _name, _edit, _what in _PIN_EDITS:
    attack("bad input", _name)(lambda lab, edit=_edit, what=_what: _pins(lab, edit, what))


def _factory(lab, body: str, what: str) -> tuple[str, str | None]:
    model = lab.root / f"model_{abs(hash(body))}.py"
    model.write_text("import sys\nimport torch\n\nclass Dict(torch.nn.Module):\n    def forward(self, x):\n"
                     f"        return {{'y': x}}\n\ndef make():\n    {body}\n")
    out = lab.root / "factory-out" / "m.pte"
    r = lab.cli("export", f"{model}:make", "-t", "cortex-m7", "-o", str(out))
    problem = r.one_error_line() or ("it wrote files" if out.parent.exists() else None)
    shutil.rmtree(out.parent, ignore_errors=True)
    return f"cortexm export model.py:make ({what})", problem


_FACTORY_BODIES = (
    ("factory: zero-size example input", "return torch.nn.ReLU(), (torch.zeros(1, 0, 4),)", "zero-size input"),
    ("factory: calibration samples 5", "return torch.nn.ReLU(), (torch.zeros(1, 4),), 5", "calibration_samples = 5"),
    ("factory: the model returns a dict", "return Dict(), (torch.zeros(1, 4),)", "forward returns a dict"),
    ("factory: sys.exit(0)", "sys.exit(0)", "calls sys.exit(0)"),
)
for _name, _body, _what in _FACTORY_BODIES:
    attack("bad input", _name)(lambda lab, body=_body, what=_what: _factory(lab, body, what))
