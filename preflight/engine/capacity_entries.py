"""The capacity model's entries in rule files: [[workload]] (measured memory per model, task and precision), read
into the value types of preflight.capacity.workloads, and [[gpu]] (a GPU added to the catalog plan compares)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Tuple

from preflight.capacity.workloads import (
    OPTIMIZER_STATE_BYTES,
    PRECISIONS,
    Estimate,
    Workload,
)
from preflight.engine.fields import EntryReader, entry_reader
from preflight.knowledge import gpus
from preflight.knowledge.gpus import GpuModel

if TYPE_CHECKING:
    from preflight.engine.loader import RuleSet

_ID = r"^[a-z0-9][a-z0-9._-]*$"  # compiled at its first use
_WORKLOAD_KEYS = {"id", "title", "parameters", "measured_on", "source", "margin", "reference_imgsz", "estimate",
                  "optimizer", "train_script"}
_ESTIMATE_KEYS = {"task", "precision", "fixed_bytes", "per_image_bytes", "measured_batches", "measured_imgsz",
                  "extrapolated", "validation_per_image_bytes"}


def _reader(raw: Dict[str, Any], path: str, ruleset: "RuleSet", kind: str, table) -> EntryReader:
    return entry_reader(raw, path, kind, ruleset.fixes, table, _ID,
                        "lowercase letters, digits, '.', '-' or '_'")


def _int_list(entry: EntryReader, raw: Dict[str, Any], key: str) -> List[int]:
    value = raw.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value):
        raise entry.error("'%s' must be a list of positive whole numbers, found %r" % (key, value))
    return sorted(value)


def build_workload(raw: Dict[str, Any], path: str, ruleset: "RuleSet", table=()) -> Workload:
    entry = _reader(raw, path, ruleset, "workload", table)
    entry.check_keys(_WORKLOAD_KEYS)
    margin = raw.get("margin", 0.10)
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 <= margin < 1:
        raise entry.error("'margin' must be a fraction from 0 to below 1 (0.10 is 10%%), found %r" % (margin,))
    if not raw.get("estimate"):
        raise entry.error("needs at least one [[workload.estimate]] table")
    estimates: Dict[Tuple[str, str], Estimate] = {}
    for sub in entry.tables("estimate"):
        table = sub.raw
        sub.check_keys(_ESTIMATE_KEYS, "a [[workload.estimate]]")
        task = sub.string("task", required=True)
        precision = sub.string("precision", required=True)
        if task not in PRECISIONS:
            raise entry.error("estimate task %r must be one of %s" % (task, ", ".join(PRECISIONS)))
        if precision not in PRECISIONS[task]:
            raise entry.error("estimate precision %r for %s must be one of %s"
                              % (precision, task, ", ".join(PRECISIONS[task])))
        if (task, precision) in estimates:
            raise entry.error("two estimates for %s %s" % (task, precision))
        estimates[(task, precision)] = Estimate(
            task, precision, sub.integer("fixed_bytes", 0), sub.integer("per_image_bytes", 1),
            _int_list(sub, table, "measured_batches"), _int_list(sub, table, "measured_imgsz"),
            sub.string("extrapolated"), sub.integer("validation_per_image_bytes", 0, default=0))
    optimizer = entry.string("optimizer", default="AdamW")
    if optimizer not in OPTIMIZER_STATE_BYTES:
        raise entry.error("'optimizer' must be one of %s, found %r" % (", ".join(OPTIMIZER_STATE_BYTES), optimizer))
    return Workload(entry.entry_id, entry.string("title", default=entry.entry_id), entry.integer("parameters", 1, required=False),
                    entry.string("measured_on", required=True), entry.string("source"), float(margin),
                    entry.integer("reference_imgsz", 32, default=640), estimates, path,
                    optimizer, entry.string("train_script", default="train_dual.py"))


def build_gpu(raw: Dict[str, Any], path: str, ruleset: "RuleSet", table=()) -> GpuModel:
    """A [[gpu]] of a rule file: read as the catalog's own entries are (preflight.knowledge.gpus)."""
    entry = _reader(raw, path, ruleset, "gpu", table)
    return gpus.build(entry, entry.entry_id)
