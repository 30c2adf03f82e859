"""Counters against their last reading on this machine: how fast PCIe replays and NVLink errors rise, and
whether pages were retired since the last check.

The NVML counters count since the driver loaded, so a single reading cannot tell a link that replayed once a
month ago from one replaying now. Each live node check keeps the readings per GPU UUID in the cache folder
(gpu-counters.json); the next check turns them into rates and differences, which go into the snapshot (so a
saved snapshot replays with them). A replayed recording has no history. A missing or damaged file only means
"first reading": nothing is judged, nothing fails.
"""

from __future__ import annotations

import time
from typing import Any, Dict, Optional

from preflight.knowledge import nvidia

FILE = "gpu-counters.json"


def annotate(nvml: Dict[str, Any], now: Optional[float] = None) -> None:
    """Add rates and differences since the last reading to ``nvml``'s GPUs, and store this reading."""
    now = time.time() if now is None else now
    previous = _read()
    current: Dict[str, Any] = {}
    for gpu in nvml.get("gpus") or []:
        uuid = gpu.get("uuid")
        if not uuid or gpu.get("lost"):
            continue
        reading = _reading(gpu, now)
        before = previous.get(uuid)
        if isinstance(before, dict) and isinstance(before.get("time"), (int, float)):
            elapsed = now - before["time"]
            if 1 <= elapsed <= nvidia.COUNTER_HISTORY_MAX_AGE:
                _compare(gpu, reading, before, elapsed)
        current[uuid] = reading
    if current:
        from preflight.files.cache import write_json

        write_json(FILE, dict(previous, **current))  # an unwritable cache only means no rates next time


def _reading(gpu: Dict[str, Any], now: float) -> Dict[str, Any]:
    pcie = gpu.get("pcie") or {}
    retired = gpu.get("retired_pages")
    nvlink = gpu.get("nvlink") or {}
    return {"time": now, "pcie_replays": pcie.get("replay_counter"),
            "retired_pages": (retired["single_bit"] + retired["double_bit"]) if retired else None,
            "nvlink_errors": dict(nvlink.get("errors") or {}) or None}


def _compare(gpu: Dict[str, Any], now: Dict[str, Any], before: Dict[str, Any], elapsed: float) -> None:
    pcie = gpu.get("pcie")
    if pcie and _counts(now["pcie_replays"], before.get("pcie_replays")):
        # A counter that went down was reset (a driver reload): count from zero.
        rose = now["pcie_replays"] - before["pcie_replays"] if now["pcie_replays"] >= before["pcie_replays"] \
            else now["pcie_replays"]
        pcie["replay_rate_per_min"] = round(rose / (elapsed / 60.0), 3)
    retired = gpu.get("retired_pages")
    if retired and _counts(now["retired_pages"], before.get("retired_pages")):
        retired["previous_total"] = before["retired_pages"]
    nvlink = gpu.get("nvlink")
    old = before.get("nvlink_errors")
    if nvlink and isinstance(old, dict) and now["nvlink_errors"]:
        rose = {name: max(0, count - old[name]) for name, count in now["nvlink_errors"].items()
                if _counts(count, old.get(name))}
        nvlink["errors_since_last"] = rose
        nvlink["seconds_since_last"] = round(elapsed, 1)


def _counts(value: Any, before: Any) -> bool:
    return all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (value, before))


def _read() -> Dict[str, Any]:
    from preflight.files.cache import read_json

    data = read_json(FILE)
    return data if isinstance(data, dict) else {}
