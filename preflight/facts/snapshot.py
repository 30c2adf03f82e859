"""The facts snapshot file: what ``preflight facts`` writes and ``check --facts`` reads."""

from __future__ import annotations

import json
from typing import Any, Dict

from preflight.errors import FactsFileError

SCHEMA = "preflight.facts/1"
SECTIONS = ("nvml", "visibility", "host", "python", "torch_arch", "container", "workload")
_HINT = "a facts file is the JSON that 'preflight facts' prints; create one with: preflight facts > facts.json"


def load(path: str) -> Dict[str, Any]:
    try:
        if path == "-":
            import sys

            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
    except FileNotFoundError:
        raise FactsFileError("facts file %s: no such file" % path, _HINT)
    except (OSError, UnicodeDecodeError) as exc:
        raise FactsFileError("facts file %s: cannot read it: %s" % (path, exc), _HINT)
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise FactsFileError("facts file %s: not valid JSON (%s)" % (path, exc), _HINT)
    validate(data, path)
    return data


def validate(data: Any, path: str) -> None:
    if not isinstance(data, dict):
        raise FactsFileError("facts file %s: the top level must be a JSON object" % path, _HINT)
    if data.get("schema") != SCHEMA:
        raise FactsFileError("facts file %s: 'schema' is %r; this preflight reads %r" % (path, data.get("schema"), SCHEMA), _HINT)
    if not isinstance(data.get("probes"), dict):
        raise FactsFileError("facts file %s: 'probes' must be an object" % path, _HINT)
    for section in SECTIONS:
        if section in data and data[section] is not None and not isinstance(data[section], dict):
            raise FactsFileError("facts file %s: '%s' must be an object or null" % (path, section), _HINT)
    nvml = data.get("nvml")
    if isinstance(nvml, dict):
        if not isinstance(nvml.get("init"), dict) or not isinstance(nvml.get("gpus", []), list):
            raise FactsFileError("facts file %s: 'nvml' needs an 'init' object and a 'gpus' list" % path, _HINT)
        if not all(isinstance(gpu, dict) and isinstance(gpu.get("index"), int) for gpu in nvml.get("gpus", [])):
            raise FactsFileError("facts file %s: every entry of nvml.gpus must be an object with an integer 'index'" % path, _HINT)
    visibility = data.get("visibility")
    if isinstance(visibility, dict) and not isinstance(visibility.get("visible", []), list):
        raise FactsFileError("facts file %s: visibility.visible must be a list of GPU indices" % path, _HINT)


def dumps(snapshot: Dict[str, Any]) -> str:
    return json.dumps(snapshot, indent=2, sort_keys=False)
