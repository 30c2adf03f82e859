"""The one door to NVML: the only module that imports ``pynvml``.

``probe(binding)`` asks NVML everything the rules may need and returns plain
data. ``binding`` is the ``pynvml`` module of nvidia-ml-py, or a replay of a
recorded machine (``nvml_replay.ReplayBinding``) that answers the same calls
and raises the same ``pynvml.NVMLError_*`` classes.

"Not supported" is a value here (``None``, listed under ``unsupported``), never
a failure. Any other error of one query is recorded under ``errors`` and the
rest of the GPU is still read.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any, Dict, List, Optional

from preflight.knowledge import nvidia

# NVML error classes whose meaning is "this query does not apply here".
_NOT_SUPPORTED = ("NVMLError_NotSupported", "NVMLError_FunctionNotFound")

# What a failed nvmlInit means, keyed by the pynvml exception class.
INIT_ERROR_KINDS = {
    "NVMLError_LibraryNotFound": "library_not_found",
    "NVMLError_DriverNotLoaded": "driver_not_loaded",
    "NVMLError_LibRmVersionMismatch": "driver_library_mismatch",
    "NVMLError_NoPermission": "no_permission",
    "NVMLError_GpuIsLost": "gpu_is_lost",
}


class BindingMissing(Exception):
    """nvidia-ml-py cannot be imported."""


def import_pynvml():
    """Import nvidia-ml-py's ``pynvml``, quietly.

    The deprecated ``pynvml`` PyPI package warns on import (or shadows the
    official module); that warning is not the user's concern during a check.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pynvml
    except ImportError as exc:  # pragma: no cover - dependency missing
        raise BindingMissing(str(exc))
    return pynvml


def load_binding(fixture_path: Optional[str] = None):
    """The real library, or a replay of ``fixture_path``.

    A fixture file is read and checked first (a bad file is the user's error,
    exit 2); BindingMissing follows only when the file is good but nvidia-ml-py
    cannot be imported, and the probe reports that as the live path does.
    """
    if fixture_path:
        from preflight.probes.nvml_replay import ReplayBinding, load_fixture

        fixture = load_fixture(fixture_path)
        return ReplayBinding(import_pynvml(), fixture, source=fixture_path)
    return import_pynvml()


def probe(binding=None, fixture_path: Optional[str] = None, health: bool = False) -> Dict[str, Any]:
    """Initialise NVML and read the driver and every GPU; always returns facts.

    ``health``: also read what the node-health rules need (PCIe link, NVLink, thresholds and power limits,
    retired pages, InfoROM); those calls cost time on every GPU, so a plain training check skips them.
    """
    if binding is None:
        try:
            binding = load_binding(fixture_path)
        except BindingMissing as exc:
            return binding_missing(str(exc))
    live = not getattr(binding, "is_replay", False)
    try:
        binding.nvmlInit()
    except binding.NVMLError as exc:
        name = type(exc).__name__
        failed = _init_failed(INIT_ERROR_KINDS.get(name, "other"), name, getattr(exc, "value", None), _error_text(exc))
        failed["device_files"] = device_files() if live else binding.device_files
        return failed
    try:
        facts = _read_machine(binding, live, health)
        facts["device_files"] = device_files() if live else binding.device_files
        if health or any(gpu.get("lost") for gpu in facts["gpus"]):
            # Where a GPU sits on the PCI bus even when NVML cannot reach it: how an operator finds it.
            facts["pci_gpus"] = pci_gpus() if live else list(getattr(binding, "pci_gpus", []))
        return facts
    finally:
        try:
            binding.nvmlShutdown()
        except binding.NVMLError:
            pass


def device_files(folder: str = "/dev") -> List[str]:
    """The NVIDIA device files (nvidiactl, nvidia0, ...): they exist where an NVIDIA kernel driver runs."""
    try:
        return sorted(name for name in os.listdir(folder) if name.startswith("nvidia"))
    except OSError:
        return []


def pci_gpus(folder: str = "/sys/bus/pci/devices") -> List[str]:
    """NVIDIA display and 3D controllers on the PCI bus (vendor 0x10de, class 0x03xxxx), as bus ids."""
    found = []
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    for name in names:
        try:
            with open(os.path.join(folder, name, "vendor")) as vendor, open(os.path.join(folder, name, "class")) as cls:
                if vendor.read().strip() == "0x10de" and cls.read().strip().startswith("0x03"):
                    found.append(name)
        except OSError:
            continue
    return sorted(found)


