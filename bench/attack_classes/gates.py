"""Attacks (round 5): an input read twice, writers and gates that escaped the last round's rules."""

from __future__ import annotations

import json
import os
import threading

from attack_classes.lab import attack


@attack("read once", "an input file replaced again and again while run runs")
def an_input_replaced_while_run_runs(lab):
    import numpy as np

    pte = lab.relu()
    entry = json.loads(pte.with_suffix(".json").read_text())["inputs"][0]
    shape, dtype = entry["shape"], np.dtype(entry["dtype"])
    given = lab.root / "racing.npy"
    contents = []
    for fill in (np.linspace(-1, 1, int(np.prod(shape))).reshape(shape), np.full(shape, 0.75)):
        tmp = lab.root / "racing-tmp.npy"
        np.save(tmp, fill.astype(dtype))
        contents.append(tmp.read_bytes())
    stop = threading.Event()

    def flip() -> None:  # whole files, swapped in one step: each read sees one content or the other
        k = 0
        while not stop.is_set():
            part = lab.root / f".racing-{k % 2}.npy"
            part.write_bytes(contents[k % 2])
            os.replace(part, given)
            k += 1

    given.write_bytes(contents[0])
    racer = threading.Thread(target=flip, daemon=True)
    racer.start()
    try:
        outcomes = [lab.cli("run", str(pte), "-t", "cortex-m7", "-i", str(given)) for _ in range(5)]
    finally:
        stop.set()
        racer.join()
    wrong = [r for r in outcomes if r.rc != 0]
    return ("cortexm run relu.pte -i x.npy five times, x.npy swapped between two contents meanwhile",
            f"{len(wrong)} of 5 runs failed: {(wrong[0].out + wrong[0].err).strip().splitlines()[-1][:120]}" if wrong else None)


@attack("writers", "--update-goldens with a golden that is a link to a file outside")
def update_goldens_through_a_link(lab):
    victim = lab.root / "golden-victim.txt"
    victim.write_text("the user's notes\n")
    goldens = lab.folder("linked-goldens")
    (goldens / "cortex-m7").mkdir(exist_ok=True)
    link = goldens / "cortex-m7" / "relu.txt"
    link.unlink(missing_ok=True)
    link.symlink_to(victim)
    r = lab.cli("dialect", "relu", "-t", "cortex-m7", "--goldens", str(goldens), "--update-goldens")
    if victim.read_text() != "the user's notes\n":
        return "cortexm dialect relu --update-goldens, the golden a link to notes.txt", "the golden was written through the link"
    return "cortexm dialect relu --update-goldens, the golden a link to notes.txt", r.one_error_line("link")


@attack("writers", "test --json naming an export's sidecar")
def test_json_over_a_sidecar(lab):
    sidecar = lab.relu().with_suffix(".json")
    before = sidecar.read_text()
    r = lab.cli("test", "-t", "cortex-m7", "-k", "relu", "--grid", "none", "--sim", "none", "--json", str(sidecar))
    if sidecar.read_text() != before:
        return "cortexm test --json relu.json (an export's sidecar)", "the sidecar was replaced by a report"
    return "cortexm test --json relu.json (an export's sidecar)", r.one_error_line("not a test report")


@attack("writers", "CORTEXM_RUN_CACHE a folder with the user's own .tmp-* folders")
def run_store_in_a_folder_of_the_users(lab):
    store = lab.folder("my-folder")
    mine = store / ".tmp-999999997-drafts"
    mine.mkdir(exist_ok=True)
    (mine / "draft.txt").write_text("mine\n")
    lab.cli("test", "-t", "cortex-m7", "-k", "relu", "--grid", "none", env={"CORTEXM_RUN_CACHE": str(store)}, timeout=900)
    return ("cortexm test -k relu, CORTEXM_RUN_CACHE=DIR holding DIR/.tmp-999999997-drafts",
            None if (mine / "draft.txt").is_file() else "the user's folder was removed")


@attack("gates", "an accuracy gate against a baseline without accuracy figures")
def accuracy_gate_without_accuracy(lab):
    base = lab.root / "no-accuracy.json"
    base.write_text(json.dumps({"results": [{"case": "relu", "core": "cortex-m7", "instructions": None}]}))
    r = lab.cli("test", "-t", "cortex-m7", "-k", "relu", "--grid", "none", "--sim", "none", "--baseline", str(base))
    said = "NOTHING COMPARED" in r.out and "accuracy" in r.out
    return ("cortexm test -k relu --baseline B (B's relu has no accuracy figure)",
            None if r.rc == 1 and said else f"exit {r.rc}, and it did not say the gate compared nothing")


@attack("readers", "a C-header input whose array sits under #if/#else")
def c_header_under_a_condition(lab):
    import numpy as np

    pte = lab.relu()
    entry = json.loads(pte.with_suffix(".json").read_text())["inputs"][0]
    count = int(np.prod(entry["shape"]))
    header = lab.root / "conditional.h"
    header.write_text("#if USE_ZEROS\nconst float x[] = {" + ", ".join(["0"] * count) + "};\n#else\n"
                      "const float x[] = {" + ", ".join(["0.5"] * count) + "};\n#endif\n")
    r = lab.cli("run", str(pte), "-t", "cortex-m7", "-i", str(header))
    return "cortexm run relu.pte -i conditional.h (x under #if/#else)", r.one_error_line("#if")
