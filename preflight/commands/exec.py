"""preflight exec: run the checks, then become the training command (a container's entrypoint)."""

from __future__ import annotations

import os
import sys
from typing import Callable, Sequence

import click

from preflight.commands import common, pipeline
from preflight.commands.click_options import (KEEP, PROBE, check_group, check_options, complete_files, declare,
                                              duration, kept, log, shown, warn)
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


# --- the command line ----------------------------------------------------------------------------------------

def build() -> click.Command:
    @click.command("exec", context_settings={"allow_interspersed_args": False})
    @declare(check_group("exec"))
    @click.option("--format", "output_format", type=click.Choice(["text", "json", "jsonl"]), default="text",
                  show_default=True, help="Format of the report, written to standard error. text: one line when the "
                                          "checks pass, the full report when they fail; jsonl: the JSON report on one "
                                          "line, for log shippers.")
    @click.option("-v", "--verbose", is_flag=True, help="With text: the full report even when the checks pass.")
    @click.option("-q", "--quiet", is_flag=True, help="In a full report, only failures, warnings and errors.")
    @click.option("--warn-only", is_flag=True, help="Start the command even when checks fail (the report still says so).")
    @click.option("--retry-timeout", default="0", show_default=True, metavar="DURATION",
                  help="Keep checking until they pass or this much time has gone (30s, 5m): for a GPU or driver that "
                       "comes up late.")
    @click.option("--sleep", default="1s", show_default=True, metavar="DURATION", help="Wait between checks.")
    @click.option("--fail-exit-code", type=click.IntRange(1, 255), default=int(ExitCode.EXEC_BLOCKED), show_default=True,
                  metavar="N", help="Exit with N when the checks keep COMMAND from starting (78 is EX_CONFIG), so a "
                                    "job controller can tell an unfit node from a crashed script.")
    @click.option("--termination-log", default="/dev/termination-log", show_default=True, metavar="FILE",
                  shell_complete=complete_files,
                  help="When the checks keep COMMAND from starting, write the reason as one line here: the default "
                       "only when it exists (Kubernetes' terminationMessagePath), a FILE given here is created.")
    @declare(KEEP)
    @check_options(PROBE)
    @click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
    def exec_command(options, output_format, verbose, quiet, warn_only, retry_timeout, sleep, fail_exit_code,
                     termination_log, report_dir, syslog, command) -> int:
        """Run the checks, then replace preflight with COMMAND (as a container ENTRYPOINT: preflight exec -- CMD...).

        \b
        The report goes to standard error: one line when the checks pass (--verbose:
        all of it), the full report when they fail. When they fail, COMMAND does not
        start (unless --warn-only): preflight exits 78 (--fail-exit-code) and writes
        the reason to /dev/termination-log when it exists (Kubernetes). Otherwise
        COMMAND takes over this process (same PID, signals and exit status). Extra
        options can come from PREFLIGHT_ARGS (options only: a stray word or '--'
        there is exit 2); PREFLIGHT_SKIP=1 skips the checks (and says so).
        Exit codes: COMMAND's own; 78 checks failed (--fail-exit-code); 2 bad usage;
        126 COMMAND cannot be run; 127 COMMAND not found.
        """
        return main(options, command, shown(output_format, quiet=quiet), warn_only,
                    duration("--retry-timeout", retry_timeout), duration("--sleep", sleep), log, warn,
                    fail_exit_code, termination_log, verbose, kept(report_dir, syslog))
    return exec_command
