"""Which fix lines fit where the run was (for check, this machine): the markers of placeholders.FIX_CONDITIONS.

A fix line may end in a marker such as ``{when_apt}``: the marker is "" where the line applies and unknown
elsewhere, so the template leaves the line out (the fix's alternatives then give the line that fits). The
facts come from the log's clues first (its paths, banner, kernel, hosted notebook) and from this machine's
facts where diagnose uses them. Unknown means the common case: Linux with apt, a driver the user manages.
"""

from __future__ import annotations

from typing import Dict, Optional

from packaging.version import InvalidVersion, Version

from preflight import inventory
from preflight.facts.view import SnapshotView, Unknown

_RHEL = ("rocky", "alma", "centos", "red hat", "rhel", "oracle linux", "fedora")


def conditions(run: Dict[str, str], facts: Optional[SnapshotView], from_log: bool = False) -> Dict[str, str]:
    """The markers that hold (value "") for a run whose clues are ``run`` (scan values) on ``facts``. ``from_log``:
    diagnose's, where YOLOv9's own commands are given only to a log that shows YOLOv9 ran (check sizes YOLOv9's
    workloads, so its fixes keep them)."""
    host_os = {}
    if facts is not None:
        host_os = (facts.snapshot.get("host") or {}).get("os") or {}
    system = str(host_os.get("system") or "").lower()
    os_name = run.get("os") or {"linux": "linux", "windows": "windows", "darwin": "macos"}.get(system, "")
    distribution = str(host_os.get("distribution") or "").lower()
    distro = run.get("distro") or ("rhel" if any(name in distribution for name in _RHEL) else
                                   "debian" if "debian" in distribution else "")
    wsl = bool(run.get("wsl")) or "microsoft" in str(host_os.get("release") or "").lower()
    managed = run.get("managed")
    yolo = run.get("yolo")
    jetson = bool(run.get("jetson"))
    operator = run.get("driver_owner") == "gpu-operator"
    runtime = run.get("container_runtime")
    holds = {
        "when_linux": os_name not in ("windows", "macos"),
        "when_windows": os_name == "windows",
        "when_macos": os_name == "macos",
        "when_not_macos": os_name != "macos",
        "when_apt": os_name not in ("windows", "macos") and distro != "rhel",
        "when_rhel": distro == "rhel",
        "when_ubuntu": os_name not in ("windows", "macos") and distro not in ("rhel", "debian"),
        "when_debian": distro == "debian",
        "when_wsl": wsl,
        "when_not_wsl": not wsl,
        # Not where a platform owns the driver: a hosted notebook, WSL2 (Windows' driver), a Jetson (L4T's), the GPU
        # Operator's driver container.
        "when_own_driver": not managed and not wsl and os_name != "macos" and not jetson and not operator,
        "when_managed": bool(managed),
        # A log gets YOLOv9's commands only when it shows YOLOv9 ran; a check (no log) keeps them: YOLOv9 is the
        # code preflight sizes.
        "when_yolov9": yolo == "yolov9" or (not from_log and not yolo and not run.get("program")),
    }
    holds["when_not_yolov9"] = not holds["when_yolov9"]
    holds["when_yolov7"] = yolo == "yolov7"
    holds["when_yolox_occupy"] = run.get("yolox_occupy") == "yes"
    holds["when_paddle"] = run.get("framework") == "paddle"
    holds["when_jax"] = run.get("framework") == "jax"
    holds["when_torch"] = not holds["when_paddle"] and not holds["when_jax"]
    holds.update(when_jetson=jetson, when_not_jetson=not jetson, when_operator=operator,
                 when_slurm=bool(run.get("slurm")), when_singularity=runtime == "singularity",
                 when_bridge_network=run.get("container_network") == "bridge",
                 when_container_network=run.get("container_network") in ("bridge", "own"),
                 when_docker_runtime=runtime == "docker", when_crio_runtime=runtime == "cri-o",
                 when_containerd_runtime=runtime not in ("docker", "cri-o", "singularity"))
    holds["when_python_32bit"] = run.get("python_bits") == "32"
    holds["when_ultralytics_load"] = run.get("ultralytics_load") == "yes"
    holds["when_akmods"] = run.get("driver_build") == "akmods"
    holds["when_not_akmods"] = not holds["when_akmods"]
    # CUDA's "driver version is insufficient" is also what its runtime says where it finds no driver at all.
    holds["when_no_driver_seen"] = (from_log and not run.get("driver_version") and not run.get("driver_cuda")
                                    and not _machine_has_driver(facts))
    holds["when_request_may_fit"] = True  # diagnose turns it round for a message that says otherwise
    # A driver/library mismatch has two directions: libraries newer than the loaded module (an upgrade awaiting a
    # reboot, or a module that was never built for this kernel) or older (held-back or image-shipped libraries).
    order = _compare(run.get("library_version"), run.get("module_version"))
    holds["when_libraries_newer"] = order == 1
    holds["when_libraries_older"] = order == -1
    gpus = _machine_gpus(facts)
    holds["when_gpu"] = bool(run.get("gpu_name")) or bool(gpus)
    holds["when_no_gpu"] = gpus == [] and not run.get("gpu_name")
    return {name: "" for name, held in holds.items() if held}


def _machine_gpus(facts: Optional[SnapshotView]):
    """This machine's NVIDIA GPUs; None where that is not known (no facts, or NVML could not say)."""
    if facts is None:
        return None
    try:
        nvml = facts.section("nvml")
    except Unknown:
        return None
    if (nvml.get("init") or {}).get("status") not in ("ok", None) and not nvml.get("gpus"):
        return None  # no driver: a GPU may still be there
    return list(inventory.machine_gpus(facts.snapshot))


def _machine_has_driver(facts: Optional[SnapshotView]) -> bool:
    """Whether this machine's facts show a working NVIDIA driver (NVML started)."""
    if facts is None:
        return False
    try:
        nvml = facts.section("nvml")
    except Unknown:
        return False
    return (nvml.get("init") or {}).get("status") == "ok"


def _compare(first: Optional[str], second: Optional[str]) -> Optional[int]:
    """1, 0 or -1 as driver version ``first`` is newer, equal or older than ``second``; None when either is missing."""
    if not first or not second:
        return None
    try:
        a, b = Version(first), Version(second)
    except InvalidVersion:
        return None
    return (a > b) - (a < b)
