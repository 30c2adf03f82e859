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
``usable_source`` (where the figure was seen and on which driver generation);
a list of figures where drivers and cloud images differ (a T4 gives 14913 MiB on
current Colab, 14931 on AWS, 15102 on older drivers), judged by the lowest.
Without it the usable memory is estimated at ESTIMATED_USABLE of the total.
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Tuple

PRECISIONS = {"train": ("amp", "fp32"), "inference": ("fp16", "fp32")}
# Bytes of optimizer state per parameter (FP32 buffers): SGD with momentum keeps one, Adam and AdamW two.
OPTIMIZER_STATE_BYTES = {"SGD": 4, "Adam": 8, "AdamW": 8}
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
    usable_mib: Optional[int] = None  # the lowest of ``usable_figures``: what is judged with
    usable_source: str = ""
    usable_figures: Tuple[int, ...] = ()  # every figure reported (MiB), in the catalog's order

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
