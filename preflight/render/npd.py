"""node-problem-detector's custom plugin protocol: one short line, and the exit code.

The exit code (Report.npd_exit_code) is 0 when the checks pass, 1 for a
problem, 2 for unknown (nothing failed, but something could not be
determined). The line names the first blocking result's subject (gpu1), rule
and message, cut to NPD's default limit of 80 characters.
"""

from __future__ import annotations

from preflight.report import Report

LIMIT = 80


def render(report: Report, limit: int = LIMIT) -> str:
    blocking = report.blocking()
    counts = report.counts()
    if not blocking:
        line = "preflight: OK, %d passed, %d warning%s" % (counts["pass"], counts["warn"],
                                                             "" if counts["warn"] == 1 else "s")
    else:
        first = blocking[0]
        word = "UNKNOWN" if report.npd_exit_code == 2 else "FAIL"
        more = " (+%d more)" % (len(blocking) - 1) if len(blocking) > 1 else ""
        # The subject first: cut to 80 characters, "gpu1" must survive where the product name would not.
        subject = "" if first.subject == "system" else first.subject + " "
        line = "preflight: %s %s%s: %s%s" % (word, subject, first.id, first.message, more)
        if len(line) > limit:
            line = "preflight: %s %s%s%s: %s" % (word, subject, first.id, more, first.message)
    return line if len(line) <= limit else line[:limit - 3] + "..."
