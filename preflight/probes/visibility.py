"""Which GPUs a CUDA program will see.

NVML ignores ``CUDA_VISIBLE_DEVICES`` and lists every GPU of the machine; the
CUDA runtime shows a program only the ones that variable names, in the order
``CUDA_DEVICE_ORDER`` gives. This module works that out from the NVML facts and
the two variables, without touching CUDA.

CUDA's rules, as documented in the CUDA C Programming Guide (environment
variables) and the MIG user guide:

- unset: every GPU; set but empty: none.
- a comma-separated list of indices, ``GPU-<uuid>`` (a unique prefix is
  enough) or ``MIG-<uuid>`` entries; parsing stops at the first entry that names
  no device, and that entry and everything after it are ignored.
- indices count in CUDA's order: ``PCI_BUS_ID`` orders by PCI bus id (as NVML
  does); the default ``FASTEST_FIRST`` puts the fastest device first. Here
  "fastest" is approximated by compute capability, ties in PCI order: exact on
  machines whose GPUs are all the same model.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from preflight.knowledge.nvidia import parse_major_minor


def _cc_key(gpu: Dict[str, Any]):
    major, minor = parse_major_minor(gpu.get("compute_capability")) or (0, 0)
    return (-major, -minor, gpu.get("index", 0))


def cuda_order(gpus: List[Dict[str, Any]], device_order: Optional[str]) -> List[Dict[str, Any]]:
    if (device_order or "").strip().upper() == "PCI_BUS_ID":
        return sorted(gpus, key=lambda g: (g.get("pci_bus_id") or "", g.get("index", 0)))
    return sorted(gpus, key=_cc_key)


def resolve(gpus: List[Dict[str, Any]], cuda_visible_devices: Optional[str],
            device_order: Optional[str]) -> Dict[str, Any]:
    ordered = cuda_order(gpus, device_order)
    order_name = "PCI_BUS_ID" if (device_order or "").strip().upper() == "PCI_BUS_ID" else "FASTEST_FIRST"
    result: Dict[str, Any] = {
        "cuda_visible_devices": cuda_visible_devices,
        "cuda_device_order": device_order,
        "order": order_name,
        "visible": [],
        "mig_selected": [],
        "notes": [],
    }
    notes: List[str] = result["notes"]
    if cuda_visible_devices is None:
        result["visible"] = [g["index"] for g in ordered]
        return _finish(result)
    if cuda_visible_devices.strip() == "":
        notes.append("CUDA_VISIBLE_DEVICES is set but empty: CUDA sees no GPU")
        return _finish(result)

    visible: List[int] = []
    for position, raw in enumerate(cuda_visible_devices.split(",")):
        entry = raw.strip()
        index = _match(entry, ordered, result, notes)
        if index is None:
            rest = ",".join(cuda_visible_devices.split(",")[position:])
            notes.append("CUDA_VISIBLE_DEVICES entry %r names no GPU of this machine: CUDA ignores %r" % (entry, rest))
            break
        if index in visible:
            notes.append("CUDA_VISIBLE_DEVICES lists GPU %d more than once" % index)
            continue
        visible.append(index)
    result["visible"] = visible
    return _finish(result)


def _finish(result: Dict[str, Any]) -> Dict[str, Any]:
    result["count"] = len(result["visible"])
    return result


def _match(entry: str, ordered: List[Dict[str, Any]], result: Dict[str, Any], notes: List[str]) -> Optional[int]:
    if entry.isascii() and entry.isdigit():  # CUDA reads ASCII digits only: "²" names no device
        position = int(entry) if len(entry) <= 9 else len(ordered)  # 5,000 digits name no device either
        return ordered[position]["index"] if position < len(ordered) else None
    upper = entry.upper()
    if upper.startswith("MIG-"):
        return _match_mig(entry, ordered, result, notes)
    if upper.startswith("GPU-"):
        found = [g for g in ordered if (g.get("uuid") or "").upper().startswith(upper)]
        if len(found) > 1:
            notes.append("CUDA_VISIBLE_DEVICES entry %r matches %d GPUs; a prefix must be unique" % (entry, len(found)))
            return None
        return found[0]["index"] if found else None
    return None


def _match_mig(entry: str, ordered: List[Dict[str, Any]], result: Dict[str, Any], notes: List[str]) -> Optional[int]:
    upper = entry.upper()
    for gpu in ordered:
        if any((uuid or "").upper() == upper for uuid in gpu.get("mig_devices") or []):
            return _select_mig(gpu, result)
    # Legacy form MIG-GPU-<parent uuid>/<gi>/<ci> names its parent.
    if upper.startswith("MIG-GPU-"):
        parent = upper[len("MIG-"):].split("/")[0]
        for gpu in ordered:
            if (gpu.get("uuid") or "").upper() == parent:
                return _select_mig(gpu, result)
    # A MIG UUID whose parent NVML did not list: credit the MIG-enabled GPUs.
    enabled = [g for g in ordered if (g.get("mig_mode") or {}).get("current")]
    if len(enabled) == 1:
        return _select_mig(enabled[0], result)
    if enabled:
        notes.append("cannot tell which GPU MIG instance %r belongs to; counting it on GPU %d" % (entry, enabled[0]["index"]))
        return _select_mig(enabled[0], result)
    return None


def _select_mig(gpu: Dict[str, Any], result: Dict[str, Any]) -> int:
    if gpu["index"] not in result["mig_selected"]:
        result["mig_selected"].append(gpu["index"])
    return gpu["index"]
