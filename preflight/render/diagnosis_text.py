"""A diagnosis for people: each problem with its line, excerpt, cause, what this machine shows, and the fix."""

from __future__ import annotations

import os
from typing import List

from preflight import units
from preflight.diagnose.diagnosis import Diagnosis
from preflight.render.blocks import LABELS, fix_lines, paint, width, wrap


def render(diagnosis: Diagnosis, color: bool = False, columns: int = 0) -> str:
    columns = columns or width()

    def bold(text: str) -> str:
        return paint(text, "1", color)

    def add(text: str, first: str = "", hanging: str = "") -> None:
        lines.extend(wrap(text, columns, first, hanging or " " * len(first)))
    found = diagnosis.findings
    head = "preflight diagnose: %s (%d lines, %s): " % (diagnosis.source, diagnosis.scan.lines,
                                                       units.format_bytes(diagnosis.scan.bytes, binary=False))
    lines: List[str] = []
    if not found:
        add(head + "no known problem recognised", "", "  ")
        add(diagnosis.facts.header)
        for note in diagnosis.notes:
            add(note, "note: ")
        errors = diagnosis.scan.error_lines()
        if errors:
            lines.append("")
            lines.append("The last error-looking lines:")
            for number, text in errors:
                add(text, "  %7d | " % number, " " * 10 + " | ")
            lines.append("")

            from preflight.knowledge.shipped import data_dir

            add("If this is a failure preflight should know: its catalog is %s (preflight diagnose --list shows it); "
                "add a [[failure]] in your own file with --rules FILE." % os.path.join(data_dir(), "failures",
                                                                                      "known.toml"))
        else:
            lines.append("Nothing in it looks like an error.")
        return "\n".join(lines)
    add(head + _count(found) + ", most likely cause first", "", "  ")
    add(diagnosis.facts.header)
    for note in diagnosis.notes:
        add(note, "note: ")
    for number, finding in enumerate(found, 1):
        failure = finding.failure
        times = " (%d times)" % finding.hit.count if finding.hit.count > 1 else ""
        lines.append("")
        if failure.family is None:
            title = wrap("%d. %s: %s" % (number, failure.id, failure.title), columns, "", "   ")
        else:  # recognised by its structure, not a message the catalog knows: said so
            title = wrap("%d. %s (a family, less certain than a known failure): %s" % (number, finding.key,
                                                                                    failure.title), columns, "", "   ")
        lines += [bold(part) for part in title]
        lines.append("   line %d%s:" % (finding.hit.line, times))
        add(finding.hit.excerpt, "   | ")
        for follow_up in finding.explains:
            if follow_up.line == finding.hit.line:  # the same line, matched twice: said once, above
                continue
            add(follow_up.excerpt, "   also explains line %d: " % follow_up.line, "     ")
        add(failure.cause, "   cause: ", "     ")
        for context in finding.context:
            add(context, "   here: ", "     ")
        for unknown in failure.undetermined:
            add(unknown, "   not determined: ", "     ")
        for check in finding.checks:
            add("%s %s" % (LABELS[check.status], check.message), "   preflight check %s (%s): " % (check.id,
                                                                                          check.subject), "     ")
        lines.extend(fix_lines(finding.fix, "   ", columns=columns))
        if failure.rules:
            lines.append("   caught before a run by:")
            lines.append("   $ preflight check --select %s" % ",".join(failure.rules))
    return "\n".join(lines)


def _count(found) -> str:
    """'2 known problems', '1 problem recognised by its family', or both: a family finding is not called known."""
    known = sum(1 for finding in found if finding.failure.family is None)
    families = len(found) - known
    parts = []
    if known:
        parts.append("%d known problem%s" % (known, "" if known == 1 else "s"))
    if families:
        parts.append("%d %srecognised by %s family" % (families, "" if known else ("problem " if families == 1 else "problems "),
                                                      "its" if families == 1 else "their"))
    return " and ".join(parts)
