"""preflight plan for people (text, markdown) and programs (JSON)."""

from __future__ import annotations

import json

from preflight import units
from preflight.capacity import estimate
from preflight.capacity.planning import Plan


def _gib(value: int) -> str:
    return units.format_bytes(value)


def _heading(plan: Plan) -> list:
    r = plan.request
    batch = "batch %d" % plan.batch
    optimizer = ", %s" % r["optimizer"] if r.get("optimizer") else ""
    lines = ["%s %s (%s%s), %s, --img %d: about %s per GPU" % (
        r["id"], r["task"], estimate.PRECISION_WORDS[r["precision"]], optimizer, batch, r["imgsz"],
        _gib(estimate.required_bytes(r, plan.batch)))]
    if r["task"] == "train":
        lines.append("training steps need %s; with the validation pass after each epoch (twice the batch, FP16) up "
                     "to %s: fits and the largest batch use the latter" % (
                         _gib(estimate.training_bytes(r, plan.batch)), _gib(estimate.required_bytes(r, plan.batch))))
    basis = {"measured": "measured", "extrapolated": "extrapolated from measured models",
             "derived": "derived from the measured dual-head model (not measured itself)"}[r.get("basis", "measured")]
    objects = "" if r["task"] != "train" or r.get("max_objects") else (
        "; assumes a typical number of objects per image (for dense datasets give --max-objects)")
    lines.append("estimate: %s; peak memory linear in batch and pixels, plus a %d%% margin; measured on %s%s" % (
        basis, round(r["margin"] * 100), r["measured_on"], objects))
    lines += ["note: %s" % note for note in r["notes"]]
    import os

    if os.name == "nt":
        lines.append("note: on Windows (WDDM) a run over its GPU memory may spill into system memory and slow down or "
                     "crash without an out-of-memory message")
    return lines


def _cells(row) -> list:
    if row.source == "this machine":
        memory = "%s (%s free)" % (_gib(row.memory_bytes), _gib(row.available_bytes))
        name = "this machine %s: %s" % (row.subject, row.name)
    else:
        memory = "%s (%s%s usable)" % (_gib(row.memory_bytes), "~" if row.usable == "estimated" else "",
                                       _gib(row.available_bytes))
        name = row.name
    return [name, memory, row.compute_capability or "?", row.arch, "yes" if row.fits else "no", str(row.max_batch)]


HEADERS = ["GPU", "memory", "cc", "architecture supported", "fits", "largest batch"]
USABLE_NOTE = ("usable: what one process can allocate on the idle GPU, as PyTorch reports it in public logs, or ~ "
               "estimated at 97% of the total; GDDR cards with ECC on lose 6.25% (the catalog says which state it "
               "assumes)")


def text(plan: Plan) -> str:
    lines = _heading(plan) + [""]
    table = [HEADERS] + [_cells(row) for row in plan.rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(HEADERS))]
    for row in table:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    if plan.machine_note:
        lines.append("this machine: %s" % plan.machine_note)
    lines.append("")
    lines.append(USABLE_NOTE)
    lines.append("smallest catalog GPUs that fit batch %d: %s" % (plan.batch, ", ".join(plan.smallest) or "none"))
    return "\n".join(lines)


def markdown(plan: Plan) -> str:
    lines = ["**%s**" % _heading(plan)[0], ""] + ["- %s" % line for line in _heading(plan)[1:]] + [""]
    lines.append("| %s |" % " | ".join(HEADERS))
    lines.append("|%s|" % "|".join("---" for _ in HEADERS))
    for row in plan.rows:
        lines.append("| %s |" % " | ".join(_cells(row)))
    if plan.machine_note:
        lines += ["", "this machine: %s" % plan.machine_note]
    lines += ["", USABLE_NOTE[0].upper() + USABLE_NOTE[1:] + ".", "", "Smallest catalog GPUs that fit batch %d: %s" % (plan.batch, ", ".join(plan.smallest) or "none")]
    return "\n".join(lines)


def as_json(plan: Plan) -> str:
    return json.dumps(plan.to_json(), indent=2)
