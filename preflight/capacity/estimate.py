"""A workload's GPU memory at a batch and image size, and what fits where.

A request is plain data (JSON-serialisable): ``check --workload`` puts it in
the facts snapshot and ``plan`` uses it directly, so both compute alike.
Memory is always per GPU; under DDP each of N GPUs holds batch / N images.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Iterable, List, Optional, Tuple

from preflight.capacity.workloads import OPTIMIZER_STATE_BYTES, PRECISIONS, Workload
from preflight.errors import PreflightError
from preflight.knowledge.gpus import ESTIMATED_USABLE, GpuModel

IMG_STRIDE = 32             # YOLOv9 rounds --img up to a multiple of its largest stride
DEFAULT_PRECISION = {"train": "amp", "inference": "fp32"}  # train_dual.py uses AMP; detect_dual.py FP32 unless --half
PRECISION_WORDS = {"amp": "AMP", "fp32": "FP32", "fp16": "FP16"}
DEFAULT_OPTIMIZER = "SGD"   # train.py and train_dual.py's default (--optimizer)
DEFAULT_BATCH = {"train": 16, "inference": 1}  # train_dual.py's --batch-size default; detect_dual.py runs one image
VALIDATION_BATCH_FACTOR = 2  # train.py / train_dual.py validate at twice the training batch

# Objects per image. The loss's task-aligned assigner (utils/tal/assigner.py) pads every image of a batch to the
# batch's largest label count n and builds (batch, n, anchors) tensors; its peak is F.one_hot(topk_idxs, anchors)
# in int64 (8 bytes x topk per cell), its sum (8) and four FP32 metrics and masks alive beside it (16).
# utils/loss_tal.py sets topk from YOLOM, 10 by default. The H200 measurement used MEASURED_OBJECTS boxes per
# image, so its figures hold that many; the validation pass computes the same loss at twice the batch.
ASSIGNER_TOPK = 10
ASSIGNER_BYTES_PER_CELL = 8 * ASSIGNER_TOPK + 8 + 16
ANCHOR_STRIDES = (8, 16, 32)  # YOLOv9's detection strides: anchors = sum of (imgsz / stride)^2
MEASURED_OBJECTS = 8
MAX_OBJECTS = 100_000


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


def anchors(imgsz: int) -> int:
    """Anchor points of a square image: one per cell of each detection level."""
    return sum((imgsz // stride) ** 2 for stride in ANCHOR_STRIDES)


def object_bytes(objects: int) -> int:
    """The assigner's peak per image at the reference size (640) for ``objects`` labels in an image."""
    return objects * anchors(640) * ASSIGNER_BYTES_PER_CELL


def make_request(workloads: Dict[str, Workload], workload_id: str, task: str, precision: str, batch: Optional[int],
                 imgsz: int, optimizer: str = DEFAULT_OPTIMIZER, max_objects: Optional[int] = None,
                 objects_source: str = "") -> Dict[str, Any]:
    """Validate a request (exit 2 on bad input) and gather what estimating it needs."""
    if workload_id not in workloads:
        from preflight.errors import close_matches

        raise PreflightError("unknown workload '%s'%s: the capacity model covers the YOLOv9 (dual-head) and GELAN "
                             "detection models only, not segmentation, panoptic or other repositories' models"
                             % (workload_id, close_matches(workload_id, workloads)),
                             "workloads: %s" % ", ".join(sorted(workloads)))
    if optimizer not in OPTIMIZER_STATE_BYTES:
        raise PreflightError("--optimizer must be one of %s, got %r" % (", ".join(OPTIMIZER_STATE_BYTES), optimizer))
    workload = workloads[workload_id]
    if max_objects is not None:
        if task != "train":
            raise PreflightError("--max-objects is for training: the loss's assigner holds every label, inference "
                                 "does not see labels")
        if max_objects > MAX_OBJECTS and objects_source:
            max_objects = MAX_OBJECTS  # a found count past any image's: the bound, not the figure, is the limit
        if not 1 <= max_objects <= MAX_OBJECTS:
            raise PreflightError("--max-objects must be from 1 to %d labels in one image, got %d"
                                 % (MAX_OBJECTS, max_objects), "the most labelled objects in one training image")
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
    objects_train = objects_validation = 0
    if task == "train" and max_objects is not None:
        objects_train = object_bytes(max(0, max_objects - MEASURED_OBJECTS))
        objects_validation = object_bytes(max_objects)
        notes.append("up to %d objects in an image%s: the loss's assigner pads every image of a batch to its most "
                     "labelled one, which adds %s per image at 640 to the training steps and %s per image to the "
                     "validation pass" % (max_objects, " (%s)" % objects_source if objects_source else "",
                                          _mib(objects_train), _mib(objects_validation)))
    return {
        "id": workload.id, "title": workload.title, "task": task, "precision": precision, "batch": batch,
        "imgsz": rounded, "fixed_bytes": fixed, "per_image_bytes": estimate.per_image_bytes,
        "validation_per_image_bytes": estimate.validation_per_image_bytes if task == "train" else 0,
        "optimizer": optimizer if task == "train" else None, "train_script": workload.train_script,
        "max_objects": max_objects, "object_bytes_per_image": objects_train,
        "validation_object_bytes_per_image": objects_validation,
        "margin": workload.margin, "reference_imgsz": workload.reference_imgsz, "measured_on": workload.measured_on,
        "basis": "derived" if derived else ("extrapolated" if estimate.extrapolated else "measured"),
        "notes": notes,
    }


