"""A workload's GPU memory at a batch and image size, and what fits where.

A request is plain data (JSON-serialisable): ``check --workload`` puts it in
the facts snapshot and ``plan`` uses it directly, so both compute alike.
Memory is always per GPU; under DDP each of N GPUs holds batch / N images.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Iterable, List, Optional

from preflight.capacity.workloads import OPTIMIZER_STATE_BYTES, PRECISIONS, GpuModel, Workload
from preflight.errors import PreflightError

IMG_STRIDE = 32             # YOLOv9 rounds --img up to a multiple of its largest stride
CATALOG_RESERVED = 0.005    # share of an idle catalog GPU's memory the driver keeps (0.43% measured on the H200)
DEFAULT_PRECISION = {"train": "amp", "inference": "fp32"}  # train_dual.py uses AMP; detect_dual.py FP32 unless --half
PRECISION_WORDS = {"amp": "AMP", "fp32": "FP32", "fp16": "FP16"}
DEFAULT_OPTIMIZER = "SGD"   # train.py and train_dual.py's default (--optimizer)
DEFAULT_BATCH = {"train": 16, "inference": 1}  # train_dual.py's --batch-size default; detect_dual.py runs one image
VALIDATION_BATCH_FACTOR = 2  # train.py / train_dual.py validate at twice the training batch


def precision_for(task: str, fp32: bool = False, half: bool = False) -> str:
    if task not in PRECISIONS:
        raise PreflightError("--task must be train or inference, got %r" % task)
    if fp32 and task != "train":
        raise PreflightError("--fp32 is for training (inference is FP32 unless --half)")
    if half and task != "inference":
        raise PreflightError("--half is for inference (training uses AMP unless --fp32)",
                             "train_dual.py turns AMP on by itself; --fp32 estimates a run with it off")
    if fp32:
        return "fp32"
    if half:
        return "fp16"
    return DEFAULT_PRECISION[task]


def make_request(workloads: Dict[str, Workload], workload_id: str, task: str, precision: str, batch: Optional[int],
                 imgsz: int, optimizer: str = DEFAULT_OPTIMIZER) -> Dict[str, Any]:
    """Validate a request (exit 2 on bad input) and gather what estimating it needs."""
    if workload_id not in workloads:
        from preflight.engine.fields import close_matches

        raise PreflightError("unknown workload '%s'%s: the capacity model covers the YOLOv9 (dual-head) and GELAN "
                             "detection models only, not segmentation, panoptic or other repositories' models"
                             % (workload_id, close_matches(workload_id, workloads)),
                             "workloads: %s" % ", ".join(sorted(workloads)))
    if optimizer not in OPTIMIZER_STATE_BYTES:
        raise PreflightError("--optimizer must be one of %s, got %r" % (", ".join(OPTIMIZER_STATE_BYTES), optimizer))
    workload = workloads[workload_id]
    if batch is not None and batch < 1:
        hint = ("with --batch-size -1 YOLOv9 picks the batch itself; preflight plan shows the largest batch that fits"
                if batch == -1 else "give the batch size the run will use, 1 or more")
        raise PreflightError("--batch must be 1 or more, got %d" % batch, hint)
    if batch is not None and batch > MAX_BATCH:
        raise PreflightError("--batch %d is more than %d images; no GPU holds that" % (batch, MAX_BATCH),
                             "give the batch size the run will use")
    if not IMG_STRIDE <= imgsz <= MAX_IMGSZ:
        raise PreflightError("--img must be from %d to %d pixels, got %d" % (IMG_STRIDE, MAX_IMGSZ, imgsz),
                             "for example --img 640")
    estimate = workload.estimates.get((task, precision))
    if estimate is None:
        raise PreflightError("workload '%s' has no estimate for %s in %s" % (workload_id, task,
                                                                          PRECISION_WORDS[precision]),
                             "it has: %s" % ", ".join("%s %s" % k for k in sorted(workload.estimates)))
    rounded = int(math.ceil(imgsz / IMG_STRIDE) * IMG_STRIDE)
    notes = []
    if rounded != imgsz:
        notes.append("--img %d is rounded up to %d, as YOLOv9 does (a multiple of %d)" % (imgsz, rounded, IMG_STRIDE))
    if estimate.extrapolated:
        notes.append("extrapolated: %s" % estimate.extrapolated)
    if estimate.measured_imgsz and not estimate.measured_imgsz[0] <= rounded <= estimate.measured_imgsz[-1]:
        notes.append("extrapolated: --img %d is outside the measured sizes (%d to %d); memory scaled with the pixel count"
                     % (rounded, estimate.measured_imgsz[0], estimate.measured_imgsz[-1]))
    if batch and estimate.measured_batches and batch > estimate.measured_batches[-1]:
        notes.append("extrapolated: batch %d is above the largest measured batch (%d); memory grows linearly with it"
                     % (batch, estimate.measured_batches[-1]))
    fixed = estimate.fixed_bytes
    if task == "train" and workload.parameters:
        # The estimate's fixed part holds the measured optimizer's state; the run's may keep more or less.
        fixed += (OPTIMIZER_STATE_BYTES[optimizer] - OPTIMIZER_STATE_BYTES[workload.optimizer]) * workload.parameters
    derived = estimate.extrapolated.startswith("derived")
    return {
        "id": workload.id, "title": workload.title, "task": task, "precision": precision, "batch": batch,
        "imgsz": rounded, "fixed_bytes": fixed, "per_image_bytes": estimate.per_image_bytes,
        "validation_per_image_bytes": estimate.validation_per_image_bytes if task == "train" else 0,
        "optimizer": optimizer if task == "train" else None,
        "margin": workload.margin, "reference_imgsz": workload.reference_imgsz, "measured_on": workload.measured_on,
        "basis": "derived" if derived else ("extrapolated" if estimate.extrapolated else "measured"),
        "notes": notes,
    }


MAX_BATCH = 1_000_000   # images in one batch; far beyond any GPU, small enough to compute with
MAX_IMGSZ = 16384       # pixels; YOLOv9 trains at 640 and infers up to a few thousand
MAX_SPREAD = 64         # GPUs one torchrun command is suggested over


def per_gpu_batch(batch: int, gpus: int) -> int:
    """Images each GPU holds under DDP (train_dual.py splits --batch-size across the processes)."""
    return int(math.ceil(batch / max(1, gpus)))


def _per_image(request: Dict[str, Any], with_validation: bool = True) -> float:
    """Bytes per image at the reference size: the training step's, plus (for a whole run) what the validation
    pass at twice the batch adds on top."""
    validation = request.get("validation_per_image_bytes", 0) * VALIDATION_BATCH_FACTOR if with_validation else 0
    return request["per_image_bytes"] + validation


def required_bytes(request: Dict[str, Any], batch: int, imgsz: Optional[int] = None) -> int:
    """The whole run's peak per GPU: for training, the training steps and the validation pass after them."""
    imgsz = imgsz or request["imgsz"]
    scale = (imgsz / request["reference_imgsz"]) ** 2
    return int(round((request["fixed_bytes"] + _per_image(request) * batch * scale) * (1 + request["margin"])))


