"""preflight schema: the JSON Schemas of the documents preflight writes (shipped in preflight/schemas/)."""

from __future__ import annotations

import importlib
import os
from typing import Optional

import click

from preflight.commands.click_options import OUTPUT
from preflight.errors import ExitCode, PreflightError

# Every JSON document preflight writes: its schema name, what writes it, and the function beside that code that
# gives its JSON Schema (scripts/make_schemas.py writes them to preflight/schemas/, a test keeps them equal).
DOCUMENTS = {
    "report": ("preflight.report/1", "what preflight check --format json writes", "preflight.report:json_schema"),
    "diagnosis": ("preflight.diagnosis/1", "what preflight diagnose --format json writes",
                  "preflight.diagnose.diagnosis:json_schema"),
    "plan": ("preflight.plan/1", "what preflight plan --format json writes",
             "preflight.capacity.planning:json_schema"),
    "submission": ("preflight.submission/1", "what preflight plan --format json writes in its Slurm mode "
                   "(--slurm-comment)", "preflight.integrations.slurm_submit:json_schema"),
    "fix": ("preflight.fix/1", "what preflight fix --format json writes", "preflight.fix_plan:outcome_json_schema"),
    "facts": ("preflight.facts/1", "what preflight facts writes (and check --facts reads)",
              "preflight.facts.snapshot:json_schema"),
    "fleet": ("preflight.fleet/1", "what preflight fleet --format json writes", "preflight.render.fleet:json_schema"),
    "config": ("preflight.config/1", "the site configuration (/etc/preflight/config.toml), its TOML as JSON; "
               "preflight config validate also checks rule ids and settings", "preflight.config.site_config:json_schema"),
}
NAMES = {name: document[0] for name, document in DOCUMENTS.items()}
DRAFT = "https://json-schema.org/draft/2020-12/schema"
BASE = "urn:preflight:schema:"


def generated(name: str) -> str:
    """The schema of document ``name`` as the code beside its writer defines it, as the shipped file holds it."""
    from preflight.files.output import json_text

    schema_name, what, reference = DOCUMENTS[name]
    module, _, function = reference.partition(":")
    schema = {"$schema": DRAFT, "$id": BASE + "%s-1" % name, "title": "%s: %s" % (schema_name, what)}
    schema.update(getattr(importlib.import_module(module), function)())
    return json_text(schema) + "\n"


def path_of(name: str) -> str:
    import preflight.schemas

    return os.path.join(os.path.dirname(os.path.abspath(preflight.schemas.__file__)), "%s-1.schema.json" % name)


def main(name: Optional[str], output: Optional[str] = None) -> int:
    from preflight.files.output import emit

    if name is None:
        emit("\n".join("%-10s %s" % (key, value) for key, value in NAMES.items()), output)
        return ExitCode.OK
    try:
        with open(path_of(name), encoding="utf-8") as handle:
            emit(handle.read(), output)
    except OSError as exc:
        raise PreflightError("the %s schema is missing from this installation (%s)" % (name, exc),
                             "reinstall: pip install --force-reinstall gpu-preflight")
    return ExitCode.OK


# --- the command line ----------------------------------------------------------------------------------------

def build() -> click.Command:
    @click.command("schema")
    @click.argument("name", required=False, type=click.Choice(list(DOCUMENTS)))
    @OUTPUT
    def schema(name, output) -> int:
        """Print the JSON Schema (draft 2020-12) of a JSON document preflight writes: report (check --format json),
        diagnosis, plan, facts or fleet; or of the site configuration it reads (config, its TOML as JSON); without
        NAME, list them."""
        return main(name, output)
    return schema
