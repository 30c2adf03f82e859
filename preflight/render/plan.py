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
    batch = "batch %d" % plan.batch if r["batch"] else "batch 1 (give --batch for another)"
    lines = ["%s %s (%s), %s, --img %d: about %s per GPU" % (
        r["id"], r["task"], estimate.PRECISION_WORDS[r["precision"]], batch, r["imgsz"],
        _gib(estimate.required_bytes(r, plan.batch)))]
    lines.append("estimate: measured peak memory fitted linearly in batch and pixels, plus a %d%% margin; "
                 "measured on %s" % (round(r["margin"] * 100), r["measured_on"]))
    lines += ["note: %s" % note for note in r["notes"]]
    return lines


def _cells(row) -> list:
    memory = _gib(row.memory_bytes) if row.source == "catalog" else "%s (%s free)" % (_gib(row.memory_bytes),
                                                                                 _gib(row.available_bytes))
    name = row.name if row.source == "catalog" else "this machine %s: %s" % (row.subject, row.name)
    return [name, memory, row.compute_capability or "?", row.arch, "yes" if row.fits else "no", str(row.max_batch)]


HEADERS = ["GPU", "memory", "cc", "architecture supported", "fits", "largest batch"]


def text(plan: Plan) -> str:
    lines = _heading(plan) + [""]
    table = [HEADERS] + [_cells(row) for row in plan.rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(HEADERS))]
    for row in table:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    if plan.machine_note:
        lines.append("this machine: %s" % plan.machine_note)
    lines.append("")
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
    lines += ["", "Smallest catalog GPUs that fit batch %d: %s" % (plan.batch, ", ".join(plan.smallest) or "none")]
    return "\n".join(lines)


def as_json(plan: Plan) -> str:
    return json.dumps(plan.to_json(), indent=2)
