"""preflight config show: the settings in effect on a host, and where each came from."""

from __future__ import annotations

import json
from typing import Callable, List, Optional, Sequence

from preflight import site_config
from preflight.commands import site
from preflight.commands.options import CheckOptions


def show(options: CheckOptions, host: Optional[str], gpus: Sequence[str], partitions: Sequence[str],
         features: Sequence[str], output_format: str, echo: Callable[[str], None], warn=None) -> int:
    import os

    environ = options.environ if options.environ is not None else os.environ
    path = site.locate(options.config, environ)
    config = site.read(path, options, warn)
    names = tuple(gpus) or None
    if names is None and site_config.needs_gpus(config):
        _, names = site._machine_gpus(options)
    here = site.target(options, None, names, host)
    if partitions or features:
        here = here._replace(partitions=tuple(partitions) or here.partitions, features=tuple(features) or None)
    effective = site_config.effective(config, here) if config.sections else None
    applied = _applied(options, config, effective)
    problems = []
    if effective is not None:
        from preflight.commands import common

        site_config.check_rule_paths(effective)
        ruleset = common.load_rules(list(applied.options.rules_paths))
        site.validate(applied, ruleset)  # ids in set, select, ignore
        if not common.choose_rules(applied.options, ruleset):
            problems.append(site.no_rules_left(applied).message)
    rows = site.origins(applied)
    sections = effective.applied if effective else []
    if output_format == "json":
        echo(json.dumps({
            "config": path,
            "target": here._asdict(),
            "settings": [{"setting": key, "value": value, "from": where} for key, value, where in rows],
            "sections": [{"section": section.name, "line": section.line, "applies": not why_not,
                          "why_not": why_not or None} for section, why_not in sections],
            "problems": problems,
        }, indent=2))
        return 0
    echo(_text(path, here, rows, sections, problems))
    return 0


def _applied(options: CheckOptions, config, effective) -> site.Applied:
    """The options as the file would change them (the command line of `config show` gives none)."""
    if effective is None:
        return site.Applied(options, config, None, None)
    changes = {field: effective.values[key] for key, field in site.FIELDS.items() if key in effective.values}
    changes["settings"] = [item for item, _ in effective.set_items]
    changes["rules_paths"] = [path for path, _ in effective.rules]
    return site.Applied(options.replace(**changes), config, effective, None)


def _text(path, here: site_config.Target, rows, sections, problems=()) -> str:
    def known(values) -> str:
        return "unknown" if values is None else (", ".join(values) or "none")

    lines: List[str] = [
        "configuration: %s" % (path or "none (no --config, PREFLIGHT_CONFIG or %s)" % site.SYSTEM_CONFIG),
        "host %s | GPUs: %s | Slurm partitions: %s | features: %s" % (
            here.host, known(here.gpus), known(here.partitions), known(here.features)),
        "",
    ]
    width = max(len(key) for key, _, _ in rows)
    value_width = min(40, max(len(value) for _, value, _ in rows))
    for key, value, where in rows:
        lines.append("%-*s  %-*s  %s" % (width, key, value_width, value, where))
    if sections:
        lines.append("")
        for section, why_not in sections:
            where = "line %d" % section.line if section.line else "?"
            lines.append("%s (%s): %s" % (section.name, where, "applies" if not why_not else "does not apply: " + why_not))
    for problem in problems:
        lines += ["", "PROBLEM: %s" % problem]
    from preflight.render.blocks import printable

    return "\n".join(printable(line) for line in lines)  # values from the file and the machine, shown as text