def setup_words(request: Dict[str, Any]) -> str:
    """How the run is set up, for messages: "AMP, SGD", "AMP, SGD, up to 200 objects in an image", "FP16"."""
    words = [PRECISION_WORDS[request["precision"]]]
    if request.get("optimizer"):
        words.append(request["optimizer"])
    if request.get("max_objects"):
        words.append("up to %d objects in an image" % request["max_objects"])
    return ", ".join(words)


def _mib(value: int) -> str:
    return "%d MiB" % round(value / 2**20)


MAX_BATCH = 1_000_000   # images in one batch; far beyond any GPU, small enough to compute with
MAX_IMGSZ = 16384       # pixels; YOLOv9 trains at 640 and infers up to a few thousand
MAX_SPREAD = 64         # GPUs one torchrun command is suggested over


def per_gpu_batch(batch: int, gpus: int) -> int:
    """Images each GPU holds under DDP (train_dual.py splits --batch-size across the processes)."""
    return int(math.ceil(batch / max(1, gpus)))


def check_split(batch: int, gpus: int, where: str) -> None:
    """A total --batch that the GPUs cannot share evenly is refused, as YOLOv9's trainer refuses it at start-up
    ("--batch-size must be multiple of WORLD_SIZE"): exit 2, naming the nearest totals that work."""
    if gpus > 1 and batch % gpus:
        lower, upper = batch - batch % gpus, batch - batch % gpus + gpus
        nearest = " or ".join(str(total) for total in (lower, upper) if total >= gpus)
        raise PreflightError("--batch %d does not divide by the %d GPUs %s: YOLOv9's trainer refuses it at start-up "
                             "(under torchrun each GPU takes an equal share)" % (batch, gpus, where),
                             "use --batch %s" % nearest)


def ddp_batch(batch: int, gpus: int) -> int:
    """The total batch nearest ``batch`` that ``gpus`` GPUs share evenly (at least one image each)."""
    return max(gpus, int(round(batch / gpus)) * gpus)


def per_image(request: Dict[str, Any], with_validation: bool = True) -> float:
    """Bytes per image at the reference size: the training step's, plus (for a whole run) what the validation
    pass at twice the batch adds on top; both with the assigner's share for dense images (--max-objects)."""
    training = request["per_image_bytes"] + request.get("object_bytes_per_image", 0)
    if not with_validation:
        return training
    validation = request.get("validation_per_image_bytes", 0) + request.get("validation_object_bytes_per_image", 0)
    return training + validation * VALIDATION_BATCH_FACTOR


def required_bytes(request: Dict[str, Any], batch: int, imgsz: Optional[int] = None) -> int:
    """The whole run's peak per GPU: for training, the training steps and the validation pass after them."""
    imgsz = imgsz or request["imgsz"]
    scale = (imgsz / request["reference_imgsz"]) ** 2
    return int(round((request["fixed_bytes"] + per_image(request) * batch * scale) * (1 + request["margin"])))


def training_bytes(request: Dict[str, Any], batch: int, imgsz: Optional[int] = None) -> int:
    """The training steps alone (what the first epoch shows, before any validation)."""
    imgsz = imgsz or request["imgsz"]
    scale = (imgsz / request["reference_imgsz"]) ** 2
    return int(round((request["fixed_bytes"] + per_image(request, False) * batch * scale) * (1 + request["margin"])))


# The three verdicts. PyTorch's caching allocator gives cached blocks back and retries before it raises
# out-of-memory, so a run whose whole-run peak (validation cache included) sits at the card's limit still
# finishes: public runs finished at 1.00-1.07 times the usable memory by the whole-run estimate with its margin,
# while their training steps alone needed 0.77-0.82 of it (tests/test_capacity.py, public runs).
FITS, TIGHT, DOES_NOT_FIT = "fits", "tight", "does not fit"
VERDICTS = (FITS, TIGHT, DOES_NOT_FIT)


def without_validation(request: Dict[str, Any]) -> Dict[str, Any]:
    """The request as a DDP rank other than 0 holds it: the trainers validate on rank 0 only."""
    return dict(request, validation_per_image_bytes=0, validation_object_bytes_per_image=0)


def steps_need_bytes(request: Dict[str, Any], batch: int, imgsz: Optional[int] = None) -> int:
    """What the training steps themselves hold (no validation cache, no margin): below this nothing runs."""
    imgsz = imgsz or request["imgsz"]
    scale = (imgsz / request["reference_imgsz"]) ** 2
    return int(round(request["fixed_bytes"] + per_image(request, False) * batch * scale))


