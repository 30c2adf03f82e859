"""The machine around the GPUs: CPUs, RAM, /dev/shm, container markers, OS.

CPU and RAM are what this process may use, not what the machine has: CPU
affinity and a cgroup CPU quota lower the CPU count, and a cgroup memory
limit lowers total and available RAM (a container given 16 GB on a 1 TB host
has 16 GB). ``root`` lets tests point the probe at a fake file tree.
"""

from __future__ import annotations

import math
import os
import platform
from typing import Any, Dict, Optional

_UNLIMITED = 2**60  # cgroup v1 reports "no limit" as a huge number


def probe(root: str = "/", environ: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    environ = os.environ if environ is None else environ
    return {
        "cpu": _cpu(root),
        "memory": _memory(root),
        "shm": _shm(root),
        "container": _container(root, environ),
        "os": _os(root),
    }


def _path(root: str, path: str) -> str:
    return os.path.join(root, path.lstrip("/"))


def _read(root: str, path: str) -> Optional[str]:
    try:
        with open(_path(root, path), encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def _cgroup_dirs(root: str, controller: str):
    """Candidate cgroup folders of this process for one controller, most specific first."""
    own = _read(root, "/proc/self/cgroup") or ""
    candidates = []
    for line in own.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and controllers == "":
            candidates.append(("v2", "/sys/fs/cgroup" + path.rstrip("/")))
        elif controller in controllers.split(","):
            candidates.append(("v1", "/sys/fs/cgroup/%s%s" % (controllers, path.rstrip("/"))))
            candidates.append(("v1", "/sys/fs/cgroup/%s%s" % (controller, path.rstrip("/"))))
    # Inside a container the namespace root is the container's own cgroup.
    candidates += [("v2", "/sys/fs/cgroup"), ("v1", "/sys/fs/cgroup/" + controller)]
    return candidates


def _cpu(root: str) -> Dict[str, Any]:
    logical = os.cpu_count()
    try:
        affinity = len(os.sched_getaffinity(0)) if root == "/" else None
    except (AttributeError, OSError):
        affinity = None
    usable = affinity or logical
    quota = _cpu_quota(root)
    if quota is not None and usable:
        usable = min(usable, max(1, math.ceil(quota)))
    return {"logical": logical, "affinity": affinity, "cgroup_quota": quota, "count": usable}


def _int(text) -> Optional[int]:
    try:
        return int(str(text).strip())
    except (TypeError, ValueError):
        return None


def _cpu_quota(root: str) -> Optional[float]:
    for version, folder in _cgroup_dirs(root, "cpu"):
        if version == "v2":
            fields = (_read(root, folder + "/cpu.max") or "").split()
            if len(fields) == 2:
                quota, period = _int(fields[0]), _int(fields[1])
                return quota / period if quota and period else None  # "max 100000": no quota
        else:
            quota = _int(_read(root, folder + "/cpu.cfs_quota_us"))
            period = _int(_read(root, folder + "/cpu.cfs_period_us"))
            if quota is not None and period:
                return None if quota < 0 else quota / period
    return None


def _memory(root: str) -> Dict[str, Any]:
    total, available = _physical_memory(root)
    limit, usage = _memory_limit(root)
    facts = {"physical_total": total, "physical_available": available, "cgroup_limit": limit, "total": total,
             "available": available}
    if limit is not None:
        facts["total"] = min(total, limit) if total is not None else limit
        if usage is not None:
            headroom = max(0, limit - usage)
            facts["available"] = min(available, headroom) if available is not None else headroom
    return facts


def _physical_memory(root: str):
    # On Linux, /proc/meminfo is what psutil reads too (MemAvailable is its
    # "available"); reading it directly spares the import. psutil covers the rest.
    meminfo = _read(root, "/proc/meminfo")
    if not meminfo:
        if root != "/":
            return None, None
        try:
            import psutil

            memory = psutil.virtual_memory()
            return memory.total, memory.available
        except Exception:  # psutil does not support this system
            return None, None
    values = {}
    for line in meminfo.splitlines():
        name, _, rest = line.partition(":")
        amount = _int((rest.split() or [""])[0])
        if amount is not None:
            values[name] = amount * 1024
    return values.get("MemTotal"), values.get("MemAvailable", values.get("MemFree"))


def _memory_limit(root: str):
    for version, folder in _cgroup_dirs(root, "memory"):
        if version == "v2":
            text = _read(root, folder + "/memory.max")
            if text is None:
                continue
            limit = _int(text)  # "max" means no limit
            return (limit, _int(_read(root, folder + "/memory.current"))) if limit else (None, None)
        limit = _int(_read(root, folder + "/memory.limit_in_bytes"))
        if limit is None:
            continue
        if limit >= _UNLIMITED:
            return None, None
        return limit, _int(_read(root, folder + "/memory.usage_in_bytes"))
    return None, None


def _shm(root: str) -> Dict[str, Any]:
    try:
        stat = os.statvfs(_path(root, "/dev/shm"))
    except (OSError, AttributeError) as exc:
        return {"total": None, "free": None, "error": "cannot read /dev/shm: %s" % exc}
    return {"total": stat.f_blocks * stat.f_frsize, "free": stat.f_bavail * stat.f_frsize, "error": None}


def _container(root: str, environ) -> Dict[str, Any]:
    markers = []
    if os.path.exists(_path(root, "/.dockerenv")):
        markers.append("/.dockerenv")
    if os.path.exists(_path(root, "/run/.containerenv")):
        markers.append("/run/.containerenv")
    if environ.get("container"):
        markers.append("container=%s" % environ["container"])
    if environ.get("KUBERNETES_SERVICE_HOST"):
        markers.append("KUBERNETES_SERVICE_HOST")
    cgroup = _read(root, "/proc/1/cgroup") or ""
    for word in ("docker", "kubepods", "containerd", "libpod", "lxc"):
        if word in cgroup:
            markers.append("/proc/1/cgroup:%s" % word)
    kind = None
    if any("kube" in m.lower() for m in markers):
        kind = "kubernetes"
    elif any("docker" in m for m in markers):
        kind = "docker"
    elif any("containerenv" in m or "libpod" in m or "podman" in m for m in markers):
        kind = "podman"
    elif markers:
        kind = "other"
    return {"detected": bool(markers), "kind": kind, "markers": markers}


def _os(root: str) -> Dict[str, Any]:
    try:
        uname = os.uname()
        system, release, machine = uname.sysname, uname.release, uname.machine
    except AttributeError:  # Windows

        system, release, machine = platform.system(), platform.release(), platform.machine()
    pretty = None
    for line in (_read(root, "/etc/os-release") or "").splitlines():
        if line.startswith("PRETTY_NAME="):
            pretty = line.split("=", 1)[1].strip().strip('"')
    return {"system": system, "release": release, "machine": machine, "distribution": pretty}
