"""A plan: one workload against GPUs, one row per GPU (the table ``preflight plan`` prints and writes as
preflight.plan/1). The rows are made by commands/plan.py; this module holds their shape."""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Tuple

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
    verdict: str  # estimate.VERDICTS: fits, tight, does not fit
    max_batch: int  # the largest --batch-size (total over the plan's GPUs) whose whole run fits with the margin
    max_batch_tight: int  # the largest whose training steps alone fit (it should run, with no headroom)
    usable: str = "free now"  # catalog and custom GPUs: "reported" or "estimated" usable memory
    ecc: Optional[str] = None
    usable_figures: Tuple[int, ...] = ()  # catalog GPUs: every usable figure reported (MiB); the lowest is used

    @property
    def fits(self) -> bool:
        return self.verdict == estimate.FITS

    def to_json(self) -> Dict[str, Any]:
        return {"name": self.name, "source": self.source, "subject": self.subject, "memory_bytes": self.memory_bytes,
                "available_bytes": self.available_bytes, "available_basis": self.usable,
                "usable_figures_mib": list(self.usable_figures), "ecc": self.ecc,
                "compute_capability": self.compute_capability, "arch_supported": self.arch,
                "required_bytes": self.required_bytes, "verdict": self.verdict, "fits": self.fits,
                "max_batch": self.max_batch, "max_batch_tight": self.max_batch_tight}


class Plan(NamedTuple):
    request: Dict[str, Any]
    batch: int  # per GPU: the total --batch split over ``gpus`` as DDP splits it
    rows: List[Row]
    smallest: List[str]
    machine_note: Optional[str]
    gpus: int = 1

    def to_json(self) -> Dict[str, Any]:
        r = self.request
        return {
            "schema": "preflight.plan/1",
            "workload": {"id": r["id"], "title": r["title"], "task": r["task"], "precision": r["precision"],
                         "imgsz": r["imgsz"], "batch": r["batch"], "optimizer": r.get("optimizer")},
            "estimate": {"batch": self.batch, "gpus": self.gpus,
                         "required_bytes": estimate.required_bytes(r, self.batch),
                         "training_bytes": estimate.training_bytes(r, self.batch),
                         "steps_need_bytes": estimate.steps_need_bytes(r, self.batch),
                         "max_objects": r.get("max_objects"),
                         "basis": r.get("basis", "measured"),
                         "margin": r["margin"], "measured_on": r["measured_on"], "notes": r["notes"]},
            "gpus": [row.to_json() for row in self.rows],
            "smallest_fitting": self.smallest,
            "this_machine": self.machine_note,
        }


def json_schema() -> Dict[str, Any]:
    """``Plan.to_json`` (plan --format json) as JSON Schema."""
    from preflight.files.json_schema import BOOL, INT, NUM, STR, nullable, obj, strings

    count = {"type": "integer", "minimum": 0}
    row = obj(["name", "source", "subject", "memory_bytes", "available_bytes", "verdict", "fits", "max_batch",
               "max_batch_tight", "required_bytes"], {
        "name": STR, "source": {"enum": ["catalog", "this machine", "custom"]}, "subject": STR,
        "memory_bytes": INT, "available_bytes": INT, "available_basis": {"enum": ["reported", "estimated", "free now"]},
        "usable_figures_mib": {"type": "array", "items": INT},
        "ecc": nullable(STR), "compute_capability": nullable(STR), "arch_supported": STR,
        "required_bytes": INT, "verdict": {"enum": list(estimate.VERDICTS)}, "fits": BOOL, "max_batch": count,
        "max_batch_tight": count})
    return obj(["schema", "workload", "estimate", "gpus", "smallest_fitting"], {
        "schema": {"const": "preflight.plan/1"},
        "workload": obj(["id", "task", "precision", "imgsz", "batch"], {
            "id": STR, "title": STR, "task": {"enum": ["train", "inference"]},
            "precision": {"enum": ["amp", "fp32", "fp16"]}, "imgsz": INT, "batch": nullable(INT),
            "optimizer": {"enum": ["SGD", "Adam", "AdamW", None]}}),
        "estimate": obj(["batch", "gpus", "required_bytes", "training_bytes", "steps_need_bytes", "basis", "margin"], {
            "batch": INT, "gpus": INT, "required_bytes": INT, "training_bytes": INT, "steps_need_bytes": INT,
            "basis": {"enum": ["measured", "extrapolated", "derived"]}, "max_objects": nullable(INT),
            "margin": NUM, "measured_on": STR, "notes": strings()}),
        "gpus": {"type": "array", "items": row}, "smallest_fitting": strings(),
        "this_machine": nullable(STR)})
