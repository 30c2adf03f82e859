"""The facts snapshot file: what ``preflight facts`` writes and ``check --facts`` reads."""

from __future__ import annotations

from typing import Any, Dict

from preflight.errors import FactsFileError

SCHEMA = "preflight.facts/1"
_HINT = "a facts file is the JSON that 'preflight facts' prints; create one with: preflight facts > facts.json"


def load(path: str) -> Dict[str, Any]:
    from preflight.files import input_files

    what = "facts file %s" % ("(standard input)" if path == "-" else path)
    data = input_files.load_json(path, what, FactsFileError, _HINT, allow_stdin=True)
    validate(data, path)
    return data


def validate(data: Any, path: str) -> None:
    if not isinstance(data, dict):
        raise FactsFileError("facts file %s: the top level must be a JSON object" % path, _HINT)
    if data.get("schema") != SCHEMA:
        raise FactsFileError("facts file %s: 'schema' is %r; this preflight reads %r" % (path, data.get("schema"), SCHEMA), _HINT)
    if not isinstance(data.get("probes"), dict):
        raise FactsFileError("facts file %s: 'probes' must be an object" % path, _HINT)
    from preflight.probes import (
        shape,  # not on the path of a plain check: only files are validated
    )

    try:
        shape.check(data)
    except shape.ShapeError as exc:
        raise FactsFileError("facts file %s: %s" % (path, exc),
                             "fix or remove that key, or save the snapshot again: preflight facts > facts.json")


def json_schema() -> Dict[str, Any]:
    """A snapshot (what preflight facts writes) as JSON Schema: the shape the code reads and checks, with the
    format's name and the inventory."""
    import copy

    from preflight import inventory
    from preflight.probes import shape

    schema = copy.deepcopy(shape.SNAPSHOT)
    schema["required"] = ["schema", "probes"]
    schema["properties"]["schema"] = {"const": SCHEMA}
    schema["properties"]["inventory"] = inventory.json_schema()
    return schema
