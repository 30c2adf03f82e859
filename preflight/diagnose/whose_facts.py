"""Whose facts diagnose uses to make fixes concrete: this machine's only where the log does not contradict them.

A log is often read far from where it ran (a helpdesk reading a Colab log, a laptop reading a cluster job's).
This machine's facts fill a fix only when the log's own clues (host name, operating system, Python version and
path, torch version, GPU, driver) agree with them or say nothing; otherwise only the log's values are used, and
one line says why. The mode comes from --facts-from (or the site configuration's facts_from):

    auto     this machine's facts unless the log contradicts them (the default)
    machine  this machine's facts even when the log seems to come from elsewhere
    log      never this machine's: only what the log says (--no-facts)
"""

from __future__ import annotations

import os
from typing import Dict, List, NamedTuple, Optional

from preflight import inventory
from preflight.facts.view import SnapshotView, Unknown

MODES = ("auto", "machine", "log")


class Decision(NamedTuple):
    use: bool  # this machine's (or the --facts file's) facts fill the fixes
    header: str  # "facts: this machine (HOST)", "facts: from the log", "facts: none"
    why: str  # one line when the facts are not used although they were there ("" otherwise)

    def to_json(self) -> Dict[str, object]:
        whose = "machine" if self.use else ("log" if self.header.startswith("facts: from the log") else "none")
        return {"whose": whose, "header": self.header, "why": self.why}


def decide(mode: str, run: Dict[str, str], facts: Optional[SnapshotView], label: str = "this machine") -> Decision:
    """``run``: the log's clues (scan values); ``facts``: the snapshot, or None when none was taken."""
    from_log = "facts: from the log" if run else "facts: none"
    if facts is None:
        return Decision(False, from_log + (" (this machine not looked at: --facts-from log)" if mode == "log" else ""), "")
    host = facts.snapshot.get("hostname")
    named = "%s (%s)" % (label, host) if host else label
    if mode == "machine":
        return Decision(True, "facts: " + named, "")
    against = contradictions(run, facts)
    if against:
        return Decision(False, from_log, "%s is not where the log ran: %s; its facts are not used"
                        % (named, "; ".join(against)))
    return Decision(True, "facts: " + named, "")


_NOTEBOOKS = {"colab": "Google Colab", "kaggle": "a Kaggle notebook", "aistudio": "Baidu AI Studio"}


def contradictions(run: Dict[str, str], facts: SnapshotView) -> List[str]:
    """What the log says that this machine is not."""
    found: List[str] = []
    snapshot = facts.snapshot
    host_os = (snapshot.get("host") or {}).get("os") or {}
    system = str(host_os.get("system") or "").lower()
    log_host, here = _short(run.get("host")), _short(snapshot.get("hostname"))
    if log_host and here and log_host != here:
        found.append("the log ran on %s" % run["host"])
    log_os = run.get("os")
    names = {"windows": "Windows", "macos": "macOS", "linux": "Linux", "darwin": "macOS"}
    if log_os and system and names.get(log_os) != names.get(system):
        found.append("the log shows %s, this machine runs %s" % (names.get(log_os, log_os), names.get(system, system)))
    if run.get("wsl") and system == "linux" and "microsoft" not in str(host_os.get("release") or "").lower():
        found.append("the log ran under WSL2, this machine does not")
    managed = run.get("managed")
    if managed and not _is_managed(managed):
        found.append("the log ran in %s" % _NOTEBOOKS.get(managed, managed))
    python = facts.snapshot.get("python") or {}
    log_python, here_python = _minor(run.get("python")), _minor(python.get("version"))
    if log_python and here_python and log_python != here_python:
        found.append("the log's Python is %s, this machine's %s" % (log_python, here_python))
    torch = (python.get("torch") or {}).get("version")
    if run.get("torch_version") and torch and run["torch_version"].strip() != str(torch).strip():
        found.append("the log's torch is %s, this environment's %s" % (run["torch_version"], torch))
    site = run.get("site_packages")
    prefixes = [p for p in (python.get("prefix"), python.get("base_prefix")) if p]
    if site and prefixes and not any(_under(site, prefix) for prefix in prefixes):
        found.append("the log's packages are in %s" % site)
    nvml = snapshot.get("nvml") or {}
    driver = nvml.get("driver_version")
    if run.get("driver_version") and driver and run["driver_version"] != driver:
        found.append("the log's driver is %s, this machine's %s" % (run["driver_version"], driver))
    elif run.get("driver_cuda") and nvml.get("cuda_driver_version") and \
            _minor(run["driver_cuda"]) != _minor(nvml["cuda_driver_version"]):
        found.append("the log's driver runs CUDA %s, this machine's CUDA %s" % (run["driver_cuda"],
                                                                             nvml["cuda_driver_version"]))
    name = run.get("gpu_name")
    if name:
        try:
            facts.section("nvml")
            here_gpus = [gpu.get("name") or "" for gpu in inventory.machine_gpus(snapshot)]
        except Unknown:
            here_gpus = []
        if not any(n and (n.lower() in name.lower() or name.lower() in n.lower()) for n in here_gpus):
            found.append("the log's GPU is %s, this machine has %s" % (
                name, ", ".join(sorted(set(g for g in here_gpus if g))) or "none"))
    return found


def _short(host: Optional[str]) -> str:
    return str(host or "").split(".")[0].strip().lower()


def _minor(version: Optional[str]) -> str:
    parts = str(version or "").strip().split(".")
    return "%s.%s" % (parts[0], parts[1]) if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit() else ""


def _under(path: str, prefix: str) -> bool:
    def plain(text: str) -> str:
        return text.replace("\\", "/").rstrip("/").lower()

    return plain(path).startswith(plain(prefix) + "/")


def _is_managed(kind: str) -> bool:
    """Whether this process runs where the log says it ran (a hosted notebook sets these variables)."""
    return bool(os.environ.get({"colab": "COLAB_RELEASE_TAG", "kaggle": "KAGGLE_KERNEL_RUN_TYPE"}.get(kind, "")))
