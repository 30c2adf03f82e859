"""The report as node_exporter textfile metrics (write it with --output DIR/preflight.prom).

Gauges with a ``preflight_`` prefix and base units. A rule's status is one
series per possible status, 1 on the current one, so that series do not
appear and vanish as results change; labels carry the rule's own severity for
the same reason. A GPU's ``gpu`` label is its index, as dcgm-exporter's is;
``uuid`` is dcgm-exporter's ``UUID`` and ``hostname`` its ``Hostname`` (the node
name in ``NODE_NAME`` where set, as dcgm-exporter's DaemonSet sets it, else the
host name), written in snake_case as Prometheus' naming rules (and promtool)
require; docs/kubernetes.md shows the join with label_replace.
"""

from __future__ import annotations

import os
from typing import Dict, List

from preflight import __version__, inventory
from preflight.engine.evaluate import STATUSES
from preflight.report import Report


def _escape(value) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _series(name: str, labels: Dict[str, object], value) -> str:
    inner = ",".join('%s="%s"' % (key, _escape(val)) for key, val in labels.items())
    return "%s{%s} %s" % (name, inner, value)


def _metric(lines: List[str], name: str, help_text: str) -> None:
    lines.append("# HELP %s %s" % (name, help_text))
    lines.append("# TYPE %s gauge" % name)


def hostname(report: Report) -> str:
    live = not report.facts_source.startswith("file")  # a saved snapshot names its own host, not this one
    return (os.environ.get("NODE_NAME") if live else None) or report.host or ""


def render(report: Report) -> str:
    host = hostname(report)
    profile = {"profile": report.profile, "hostname": host}  # every series names its node, as dcgm-exporter's
    lines: List[str] = []
    _metric(lines, "preflight_ok", "1 when the check passed (exit code 0), else 0.")
    lines.append(_series("preflight_ok", profile, 1 if report.ok else 0))
    _metric(lines, "preflight_rule_status", "Status of a rule for a subject: 1 on the current status, 0 on the others.")
    for result in report.results:
        gpu = result.subject[3:] if result.subject.startswith("gpu") else ""
        labels = {"rule": result.id, "subject": result.subject, "severity": result.rule.severity, "gpu": gpu,
                  "hostname": host}
        for status in STATUSES:
            lines.append(_series("preflight_rule_status", dict(labels, status=status), 1 if result.status == status else 0))
    _metric(lines, "preflight_check_duration_seconds", "Seconds the check took.")
    lines.append(_series("preflight_check_duration_seconds", profile, "%.4f" % report.seconds))
    _metric(lines, "preflight_last_run_timestamp_seconds", "When the check finished, in seconds since the epoch.")
    lines.append(_series("preflight_last_run_timestamp_seconds", profile, "%.3f" % report.finished_at))
    coverage = report.coverage()
    if coverage:
        _metric(lines, "preflight_coverage", "1 when preflight could see what a group of checks needs (check=xid: "
                                             "the kernel log), 0 when those checks were skipped for want of it.")
        for check, seen in coverage.items():
            lines.append(_series("preflight_coverage", {"check": check, "hostname": host}, 1 if seen["covered"] else 0))
    _metric(lines, "preflight_build_info", "The preflight version (value 1).")
    lines.append(_series("preflight_build_info", {"version": __version__, "hostname": host}, 1))
    nvml = report.facts.get("nvml") or {}
    gpus = inventory.visible_gpus(report.facts, readable=True)
    if gpus:
        _metric(lines, "preflight_gpu_info", "GPU facts as labels (value 1).")
        for gpu in gpus:
            lines.append(_series("preflight_gpu_info", {
                "gpu": gpu["index"], "name": gpu.get("name") or "", "uuid": gpu.get("uuid") or "",
                "pci_bus_id": gpu.get("pci_bus_id") or "", "compute_capability": gpu.get("compute_capability") or "",
                "driver_version": nvml.get("driver_version") or "", "cuda_driver_version": nvml.get("cuda_driver_version") or "",
                "hostname": host,
            }, 1))
        _metric(lines, "preflight_gpu_memory_total_bytes", "Total GPU memory, as NVML reports it.")
        for gpu in gpus:
            total = (gpu.get("memory") or {}).get("total")
            if total is not None:
                lines.append(_series("preflight_gpu_memory_total_bytes", {"gpu": gpu["index"], "uuid": gpu.get("uuid") or "",
                                                                          "hostname": host}, total))
    return "\n".join(lines) + "\n"
