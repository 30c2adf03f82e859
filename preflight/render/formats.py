"""One door to every report format: the CLI asks for a format by name."""

from __future__ import annotations

from preflight.report import Report

FORMATS = ("text", "json", "junit", "prometheus", "nfd", "npd")


def render(report: Report, name: str, quiet: bool = False, color: bool = False, expires_in: float = 3600.0,
           show_exit: bool = True) -> str:
    if name == "text":
        from preflight.render import text

        return text.render(report, quiet=quiet, color=color, show_exit=show_exit)
    if name == "json":
        from preflight.render import json_report

        return json_report.render(report)
    if name == "junit":
        from preflight.render import junit

        return junit.render(report)
    if name == "prometheus":
        from preflight.render import prometheus

        return prometheus.render(report)
    if name == "nfd":
        from preflight.render import nfd

        return nfd.render(report, expires_in=expires_in)
    if name == "npd":
        from preflight.render import npd

        return npd.render(report)
    raise ValueError("unknown format %r" % name)


def exit_code(report: Report, name: str) -> int:
    """The exit code for a format: the report's, except node-problem-detector's own protocol."""
    return report.npd_exit_code if name == "npd" else report.exit_code