def training_bytes(request: Dict[str, Any], batch: int, imgsz: Optional[int] = None) -> int:
    """The training steps alone (what the first epoch shows, before any validation)."""
    imgsz = imgsz or request["imgsz"]
    scale = (imgsz / request["reference_imgsz"]) ** 2
    return int(round((request["fixed_bytes"] + _per_image(request, False) * batch * scale) * (1 + request["margin"])))


def max_batch(request: Dict[str, Any], available: int, imgsz: Optional[int] = None) -> int:
    """The largest batch per GPU whose whole run fits in ``available`` bytes (0: not even one image)."""
    imgsz = imgsz or request["imgsz"]
    per_image = _per_image(request) * (imgsz / request["reference_imgsz"]) ** 2
    room = available / (1 + request["margin"]) - request["fixed_bytes"]
    if room < per_image:
        return 0
    batch = int(room // per_image)
    while batch > 0 and required_bytes(request, batch, imgsz) > available:  # rounding at the edge
        batch -= 1
    return batch


def largest_imgsz(request: Dict[str, Any], batch: int, available: int) -> Optional[int]:
    """The largest image size (a multiple of 32, at most the requested one) at which ``batch`` fits."""
    room = available / (1 + request["margin"]) - request["fixed_bytes"]
    if room <= 0 or batch < 1:
        return None
    # Solve fixed + per_image * batch * (size / reference)^2 <= room for size, then check the edge.
    size = request["reference_imgsz"] * math.sqrt(room / (_per_image(request) * batch))
    size = min(request["imgsz"], int(size // IMG_STRIDE) * IMG_STRIDE)
    while size >= IMG_STRIDE and required_bytes(request, batch, size) > available:  # rounding: a step or two
        size -= IMG_STRIDE
    return size if size >= IMG_STRIDE else None


def gpus_needed(request: Dict[str, Any], batch: int, available: int, most: int = 64) -> Optional[int]:
    """How many GPUs like this one spread ``batch`` so that each share fits."""
    for count in range(1, most + 1):
        if required_bytes(request, per_gpu_batch(batch, count)) <= available:
            return count
    return None


def catalog_available(gpu: GpuModel) -> int:
    return int(gpu.memory_bytes * (1 - CATALOG_RESERVED))


def fitting_gpus(request: Dict[str, Any], batch: int, gpus: Iterable[GpuModel]) -> List[GpuModel]:
    """Catalog GPUs that hold ``batch`` images each, smallest memory first."""
    fitting = [g for g in gpus if required_bytes(request, batch) <= catalog_available(g)]
    return sorted(fitting, key=lambda g: g.memory_mib)
