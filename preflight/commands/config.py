"""preflight config show: the settings in effect on a host, and where each came from."""

from __future__ import annotations

from typing import Callable, Optional, Sequence

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