def binding_missing(reason: str) -> Dict[str, Any]:
    failed = _init_failed("binding_missing", "ImportError", None, "cannot import pynvml (nvidia-ml-py): %s" % reason)
    failed["init"]["python"] = sys.executable  # the interpreter whose environment lacks it: where to install it
    failed["device_files"] = device_files()
    return failed


def _init_failed(status: str, error: str, code, message: str) -> Dict[str, Any]:
    return {
        "init": {"status": status, "error": error, "code": code, "message": message},
        "driver_version": None,
        "cuda_driver_version": None,
        "device_count": 0,
        "gpus": [],
    }


def _error_text(exc) -> str:
    try:
        return str(exc)
    except Exception:  # pynvml's __str__ calls into the library for unknown codes
        return "NVML error %s" % getattr(exc, "value", "?")


class _Reader:
    """Runs single queries, turning NVML errors into recorded values."""

    def __init__(self, binding) -> None:
        self.binding = binding
        self.unsupported: List[str] = []
        self.errors: Dict[str, str] = {}
        self.lost = False

    def get(self, field: str, function: str, *args, **kwargs):
        call = getattr(self.binding, function, None)
        if call is None:  # binding older than this call
            self.unsupported.append(field)
            return None
        try:
            return call(*args, **kwargs)
        except self.binding.NVMLError as exc:
            name = type(exc).__name__
            if name in _NOT_SUPPORTED:
                self.unsupported.append(field)
            else:
                if name == "NVMLError_GpuIsLost":
                    self.lost = True
                self.errors[field] = "%s (%s)" % (name, getattr(exc, "value", "?"))
            return None


def _text(value) -> Optional[str]:
    if value is None:
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _read_machine(binding, live: bool, health: bool = False) -> Dict[str, Any]:
    system = _Reader(binding)
    driver = _text(system.get("driver_version", "nvmlSystemGetDriverVersion"))
    cuda_encoded = system.get("cuda_driver_version", "nvmlSystemGetCudaDriverVersion")
    count = system.get("device_count", "nvmlDeviceGetCount") or 0
    return {
        "init": {"status": "ok", "error": None, "code": None, "message": None},
        "driver_version": driver,
        "cuda_driver_version": nvidia.cuda_from_nvml(cuda_encoded) if cuda_encoded else None,
        "device_count": count,
        "gpus": [_read_gpu(binding, index, live, health) for index in range(count)],
        "health_read": health,
        "errors": system.errors,
    }


def _read_gpu(binding, index: int, live: bool, health: bool = False) -> Dict[str, Any]:
    r = _Reader(binding)
    gpu: Dict[str, Any] = {"index": index}
    handle = r.get("handle", "nvmlDeviceGetHandleByIndex", index)
    if handle is None:
        gpu.update(lost=r.lost, errors=r.errors, unsupported=r.unsupported)
        return gpu

    gpu["name"] = _text(r.get("name", "nvmlDeviceGetName", handle))
    gpu["uuid"] = _text(r.get("uuid", "nvmlDeviceGetUUID", handle))
    pci = r.get("pci_bus_id", "nvmlDeviceGetPciInfo", handle)
    gpu["pci_bus_id"] = _text(getattr(pci, "busId", None)) if pci is not None else None
    brand = r.get("brand", "nvmlDeviceGetBrand", handle)
    gpu["brand"] = nvidia.BRAND_NAMES.get(brand, "unknown") if brand is not None else None
    arch = r.get("architecture", "nvmlDeviceGetArchitecture", handle)
    gpu["architecture"] = nvidia.ARCHITECTURE_NAMES.get(arch, "unknown") if arch is not None else None
    cc = r.get("compute_capability", "nvmlDeviceGetCudaComputeCapability", handle)
    gpu["compute_capability"] = "%d.%d" % (cc[0], cc[1]) if cc is not None else None
    gpu["memory"] = _read_memory(r, binding, handle)

    mig = r.get("mig_mode", "nvmlDeviceGetMigMode", handle)
    gpu["mig_mode"] = {"current": bool(mig[0]), "pending": bool(mig[1])} if mig is not None else None
    gpu["mig_devices"] = _read_mig_devices(r, handle) if gpu["mig_mode"] and gpu["mig_mode"]["current"] else []
    persistence = r.get("persistence_mode", "nvmlDeviceGetPersistenceMode", handle)
    gpu["persistence_mode"] = bool(persistence) if persistence is not None else None
    ecc = r.get("ecc_mode", "nvmlDeviceGetEccMode", handle)
    gpu["ecc_mode"] = {"current": bool(ecc[0]), "pending": bool(ecc[1])} if ecc is not None else None
    gpu["ecc_uncorrected_volatile"] = r.get(
        "ecc_uncorrected_volatile", "nvmlDeviceGetTotalEccErrors", handle,
        binding.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, binding.NVML_VOLATILE_ECC,
    )
    rows = r.get("remapped_rows", "nvmlDeviceGetRemappedRows", handle)
    gpu["remapped_rows"] = (
        {"corrected": rows[0], "uncorrected": rows[1], "pending": bool(rows[2]), "failure": bool(rows[3])}
        if rows is not None else None
    )
    pending = r.get("retired_pages_pending", "nvmlDeviceGetRetiredPagesPendingStatus", handle)
    gpu["retired_pages_pending"] = bool(pending) if pending is not None else None
    gpu["temperature_c"] = r.get("temperature_c", "nvmlDeviceGetTemperature", handle, binding.NVML_TEMPERATURE_GPU)
    gpu["clock_event_reasons"] = _read_clock_events(r, binding, handle)
    gpu["processes"] = _read_processes(r, handle, live)
    gpu["fabric"] = _read_fabric(r, binding, handle)
    if health:
        _read_health(r, binding, handle, gpu)

    gpu["lost"] = r.lost
    gpu["unsupported"] = r.unsupported
    gpu["errors"] = r.errors
    return gpu


