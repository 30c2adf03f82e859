"""preflight schema: the JSON Schemas of the documents preflight writes (shipped in preflight/schemas/)."""

from __future__ import annotations

import os
from typing import Optional

from preflight.errors import ExitCode, PreflightError

NAMES = {"report": "preflight.report/1", "diagnosis": "preflight.diagnosis/1", "plan": "preflight.plan/1",
         "facts": "preflight.facts/1", "fleet": "preflight.fleet/1"}


def path_of(name: str) -> str:
    import preflight.schemas

    return os.path.join(os.path.dirname(os.path.abspath(preflight.schemas.__file__)), "%s-1.schema.json" % name)


def main(name: Optional[str], output: Optional[str] = None) -> int:
    from preflight.output import emit

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
