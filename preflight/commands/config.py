"""preflight config show: the settings in effect on a host, and where each came from; config validate: whole files."""

from __future__ import annotations

import os
from typing import Callable, Optional, Sequence

import click

from preflight.commands import CHECKING_COMMANDS, COMMANDS, pipeline, site
from preflight.commands.click_options import CONFIG, complete_files, format_names, warn
from preflight.commands.options import CheckOptions
from preflight.config import site_config


def show(options: CheckOptions, host: Optional[str], gpus: Sequence[str], partitions: Sequence[str],
         features: Sequence[str], output_format: str, echo: Callable[[str], None], warn=None) -> int:
    path = site.locate(options.config, os.environ)
    config = site.read(path, options, warn)
    names = tuple(gpus) or None
    if names is None and site_config.needs_gpus(config):
        _, names = site.machine_gpus(options)
    here = site.target(options, None, names, host)
    if partitions or features:
        here = here._replace(partitions=tuple(partitions) or here.partitions, features=tuple(features) or None)
    applied = site.apply(options, None, warn, here, config)
    prepared = pipeline.prepare(options, warn, applied=applied, checking=False)  # ids in set, select, ignore
    problems = [] if prepared.rules else [pipeline.no_rules_left(applied).message]
    rows = site.origins(applied)
    sections = applied.effective.applied if applied.effective else []
    document = {
        "config": path,
        "system_config": site.SYSTEM_CONFIG,
        "target": here._asdict(),
        "settings": [{"setting": key, "value": value, "from": where} for key, value, where in rows],
        "sections": [{"section": section.name, "line": section.line, "applies": not why_not,
                      "why_not": why_not or None} for section, why_not in sections],
        "problems": problems,
    }
    from preflight.render import formats

    echo(formats.render("config", document, output_format))
    return 0


def validate(paths: Sequence[str], echo: Callable[[str], None], warn=None, tables: Sequence[str] = ()) -> int:
    """Check whole configuration files, every section whether it would match here or not, for a rollout pipeline
    (like ``nginx -t``): each problem with its file and line; exit 0 when every file is good, 2 otherwise. The
    submit filters' table (``tables``, else preflight-fit.lua beside slurm.conf where there is one) is said to be
    stale when another preflight wrote it or the configuration changed since (a warning: it changes no exit)."""
    import os

    from preflight.engine import loader
    from preflight.engine.model import PROFILES
    from preflight.errors import ExitCode, PreflightError
    from preflight.integrations import slurm as admission
    from preflight.integrations import submit_table

    submit_tables = list(tables)
    if not submit_tables:
        slurm_conf = admission.find_slurm_conf(None, os.environ)
        beside = os.path.join(os.path.dirname(slurm_conf), submit_table.FILE_NAME) if slurm_conf else None
        submit_tables = [beside] if beside and os.path.exists(beside) else []

    bad = 0
    for path in paths:
        found: list = []
        try:
            problem = site_config.permission_problem(path)
            if problem and warn:
                warn("%s: %s (preflight slurm, exec and serve refuse it)" % (path, problem))
            config = site_config.load(path)
            rules = [site_config.rule_path(path, rule) for section in config.sections
                     for rule in section.settings.get("rules", ())]
            ruleset = loader.load(rules, capacity=site.needs_capacity(config))
            found = site.problems(config, ruleset, PROFILES, warn)
        except site_config.ConfigError as exc:
            found = site_config.each(exc)
        except PreflightError as exc:  # a rule file the configuration names, or the file cannot be read
            found = [site_config.ConfigError(exc.message, exc.hint)]
        if found:
            bad += 1
            for error in found:
                echo(str(error))
        else:
            matches = len(config.sections) - 1
            echo("%s: ok ([defaults] and %d [[match]] section%s)" % (path, matches, "" if matches == 1 else "s"))
        for table in submit_tables:
            why = submit_table.stale(table, path)
            if why and warn:  # a warning: a configuration is validated before the table is written again from it
                warn("%s; the submit filters let every job go on unchecked until preflight slurm --submit-table %s "
                     "writes it again" % (why, table))
    if bad:
        echo("%d of %d configuration file%s invalid" % (bad, len(paths), "" if len(paths) == 1 else "s"))
    return ExitCode.USAGE if bad else ExitCode.OK


# --- the command line ----------------------------------------------------------------------------------------

def build() -> click.Command:
    @click.group("config")
    def config_group() -> None:
        """The site configuration (--config, PREFLIGHT_CONFIG or /etc/preflight/config.toml)."""


    @config_group.command("show")
    @CONFIG
    @click.option("--host", metavar="NAME", help="Match [[match]] hosts against this short host name [default: this host].")
    @click.option("--gpu", "gpus", multiple=True, metavar="NAME",
                  help="Match [[match]] gpus against this GPU name (repeatable) [default: this machine's, from NVML].")
    @click.option("--partition", "partitions", multiple=True, metavar="NAME",
                  help="Slurm partitions to match (repeatable) [default: SLURM_JOB_PARTITION, else unknown].")
    @click.option("--feature", "features", multiple=True, metavar="NAME", help="Slurm node features to match (repeatable).")
    @click.option("--command", "for_command", type=click.Choice(CHECKING_COMMANDS), default="check",
                  show_default=True, help="Whose built-in defaults to show (slurm: profile node, --expect-gpus auto; "
                                          "serve: profile node).")
    @click.option("--nvml-fixture", metavar="FILE", envvar="PREFLIGHT_NVML_FIXTURE", shell_complete=complete_files,
                  help="GPU names from a replayed NVML recording. [env: PREFLIGHT_NVML_FIXTURE]")
    @click.option("--format", "output_format", type=click.Choice(format_names("config")), default="text", show_default=True)
    def config_show(config, host, gpus, partitions, features, for_command, nvml_fixture, output_format) -> int:
        """Print the settings in effect here (profile, select, ignore, set, rules, expect_gpus, timeout) and where
        each came from: the built-in default, [defaults], or the [[match]] that set it, with its line.

        \b
        Exit codes: 0 shown, 2 the configuration file is bad (file, line and key are named).
        """
        profile, expect_gpus = COMMANDS[for_command].profile, COMMANDS[for_command].expect_gpus
        options = CheckOptions(profile=profile, expect_gpus=expect_gpus, config=config, nvml_fixture=nvml_fixture,
                               command="config")
        return show(options, host, gpus, partitions, features, output_format, click.echo, warn)


    @config_group.command("validate")
    @click.argument("files", nargs=-1, required=True, metavar="FILE...", shell_complete=complete_files)
    @click.option("--submit-table", "tables", multiple=True, metavar="FILE", shell_complete=complete_files,
                  help="Also say whether this submit filters' table is stale for the configuration [default: "
                       "preflight-fit.lua beside slurm.conf, where there is one].")
    def config_validate(files, tables) -> int:
        """Check whole site configuration files, for a rollout pipeline (like nginx -t or goss validate): every section,
        whether it matches this host or not: keys, values, selectors, rule ids and settings in set, select and ignore,
        and rules paths. Each problem is printed with its file and line.

        \b
        Exit codes: 0 every file is valid, 2 a file is not (each problem named).
        """
        return validate(files, click.echo, warn, tables)
    return config_group
