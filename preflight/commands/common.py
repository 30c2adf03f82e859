"""What several commands share: rules loaded with their warnings and chosen, and facts from a file or from probing."""

from __future__ import annotations

import os
import socket
import sys
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Set, Tuple

from preflight.commands.options import CheckOptions, OutputOptions
from preflight.errors import PreflightError, WriteFailed
from preflight.facts import collect

Warn = Optional[Callable[[str], None]]


def collect_options(options: CheckOptions, packages: List[Dict[str, Any]],
                    workload: Optional[Dict[str, Any]] = None) -> collect.Options:
    """How to probe for these options; ``workload``: the sized workload request, which the active test measures."""
    python = None
    if options.python:
        from preflight.probes.python_env import resolve_interpreter

        python = resolve_interpreter(options.python)
    return collect.Options(timeout=options.timeout, python=python, nvml_fixture=options.nvml_fixture,
                           packages=packages, use_cache=options.use_cache,
                           on_wait=tell_terminal, kernel_log=options.kernel_log,
                           smoke=options.smoke.request(workload, options.timeout) if options.smoke else None)


def tell_terminal(line: str) -> None:
    """A progress line for a person watching (stderr is a terminal); nothing in logs or pipes."""
    stream = sys.stderr
    try:
        if stream is not None and stream.isatty():
            stream.write(line + "\n")
            stream.flush()
    except (OSError, ValueError):
        pass


def snapshot(options: CheckOptions, probes: Set[str], packages: List[Dict[str, Any]],
             reuse: Optional[Dict[str, Any]] = None,
             workload: Optional[Dict[str, Any]] = None) -> Tuple[Dict[str, Any], str]:
    """(snapshot, where it came from): the saved file of --facts, else these probes run now (``reuse``: some
    already probed)."""
    if options.facts_file:
        from preflight.facts import snapshot as snapshot_file

        return snapshot_file.load(options.facts_file), "file %s" % options.facts_file
    facts = collect.collect(probes, collect_options(options, packages, workload), reuse)
    return facts, facts["source"]


class Keep(NamedTuple):
    """Where a run's verdict is kept besides its output: --report-dir DIR (HOST.json), --syslog (one line)."""

    report_dir: Optional[str] = None
    syslog: bool = False


def keep(report, kept: Keep, warn: Warn = None, host: Optional[str] = None, line: Optional[str] = None,
         severity: Optional[str] = None) -> None:
    """Write the report to ``--report-dir`` as HOST.json (``host``: the Slurm node name; else the report's) and
    send ``line`` (else the report's summary) to syslog."""
    if kept.report_dir:
        from preflight.files import kept_reports
        from preflight.files.output import json_text
        from preflight.integrations.slurm import scheduler_node_name

        # The node as the scheduler names it (fleet shows it, so its lists paste into scontrol): the Slurm node
        # name given or in slurmd's environment, else the report's host.
        node = host or scheduler_node_name(os.environ)
        document = report.to_json()
        if node:
            document["node"] = node
        try:
            kept_reports.write(kept.report_dir, node or report.host or _short_host(), json_text(document))
        except PreflightError as exc:  # a full disk or a missing folder: never a verdict on the machine
            if warn:
                warn("the report was not kept: %s%s; the check's own verdict stands" % (
                    exc.message, " (%s)" % exc.hint if exc.hint else ""))
    keep_line(kept, line or "preflight: %s" % report.summary_line(), severity or ("info" if report.ok else "error"),
              warn)


def show_report(report, shown: OutputOptions, warn: Warn = None, kept: Keep = Keep()) -> int:
    """Keep a judged report (--report-dir, --syslog), write it in the chosen format, and return its exit code:
    check and smoke end here."""
    from preflight.files.output import emit
    from preflight.render import formats

    keep(report, kept, warn)
    code = formats.exit_code(report, shown.format)
    try:
        emit(formats.render("report", report, shown.format, quiet=shown.quiet, color=shown.colored(),
                            expires_in=shown.expires_in), shown.output)
    except WriteFailed as exc:  # a full disk must not turn a failed check into bad usage, nor a passed one;
        # a wrong destination (no such folder, a folder, a planted link) stays the user's to fix: exit 2.
        # A Nagios plugin whose line was not written could not run: UNKNOWN (cli.main says so).
        if warn is None or shown.format == "nagios":
            raise
        warn("the report was not written: %s; the check's own verdict stands (exit %d)" % (exc.message, code))
    return code


def keep_line(kept: Keep, line: str, severity: str, warn: Warn = None) -> None:
    if kept.syslog:
        from preflight.files import kept_reports

        kept_reports.syslog(line, severity, warn)


def _short_host() -> str:
    return socket.gethostname().split(".")[0]