FABRIC_STATES = {0: "not_supported", 1: "not_started", 2: "in_progress", 3: "completed"}


def _read_fabric(r: _Reader, binding, handle) -> Optional[Dict[str, Any]]:
    """GPU fabric registration (HGX Hopper and newer: Fabric Manager / NVLink subnet manager); None: not supported."""
    struct = getattr(binding, "c_nvmlGpuFabricInfo_t", None)
    if struct is None:
        r.unsupported.append("fabric")
        return None
    info = struct()
    if r.get("fabric", "nvmlDeviceGetGpuFabricInfo", handle, info) is None:
        return None
    state = FABRIC_STATES.get(int(info.state), "unknown")
    return None if state == "not_supported" else {"state": state, "status": int(info.status)}


NVLINK_MAX_LINKS = 18  # NVLink 4 and 5 GPUs have 18 links; older ones fewer (NVML answers NotSupported past them)
NVLINK_COUNTERS = {"replay": 0, "recovery": 1, "crc_flit": 2, "crc_data": 3}  # NVML_NVLINK_ERROR_DL_*


def _read_health(r: _Reader, binding, handle, gpu: Dict[str, Any]) -> None:
    """What the node-health rules read beyond a training check: link, thresholds, power, retirement, InfoROM."""
    pcie = {key: r.get("pcie_" + key, function, handle) for key, function in (
        ("current_generation", "nvmlDeviceGetCurrPcieLinkGeneration"),
        ("max_generation", "nvmlDeviceGetMaxPcieLinkGeneration"),
        ("current_width", "nvmlDeviceGetCurrPcieLinkWidth"),
        ("max_width", "nvmlDeviceGetMaxPcieLinkWidth"),
        ("replay_counter", "nvmlDeviceGetPcieReplayCounter"))}
    gpu["pcie"] = pcie if any(value is not None for value in pcie.values()) else None
    utilization = r.get("utilization", "nvmlDeviceGetUtilizationRates", handle)
    gpu["utilization_gpu"] = getattr(utilization, "gpu", None) if utilization is not None else None
    gpu["nvlink"] = _read_nvlink(binding, handle, r)
    gpu["temperature_thresholds"] = {
        "slowdown": r.get("temperature_slowdown", "nvmlDeviceGetTemperatureThreshold", handle,
                          binding.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN),
        "shutdown": r.get("temperature_shutdown", "nvmlDeviceGetTemperatureThreshold", handle,
                          binding.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN)}
    gpu["power"] = {
        "usage_mw": r.get("power_usage", "nvmlDeviceGetPowerUsage", handle),
        "enforced_limit_mw": r.get("power_enforced_limit", "nvmlDeviceGetEnforcedPowerLimit", handle),
        "default_limit_mw": r.get("power_default_limit", "nvmlDeviceGetPowerManagementDefaultLimit", handle)}
    retired = {cause: r.get("retired_pages_" + cause, "nvmlDeviceGetRetiredPages", handle, code)
               for cause, code in (("single_bit", binding.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS),
                                   ("double_bit", binding.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR))}
    gpu["retired_pages"] = ({cause: len(pages or []) for cause, pages in retired.items()}
                            if any(pages is not None for pages in retired.values()) else None)
    gpu["inforom"] = _read_inforom(r, handle)


