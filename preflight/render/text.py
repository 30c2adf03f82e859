"""The report for people: one line per result, the fix under each failure, a summary."""

from __future__ import annotations

from typing import List

from preflight import __version__
from preflight.report import Report

_LABELS = {"pass": "PASS", "fail": "FAIL", "warn": "WARN", "skip": "SKIP", "error": "ERROR"}
_COLORS = {"pass": "32", "fail": "1;31", "warn": "33", "skip": "2", "error": "1;35"}


def _paint(text: str, code: str, color: bool) -> str:
    return "\033[%sm%s\033[0m" % (code, text) if color else text


def _plural(count: int, word: str) -> str:
    return "%d %s%s" % (count, word, "" if count == 1 else "s")


def render(report: Report, quiet: bool = False, color: bool = False) -> str:
    shown = [r for r in report.results if not quiet or r.status in ("fail", "warn", "error")]
    id_width = max([len(r.id) for r in shown] + [10])
    subject_width = max([len(r.subject) for r in shown] + [6])
    lines: List[str] = []
    if not quiet:
        lines.append("preflight %s | profile %s | facts: %s%s" % (
            __version__, report.profile, report.facts_source, " | strict" if report.strict else ""))
    for result in shown:
        label = _LABELS[result.status]
        mark = _paint(label.ljust(5), _COLORS[result.status], color)
        severity = " (%s)" % result.severity if result.status == "fail" and result.severity != "error" else ""
        lines.append("%s  %s  %s  %s%s" % (mark, result.id.ljust(id_width), result.subject.ljust(subject_width),
                                           result.message, severity))
        if result.fix:
            indent = " " * 7
            lines.append("%sfix: %s" % (indent, result.fix["title"]))
            lines.extend("%s  - %s" % (indent, step) for step in result.fix["steps"])
            lines.extend("%s  $ %s" % (indent, command) for command in result.fix["commands"])
    counts = report.counts()
    verdict = _paint("OK", "32", color) if report.ok else _paint("FAILED", "1;31", color)
    if lines and not quiet:
        lines.append("")
    lines.append("%d passed, %s, %d failed, %s, %d skipped: %s (exit %d)" % (
        counts["pass"], _plural(counts["warn"], "warning"), counts["fail"], _plural(counts["error"], "error"),
        counts["skip"], verdict, report.exit_code))
    return "\n".join(lines)
