"""What a snapshot says the machine is, in brief: host, GPUs, driver and CUDA, the Python judged and its torch.

Reports and facts snapshots carry it (``inventory``) so that a fleet of them can be read without the full
facts, and text reports start with it in one line.
"""

from __future__ import annotations

import os
import platform
from typing import Any, Dict, List, Optional


def host_name() -> str:
    try:
        return os.uname().nodename
    except AttributeError:  # Windows
        return platform.node()


def machine_gpus(snapshot: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Every GPU NVML lists on the machine, lost ones too (the inventory, the fleet's drift), in NVML's order."""
    nvml = snapshot.get("nvml") if isinstance(snapshot.get("nvml"), dict) else {}
    gpus = nvml.get("gpus")
    return [gpu for gpu in gpus if isinstance(gpu, dict)] if isinstance(gpus, list) else []


def visible_gpus(snapshot: Dict[str, Any], readable: bool = False) -> List[Dict[str, Any]]:
    """The GPUs a CUDA program here sees, in CUDA's order (CUDA_VISIBLE_DEVICES applied; a GPU some of whose MIG
    instances are selected counts as that GPU); with ``readable``, only those NVML can read (not lost).

    The one answer to "which GPUs count" for the rules (every visible GPU is a subject, a lost one too), the NFD
    labels, the Prometheus GPU series, capacity planning and diagnose. Without visibility facts, every GPU.
    """
    gpus = machine_gpus(snapshot)
    visibility = snapshot.get("visibility") if isinstance(snapshot.get("visibility"), dict) else None
    if visibility is not None and isinstance(visibility.get("visible"), list):
        by_index = {gpu.get("index"): gpu for gpu in gpus}
        gpus = [by_index[index] for index in visibility["visible"] if index in by_index]
    return [gpu for gpu in gpus if not (readable and gpu.get("lost"))]


def of(snapshot: Dict[str, Any]) -> Dict[str, Any]:
    """The inventory of a facts snapshot; parts the snapshot lacks are null."""
    nvml = snapshot.get("nvml") if isinstance(snapshot.get("nvml"), dict) else {}
    python = snapshot.get("python") if isinstance(snapshot.get("python"), dict) else {}
    torch = python.get("torch") if isinstance(python.get("torch"), dict) else {}
    gpus: List[Dict[str, Any]] = []
    for gpu in machine_gpus(snapshot):
        memory = gpu.get("memory") if isinstance(gpu.get("memory"), dict) else {}
        gpus.append({"index": gpu.get("index"), "name": gpu.get("name"), "uuid": gpu.get("uuid"),
                     "pci_bus_id": gpu.get("pci_bus_id"), "memory_total": memory.get("total"),
                     "compute_capability": gpu.get("compute_capability"), "lost": bool(gpu.get("lost"))})
    return {
        "gpus": gpus,
        "driver": {"version": nvml.get("driver_version"), "cuda": nvml.get("cuda_driver_version"),
                   "nvml": (nvml.get("init") or {}).get("status") if nvml else None},
        "python": {"executable": python.get("executable"), "version": python.get("version")} if python else None,
        "torch": {"version": torch.get("version"), "cuda": torch.get("cuda")} if torch.get("installed") else None,
    }


def gpu_summary(gpus: List[Dict[str, Any]]) -> str:
    """"8x NVIDIA H100 80GB HBM3", "NVIDIA A100 + NVIDIA T4", "no GPU"."""
    names: Dict[str, int] = {}
    for gpu in gpus:
        name = gpu.get("name") or ("lost GPU" if gpu.get("lost") else "unknown GPU")
        names[name] = names.get(name, 0) + 1
    return " + ".join("%dx %s" % (count, name) for name, count in names.items()) or "no GPU"


def line(host: Optional[str], inventory: Dict[str, Any]) -> str:
    """One line: host | GPUs | driver (CUDA) | Python, torch."""
    driver = inventory.get("driver") or {}
    gpus = gpu_summary(inventory.get("gpus") or [])
    if driver.get("version"):
        drivers = "driver %s (CUDA %s)" % (driver["version"], driver.get("cuda") or "?")
    elif not driver.get("nvml"):  # NVML was not asked (smoke, or a --select without GPU rules): nothing is known
        gpus, drivers = "GPUs and driver not probed", None
    else:
        drivers = "no driver (NVML: %s)" % driver["nvml"]
    python = inventory.get("python") or {}
    torch = inventory.get("torch")
    software = "Python %s, %s" % (python.get("version") or "?", "torch %s" % torch["version"] if torch else "no torch") \
        if python else "Python not probed"
    return " | ".join(part for part in (host or "unknown host", gpus, drivers, software) if part)


def json_schema() -> Dict[str, Any]:
    """``of`` as JSON Schema."""
    from preflight.files.json_schema import BOOL, INT, STR, nullable, obj

    return obj(["gpus", "driver", "python", "torch"], {
        "gpus": {"type": "array", "items": obj(["index", "name"], {
            "index": nullable(INT), "name": nullable(STR), "uuid": nullable(STR), "pci_bus_id": nullable(STR),
            "memory_total": nullable(INT), "compute_capability": nullable(STR), "lost": BOOL})},
        "driver": obj(["version", "cuda"], {"version": nullable(STR), "cuda": nullable(STR), "nvml": nullable(STR)}),
        "python": nullable(obj([], {"executable": nullable(STR), "version": nullable(STR)})),
        "torch": nullable(obj([], {"version": nullable(STR), "cuda": nullable(STR)})),
    })
