"""The report for people: one line per result, the fix under each failure, a summary."""

from __future__ import annotations

from typing import List

from preflight import __version__
from preflight.report import Report
from preflight.render.blocks import COLORS, LABELS, fix_lines, paint



def _plural(count: int, word: str) -> str:
    return "%d %s%s" % (count, word, "" if count == 1 else "s")


def render(report: Report, quiet: bool = False, color: bool = False, show_exit: bool = True) -> str:
    """``show_exit``: end the summary with the exit code (exec says its own: the command's, or 78)."""
    shown = [r for r in report.results if not quiet or r.status in ("fail", "warn", "error")]
    id_width = max([len(r.id) for r in shown] + [10])
    subject_width = max([len(r.subject) for r in shown] + [6])
    lines: List[str] = []
    if not quiet:
        from preflight import inventory

        lines.append("preflight %s | %s | profile %s | facts: %s%s" % (
            __version__, inventory.line(report.host, report.inventory()), report.profile, report.facts_source,
            " | strict" if report.strict else ""))
    for result in shown:
        mark = paint(LABELS[result.status].ljust(5), COLORS[result.status], color)
        severity = " (%s)" % result.severity if result.status == "fail" and result.severity != "error" else ""
        lines.append("%s  %s  %s  %s%s" % (mark, result.id.ljust(id_width), result.subject.ljust(subject_width),
                                           result.message, severity))
        if result.fix:
            lines.extend(fix_lines(result.fix, " " * 7))
    counts = report.counts()
    verdict = paint("OK", COLORS["pass"], color) if report.ok else paint("FAILED", COLORS["fail"], color)
    if lines and not quiet:
        lines.append("")
    lines.append("%d passed, %s, %d failed, %s, %d skipped: %s%s" % (
        counts["pass"], _plural(counts["warn"], "warning"), counts["fail"], _plural(counts["error"], "error"),
        counts["skip"], verdict, " (exit %d)" % report.exit_code if show_exit else ""))
    return "\n".join(lines)
