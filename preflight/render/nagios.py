"""The Nagios plugin convention, which Icinga, Naemon and Zabbix's agent also run plugins by: one status line with
performance data after a ``|``, the problems one per line below it, and the exit code: 0 OK, 1 WARNING,
2 CRITICAL, 3 UNKNOWN.

CRITICAL when a result fails the check (the report's own verdict); UNKNOWN when the check fails only on what it
could not determine (every blocking result unknown), or could not run at all (bad usage: cli.main); WARNING when
nothing blocks but a rule warns, fails at warning severity or is unknown; OK otherwise.
"""

from __future__ import annotations

from typing import List

from preflight.report import Report, one_line
from preflight.terminal import printable

OK, WARNING, CRITICAL, UNKNOWN = 0, 1, 2, 3
WORDS = {OK: "OK", WARNING: "WARNING", CRITICAL: "CRITICAL", UNKNOWN: "UNKNOWN"}


def state(report: Report) -> int:
    blocking = report.blocking()
    if blocking:
        return UNKNOWN if all(r.status == "error" for r in blocking) else CRITICAL
    return WARNING if any(r.status in ("warn", "fail", "error") for r in report.results) else OK


def _plain(text: str) -> str:
    """A plugin's text: printable, one line, and no ``|`` (which starts the performance data)."""
    return " ".join(printable(text.replace("\n", " ")).replace("|", "/").split())


def render(report: Report) -> str:
    code = state(report)
    counts = report.counts()
    blocking = report.blocking()
    others = [r for r in report.results if r.status in ("warn", "fail", "error") and r not in blocking]
    if code in (CRITICAL, UNKNOWN):
        said = one_line(blocking, 200)
    elif code == WARNING:
        said = one_line(others, 200)
    else:
        said = "%d passed (%s profile) on %s" % (counts["pass"], report.profile, report.host or "this host")
    performance = "passed=%d;;;0 warnings=%d;;;0 failed=%d;;;0 unknown=%d;;;0 time=%.3fs;;;0" % (
        counts["pass"], counts["warn"], counts["fail"], counts["error"], report.seconds)
    lines: List[str] = ["PREFLIGHT %s - %s | %s" % (WORDS[code], _plain(said), performance)]
    for result in blocking + others:  # the long output: every problem, the blocking ones first
        subject = "" if result.subject == "system" else " %s" % result.subject
        lines.append(_plain("%s %s%s: %s" % (result.status.upper(), result.id, subject, result.message)))
    return "\n".join(lines) + "\n"


def could_not_run(message: str) -> str:
    """The line for a check that did not run (bad usage, an unreadable file): UNKNOWN, as the convention asks."""
    return "PREFLIGHT UNKNOWN - preflight could not run: %s\n" % _plain(message)
