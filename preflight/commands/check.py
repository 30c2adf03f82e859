"""preflight check: evaluate the rules against this machine (or a saved snapshot) and render the report."""

from __future__ import annotations

from preflight.commands import common, pipeline
from preflight.commands.options import CheckOptions, OutputOptions
from preflight.errors import WriteFailed


def main(options: CheckOptions, shown: OutputOptions, warn: common.Warn = None,
         kept: common.Keep = common.Keep()) -> int:
    from preflight.files.output import emit
    from preflight.render import formats

    report = pipeline.check(options, warn)
    common.keep(report, kept, warn)
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
