"""preflight config show: the settings in effect on a host, and where each came from."""

from __future__ import annotations

import json
from typing import Callable, List, Optional, Sequence

from preflight import site_config
from preflight.commands import pipeline, site
from preflight.commands.options import CheckOptions


def show(options: CheckOptions, host: Optional[str], gpus: Sequence[str], partitions: Sequence[str],
         features: Sequence[str], output_format: str, echo: Callable[[str], None], warn=None) -> int:
    import os

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