def verdict(request: Dict[str, Any], batch: int, available: int, imgsz: Optional[int] = None) -> str:
    """fits: the whole run's peak with the margin is within ``available``; tight: only the training steps' own
    need is (it should run, with no headroom, as PyTorch gives back cached memory); does not fit: not even that."""
    if required_bytes(request, batch, imgsz) <= available:
        return FITS
    if steps_need_bytes(request, batch, imgsz) <= available:
        return TIGHT
    return DOES_NOT_FIT


def _largest_batch(request: Dict[str, Any], available: int, imgsz: Optional[int], whole_run: bool) -> int:
    """The largest batch per GPU within ``available``: the whole run with its margin, or the steps' own need."""
    imgsz = imgsz or request["imgsz"]
    each = per_image(request, whole_run) * (imgsz / request["reference_imgsz"]) ** 2
    room = (available / (1 + request["margin"]) if whole_run else available) - request["fixed_bytes"]
    if room < each:
        return 0
    need = required_bytes if whole_run else steps_need_bytes
    batch = int(room // each)
    while batch > 0 and need(request, batch, imgsz) > available:  # rounding at the edge
        batch -= 1
    return batch


def max_tight_batch(request: Dict[str, Any], available: int, imgsz: Optional[int] = None) -> int:
    """The largest batch per GPU whose training steps alone fit (fits or tight; 0: not even one image)."""
    return _largest_batch(request, available, imgsz, whole_run=False)


def max_batch(request: Dict[str, Any], available: int, imgsz: Optional[int] = None) -> int:
    """The largest batch per GPU whose whole run fits in ``available`` bytes (0: not even one image)."""
    return _largest_batch(request, available, imgsz, whole_run=True)


def largest_imgsz(request: Dict[str, Any], batch: int, available: int) -> Optional[int]:
    """The largest image size (a multiple of 32, at most the requested one) at which ``batch`` fits."""
    room = available / (1 + request["margin"]) - request["fixed_bytes"]
    if room <= 0 or batch < 1:
        return None
    # Solve fixed + per_image * batch * (size / reference)^2 <= room for size, then check the edge.
    size = request["reference_imgsz"] * math.sqrt(room / (per_image(request) * batch))
    size = min(request["imgsz"], int(size // IMG_STRIDE) * IMG_STRIDE)
    while size >= IMG_STRIDE and required_bytes(request, batch, size) > available:  # rounding: a step or two
        size -= IMG_STRIDE
    return size if size >= IMG_STRIDE else None


def catalog_available(gpu: GpuModel) -> int:
    """What a job can allocate on an idle catalog GPU: its usable memory (reported, or estimated from the total)."""
    return gpu.usable_bytes


def fitting_gpus(request: Dict[str, Any], batch: int, gpus: Iterable[GpuModel]) -> List[GpuModel]:
    """Catalog GPUs that hold ``batch`` images each, smallest memory first."""
    fitting = [g for g in gpus if required_bytes(request, batch) <= catalog_available(g)]
    return sorted(fitting, key=lambda g: g.memory_mib)


def idle_usable(total_bytes: int, catalog: Iterable[GpuModel]) -> Tuple[int, str]:
    """What one process can allocate on an idle GPU of ``total_bytes`` (NVML's total), and where the figure comes
    from: the lowest usable figure reported for a catalog GPU of exactly that total, else ESTIMATED_USABLE of it.
    Free memory is not used: a node's labels must not change with the jobs running on it."""
    total_mib = total_bytes // 2**20
    reported = [g for g in catalog if g.usable_mib is not None and g.memory_mib == total_mib]
    if reported:
        lowest = min(reported, key=lambda g: g.usable_mib)
        return lowest.usable_mib * 2**20, "%d MiB usable, as reported for the %s" % (lowest.usable_mib, lowest.name)
    return int(total_bytes * ESTIMATED_USABLE), "%d%% of %d MiB (estimated)" % (round(ESTIMATED_USABLE * 100),
                                                                                total_mib)


def node_fits(requests: Iterable[Dict[str, Any]], gpus: List[Dict[str, Any]],
              catalog: Iterable[GpuModel]) -> List[Dict[str, Any]]:
    """For each sized request, the largest batch per GPU whose whole run fits on every one of ``gpus`` when idle
    (the smallest GPU decides), with the GPU that decides and its usable memory. No GPU with a known total: []."""
    sized = [(gpu, idle_usable(gpu["memory"]["total"], catalog)) for gpu in gpus
             if isinstance((gpu.get("memory") or {}).get("total"), int)]
    if not sized:
        return []
    fits = []
    for request in requests:
        batches = [(max_batch(request, usable), gpu, usable, basis) for gpu, (usable, basis) in sized]
        batch, gpu, usable, basis = min(batches, key=lambda found: found[0])
        fits.append({"workload": request["id"], "task": request["task"], "imgsz": request["imgsz"],
                     "precision": request["precision"], "batch": batch, "gpu": gpu.get("index"),
                     "gpu_name": gpu.get("name"), "usable": usable, "usable_basis": basis})
    return fits
