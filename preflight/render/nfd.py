"""The report as a Node Feature Discovery feature file (features.d/), for Kubernetes labels.

One ``name=value`` per line: an overall readiness label, one label per rule
(its worst status over the GPUs), and GPU facts named as NVIDIA's GPU Feature
Discovery names them (``gpu.compute.major``, ``gpu.memory`` in MiB,
``cuda.driver-version.major``), under preflight's own prefix so they never
collide with GFD's ``nvidia.com/`` labels. NFD puts names without a namespace
under ``feature.node.kubernetes.io/``. An ``# +expiry-time`` line makes NFD
drop the labels if the file stops being refreshed.
"""

from __future__ import annotations

import re
import time
from typing import Dict, List, Optional

from preflight import __version__, inventory
from preflight.knowledge.nvidia import parse_major_minor
from preflight.report import Report

PREFIX = "preflight."
_WORST_FIRST = ("error", "fail", "warn", "pass", "skip")
_INVALID = re.compile(r"[^A-Za-z0-9_.-]+")


def label_value(text: str) -> str:
    """A valid Kubernetes label value: [A-Za-z0-9_.-], starting and ending alphanumeric, at most 63 characters."""
    value = _INVALID.sub("-", str(text))[:63]
    return value.strip("-_.") or "unknown"


def _rule_statuses(report: Report) -> Dict[str, str]:
    worst: Dict[str, str] = {}
    for result in report.results:
        current = worst.get(result.id)
        if current is None or _WORST_FIRST.index(result.status) < _WORST_FIRST.index(current):
            worst[result.id] = result.status
    return worst


def _gpu_labels(report: Report) -> List[str]:
    nvml = report.facts.get("nvml") or {}
    gpus = inventory.visible_gpus(report.facts, readable=True)
    labels = ["%sgpu.present=%s" % (PREFIX, "true" if gpus else "false"), "%sgpu.count=%d" % (PREFIX, len(gpus))]
    driver = (nvml.get("driver_version") or "").split(".")
    if driver and driver[0]:
        for part, name in zip(driver, ("major", "minor", "rev")):
            labels.append("%scuda.driver-version.%s=%s" % (PREFIX, name, label_value(part)))
    runtime = (nvml.get("cuda_driver_version") or "").split(".")
    if runtime and runtime[0]:
        for part, name in zip(runtime, ("major", "minor")):
            labels.append("%scuda.runtime-version.%s=%s" % (PREFIX, name, label_value(part)))
    if gpus:
        # Like GFD, describe the node by its GPUs; on a mixed node, by the least capable one.
        ccs = [cc for cc in (parse_major_minor(g.get("compute_capability")) for g in gpus) if cc]
        memory = [total for total in ((g.get("memory") or {}).get("total") for g in gpus)
                  if isinstance(total, int) and not isinstance(total, bool)]
        if ccs:
            lowest = min(ccs)
            labels += ["%sgpu.compute.major=%d" % (PREFIX, lowest[0]), "%sgpu.compute.minor=%d" % (PREFIX, lowest[1])]
        if memory:
            labels.append("%sgpu.memory=%d" % (PREFIX, min(memory) // 2**20))
        labels.append("%sgpu.product=%s" % (PREFIX, label_value(gpus[0].get("name") or "unknown")))
        if gpus[0].get("architecture"):
            labels.append("%sgpu.family=%s" % (PREFIX, label_value(gpus[0]["architecture"])))
    return labels


def render(report: Report, expires_in: Optional[float] = 3600.0) -> str:
    now = time.time()
    lines = ["# preflight %s: node features (profile %s), written %s" % (
        __version__, report.profile, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)))]
    if expires_in:
        lines.append("# +expiry-time=%s" % time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now + expires_in)))
    lines.append("%sready=%s" % (PREFIX, "true" if report.ok else "false"))
    for rule_id, status in _rule_statuses(report).items():
        lines.append("%sstatus.%s=%s" % (PREFIX, rule_id, status))
    lines += _gpu_labels(report)
    for fit in report.fits:  # a job selects nodes by what fits: preflight.fit.gelan-c.train.640=24 (per GPU)
        lines.append("%sfit.%s.%s.%d=%d" % (PREFIX, label_value(fit["workload"]), fit["task"], fit["imgsz"],
                                             fit["batch"]))
    for check, seen in report.coverage().items():  # a skipped check is said, never silent
        lines.append("%scoverage.%s=%s" % (PREFIX, check, "true" if seen["covered"] else "false"))
    return "\n".join(lines) + "\n"
