"""preflight check: evaluate the rules against this machine (or a saved snapshot) and render the report."""

from __future__ import annotations

import click

from preflight.commands import common, pipeline
from preflight.commands.click_options import (CHECK, COLORS, FIT, KEEP, OUTPUT, PROBE, WORKLOAD, check_options, declare,
                                              duration, format_names, kept, shown, warn)
from preflight.commands.options import CheckOptions, OutputOptions
from preflight.commands.smoke import SMOKE, options_from


def main(options: CheckOptions, shown: OutputOptions, warn: common.Warn = None,
         kept: common.Keep = common.Keep()) -> int:
    return common.show_report(pipeline.check(options, warn), shown, warn, kept)


# --- the command line ----------------------------------------------------------------------------------------

def build() -> click.Command:
    @click.command("check")
    @declare(CHECK)
    @click.option("--format", "output_format", type=click.Choice(format_names("report")), default="text", show_default=True,
                  help="text for people; json (preflight.report/1); jsonl (the same, one line); junit for CI; prometheus for node_exporter's textfile "
                       "collector; nfd for Node Feature Discovery's features.d; npd for node-problem-detector "
                       "(exit 0 OK, 1 problem, 2 unknown).")
    @OUTPUT
    @click.option("--expires-in", default="1h", show_default=True, metavar="DURATION",
                  help="With --format nfd: NFD drops the labels if the file is not rewritten within this time (0: never).")
    @click.option("-q", "--quiet", is_flag=True, help="Show only failures, warnings and errors.")
    @click.option("--color", type=COLORS, default="auto", show_default=True,
                  help="Colour the text report (auto: only on a terminal, never when NO_COLOR is set).")
    @declare(KEEP)
    @click.option("--smoke", is_flag=True, help="Also run the active test (as preflight smoke: it loads the GPUs for up "
                  "to --timeout, 60 s by default with --smoke) and judge its results with the other rules.")
    @check_options(PROBE, WORKLOAD, FIT, SMOKE, active_test=options_from)
    def check(options, output_format, output, expires_in, quiet, color, report_dir, syslog) -> int:
        """Check this machine and environment against the rules; print a report with a fix for every problem."""
        return main(options, shown(output_format, output, quiet, color, duration("--expires-in", expires_in)),
                    warn, kept(report_dir, syslog))
    return check
