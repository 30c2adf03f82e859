"""preflight plan: one workload against every catalog GPU and this machine's GPUs."""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional

from preflight.engine.loader import RuleSet
from preflight.capacity import estimate
from preflight.capacity.workloads import GpuModel
from preflight.errors import PreflightError
from preflight.facts.view import SnapshotView, Unknown


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


def _arch(rule, compute_capability: Optional[str]) -> str:
    """The default rule's verdict on a compute capability: yes, below recommended, or no."""
    if rule is None or compute_capability is None:
        return "unknown"
    resolved = rule.resolve("train")
    texts = resolved.texts()
    verdict = rule.comparison.evaluate(compute_capability, resolved.params, {})
    if verdict.status == "pass":
        return "yes"
    if verdict.status == "warn":
        return "yes, below the recommended %s" % texts.get("recommended", "")
    return "no (needs %s)" % texts.get("min", "")


def _chosen(gpus, filters: List[str]):
    if not filters:
        return list(gpus)
    chosen = []
    for wanted in filters:
        found = [g for g in gpus if wanted.lower() in g.name.lower() or wanted.lower() == g.id]
        if not found:
            raise PreflightError("--gpu %s: no catalog GPU matches" % wanted,
                                 "catalog: %s" % ", ".join(g.name for g in gpus))
        chosen.extend(g for g in found if g not in chosen)
    return sorted(chosen, key=lambda g: g.memory_mib)


def plan(request: Dict[str, Any], ruleset: RuleSet, snapshot: Optional[Dict[str, Any]], filters: List[str],
         custom: Optional[GpuModel] = None) -> Plan:
    """Every catalog GPU (or those ``filters`` name) and this machine's; or ``custom`` alone."""
    batch = request["batch"] or 1
    required = estimate.required_bytes(request, batch)
    rule = ruleset.rules.get("gpu.compute_capability")
    catalog = sorted(ruleset.gpus.values(), key=lambda g: g.memory_mib)
    rows = []
    for gpu in [custom] if custom is not None else _chosen(catalog, filters):
        available = estimate.catalog_available(gpu)
        cc = gpu.compute_capability or None
        rows.append(Row(gpu.name, "custom" if gpu is custom else "catalog", gpu.id, gpu.memory_bytes, available, cc,
                        _arch(rule, cc), required, required <= available, estimate.max_batch(request, available),
                        gpu.usable_basis, None if gpu is custom else gpu.ecc))
    machine_rows, note = _this_machine(request, batch, required, rule, snapshot)
    smallest = [g.name for g in estimate.fitting_gpus(request, batch, catalog)[:3]]
    return Plan(request, batch, rows + machine_rows, smallest, note)


def _this_machine(request, batch: int, required: int, rule, snapshot):
    if snapshot is None:
        return [], None
    facts = SnapshotView(snapshot)
    try:
        nvml = facts.section("nvml")
        if nvml.get("init", {}).get("status") != "ok":
            return [], "NVML is not available here (%s)" % nvml.get("init", {}).get("status")
        rows = []
        for gpu in facts.visible_gpus(readable=True):
            index = gpu.get("index")
            memory = gpu.get("memory") or {}
            if memory.get("free") is None or memory.get("total") is None:
                continue
            free = memory["free"]
            rows.append(Row(gpu.get("name") or "GPU %d" % index, "this machine", "gpu%d" % index, memory["total"], free,
                            gpu.get("compute_capability"), _arch(rule, gpu.get("compute_capability")), required,
                            required <= free, estimate.max_batch(request, free)))
        return rows, None if rows else "no GPU is visible here"
    except Unknown as unknown:
        return [], "this machine's GPUs are unknown: %s" % unknown
