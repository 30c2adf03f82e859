"""One door to every output format of every command: a document kind and a format name give the renderer.

A renderer is ``module:function`` (imported only when that format is asked for), called with the document and
the options it takes. Every JSON document is written one way (``output.json_text`` of the document's
``to_json()``); its schema sits beside the code that builds it (``commands/schema.py`` lists them). The command
line's ``--format`` choices are ``names(kind)``.
"""

from __future__ import annotations

import importlib
from typing import Any, Dict, Tuple

# kind -> format -> (renderer, the options it takes)
RENDERERS: Dict[str, Dict[str, Tuple[str, Tuple[str, ...]]]] = {
    "report": {  # check, exec, serve
        "text": ("preflight.render.text:render", ("quiet", "color", "show_exit")),
        "json": ("preflight.render.formats:as_json", ()),
        "jsonl": ("preflight.render.formats:as_json_line", ()),
        "junit": ("preflight.render.junit:render", ()),
        "prometheus": ("preflight.render.prometheus:render", ()),
        "nfd": ("preflight.render.nfd:render", ("expires_in",)),
        "npd": ("preflight.render.npd:render", ()),
        "nagios": ("preflight.render.nagios:render", ()),
    },
    "facts": {
        "json": ("preflight.render.formats:as_json", ()),
        "jsonl": ("preflight.render.formats:as_json_line", ()),
        "text": ("preflight.render.facts_text:render", ()),
    },
    "diagnosis": {
        "text": ("preflight.render.diagnosis_text:render", ("color",)),
        "json": ("preflight.render.formats:as_json", ()),
        "jsonl": ("preflight.render.formats:as_json_line", ()),
    },
    "plan": {
        "text": ("preflight.render.plan:text", ("color",)),
        "json": ("preflight.render.formats:as_json", ()),
        "jsonl": ("preflight.render.formats:as_json_line", ()),
        "markdown": ("preflight.render.plan:markdown", ()),
    },
    "submission": {  # plan's Slurm mode: one line for the submit filter to show, or the decision as JSON
        "text": ("preflight.render.plan:submission_text", ()),
        "json": ("preflight.render.formats:as_json", ()),
    },
    "fleet": {
        "text": ("preflight.render.fleet:text", ()),
        "markdown": ("preflight.render.fleet:markdown", ()),
        "json": ("preflight.render.fleet:json_text", ()),
        "jsonl": ("preflight.render.formats:as_json_line", ()),
        "csv": ("preflight.render.fleet:as_csv", ()),
        "html": ("preflight.render.fleet_html:render", ()),
    },
    "rules": {
        "text": ("preflight.render.rules_doc:list_text", ()),
        "json": ("preflight.render.formats:as_json", ()),
        "markdown": ("preflight.render.rules_doc:markdown", ()),
    },
    "fix": {  # preflight fix: the plan, what ran, what changed
        "text": ("preflight.render.fix_text:render", ()),
        "json": ("preflight.render.formats:as_json", ()),
    },
    "config": {
        "text": ("preflight.render.config_text:render", ()),
        "json": ("preflight.render.formats:as_json", ()),
    },
}

FORMATS = tuple(RENDERERS["report"])  # check --format


def names(kind: str) -> Tuple[str, ...]:
    """The formats a kind of document can be written in (a command's --format choices)."""
    return tuple(RENDERERS[kind])


def render(kind: str, document: Any, name: str, **options: Any) -> str:
    """``document`` (a Report, a Diagnosis, a Plan, ...) in format ``name``; ``options`` the command has
    (quiet, color, show_exit, expires_in); each renderer gets those it takes."""
    if name not in RENDERERS[kind]:
        raise ValueError("unknown %s format %r" % (kind, name))
    reference, takes = RENDERERS[kind][name]
    module, _, function = reference.partition(":")
    renderer = getattr(importlib.import_module(module), function)
    return renderer(document, **{key: value for key, value in options.items() if key in takes})


def as_json(document: Any) -> str:
    """Any document as JSON: its ``to_json()`` (a snapshot or a config listing is already plain data)."""
    from preflight.files.output import json_text

    return json_text(document.to_json() if hasattr(document, "to_json") else document)


def as_json_line(document: Any) -> str:
    """The same document as ``as_json``, compact on one line (``--format jsonl``): a log shipper's one record."""
    from preflight.files.output import json_line

    return json_line(document.to_json() if hasattr(document, "to_json") else document)


def exit_code(report, name: str) -> int:
    """The exit code for a report format: the report's, except node-problem-detector's own protocol."""
    if name == "nagios":
        from preflight.render import nagios

        return nagios.state(report)
    return report.npd_exit_code if name == "npd" else report.exit_code
