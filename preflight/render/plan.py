"""preflight plan for people (text, markdown) and programs (JSON)."""

from __future__ import annotations

import os

from preflight import units
from preflight.capacity import estimate
from preflight.capacity.planning import Plan
from preflight.render.blocks import COLORS, markdown_text, paint, width, wrap
from preflight.terminal import printable


def _gib(value: int) -> str:
    return units.format_bytes(value)


def _heading(plan: Plan) -> list:
    r = plan.request
    if plan.gpus > 1:
        batch = "batch %d over %d GPUs (%d per GPU; rank 0, the tightest, also validates)" % (
            r["batch"] or plan.batch, plan.gpus, plan.batch)
    else:
        batch = "batch %d" % plan.batch
    optimizer = ", %s" % r["optimizer"] if r.get("optimizer") else ""
    lines = ["%s %s (%s%s), %s, --img %d: about %s per GPU" % (
        r["id"], r["task"], estimate.PRECISION_WORDS[r["precision"]], optimizer, batch, r["imgsz"],
        _gib(estimate.required_bytes(r, plan.batch)))]
    steps = _gib(estimate.steps_need_bytes(r, plan.batch))
    whole = _gib(estimate.required_bytes(r, plan.batch))
    if r["task"] == "train":
        lines.append("the training steps hold %s; the whole run, with the validation pass after each epoch (twice "
                     "the batch, FP16) and the %d%% margin, up to %s" % (steps, round(r["margin"] * 100), whole))
    lines.append("verdict: fits on a GPU with %s or more usable; tight with %s to %s (it should run: PyTorch gives "
                 "back cached memory before it reports out-of-memory, and public runs there finished); does not fit "
                 "with less than %s" % (whole, steps, whole, steps))
    basis = {"measured": "measured", "extrapolated": "extrapolated from measured models",
             "derived": "derived from the measured dual-head model (not measured itself)"}[r.get("basis", "measured")]
    objects = "" if r["task"] != "train" or r.get("max_objects") else (
        "; assumes a typical number of objects per image (for dense datasets give --max-objects)")
    lines.append("estimate: %s; peak memory linear in batch and pixels, plus a %d%% margin; measured on %s%s" % (
        basis, round(r["margin"] * 100), r["measured_on"], objects))
    lines += ["note: %s" % note for note in r["notes"]]

    if os.name == "nt":
        lines.append("note: on Windows (WDDM) a run over its GPU memory may spill into system memory and slow down or "
                     "crash without an out-of-memory message")
    return lines


def _arch_short(arch: str) -> str:
    """"yes", "yes, below the recommended 8.0" -> "yes (< 8.0)", "no (needs 7.5)" -> "no (< 7.5)"."""
    if arch.startswith("yes, below the recommended"):
        return "yes (< %s)" % arch.rsplit(" ", 1)[-1]
    if arch.startswith("no (needs"):
        return "no (< %s)" % arch.rstrip(")").rsplit(" ", 1)[-1]
    return arch


def _cells(row, short: bool = False) -> list:
    if short:  # the terminal table: GiB without the unit (the header says it), short names
        bare = lambda value: _gib(value).replace(" GiB", "")  # noqa: E731
        if row.source == "this machine":
            memory = "%s (%s free)" % (bare(row.memory_bytes), bare(row.available_bytes))
            name = "* %s: %s" % (row.subject, printable(row.name.replace("NVIDIA ", "")))
        else:
            memory = "%s (%s%s)" % (bare(row.memory_bytes), "~" if row.usable == "estimated" else "",
                                    bare(row.available_bytes))
            name = row.name.replace("GeForce ", "")
        return [name, memory, row.compute_capability or "?", _arch_short(row.arch), _VERDICT[row.verdict],
                str(row.max_batch), str(row.max_batch_tight)]
    if row.source == "this machine":
        memory = "%s (%s free)" % (_gib(row.memory_bytes), _gib(row.available_bytes))
        name = "this machine %s: %s" % (row.subject, printable(row.name))
    else:
        lowest = " usable, the lowest of %d reported" % len(row.usable_figures) if len(row.usable_figures) > 1 \
            else " usable"
        memory = "%s (%s%s%s)" % (_gib(row.memory_bytes), "~" if row.usable == "estimated" else "",
                                  _gib(row.available_bytes), lowest)
        name = row.name
    return [name, memory, row.compute_capability or "?", row.arch, row.verdict, str(row.max_batch),
            str(row.max_batch_tight)]


