"""Workloads and GPUs as data ([[workload]] and [[gpu]] entries, rules/capacity/).

A workload::

    [[workload]]
    id = "yolov9-c"
    title = "..."
    measured_on = "NVIDIA H200, PyTorch 2.11"      # say what the numbers come from
    margin = 0.10                                  # added to every estimate
    reference_imgsz = 640

    [[workload.estimate]]                          # one per task and precision
    task = "train"                                 # train | inference
    precision = "amp"                              # train: amp | fp32; inference: fp16 | fp32
    fixed_bytes = 1547000000                       # CUDA context, weights, optimizer state
    per_image_bytes = 1082400000                   # per image at reference_imgsz
    measured_batches = [1, 8, 16, 64]              # where the numbers were measured
    measured_imgsz = [320, 640, 960]
    extrapolated = ""                              # how it was derived, when not measured

memory = (fixed_bytes + per_image_bytes * batch * (imgsz / reference_imgsz)^2) * (1 + margin).

A GPU: ``id``, ``name``, ``memory_mib`` (the total NVML reports with the ECC
state ``ecc`` assumed), ``compute_capability``, ``source``, and where known
``usable_mib``: what one process can allocate (PyTorch's ``total_memory``, what
YOLO banners print), 1-3% below the total on current drivers, with
``usable_source`` (where the figure was seen and on which driver generation).
Without it the usable memory is estimated at ESTIMATED_USABLE of the total.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, NamedTuple, Optional, TYPE_CHECKING, Tuple

from preflight.engine.fields import EntryReader

if TYPE_CHECKING:  # the loader reaches this module through the facts catalog: a real import would be a cycle
    from preflight.engine.loader import RuleSet

PRECISIONS = {"train": ("amp", "fp32"), "inference": ("fp16", "fp32")}
_ID = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_WORKLOAD_KEYS = {"id", "title", "parameters", "measured_on", "source", "margin", "reference_imgsz", "estimate",
                  "optimizer", "train_script"}
_ESTIMATE_KEYS = {"task", "precision", "fixed_bytes", "per_image_bytes", "measured_batches", "measured_imgsz",
                  "extrapolated", "validation_per_image_bytes"}
# Bytes of optimizer state per parameter (FP32 buffers): SGD with momentum keeps one, Adam and AdamW two.
OPTIMIZER_STATE_BYTES = {"SGD": 4, "Adam": 8, "AdamW": 8}
_GPU_KEYS = {"id", "name", "memory_mib", "compute_capability", "source", "ecc", "usable_mib", "usable_source"}
ECC_STATES = ("on", "off", "none")  # none: the card has no ECC (GeForce); HBM's ECC is always on and costs nothing
# What a process can allocate when no figure was reported: the T4's 14913 of 15360 MiB on current drivers is
# the lowest share seen (97.1%); others keep more (A100 98.9%, RTX 4090 98.6%, H200 99.6%).
ESTIMATED_USABLE = 0.97


class Estimate(NamedTuple):
    task: str
    precision: str
    fixed_bytes: int
    per_image_bytes: int
    measured_batches: List[int]
    measured_imgsz: List[int]
    extrapolated: str
    validation_per_image_bytes: int = 0  # training: what each validation image adds to the run's peak


class Workload(NamedTuple):
    id: str
    title: str
    parameters: Optional[int]
    measured_on: str
    source: str
    margin: float
    reference_imgsz: int
    estimates: Dict[Tuple[str, str], Estimate]
    origin: str
    optimizer: str = "AdamW"  # the optimizer the training estimates were measured with
    train_script: str = "train_dual.py"  # what trains it in WongKinYiu/yolov9 (GELAN: train.py)


class GpuModel(NamedTuple):
    id: str
    name: str
    memory_mib: int
    compute_capability: str
    source: str
    ecc: str = "none"
    usable_mib: Optional[int] = None
    usable_source: str = ""

    @property
    def memory_bytes(self) -> int:
        return self.memory_mib * 2**20

    @property
    def usable_bytes(self) -> int:
        """What a job on this idle GPU can allocate: the reported figure, or the conservative estimate."""
        if self.usable_mib is not None:
            return self.usable_mib * 2**20
        return int(self.memory_bytes * ESTIMATED_USABLE)

    @property
    def usable_basis(self) -> str:
        return "reported" if self.usable_mib is not None else "estimated"


def _reader(raw: Dict[str, Any], path: str, ruleset: RuleSet, kind: str) -> EntryReader:
    plain = EntryReader(raw, path, kind, "", ruleset.warnings, ruleset.fixes)
    entry_id = plain.string("id", required=True)
    if not _ID.match(entry_id):
        raise plain.error("%s id %r must be lowercase letters, digits, '.', '-' or '_'" % (kind, entry_id))
    return EntryReader(raw, path, kind, entry_id, ruleset.warnings, ruleset.fixes)


def _int(entry: EntryReader, raw: Dict[str, Any], key: str, low: int, required: bool = True) -> Optional[int]:
    if key not in raw and not required:
        return None
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise entry.error("'%s' must be a whole number of at least %d, found %r" % (key, low, value))
    return value


def _int_list(entry: EntryReader, raw: Dict[str, Any], key: str) -> List[int]:
    value = raw.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value):
        raise entry.error("'%s' must be a list of positive whole numbers, found %r" % (key, value))
    return sorted(value)


def build_workload(raw: Dict[str, Any], path: str, ruleset: RuleSet) -> Workload:
    entry = _reader(raw, path, ruleset, "workload")
    entry.warn_unknown(_WORKLOAD_KEYS)
    margin = raw.get("margin", 0.10)
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 <= margin < 1:
        raise entry.error("'margin' must be a fraction from 0 to below 1 (0.10 is 10%%), found %r" % (margin,))
    estimates_raw = raw.get("estimate")
    if not isinstance(estimates_raw, list) or not estimates_raw or not all(isinstance(e, dict) for e in estimates_raw):
        raise entry.error("needs at least one [[workload.estimate]] table")
    estimates: Dict[Tuple[str, str], Estimate] = {}
    for table in estimates_raw:
        sub = EntryReader(table, path, "workload", entry.entry_id, ruleset.warnings, ruleset.fixes)
        sub.warn_unknown(_ESTIMATE_KEYS)
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
            task, precision, _int(entry, table, "fixed_bytes", 0), _int(entry, table, "per_image_bytes", 1),
            _int_list(entry, table, "measured_batches"), _int_list(entry, table, "measured_imgsz"),
            sub.string("extrapolated"),
            _int(entry, table, "validation_per_image_bytes", 0) if "validation_per_image_bytes" in table else 0)
    optimizer = entry.string("optimizer", default="AdamW")
    if optimizer not in OPTIMIZER_STATE_BYTES:
        raise entry.error("'optimizer' must be one of %s, found %r" % (", ".join(OPTIMIZER_STATE_BYTES), optimizer))
    return Workload(entry.entry_id, entry.string("title", default=entry.entry_id), _int(entry, raw, "parameters", 1, False),
                    entry.string("measured_on", required=True), entry.string("source"), float(margin),
                    _int(entry, raw, "reference_imgsz", 32) if "reference_imgsz" in raw else 640, estimates, path,
                    optimizer, entry.string("train_script", default="train_dual.py"))


def build_gpu(raw: Dict[str, Any], path: str, ruleset: RuleSet) -> GpuModel:
    entry = _reader(raw, path, ruleset, "gpu")
    entry.warn_unknown(_GPU_KEYS)
    cc = entry.string("compute_capability", required=True)
    if not re.match(r"^\d+\.\d$", cc):
        raise entry.error("'compute_capability' must look like 8.6, found %r" % cc)
    memory_mib = _int(entry, raw, "memory_mib", 1)
    ecc = entry.string("ecc", default="none")
    if ecc not in ECC_STATES:
        raise entry.error("'ecc' must be one of %s (the state memory_mib was seen in), found %r"
                          % (", ".join(ECC_STATES), ecc))
    usable = _int(entry, raw, "usable_mib", 1, required=False)
    if usable is not None and usable > memory_mib:
        raise entry.error("'usable_mib' (%d) cannot be more than 'memory_mib' (%d)" % (usable, memory_mib))
    usable_source = entry.string("usable_source")
    if usable is not None and not usable_source:
        raise entry.error("'usable_mib' needs 'usable_source': where the figure was seen, on which driver")
    return GpuModel(entry.entry_id, entry.string("name", required=True), memory_mib, cc,
                    entry.string("source", required=True), ecc, usable, usable_source)
