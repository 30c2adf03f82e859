"""preflight check: evaluate the rules against this machine (or a saved snapshot) and render the report."""

from __future__ import annotations

from preflight.commands import common, pipeline
from preflight.commands.options import CheckOptions, OutputOptions


def main(options: CheckOptions, shown: OutputOptions, warn: common.Warn = None,
         kept: common.Keep = common.Keep()) -> int:
    from preflight.files.output import emit
    from preflight.render import formats

    report = pipeline.check(options, warn)
    common.keep(report, kept, warn)
    emit(formats.render("report", report, shown.format, quiet=shown.quiet, color=shown.colored(),
                        expires_in=shown.expires_in), shown.output)
    return formats.exit_code(report, shown.format)