def _read_nvlink(binding, handle, r: _Reader) -> Optional[Dict[str, Any]]:
    """Each link's state and the error counters of the active ones; None on GPUs without NVLink."""
    states: List[bool] = []
    for link in range(NVLINK_MAX_LINKS):
        probe_link = _Reader(binding)  # links past the GPU's last answer NotSupported or InvalidArgument: not errors
        state = probe_link.get("nvlink", "nvmlDeviceGetNvLinkState", handle, link)
        if probe_link.lost:
            r.lost = True
            r.errors.update(probe_link.errors)
            return None
        if state is None:
            break
        states.append(bool(state))
    if not states:
        r.unsupported.append("nvlink")
        return None
    errors = {name: 0 for name in NVLINK_COUNTERS}
    for link, active in enumerate(states):
        if not active:
            continue
        for name, counter in NVLINK_COUNTERS.items():
            errors[name] += r.get("nvlink_errors", "nvmlDeviceGetNvLinkErrorCounter", handle, link, counter) or 0
    return {"links": len(states), "active": sum(states), "inactive": [i for i, on in enumerate(states) if not on],
            "errors": errors}


def _read_inforom(r: _Reader, handle) -> Optional[str]:
    """"valid" or "corrupted" (nvmlDeviceValidateInforom's checksum); None where the GPU cannot say."""
    r.get("inforom", "nvmlDeviceValidateInforom", handle)
    if "inforom" in r.unsupported:
        return None
    failed = r.errors.get("inforom", "")
    if failed.startswith("NVMLError_CorruptedInforom"):
        del r.errors["inforom"]  # a finding, not a failure to read
        return "corrupted"
    return None if failed else "valid"


def _read_memory(r: _Reader, binding, handle) -> Optional[Dict[str, Any]]:
    # v2 separates memory the driver reserves from memory processes use.
    version = getattr(binding, "nvmlMemory_v2", None)
    if version is not None:
        probe_v2 = _Reader(binding)
        try:
            info = probe_v2.get("memory", "nvmlDeviceGetMemoryInfo", handle, version=version)
        except TypeError:  # binding without the version argument
            info = None
        if probe_v2.lost:
            r.lost = True
            r.errors.update(probe_v2.errors)
            return None
        if info is not None:
            return {"total": info.total, "free": info.free, "used": info.used,
                    "reserved": getattr(info, "reserved", None), "source": "v2"}
    info = r.get("memory", "nvmlDeviceGetMemoryInfo", handle)
    if info is None:
        return None
    return {"total": info.total, "free": info.free, "used": info.used, "reserved": None, "source": "v1"}


def _read_mig_devices(r: _Reader, handle) -> List[str]:
    count = r.get("mig_device_count", "nvmlDeviceGetMaxMigDeviceCount", handle) or 0
    uuids = []
    for slot in range(count):
        probe_slot = _Reader(r.binding)  # empty slots answer NotFound: not an error
        mig_handle = probe_slot.get("mig_device", "nvmlDeviceGetMigDeviceHandleByIndex", handle, slot)
        failed = probe_slot.errors.get("mig_device", "")
        if failed and not failed.startswith("NVMLError_NotFound"):
            r.errors["mig_devices"] = failed  # the instances cannot be listed: unknown, not "none"
        if mig_handle is not None:
            uuid = _text(probe_slot.get("mig_uuid", "nvmlDeviceGetUUID", mig_handle))
            if uuid:
                uuids.append(uuid)
    return uuids


def _read_clock_events(r: _Reader, binding, handle) -> Optional[Dict[str, Any]]:
    function = "nvmlDeviceGetCurrentClocksEventReasons"
    if not hasattr(binding, function):
        function = "nvmlDeviceGetCurrentClocksThrottleReasons"
    mask = r.get("clock_event_reasons", function, handle)
    if mask is None:
        return None
    return {"mask": mask, "active": nvidia.clock_event_names(mask)}


def _read_processes(r: _Reader, handle, live: bool) -> Optional[List[Dict[str, Any]]]:
    found = r.get("processes", "nvmlDeviceGetComputeRunningProcesses", handle)
    if found is None:
        return None
    processes = []
    for process in found:
        pid = getattr(process, "pid", None)
        used = getattr(process, "usedGpuMemory", None)
        processes.append({
            "pid": pid,
            "used_memory": used if isinstance(used, int) and used >= 0 else None,
            # A replayed machine's PIDs mean nothing here; name only live ones.
            "name": _process_name(pid) if live else getattr(process, "name", None),
        })
    return processes


def _process_name(pid) -> Optional[str]:
    try:
        with open("/proc/%d/comm" % int(pid), encoding="utf-8", errors="replace") as handle:
            return handle.read().strip() or None
    except (OSError, ValueError, TypeError):
        return None  # another PID namespace (containers) or another OS
