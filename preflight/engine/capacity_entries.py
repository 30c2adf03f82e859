"""The capacity model's entries in rule files: [[workload]] (measured memory per model, task and precision) and
[[gpu]] (the catalog GPUs plan compares), read into the value types of preflight.capacity.workloads."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Dict, List, Tuple

from preflight.capacity.workloads import (
    ECC_STATES,
    OPTIMIZER_STATE_BYTES,
    PRECISIONS,
    Estimate,
    GpuModel,
    Workload,
)
from preflight.engine.fields import EntryReader, entry_reader

if TYPE_CHECKING:
    from preflight.engine.loader import RuleSet

_ID = r"^[a-z0-9][a-z0-9._-]*$"  # compiled at its first use
_WORKLOAD_KEYS = {"id", "title", "parameters", "measured_on", "source", "margin", "reference_imgsz", "estimate",
                  "optimizer", "train_script"}
_ESTIMATE_KEYS = {"task", "precision", "fixed_bytes", "per_image_bytes", "measured_batches", "measured_imgsz",
                  "extrapolated", "validation_per_image_bytes"}
_GPU_KEYS = {"id", "name", "memory_mib", "compute_capability", "source", "ecc", "usable_mib", "usable_source"}


def _reader(raw: Dict[str, Any], path: str, ruleset: "RuleSet", kind: str, table) -> EntryReader:
    return entry_reader(raw, path, kind, ruleset.warnings, ruleset.fixes, table, _ID,
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
    entry = _reader(raw, path, ruleset, "gpu", table)
    entry.check_keys(_GPU_KEYS)
    cc = entry.string("compute_capability", required=True)
    if not re.match(r"^\d+\.\d$", cc):
        raise entry.error("'compute_capability' must look like 8.6, found %r" % cc)
    memory_mib = entry.integer("memory_mib", 1)
    ecc = entry.string("ecc", default="none")
    if ecc not in ECC_STATES:
        raise entry.error("'ecc' must be one of %s (the state memory_mib was seen in), found %r"
                          % (", ".join(ECC_STATES), ecc))
    # One figure, or every figure reported (they differ by driver and cloud image): the lowest is judged with.
    figures = raw.get("usable_mib")
    if isinstance(figures, list):
        if not figures or not all(isinstance(f, int) and not isinstance(f, bool) and f >= 1 for f in figures):
            raise entry.error("'usable_mib' must be a MiB count or a list of them, found %r" % (figures,))
        figures = tuple(figures)
    else:
        single = entry.integer("usable_mib", 1, required=False)
        figures = () if single is None else (single,)
    if figures and max(figures) > memory_mib:
        raise entry.error("'usable_mib' (%d) cannot be more than 'memory_mib' (%d)" % (max(figures), memory_mib))
    usable_source = entry.string("usable_source")
    if figures and not usable_source:
        raise entry.error("'usable_mib' needs 'usable_source': where each figure was seen, on which driver")
    return GpuModel(entry.entry_id, entry.string("name", required=True), memory_mib, cc,
                    entry.string("source", required=True), ecc, min(figures) if figures else None, usable_source,
                    figures)
