"""preflight exec: run the checks, then become the training command (a container's entrypoint)."""

from __future__ import annotations

import os
import sys
from typing import Callable, Sequence

from preflight.commands import common, pipeline
from preflight.commands.options import CheckOptions, OutputOptions
from preflight.errors import ExitCode
from preflight.integrations import entrypoint


def main(options: CheckOptions, command: Sequence[str], shown: OutputOptions, warn_only: bool, retry_timeout: float,
         sleep: float, log: Callable[[str], None], warn: common.Warn = None,
         fail_exit_code: int = ExitCode.EXEC_BLOCKED, termination_log: str = entrypoint.TERMINATION_LOG,
         verbose: bool = False, kept: common.Keep = common.Keep()) -> int:
    """Exit code: the command's own once it runs; ``fail_exit_code`` (78) when the checks keep it from starting;
    126/127 when it cannot start (found out before the checks)."""
    unstartable = entrypoint.cannot_start(command, log)
    if unstartable is not None:
        return unstartable
    if entrypoint.skip_requested(os.environ):
        log("preflight: %s is set: checks skipped; starting %s" % (entrypoint.SKIP_VARIABLE, " ".join(command)))
        return entrypoint.become(command, log)
    report = entrypoint.check_until(lambda: pipeline.check(options, warn), retry_timeout, sleep, log)
    from preflight.render import formats

    common.keep(report, kept, warn)
    if shown.format == "text" and report.ok and not verbose:
        log("preflight: %s; starting %s" % (report.summary_line(), command[0]))  # a passing gate is one line
    else:
        log(formats.render("report", report, shown.format, quiet=shown.quiet, color=shown.colored(sys.stderr),
                           show_exit=False))
    if not report.ok and not warn_only:
        log("preflight: not starting %s: the checks failed (exit %d)" % (command[0], fail_exit_code))
        entrypoint.write_termination_message(
            termination_log, "preflight: not starting %s: %s" % (command[0], report.reason(1000)), log,
            create=termination_log != entrypoint.TERMINATION_LOG)
        return fail_exit_code
    if not report.ok:
        log("preflight: checks failed; starting %s anyway (--warn-only)" % command[0])
    return entrypoint.become(command, log)