_VERDICT = {estimate.FITS: "yes", estimate.TIGHT: "tight", estimate.DOES_NOT_FIT: "no"}
HEADERS = ["GPU", "memory", "cc", "architecture supported", "verdict", "largest batch that fits",
           "largest batch, tight"]
SHORT_HEADERS = ["GPU", "GiB (usable)", "cc", "arch", "fits", "max", "tight"]
USABLE_NOTE = ("usable: what one process can allocate on the idle GPU, as PyTorch reports it in public logs (the "
               "lowest figure where drivers and clouds differ), or ~ estimated at 97% of the total; GDDR cards with "
               "ECC on lose 6.25% (the catalog says which state it assumes); arch: whether the default rules accept "
               "the compute capability (< X.Y: below the recommended or needed X.Y); fits: yes, tight (should run, "
               "no headroom) or no; max: the largest --batch-size that fits with the margin; tight: the largest "
               "that should still run")


def text(plan: Plan, color: bool = False, columns: int = 0) -> str:
    """The plan for a terminal: the heading wrapped, the table in 100 columns (short names; this machine's rows
    marked with *), "fits" coloured when ``color``."""
    columns = columns or width()
    lines: list = []
    for line in _heading(plan):
        lines += wrap(line, columns, "", "  ")
    lines.append("")
    table = [SHORT_HEADERS] + [_cells(row, short=True) for row in plan.rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(SHORT_HEADERS))]
    gap = "  " if sum(widths) + 2 * (len(widths) - 1) <= columns else " "  # a narrow terminal: one space apart
    for number, row in enumerate(table):
        cells = [cell.ljust(size) for cell, size in zip(row, widths)]
        if number and color:
            cells[4] = paint(cells[4], COLORS[{"yes": "pass", "tight": "warn"}.get(row[4], "fail")], True)
        lines.append(gap.join(cells).rstrip())
    if any(row.source == "this machine" for row in plan.rows):
        lines.append("* this machine (free memory now)")
    if plan.machine_note:
        lines += wrap(plan.machine_note, columns, "this machine: ", "  ")
    lines.append("")
    lines += wrap(USABLE_NOTE, columns, "", "  ")
    lines += wrap(", ".join(plan.smallest) or "none", columns,
                  "smallest catalog GPUs that fit batch %d per GPU: " % plan.batch, "  ")
    return "\n".join(lines)


def markdown(plan: Plan) -> str:
    lines = ["**%s**" % _heading(plan)[0], ""] + ["- %s" % line for line in _heading(plan)[1:]] + [""]
    lines.append("| %s |" % " | ".join(HEADERS))
    lines.append("|%s|" % "|".join("---" for _ in HEADERS))
    for row in plan.rows:
        lines.append("| %s |" % " | ".join(markdown_text(cell) for cell in _cells(row)))
    if plan.machine_note:
        lines += ["", "this machine: %s" % plan.machine_note]
    lines += ["", USABLE_NOTE[0].upper() + USABLE_NOTE[1:] + ".", "", "Smallest catalog GPUs that fit batch %d per GPU: %s" % (plan.batch, ", ".join(plan.smallest) or "none")]
    return "\n".join(lines)


def submission_text(submission) -> str:
    """The one line a Slurm job's user sees at submission (nothing when nothing was judged or said)."""
    return printable(submission.message) + "\n" if submission.message else ""
