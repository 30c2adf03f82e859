"""Helpers for the JSON Schemas (draft 2020-12) of the documents preflight writes.

Each document's schema is written next to the code that writes the document (``report.json_schema``,
``diagnose.diagnosis.json_schema``, ...); ``scripts/make_schemas.py`` collects them into ``preflight/schemas/``,
and a test keeps the shipped files equal to them and validates real outputs against them.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable

STR: Dict[str, Any] = {"type": "string"}
INT: Dict[str, Any] = {"type": "integer"}
NUM: Dict[str, Any] = {"type": "number"}
BOOL: Dict[str, Any] = {"type": "boolean"}
STATUS: Dict[str, Any] = {"enum": ["pass", "fail", "warn", "skip", "error"]}
SEVERITY: Dict[str, Any] = {"enum": ["error", "warning", "info"]}


def nullable(schema: Dict[str, Any]) -> Dict[str, Any]:
    kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    return dict(schema, type=kinds + ["null"])


def obj(required: Iterable[str], properties: Dict[str, Any], extra: bool = True) -> Dict[str, Any]:
    return {"type": "object", "required": list(required), "properties": properties, "additionalProperties": extra}


def strings() -> Dict[str, Any]:
    return {"type": "array", "items": STR}
