"""Node-health judgements over one GPU's NVML facts (and the kernel log's Xid events): pure functions.

Each returns a state a rule compares ("not_supported" wherever the GPU cannot say, which never fails) and the
details its message and fix quote. The limits are NVIDIA's (knowledge.py, from DCGM).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from preflight.knowledge import nvidia

Judged = Tuple[str, Dict[str, Any]]


def pcie(gpu: Dict[str, Any]) -> Judged:
    """width_degraded, generation_degraded (a busy GPU below its top generation), replays_rising, idle_downshift
    (a lower generation at idle: power saving), ok; or not_supported."""
    link = gpu.get("pcie") or {}
    width, max_width = link.get("current_width"), link.get("max_width")
    generation, max_generation = link.get("current_generation"), link.get("max_generation")
    if None in (width, max_width, generation, max_generation):
        return "not_supported", {}
    busy = gpu.get("utilization_gpu")
    rate = link.get("replay_rate_per_min")
    details = {"pcie_width": "x%d" % width, "pcie_max_width": "x%d" % max_width,
               "pcie_generation": "Gen%d" % generation, "pcie_max_generation": "Gen%d" % max_generation,
               "utilization": "%s%%" % busy if busy is not None else "unknown",
               "replays": link.get("replay_counter"), "replay_limit": nvidia.PCIE_REPLAYS_PER_MINUTE,
               "replay_rate": "%s a minute since the last check" % rate if rate is not None
               else "no earlier reading to compare with"}
    if width < max_width:
        return "width_degraded", details
    if generation < max_generation and busy is not None and busy >= nvidia.PCIE_BUSY_UTILIZATION:
        return "generation_degraded", details
    if rate is not None and rate > nvidia.PCIE_REPLAYS_PER_MINUTE:
        return "replays_rising", details
    if generation < max_generation:
        return "idle_downshift", details
    return "ok", details


def nvlink(gpu: Dict[str, Any], peers: Sequence[Dict[str, Any]]) -> Judged:
    """links_down (fewer active links than a peer of the same model, or any link down on an NVSwitch system, where
    every link trains to a switch), errors_rising, no_active_links (a PCIe card without a bridge), ok; or
    not_supported. A PCIe card with only some bridges fitted is judged against its peers, not on its own."""
    link = gpu.get("nvlink")
    if not link:
        return "not_supported", {}
    same = [p["nvlink"]["active"] for p in peers
            if p is not gpu and p.get("name") == gpu.get("name") and p.get("nvlink")]
    most = max(same + [link["active"]])
    details = {"nvlink_active": link["active"], "nvlink_links": link["links"], "nvlink_peer_active": most,
               "nvlink_inactive": ", ".join(str(i) for i in link["inactive"]) or "none",
               "nvlink_errors": ", ".join("%s %d" % (k, v) for k, v in sorted((link.get("errors") or {}).items())),
               "nvlink_errors_since_last": "no earlier reading to compare with"}
    if link["active"] < most or (gpu.get("fabric") and link["inactive"]):
        return "links_down", details
    rose = link.get("errors_since_last")
    seconds = link.get("seconds_since_last") or 0
    if rose is not None:
        details["nvlink_errors_since_last"] = ", ".join(
            "%s +%d" % (k, v) for k, v in sorted(rose.items())) + " in %.0f s" % seconds
        crc = rose.get("crc_flit", 0) + rose.get("crc_data", 0)
        if rose.get("replay", 0) or rose.get("recovery", 0) or \
                (seconds and crc / seconds >= nvidia.NVLINK_CRC_ERRORS_PER_SECOND):
            return "errors_rising", details
    if link["active"] == 0:
        return "no_active_links", details
    return "ok", details


def fabric(gpu: Dict[str, Any]) -> Judged:
    """completed, not_started, in_progress, failed (registered with an error status), or not_supported."""
    info = gpu.get("fabric")
    if not info:
        return "not_supported", {}
    details = {"fabric_state": info.get("state"), "fabric_status": info.get("status")}
    if info.get("state") == "completed":
        return ("completed" if not info.get("status") else "failed"), details
    return (info.get("state") if info.get("state") in ("not_started", "in_progress") else "failed"), details


def retired_pages(gpu: Dict[str, Any]) -> Judged:
    """over_limit (DCGM's limit), growing (more than at the last check), ok; or not_supported (HBM GPUs
    remap rows instead)."""
    pages = gpu.get("retired_pages")
    if not pages:
        return "not_supported", {}
    total = pages["single_bit"] + pages["double_bit"]
    previous = pages.get("previous_total")
    details = {"retired_total": total, "retired_single_bit": pages["single_bit"],
               "retired_double_bit": pages["double_bit"], "retired_limit": nvidia.RETIRED_PAGES_LIMIT,
               "retired_previous": previous if previous is not None else "no earlier reading"}
    if total >= nvidia.RETIRED_PAGES_LIMIT:
        return "over_limit", details
    if previous is not None and total > previous:
        return "growing", details
    return "ok", details


def temperature(gpu: Dict[str, Any]) -> Judged:
    """at_slowdown (at or above the slowdown threshold), ok; or not_supported."""
    now, slowdown = gpu.get("temperature_c"), (gpu.get("temperature_thresholds") or {}).get("slowdown")
    if now is None or slowdown is None:
        return "not_supported", {}
    details = {"temperature": now, "slowdown_temperature": slowdown,
               "shutdown_temperature": (gpu.get("temperature_thresholds") or {}).get("shutdown") or "unknown"}
    return ("at_slowdown" if now >= slowdown else "ok"), details


def power_limit(gpu: Dict[str, Any]) -> Judged:
    """capped (the enforced limit below the default: set with nvidia-smi -pl), default; or not_supported."""
    power = gpu.get("power") or {}
    enforced, default = power.get("enforced_limit_mw"), power.get("default_limit_mw")
    if enforced is None or default is None:
        return "not_supported", {}
    details = {"power_limit_w": _watts(enforced), "default_power_limit_w": _watts(default),
               "power_draw_w": _watts(power.get("usage_mw")), "default_power_limit_watts": "%d" % (default // 1000)}
    return ("capped" if enforced < default else "default"), details


def _watts(milliwatts: Optional[int]) -> str:
    return "%.0f W" % (milliwatts / 1000.0) if milliwatts is not None else "unknown"


def persistence(gpu: Dict[str, Any]) -> str:
    mode = gpu.get("persistence_mode")
    return "not_supported" if mode is None else ("enabled" if mode else "disabled")


def inforom(gpu: Dict[str, Any]) -> str:
    return gpu.get("inforom") or "not_supported"


def unlisted_pci(nvml: Dict[str, Any]) -> List[str]:
    """NVIDIA GPUs on the PCI bus that NVML does not list (or cannot read): where a missing GPU sits."""
    from preflight.probes.kernel_log import normal_pci

    listed = {normal_pci(g["pci_bus_id"]) for g in nvml.get("gpus") or [] if g.get("pci_bus_id") and not g.get("lost")}
    return [address for address in nvml.get("pci_gpus") or [] if normal_pci(address) not in listed]


# --- Xid events ---------------------------------------------------------------------

def xid_findings(events: Sequence[Dict[str, Any]], gpus: Sequence[Dict[str, Any]], kind: str) -> List[str]:
    """One line per (GPU, Xid) of this kind ("node", "watch" or "application"), with its count, meaning and what
    to do: "gpu3 (0000:3b:00): Xid 79 x2, GPU has fallen off the bus: drain the node and reboot it"."""
    from preflight.knowledge import xid as catalogue
    from preflight.probes.kernel_log import normal_pci

    where = {normal_pci(g["pci_bus_id"]): "gpu%d" % g["index"] for g in gpus if g.get("pci_bus_id")}
    counted: Dict[Tuple[str, int], int] = {}
    for event in events:
        if catalogue.describe(event["xid"]).kind != kind:
            continue
        key = (event.get("pci") or "?", event["xid"])
        counted[key] = counted.get(key, 0) + 1
    lines = []
    for (pci, number), count in sorted(counted.items()):
        known = catalogue.describe(number)
        subject = "%s (%s)" % (where[pci], pci) if pci in where else "PCI %s" % pci
        times = " x%d" % count if count > 1 else ""
        action = known.action[0].lower() + known.action[1:]
        lines.append("%s: Xid %d%s, %s%s" % (subject, number, times, known.name,
                                              "" if kind == "application" else ": " + action.rstrip(".")))
    return lines
