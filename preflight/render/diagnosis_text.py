"""A diagnosis for people: each problem with its line, excerpt, cause, what this machine shows, and the fix."""

from __future__ import annotations

from typing import List

from preflight import units
from preflight.diagnose.diagnosis import Diagnosis
from preflight.render.blocks import LABELS, fix_lines, paint



def render(diagnosis: Diagnosis, color: bool = False) -> str:
    def bold(text: str) -> str:
        return paint(text, "1", color)
    found = diagnosis.findings
    head = "preflight diagnose: %s (%d lines, %s): " % (diagnosis.source, diagnosis.scan.lines,
                                                       units.format_bytes(diagnosis.scan.bytes, binary=False))
    lines: List[str] = []
    if not found:
        lines.append(head + "no known problem recognised")
        errors = diagnosis.scan.error_lines()
        if errors:
            lines.append("")
            lines.append("The last error-looking lines:")
            lines.extend("  %7d | %s" % (number, text) for number, text in errors)
            lines.append("")
            import os

            from preflight.shipped import data_dir

            lines.append("If this is a failure preflight should know: its catalog is %s (preflight diagnose --list "
                         "shows it); add a [[failure]] in your own file with --rules FILE."
                         % os.path.join(data_dir(), "failures", "known.toml"))
        else:
            lines.append("Nothing in it looks like an error.")
        return "\n".join(lines)
    lines.append(head + "%d known problem%s, most likely cause first" % (len(found), "" if len(found) == 1 else "s"))
    lines.extend("note: %s" % note for note in diagnosis.notes)
    for number, finding in enumerate(found, 1):
        failure = finding.failure
        times = " (%d times)" % finding.hit.count if finding.hit.count > 1 else ""
        lines += ["", bold("%d. %s: %s" % (number, failure.id, failure.title))]
        lines.append("   line %d%s:" % (finding.hit.line, times))
        lines.append("   | %s" % finding.hit.excerpt)
        for follow_up in finding.explains:
            lines.append("   also explains line %d: %s" % (follow_up.line, follow_up.excerpt))
        lines.append("   cause: %s" % failure.cause)
        for context in finding.context:
            lines.append("   here: %s" % context)
        for check in finding.checks:
            lines.append("   preflight check %s (%s): %s %s" % (check.id, check.subject, LABELS[check.status],
                                                               check.message))
        lines.extend(fix_lines(finding.fix, "   "))
        if failure.rules:
            lines.append("   caught before a run by: preflight check --select %s" % ",".join(failure.rules))
    return "\n".join(lines)
