"""Attacks: Everyday use."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from attack_classes.lab import attack


def _kws() -> Path | None:
    from cortexm import sources

    tree = sources.locate(sources.EXECUTORCH).path
    folder = tree / "examples" / "arduino" / "examples" / "KeywordSpotting" if tree else None
    return folder if folder and (folder / "model.pte").is_file() else None


@attack("everyday use", "run upstream's KWS example with its C header input and labels")
def run_upstream_s_kws_example_with_its_c_header_input_and_label(lab):
    kws = _kws()
    if kws is None:
        return "cortexm run KeywordSpotting/model.pte -i mfcc_yes.h", "no ExecuTorch tree with the Arduino example here"
    r = lab.cli("run", str(kws / "model.pte"), "-t", "cortex-m7", "-i", str(kws / "mfcc_yes.h"),
                "--labels", str(kws / "KeywordSpotting.ino"), timeout=900)
    return ("cortexm run model.pte -t cortex-m7 -i mfcc_yes.h --labels KeywordSpotting.ino",
            None if r.rc == 0 and "top 3: 2 yes" in r.out else f"exit {r.rc}: {(r.err or r.out).strip()[-120:]}")


@attack("everyday use", "run with a .npy input and --save")
def run_with_a_npy_input_and_save(lab):
    import numpy as np

    pte = lab.relu()
    sidecar = json.loads(pte.with_suffix(".json").read_text())
    entry = sidecar["inputs"][0]
    raw = np.fromfile(pte.parent / entry["file"], dtype=entry["dtype"])
    order = entry["dim_order"]
    values = raw.reshape([entry["shape"][d] for d in order]).transpose(np.argsort(order))
    np.save(lab.root / "x.npy", values)
    r = lab.cli("run", str(pte), "-t", "cortex-m7", "-i", str(lab.root / "x.npy"), "--save", str(lab.root / "y.npy"),
                timeout=900)
    return ("cortexm run relu.pte -t cortex-m7 -i x.npy --save y.npy",
            None if r.rc == 0 and (lab.root / "y.npy").is_file() else f"exit {r.rc}: {r.err.strip()[-120:]}")


@attack("everyday use", "verify without --target or sidecar audits the cores")
def verify_without_target_or_sidecar_audits_the_cores(lab):
    d = lab.folder("bare")
    shutil.copyfile(lab.exported("conv2d"), d / "conv.pte")  # no sidecar: the core it was lowered for is unknown
    r = lab.cli("verify", str(d / "conv.pte"))
    return ("cortexm verify conv.pte (lowered for the M7, no sidecar)",
            None if r.rc == 1 and "cortex-m55" in r.out else f"exit {r.rc}: {r.out.strip()[-160:]}")


@attack("everyday use", "run a program planned for another core: refused before the build")
def run_a_program_planned_for_another_core_refused_before_the_bu(lab):
    r = lab.cli("run", str(lab.exported("conv2d")), "-t", "cortex-m55", "--executorch-src", str(lab.backend_only_tree()))
    problem = r.one_error_line("scratch", "--no-audit")
    return "cortexm run conv-m7.pte -t cortex-m55", problem + f" ({r.seconds:.0f} s)" if problem else None


@attack("everyday use", "model.pte files are named by their folder")
def model_pte_files_are_named_by_their_folder(lab):
    d = lab.folder("kws-small")
    shutil.copyfile(lab.relu(), d / "model.pte")
    r = lab.cli("verify", str(d / "model.pte"), "-t", "cortex-m7")
    return "cortexm verify kws-small/model.pte -t cortex-m7", None if "kws-small" in r.out else f"named: {r.out.strip()[:80]}"


@attack("everyday use", "the simulator time limit is an option with its default")
def the_simulator_time_limit_is_an_option_with_its_default(lab):
    helps = [lab.cli(cmd, "--help").out for cmd in ("run", "test", "sweep")]
    return "cortexm run/test/sweep --help", None if all("--timeout" in h and "120" in h for h in helps) else "no --timeout"
