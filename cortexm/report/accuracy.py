"""Accuracy against the float model as the terminal shows it (cortexm.semantic.accuracy,
.realinputs): the lines `cortexm export` prints for its record, and the evaluation set's table of
`cortexm test`. The verdicts are the semantic package's; this only words them."""

from __future__ import annotations

from cortexm.report import console, table


def record_lines(record: dict | None) -> list[str]:
    """One line per set an export's `accuracy` record measured: the inputs drawn like the
    calibration data, the example inputs, the evaluation set."""
    from cortexm.semantic import accuracy, realinputs

    if not record:
        return []
    lines = []
    sqnr, top1 = accuracy.summary(record)
    if sqnr is not None:
        lines.append(f"accuracy: {sqnr:g} dB SQNR against the float model over {record['samples']} inputs drawn like the "
                     f"calibration data" + (f"; top-1 agrees {top1}" if top1 else ""))
    for key, what, entry, _judged in realinputs.sets(record, "uniform"):
        if entry.get("error"):
            lines.append(f"accuracy on {what}: {entry['error']}")
            continue
        sqnr, top1 = accuracy.summary(entry)
        count = f" ({entry['samples']} samples)" if key == "evaluation" else ""
        parts = [f"{sqnr:g} dB SQNR" if sqnr is not None else "exact", f"top-1 agrees {top1}" if top1 else "",
                 _labels(entry.get("labels")), f"most clipped: {most_clipped(entry.get('saturation') or [])}"]
        lines.append(f"accuracy on {what}{count}: " + "; ".join(p for p in parts if p))
    return lines


def most_clipped(points: list[dict]) -> str:
    """The point whose clipping costs most: 'NODE (its operators, call N): K/N clipped (F) to
    [lo, hi], D dB' (D: the clipping's own SQNR)."""
    from cortexm.semantic import saturation

    clipped = [p for p in points if p.get("clip_db") is not None]
    if not clipped:
        return f"none of {len(points)} points clips a value"
    p = min(clipped, key=lambda p: p["clip_db"])
    call = f", call {p['call']}" if p.get("call") is not None else ""
    return (f"{p['node']} ({', '.join(p.get('model_ops') or [])}{call}): {p['clipped']}/{p['of']} clipped "
            f"({saturation.fraction(p)}) to [{p['range'][0]:.4g}, {p['range'][1]:.4g}], {p['clip_db']:g} dB")


def _labels(labels: dict | None) -> str:
    if not labels:
        return ""
    if labels.get("error"):
        return f"labels: {labels['error']}"
    return f"against its labels the program {labels['program']}/{labels['of']}, the float model {labels['float']}/{labels['of']}"


def print_evaluation(results) -> None:
    """A table of every result measured on an evaluation set: its accuracy against the float
    model, against the labels, and the point that clips most."""
    from cortexm.semantic import accuracy

    rows, names = [], {}
    for r in results:
        entry = (r.accuracy.real if r.accuracy else {}).get("evaluation")
        if not entry:
            continue
        names[entry.get("name")] = entry.get("samples")
        if entry.get("error"):
            rows.append([r.case, r.core, "-", entry["error"], "", "", ""])
            continue
        labels = entry.get("labels") or {}
        rows.append([r.case, r.core, entry["samples"],
                     "-" if entry.get("sqnr_db") is None else f"{entry['sqnr_db']:.1f} dB (floor {entry['floor_db']:g})",
                     entry.get("top1") or "-",
                     labels.get("error") or (f"{labels['program']}/{labels['of']}, {labels['float']}/{labels['of']}"
                                             if labels else "-"),
                     most_clipped(entry.get("saturation") or [])])
    if not rows:
        return
    table(["case", "core", "samples", "vs float", "top-1 agrees", "labels: program, float", "most clipped point"], rows,
          title=f"evaluation set {', '.join(str(n) for n in names)} (floor: {accuracy.FLOOR_DB:g} dB less 10 log10 of "
                "the quantization stages; a point fails whose clipping alone is below "
                f"{accuracy.FLOOR_DB:g} dB)")
    console().print()
