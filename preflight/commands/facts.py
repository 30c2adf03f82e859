"""preflight facts: everything the probes see, as one JSON snapshot (or the list of facts rules can read)."""

from __future__ import annotations

from typing import Any, Dict

import click

from preflight.commands import common
from preflight.commands.click_options import OUTPUT, PROBE, check_options, format_names, shown
from preflight.commands.options import CheckOptions, OutputOptions
from preflight.engine import loader, selection
from preflight.errors import ExitCode
from preflight.facts import collect


def run(options: CheckOptions) -> Dict[str, Any]:
    """A full snapshot: every probe, and every package any profile's rules list."""
    ruleset = loader.load(options.rules_paths)
    every_profile = [rule.resolve(profile) for rule in ruleset.rules.values() for profile in rule.profiles]
    packages = selection.required_packages(every_profile)
    return collect.collect(set(collect.PASSIVE) | {collect.NVML_HEALTH}, common.collect_options(options, packages))


def main(options: CheckOptions, shown: OutputOptions) -> int:
    from preflight.files.output import emit
    from preflight.render import formats

    emit(formats.render("facts", run(options), shown.format), shown.output)
    return ExitCode.OK


def list_facts() -> int:
    from preflight.facts.registry import REGISTRY
    from preflight.files.output import emit

    width = max(len(path) for path in REGISTRY)
    emit("\n".join("%s  %-8s  %-7s  %s" % (fact.path.ljust(width), fact.kind, "per-GPU" if fact.per_gpu else "",
                                           fact.description) for fact in REGISTRY.values()))
    return ExitCode.OK


# --- the command line ----------------------------------------------------------------------------------------

def build() -> click.Command:
    @click.command("facts")
    @click.option("--list", "listing", is_flag=True, help="List the facts rules can read instead of collecting them.")
    @click.option("--format", "output_format", type=click.Choice(format_names("facts")), default="json", show_default=True,
                  help="json: the snapshot (preflight.facts/1); text: a block to paste into a bug report.")
    @OUTPUT
    @check_options(PROBE)
    def facts(options, listing, output_format, output) -> int:
        """Print everything the probes see, as JSON (save it and replay it with 'check --facts FILE'), or as a short
        text block for a bug report (--format text)."""
        return list_facts() if listing else main(options, shown(output_format, output))
    return facts
