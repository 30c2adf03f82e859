"""A plan: one workload against GPUs, one row per GPU (the table ``preflight plan`` prints and writes as
preflight.plan/1). The rows are made by commands/plan.py; this module holds their shape."""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional

from preflight.capacity import estimate


class Row(NamedTuple):
    name: str
    source: str
    subject: str
    memory_bytes: int
    available_bytes: int
    compute_capability: Optional[str]
    arch: str
    required_bytes: int
    fits: bool
    max_batch: int
    usable: str = "free now"  # catalog and custom GPUs: "reported" or "estimated" usable memory
    ecc: Optional[str] = None

    def to_json(self) -> Dict[str, Any]:
        return {"name": self.name, "source": self.source, "subject": self.subject, "memory_bytes": self.memory_bytes,
                "available_bytes": self.available_bytes, "available_basis": self.usable, "ecc": self.ecc,
                "compute_capability": self.compute_capability, "arch_supported": self.arch,
                "required_bytes": self.required_bytes, "fits": self.fits, "max_batch": self.max_batch}


class Plan(NamedTuple):
    request: Dict[str, Any]
    batch: int
    rows: List[Row]
    smallest: List[str]
    machine_note: Optional[str]

    def to_json(self) -> Dict[str, Any]:
        r = self.request
        return {
            "schema": "preflight.plan/1",
            "workload": {"id": r["id"], "title": r["title"], "task": r["task"], "precision": r["precision"],
                         "imgsz": r["imgsz"], "batch": r["batch"], "optimizer": r.get("optimizer")},
            "estimate": {"batch": self.batch, "required_bytes": estimate.required_bytes(r, self.batch),
                         "training_bytes": estimate.training_bytes(r, self.batch),
                         "max_objects": r.get("max_objects"),
                         "basis": r.get("basis", "measured"),
                         "margin": r["margin"], "measured_on": r["measured_on"], "notes": r["notes"]},
            "gpus": [row.to_json() for row in self.rows],
            "smallest_fitting": self.smallest,
            "this_machine": self.machine_note,
        }


def json_schema() -> Dict[str, Any]:
    """``Plan.to_json`` (plan --format json) as JSON Schema."""
    from preflight.json_schema import BOOL, INT, NUM, STR, nullable, obj, strings

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
            "margin": NUM, "measured_on": STR, "notes": strings()}),
        "gpus": {"type": "array", "items": row}, "smallest_fitting": strings(),
        "this_machine": nullable(STR)})
