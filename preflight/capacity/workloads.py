"""Workloads as data ([[workload]] entries, rules/capacity/); the GPUs they are sized on are the catalog's
(preflight.knowledge.gpus).

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

"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Tuple

PRECISIONS = {"train": ("amp", "fp32"), "inference": ("fp16", "fp32")}
# Bytes of optimizer state per parameter (FP32 buffers): SGD with momentum keeps one, Adam and AdamW two.
OPTIMIZER_STATE_BYTES = {"SGD": 4, "Adam": 8, "AdamW": 8}


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
