#!/usr/bin/env python3
"""Write preflight/schemas/*.schema.json: JSON Schemas (draft 2020-12) of every JSON document preflight writes.

facts/1 is generated from the snapshot's shape (preflight/facts/shape.py, what the code reads and checks);
the others are written here. A test keeps the shipped files equal to this script's output and validates real
outputs of every command against them.

    python scripts/make_schemas.py [--check]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
FOLDER = os.path.join(ROOT, "preflight", "schemas")
DRAFT = "https://json-schema.org/draft/2020-12/schema"
BASE = "urn:preflight:schema:"

STR, INT, NUM, BOOL = {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}


def nullable(schema: Dict[str, Any]) -> Dict[str, Any]:
    kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    return dict(schema, type=kinds + ["null"])


def obj(required, properties, extra=True) -> Dict[str, Any]:
    return {"type": "object", "required": list(required), "properties": properties, "additionalProperties": extra}


def from_shape(spec: Any) -> Dict[str, Any]:
    """A shape.py spec as JSON Schema: the same types, nullability and required keys; other keys allowed."""
    if isinstance(spec, str):
        kind = spec.rstrip("?")
        schema = {"str": STR, "int": INT, "num": NUM, "bool": BOOL, "any": {}}[kind]
        return nullable(schema) if spec.endswith("?") and schema else dict(schema)
    if isinstance(spec, list):
        return {"type": "array", "items": from_shape(spec[0])}
    properties = {key: from_shape(value) for key, value in spec.items() if key not in ("?", "!", "*")}
    schema: Dict[str, Any] = {"type": ["object", "null"] if spec.get("?") else "object", "properties": properties}
    if spec.get("!"):
        schema["required"] = list(spec["!"])
    schema["additionalProperties"] = from_shape(spec["*"]) if "*" in spec else True
    return schema


FIX = nullable(obj(["title", "steps", "commands"], {"title": STR, "steps": {"type": "array", "items": STR},
                                                    "commands": {"type": "array", "items": STR}}))
STATUS = {"enum": ["pass", "fail", "warn", "skip", "error"]}
SEVERITY = {"enum": ["error", "warning", "info"]}
INVENTORY = obj(["gpus", "driver", "python", "torch"], {
    "gpus": {"type": "array", "items": obj(["index", "name"], {
        "index": nullable(INT), "name": nullable(STR), "uuid": nullable(STR), "pci_bus_id": nullable(STR),
        "memory_total": nullable(INT), "compute_capability": nullable(STR), "lost": BOOL})},
    "driver": obj(["version", "cuda"], {"version": nullable(STR), "cuda": nullable(STR), "nvml": nullable(STR)}),
    "python": nullable(obj([], {"executable": nullable(STR), "version": nullable(STR)})),
    "torch": nullable(obj([], {"version": nullable(STR), "cuda": nullable(STR)})),
})
RESULT = obj(["id", "title", "status", "severity", "subject", "observed", "expected", "message", "fix"], {
    "id": STR, "title": STR, "status": STATUS, "severity": SEVERITY, "subject": {"type": "string", "pattern": "^(system|gpu[0-9]+)$"},
    "observed": {}, "expected": nullable(STR), "message": STR, "fix": FIX})


def report() -> Dict[str, Any]:
    counts = obj(["pass", "fail", "warn", "skip", "error"], {s: {"type": "integer", "minimum": 0}
                                                            for s in ("pass", "fail", "warn", "skip", "error")}, False)
    return obj(["schema", "host", "collected_at", "preflight_version", "knowledge_as_of", "inventory", "ok", "profile",
                "strict", "exit_code", "summary", "facts_source", "seconds", "results", "notes"], {
        "schema": {"const": "preflight.report/1"}, "host": nullable(STR),
        "collected_at": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$"},
        "preflight_version": STR, "knowledge_as_of": nullable({"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}),
        "inventory": INVENTORY, "ok": BOOL, "notes": {"type": "array", "items": STR},
        "profile": {"enum": ["train", "inference", "node"]}, "strict": BOOL, "exit_code": {"enum": [0, 1]},
        "summary": counts, "facts_source": STR, "seconds": {"type": "number", "minimum": 0},
        "results": {"type": "array", "items": RESULT},
        "served": obj(["age_seconds", "checks"], {"age_seconds": NUM, "checks": INT, "last_error": nullable(STR)}),
    })


def diagnosis() -> Dict[str, Any]:
    match = obj(["id", "title", "line", "count", "excerpt", "cause", "fix"], {
        "id": STR, "title": STR, "line": {"type": "integer", "minimum": 1}, "count": {"type": "integer", "minimum": 1},
        "excerpt": STR, "cause": STR, "context": {"type": "array", "items": STR}, "fix": FIX,
        "rules": {"type": "array", "items": STR}, "checks": {"type": "array", "items": RESULT},
        "explains": {"type": "array", "items": obj(["id"], {"id": STR, "line": INT, "excerpt": STR})}})
    return obj(["schema", "source", "lines", "recognised", "matches"], {
        "schema": {"const": "preflight.diagnosis/1"}, "source": STR, "lines": INT, "bytes": INT,
        "recognised": BOOL, "facts_source": nullable(STR), "from_log": {"type": "object"},
        "notes": {"type": "array", "items": STR}, "matches": {"type": "array", "items": match},
        "last_error_lines": {"type": "array"}})


def plan() -> Dict[str, Any]:
    row = obj(["name", "source", "subject", "memory_bytes", "available_bytes", "fits", "max_batch", "required_bytes"], {
        "name": STR, "source": {"enum": ["catalog", "this machine", "custom"]}, "subject": STR,
        "memory_bytes": INT, "available_bytes": INT, "available_basis": {"enum": ["reported", "estimated", "free now"]},
        "ecc": nullable(STR), "compute_capability": nullable(STR), "arch_supported": STR,
        "required_bytes": INT, "fits": BOOL, "max_batch": {"type": "integer", "minimum": 0}})
    return obj(["schema", "workload", "estimate", "gpus", "smallest_fitting"], {
        "schema": {"const": "preflight.plan/1"},
        "workload": obj(["id", "task", "precision", "imgsz", "batch"], {
            "id": STR, "title": STR, "task": {"enum": ["train", "inference"]},
            "precision": {"enum": ["amp", "fp32", "fp16"]}, "imgsz": INT, "batch": nullable(INT),
            "optimizer": {"enum": ["SGD", "Adam", "AdamW", None]}}),
        "estimate": obj(["batch", "required_bytes", "training_bytes", "basis", "margin"], {
            "batch": INT, "required_bytes": INT, "training_bytes": INT,
            "basis": {"enum": ["measured", "extrapolated", "derived"]}, "max_objects": nullable(INT),
            "margin": NUM, "measured_on": STR, "notes": {"type": "array", "items": STR}}),
        "gpus": {"type": "array", "items": row}, "smallest_fitting": {"type": "array", "items": STR},
        "this_machine": nullable(STR)})


def fleet() -> Dict[str, Any]:
    entry = obj(["rule", "nodes", "count", "example"], {
        "rule": STR, "title": nullable(STR), "nodes": {"type": "array", "items": STR}, "count": INT, "example": STR,
        "fix": FIX})
    value = obj(["value", "count", "odd", "nodes"], {"value": STR, "count": INT, "odd": BOOL,
                                                     "nodes": {"type": "array", "items": STR}})
    problem = obj(["rule", "subject", "status", "severity", "message"], {
        "rule": STR, "subject": STR, "status": STATUS, "severity": STR, "message": STR})
    return obj(["schema", "generated_at", "summary", "failures", "warnings", "drift", "unreadable", "nodes"], {
        "schema": {"const": "preflight.fleet/1"}, "generated_at": STR,
        "summary": obj(["nodes", "ok", "failing", "warnings", "unreadable"], {
            key: {"type": "integer", "minimum": 0} for key in ("nodes", "ok", "failing", "warnings", "unreadable")}),
        "failures": {"type": "array", "items": entry}, "warnings": {"type": "array", "items": entry},
        "drift": {"type": "object", "additionalProperties": {"type": "array", "items": value}},
        "baseline": nullable(obj(["node", "differing"], {"node": STR, "differing": nullable({"type": "array"})})),
        "unreadable": {"type": "array", "items": obj(["path", "reason"], {"path": STR, "reason": STR})},
        "nodes": {"type": "array", "items": obj(["node", "source", "state", "problems"], {
            "node": STR, "source": STR, "state": {"enum": ["ok", "warnings", "failing"]},
            "inventory": {"type": "object"}, "problems": {"type": "array", "items": problem}})}})


def facts() -> Dict[str, Any]:
    from preflight.facts import shape

    schema = from_shape(shape.SNAPSHOT)
    schema["required"] = ["schema", "probes"]
    schema["properties"]["schema"] = {"const": "preflight.facts/1"}
    schema["properties"]["inventory"] = INVENTORY
    return schema


SCHEMAS = {"report": report, "diagnosis": diagnosis, "plan": plan, "facts": facts, "fleet": fleet}
TITLES = {"report": "preflight.report/1: what preflight check --format json writes",
          "diagnosis": "preflight.diagnosis/1: what preflight diagnose --format json writes",
          "plan": "preflight.plan/1: what preflight plan --format json writes",
          "facts": "preflight.facts/1: what preflight facts writes (and check --facts reads)",
          "fleet": "preflight.fleet/1: what preflight fleet --format json writes"}


def rendered() -> Dict[str, str]:
    out = {}
    for name, build in SCHEMAS.items():
        schema = {"$schema": DRAFT, "$id": BASE + "%s-1" % name, "title": TITLES[name]}
        schema.update(build())
        out["%s-1.schema.json" % name] = json.dumps(schema, indent=2, sort_keys=False) + "\n"
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the shipped files differ; write nothing")
    args = parser.parse_args()
    stale = []
    os.makedirs(FOLDER, exist_ok=True)
    for name, text in rendered().items():
        path = os.path.join(FOLDER, name)
        current = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        if current != text:
            stale.append(name)
            if not args.check:
                with open(path, "w", encoding="utf-8") as out:
                    out.write(text)
    print(("stale: %s" % ", ".join(stale)) if stale else "schemas up to date")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
