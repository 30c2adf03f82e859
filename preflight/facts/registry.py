"""Every fact a rule can name, and the conditions a rule can require.

A fact has a dotted path (``nvml.driver_version``, ``gpu.memory.total``), a
kind that decides which comparisons apply, the probes that must run for it,
and a pure function that reads it from a snapshot. ``gpu.*`` facts are read
once per visible GPU. Some facts imply conditions: a rule on
``nvml.driver_version`` is skipped, not failed, when NVML itself is
unavailable (``nvml.init`` reports that once).

Adding a fact here is all it takes for rule files to use it.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from preflight import knowledge, units
from preflight.facts import derived, node_health

KINDS = ("version", "number", "bytes", "bool", "string", "enum", "list", "packages")


class Unknown(Exception):
    """A fact that could not be known; the message says why."""


class SnapshotView:
    """Read access to one snapshot, raising ``Unknown`` with the reason for what is missing."""

    def __init__(self, snapshot: Dict[str, Any]) -> None:
        self.snapshot = snapshot

    def section(self, name: str) -> Dict[str, Any]:
        value = self.snapshot.get(name)
        if isinstance(value, dict):
            return value
        probe = "nvml" if name == "visibility" else name
        status = (self.snapshot.get("probes") or {}).get(probe)
        if status and status.get("error"):
            raise Unknown(status["error"])
        raise Unknown("the %s probe did not run for this snapshot" % probe)

    def nvml_ok(self) -> bool:
        return self.section("nvml").get("init", {}).get("status") == "ok"

    def visible_indices(self) -> List[int]:
        return list(self.section("visibility").get("visible") or [])

    def gpu(self, index: int) -> Dict[str, Any]:
        for gpu in self.section("nvml").get("gpus") or []:
            if gpu.get("index") == index:
                return gpu
        raise Unknown("GPU %d is not in the NVML facts" % index)

    def torch(self) -> Dict[str, Any]:
        return self.section("python").get("torch") or {"installed": False}


Compute = Callable[[SnapshotView, Optional[Dict[str, Any]]], Any]


class Fact(NamedTuple):
    path: str
    kind: str
    description: str
    probes: Tuple[str, ...]
    compute: Compute
    per_gpu: bool = False
    values: Tuple[str, ...] = ()
    details: Tuple[str, ...] = ()
    implies: Tuple[str, ...] = ()

    def read(self, facts: SnapshotView, gpu: Optional[Dict[str, Any]] = None) -> Tuple[Any, Dict[str, Any]]:
        """(value, details); raises Unknown."""
        if self.per_gpu and gpu is not None and gpu.get("lost") and self.path != "gpu.health.problems":
            raise Unknown("GPU %s is lost; NVML cannot read it" % gpu.get("index"))
        result = self.compute(facts, gpu)
        if isinstance(result, tuple):
            return result
        return result, {}


class Condition(NamedTuple):
    """A named precondition of a rule (``when = [...]``); ``check`` returns None when it holds, else the reason."""

    name: str
    description: str
    probes: Tuple[str, ...]
    check: Callable[[SnapshotView], Optional[str]]


# --- readers -------------------------------------------------------------------

def _path(*keys: str) -> Callable[[Dict[str, Any]], Any]:
    def read(data: Dict[str, Any]) -> Any:
        for key in keys:
            if not isinstance(data, dict):
                return None
            data = data.get(key)
        return data
    return read


def _system(section: str, *keys: str) -> Compute:
    read = _path(*keys)
    return lambda facts, gpu: read(facts.section(section))


def _per_gpu(*keys: str) -> Compute:
    read = _path(*keys)

    def compute(facts: SnapshotView, gpu: Optional[Dict[str, Any]]) -> Any:
        value = read(gpu or {})
        for field in keys[:1]:
            if field in (gpu or {}).get("errors", {}):
                raise Unknown("NVML could not read %s of GPU %s: %s" % (field, gpu.get("index"), gpu["errors"][field]))
        return value
    return compute


def _nvml_system(field: str) -> Compute:
    """A system-wide NVML value; a query that failed is unknown, not missing."""
    def compute(facts: SnapshotView, gpu) -> Any:
        nvml = facts.section("nvml")
        error = (nvml.get("errors") or {}).get(field)
        if error:
            raise Unknown("NVML could not read %s: %s" % (field, error))
        return nvml.get(field)
    return compute


def _driver_version(facts: SnapshotView, gpu) -> Tuple[Any, Dict[str, Any]]:
    ccs = [g.get("compute_capability") for g in facts.section("nvml").get("gpus") or []]
    return _nvml_system("driver_version")(facts, gpu), {"branch_advice": knowledge.driver_branch_advice(ccs)}


def _gpu_details(gpu: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    gpu = gpu or {}
    return {"gpu_name": gpu.get("name") or "GPU %s" % gpu.get("index"), "gpu_index": gpu.get("index")}


def _nvml_status(facts: SnapshotView, gpu) -> Tuple[str, Dict[str, Any]]:
    init = facts.section("nvml").get("init") or {}
    error = "%s (%s)" % (init.get("error"), init.get("code")) if init.get("error") else "none"
    return init.get("status"), {"nvml_error": error, "nvml_message": init.get("message") or ""}


def _visible_count(facts: SnapshotView, gpu) -> Tuple[int, Dict[str, Any]]:
    visibility = facts.section("visibility")
    shown = visibility.get("cuda_visible_devices")
    return visibility.get("count", len(visibility.get("visible") or [])), {
        "cuda_visible_devices": "(unset)" if shown is None else repr(shown),
        "visibility_notes": "; ".join(visibility.get("notes") or []) or "none",
        "machine_gpu_count": len(facts.section("nvml").get("gpus") or []),
    }


def _expected_count(facts: SnapshotView, gpu) -> Tuple[str, Dict[str, Any]]:
    """The GPUs found against the GPUs expected (--expect-gpus, Slurm's Gres): as_expected, fewer or more."""
    expected = facts.snapshot.get("expected_gpus") or {}
    if expected.get("scope") == "machine":  # a node's Gres counts the whole machine, whatever CUDA_VISIBLE_DEVICES says
        found, counted = len(facts.section("nvml").get("gpus") or []), "on this machine"
    else:
        found, counted = _visible_count(facts, gpu)[0], "visible to CUDA"
    want = expected.get("count", 0)
    state = "as_expected" if found == want else ("fewer" if found < want else "more")
    unlisted = node_health.unlisted_pci(facts.section("nvml")) if state == "fewer" else []
    return state, {"expected_gpus": want, "expected_source": expected.get("source") or "?", "found_gpus": found,
                   "counted": counted, "unlisted_pci": "; on the PCI bus but not in NVML: %s" % ", ".join(unlisted)
                   if unlisted else ""}


def _python_executable(facts: SnapshotView) -> str:
    try:
        return facts.section("python").get("executable") or "python"
    except Unknown:
        return "python"


# What a printed install command is judged for: the job's interpreter, its Python version and its platform.
PYTHON_DETAILS = ("python_executable", "python_version", "platform")


def _python_details(facts: SnapshotView) -> Dict[str, Optional[str]]:
    try:
        version = facts.section("python").get("version")
    except Unknown:
        version = None
    return {"python_executable": _python_executable(facts), "python_version": version, "platform": _platform(facts)}


def _platform(facts: SnapshotView) -> Optional[str]:
    """linux_x86_64, linux_aarch64 or windows, as the wheel data names platforms; None when not known."""
    try:
        os_facts = facts.section("host").get("os") or {}
    except Unknown:
        return None
    system, machine = (os_facts.get("system") or "").lower(), (os_facts.get("machine") or "").lower()
    if system == "linux" and machine in ("x86_64", "amd64"):
        return "linux_x86_64"
    if system == "linux" and machine in ("aarch64", "arm64"):
        return "linux_aarch64"
    if system == "windows":
        return "windows"
    return "%s_%s" % (system, machine) if system else None


WHEEL_DETAILS = ("index_url", "torch_pins", "wheel_cuda", "wheel_torch", "wheel_tag", "wheel_runs", "wheel_note",
                 "no_wheel")


def _wheel(facts: SnapshotView, gpu: Optional[Dict[str, Any]] = None) -> Dict[str, Optional[str]]:
    """The torch to install here (torch_wheels.fix_values) for this driver, Python and these GPUs (or ``gpu``)."""
    from preflight import torch_wheels

    driver_version = driver_cuda = python = None
    ccs: List[Optional[str]] = []
    try:
        nvml = facts.section("nvml")
        driver_version, driver_cuda = nvml.get("driver_version"), nvml.get("cuda_driver_version")
        gpus = [gpu] if gpu else [g for g in nvml.get("gpus") or [] if g.get("index") in facts.visible_indices()]
        ccs = [g.get("compute_capability") for g in gpus]
    except Unknown:
        pass
    try:
        python = facts.section("python").get("version")
    except Unknown:
        pass
    return torch_wheels.fix_values(driver_version, driver_cuda, ccs, python, _platform(facts))


def _torch_build(facts: SnapshotView, gpu) -> Tuple[str, Dict[str, Any]]:
    torch = facts.torch()
    build = derived.torch_build(torch)
    # Which torch to install matters only when this one is not a CUDA build (it costs start-up time otherwise).
    details = dict(_wheel(facts) if build != "cuda" else {})
    details.update(_python_details(facts), torch_version=torch.get("version") or "(not installed)",
                   torch_cuda=torch.get("cuda") or "none")
    return build, details


def _cuda_compat(facts: SnapshotView, gpu) -> Tuple[str, Dict[str, Any]]:
    nvml = facts.section("nvml")
    torch = facts.torch()
    value, details = derived.cuda_compat(nvml.get("driver_version"), nvml.get("cuda_driver_version"), torch.get("cuda"))
    if value == "unknown":
        raise Unknown("cannot read the driver's CUDA version (%r) or torch's (%r)"
                      % (nvml.get("cuda_driver_version"), torch.get("cuda")))
    details.update(_python_details(facts))
    details["torch_version"] = torch.get("version") or "(not installed)"
    if value != "ok":
        details.update(_wheel(facts))
    return value, details


def _torch_kernels(facts: SnapshotView, gpu) -> Tuple[str, Dict[str, Any]]:
    status = (facts.snapshot.get("probes") or {}).get("torch_arch") or {}
    if status.get("status") == "timeout":
        # A cold 'import torch' slower than the deadline says nothing about the kernels: not a failure.
        waited = status.get("seconds") or facts.snapshot.get("seconds") or 0
        sm = knowledge.parse_major_minor((gpu or {}).get("compute_capability")) if gpu else None
        details = dict(_gpu_details(gpu), torch_wait="%.0f" % waited, torch_version=facts.torch().get("version") or "?",
                       python_executable=_python_executable(facts), torch_archs="(not known yet)",
                       gpu_sm="sm_%d%d" % sm if sm else "?")
        return "unconfirmed", details
    flags = facts.section("torch_arch").get("flags") or []
    compat, _ = _cuda_compat(facts, None)
    value, details = derived.torch_kernels(flags, (gpu or {}).get("compute_capability"),
                                           compat == "minor_version_compat")
    if value == "unknown":
        raise Unknown("NVML gave no compute capability for GPU %s" % (gpu or {}).get("index"))
    wheel = _wheel(facts, gpu) if value not in ("sass", "ptx") else {}
    details.update(_gpu_details(gpu), torch_version=facts.torch().get("version") or "?",
                   arch_index_url=wheel.get("index_url"), torch_pins=wheel.get("torch_pins"),
                   no_wheel=wheel.get("no_wheel"), wheel_note=wheel.get("wheel_note"), **_python_details(facts))
    return value, details


def _health(facts: SnapshotView, gpu) -> Tuple[List[str], Dict[str, Any]]:
    problems = derived.health_problems(gpu or {})
    if (gpu or {}).get("lost"):
        where = (gpu or {}).get("pci_bus_id")
        unlisted = node_health.unlisted_pci(facts.section("nvml"))
        if where:
            problems.append("PCI bus id %s" % where)
        elif unlisted:
            problems.append("NVIDIA devices on the PCI bus that NVML cannot read: %s" % ", ".join(unlisted))
    return problems, _gpu_details(gpu)


def _mig(facts: SnapshotView, gpu) -> Tuple[str, Dict[str, Any]]:
    selected = facts.section("visibility").get("mig_selected") or []
    error = ((gpu or {}).get("errors") or {}).get("mig_devices") or ((gpu or {}).get("errors") or {}).get(
        "mig_device_count")
    if error:
        raise Unknown("NVML could not list the MIG devices of GPU %s: %s" % ((gpu or {}).get("index"), error))
    details = _gpu_details(gpu)
    details["mig_devices"] = ", ".join((gpu or {}).get("mig_devices") or []) or "none listed"
    return derived.mig_state(gpu or {}, selected), details


def _requirements_hosts(facts: SnapshotView) -> List[Dict[str, Optional[str]]]:
    """Every GPU given to the container (NVML inside one lists exactly those), as its requirements see it."""
    nvml = facts.section("nvml")
    system = {"cuda": nvml.get("cuda_driver_version"), "driver": nvml.get("driver_version")}
    gpus = nvml.get("gpus") or [{}]
    return [dict(system, arch=gpu.get("compute_capability"), brand=gpu.get("brand"),
                 name="GPU %s (%s)" % (gpu.get("index"), gpu.get("name")) if gpu else None) for gpu in gpus]


def _unsatisfied(facts: SnapshotView, gpu) -> Tuple[List[str], Dict[str, Any]]:
    container = facts.section("container")
    hosts = _requirements_hosts(facts)
    return derived.unsatisfied_requirements(container, hosts), {
        "host_cuda": hosts[0]["cuda"] or "unknown", "host_driver": hosts[0]["driver"] or "unknown",
    }


def _missing_capabilities(facts: SnapshotView, gpu) -> Tuple[List[str], Dict[str, Any]]:
    capabilities = facts.section("container").get("NVIDIA_DRIVER_CAPABILITIES")
    shown = "(unset)" if capabilities is None else capabilities if capabilities.strip() else \
        "(empty: the default utility,compute)"
    return derived.missing_capabilities(capabilities), {"driver_capabilities": shown}


def _gpu_memory(field: str) -> Compute:
    base = _per_gpu("memory", field)

    def compute(facts: SnapshotView, gpu) -> Tuple[Any, Dict[str, Any]]:
        value = base(facts, gpu)
        details = _gpu_details(gpu)
        processes = (gpu or {}).get("processes") or []
        details["gpu_processes"] = ", ".join(
            "%s (pid %s, %s MiB)" % (p.get("name") or "?", p.get("pid"),
                                     p["used_memory"] // 2**20 if p.get("used_memory") is not None else "?")
            for p in processes
        ) or "none"
        return value, details
    return compute


def _workload_fit(facts: SnapshotView, gpu) -> Tuple[str, Dict[str, Any]]:
    """Does the requested workload (check --workload) fit in this GPU's free memory?"""
    from preflight.capacity import estimate

    request = facts.snapshot.get("workload")
    if not request:
        raise Unknown("no workload was given (--workload)")
    free = ((gpu or {}).get("memory") or {}).get("free")
    if free is None:
        raise Unknown("NVML gave no free memory for GPU %s" % (gpu or {}).get("index"))
    batch = request["per_gpu_batch"]
    required = estimate.required_bytes(request, batch)
    most = estimate.max_batch(request, free)
    if required <= free:
        value = "fits"
    else:
        value = "%s_too_big%s" % (request["task"], "" if most else "_at_batch_1")
    needed = int(math.ceil(request["batch"] / most)) if most else None  # GPUs like this one for the whole batch
    if needed is not None and needed > estimate.MAX_SPREAD:
        needed = None  # no single torchrun command spreads that far: the fix leaves the suggestion out
    smaller = estimate.largest_imgsz(request, batch, free)
    smallest_run = estimate.largest_imgsz(request, 1, free)
    details = _gpu_memory("free")(facts, gpu)[1]
    details.update(
        workload=request["id"], task=request["task"], precision_text=estimate.setup_words(request),
        batch=request["batch"], per_gpu_batch=batch, gpus=request["gpus"], imgsz=request["imgsz"],
        required=units.format_bytes(required), free=units.format_bytes(free), max_batch=most,
        max_batch_total=most * request["gpus"], train_script=request.get("train_script", "train_dual.py"),
        val_script=request.get("train_script", "train_dual.py").replace("train", "val", 1),
        max_batch_spread=(" (%d in all over the %d GPUs under torchrun)" % (most * request["gpus"], request["gpus"])
                          if request["gpus"] > 1 else ""),
        smaller_img=smaller or "none", smaller_img_batch1=smallest_run or "none", gpus_needed=needed,
        device_list=",".join(str(i) for i in range(needed or 1)), bigger_gpus=", ".join(request["catalog_fits"][:3])
        or "none in the catalog", margin_text="%d%%" % round(request["margin"] * 100),
        measured_on=request["measured_on"], estimate_notes="; ".join(request["notes"]) or None,
    )
    return value, details


def _with_gpu_details(compute: Compute) -> Compute:
    return lambda facts, gpu: (compute(facts, gpu), _gpu_details(gpu))


def _judged(judge) -> Compute:
    """A node_health judgement of one GPU, with the GPU's name and index (and its PCI bus id) in the details."""
    def compute(facts: SnapshotView, gpu) -> Tuple[str, Dict[str, Any]]:
        value, details = judge(gpu or {})
        return value, dict(details, **_gpu_details(gpu), pci_bus_id=(gpu or {}).get("pci_bus_id") or "unknown")
    return compute


def _simple(judge) -> Compute:
    return _judged(lambda gpu: (judge(gpu), {}))


def _nvlink(facts: SnapshotView, gpu) -> Tuple[str, Dict[str, Any]]:
    peers = facts.section("nvml").get("gpus") or []
    return _judged(lambda g: node_health.nvlink(g, peers))(facts, gpu)


def _xid(kind: str) -> Compute:
    def compute(facts: SnapshotView, gpu) -> Tuple[List[str], Dict[str, Any]]:
        log = facts.section("kernel_log")
        try:
            gpus = facts.section("nvml").get("gpus") or []
        except Unknown:
            gpus = []  # Xids are still listed, by PCI address
        events = log.get("events") or []
        application = node_health.xid_findings(events, gpus, "application")
        return node_health.xid_findings(events, gpus, kind), {
            "kernel_log_source": log.get("source") or "?",
            "application_xids": "; ".join(application) or "none",
            "xid_truncated": " (only the newest %d Xid lines were kept)" % len(events) if log.get("truncated") else "",
        }
    return compute


_NV = ("nvml",)
_NVH = ("nvml", "nvml_health")  # the NVML values only node-health rules read

REGISTRY: Dict[str, Fact] = {fact.path: fact for fact in [
    # NVML and driver
    Fact("nvml.init.status", "enum", "outcome of nvmlInit", _NV, _nvml_status,
         values=("ok", "library_not_found", "driver_not_loaded", "driver_library_mismatch", "no_permission",
                 "gpu_is_lost", "binding_missing", "other"),
         details=("nvml_error", "nvml_message")),
    Fact("nvml.driver_version", "version", "NVIDIA driver version (nvmlSystemGetDriverVersion)", _NV,
         _driver_version, details=("branch_advice",), implies=("nvml_ok",)),
    Fact("nvml.cuda_driver_version", "version", "newest CUDA the driver supports (nvmlSystemGetCudaDriverVersion)",
         _NV, _nvml_system("cuda_driver_version"), implies=("nvml_ok",)),
    Fact("visibility.count", "number", "GPUs a CUDA program will see (CUDA_VISIBLE_DEVICES applied)", _NV,
         _visible_count, details=("cuda_visible_devices", "visibility_notes", "machine_gpu_count"),
         implies=("nvml_ok",)),
    Fact("gpu.count.expected", "enum", "GPUs found against the count expected (--expect-gpus, Slurm's Gres)",
         _NV, _expected_count, values=("as_expected", "fewer", "more"),
         details=("expected_gpus", "expected_source", "found_gpus", "counted", "unlisted_pci"),
         implies=("gpus_expected", "nvml_ok")),
    # per GPU
    Fact("gpu.name", "string", "product name", _NV, _with_gpu_details(_per_gpu("name")), per_gpu=True,
         details=("gpu_name", "gpu_index"), implies=("nvml_ok", "gpu_visible")),
    Fact("gpu.uuid", "string", "GPU UUID", _NV, _with_gpu_details(_per_gpu("uuid")), per_gpu=True,
         details=("gpu_name", "gpu_index"), implies=("nvml_ok", "gpu_visible")),
    Fact("gpu.architecture", "string", "architecture name (ampere, hopper, ...)", _NV,
         _with_gpu_details(_per_gpu("architecture")), per_gpu=True, details=("gpu_name", "gpu_index"),
         implies=("nvml_ok", "gpu_visible")),
    Fact("gpu.compute_capability", "version", "CUDA compute capability (major.minor)", _NV,
         _with_gpu_details(_per_gpu("compute_capability")), per_gpu=True, details=("gpu_name", "gpu_index"),
         implies=("nvml_ok", "gpu_visible")),
    Fact("gpu.memory.total", "bytes", "total GPU memory", _NV, _gpu_memory("total"), per_gpu=True,
         details=("gpu_name", "gpu_index", "gpu_processes"), implies=("nvml_ok", "gpu_visible")),
    Fact("gpu.memory.free", "bytes", "free GPU memory", _NV, _gpu_memory("free"), per_gpu=True,
         details=("gpu_name", "gpu_index", "gpu_processes"), implies=("nvml_ok", "gpu_visible")),
    Fact("gpu.memory.used", "bytes", "GPU memory in use", _NV, _gpu_memory("used"), per_gpu=True,
         details=("gpu_name", "gpu_index", "gpu_processes"), implies=("nvml_ok", "gpu_visible")),
    Fact("gpu.health.problems", "list", "what makes the GPU unfit: lost, uncorrected ECC, row remapping, retired pages",
         _NV, _health, per_gpu=True, details=("gpu_name", "gpu_index"), implies=("nvml_ok", "gpu_visible")),
    Fact("gpu.mig.state", "enum", "MIG mode of the GPU and whether a MIG instance exists or is selected", _NV, _mig,
         per_gpu=True, values=("not_supported", "disabled", "instance_selected", "instances", "no_instance"),
         details=("gpu_name", "gpu_index", "mig_devices"), implies=("nvml_ok", "gpu_visible")),
    Fact("gpu.temperature_c", "number", "GPU temperature in degrees Celsius", _NV,
         _with_gpu_details(_per_gpu("temperature_c")), per_gpu=True, details=("gpu_name", "gpu_index"),
         implies=("nvml_ok", "gpu_visible")),
    Fact("gpu.clock_event_reasons", "list", "active clock event (throttle) reasons", _NV,
         _with_gpu_details(_per_gpu("clock_event_reasons", "active")), per_gpu=True,
         details=("gpu_name", "gpu_index"), implies=("nvml_ok", "gpu_visible")),
    Fact("gpu.persistence_mode", "bool", "persistence mode enabled", _NV,
         _with_gpu_details(_per_gpu("persistence_mode")), per_gpu=True, details=("gpu_name", "gpu_index"),
         implies=("nvml_ok", "gpu_visible")),
    Fact("gpu.ecc_enabled", "bool", "ECC mode currently enabled", _NV,
         _with_gpu_details(_per_gpu("ecc_mode", "current")), per_gpu=True, details=("gpu_name", "gpu_index"),
         implies=("nvml_ok", "gpu_visible")),
    Fact("gpu.torch_kernels", "enum",
         "how torch runs on the GPU: compiled kernels (sass), PTX JIT (ptx), or not at all (none)",
         ("nvml", "python", "torch_arch", "host"), _torch_kernels, per_gpu=True,
         values=("sass", "ptx", "ptx_needs_newer_driver", "none", "unconfirmed"),
         details=("gpu_name", "gpu_index", "torch_archs", "gpu_sm", "torch_version", "arch_index_url",
                  "torch_wait", "torch_pins", "no_wheel", "wheel_note") + PYTHON_DETAILS,
         implies=("nvml_ok", "gpu_visible", "torch_cuda")),
    Fact("gpu.workload.fit", "enum",
         "whether the requested workload (check --workload) fits in the GPU's free memory", _NV, _workload_fit,
         per_gpu=True, values=("fits", "train_too_big", "train_too_big_at_batch_1", "inference_too_big",
                               "inference_too_big_at_batch_1"),
         details=("gpu_name", "gpu_index", "gpu_processes", "workload", "task", "precision_text", "batch",
                  "train_script", "val_script", "max_batch_spread",
                  "per_gpu_batch", "gpus", "imgsz", "required", "free", "max_batch", "max_batch_total", "smaller_img",
                  "smaller_img_batch1",
                  "gpus_needed", "device_list", "bigger_gpus", "margin_text", "measured_on", "estimate_notes"),
         implies=("workload_requested", "nvml_ok", "gpu_visible")),
    # node health: NVML values read only for rules that need them (nvml_health), and the kernel log
    Fact("gpu.pcie", "enum", "the PCIe link: width and generation against the most the GPU and slot allow, replays",
         _NVH, _judged(node_health.pcie), per_gpu=True,
         values=("ok", "idle_downshift", "replays_rising", "generation_degraded", "width_degraded", "not_supported"),
         details=("gpu_name", "gpu_index", "pci_bus_id", "pcie_width", "pcie_max_width", "pcie_generation",
                  "pcie_max_generation", "utilization", "replays", "replay_rate", "replay_limit"),
         implies=("nvml_ok", "gpu_visible", "health_read")),
    Fact("gpu.nvlink", "enum", "NVLink: active links against the node's other GPUs of the same model, error counters",
         _NVH, _nvlink, per_gpu=True,
         values=("ok", "no_active_links", "errors_rising", "links_down", "not_supported"),
         details=("gpu_name", "gpu_index", "pci_bus_id", "nvlink_active", "nvlink_links", "nvlink_peer_active",
                  "nvlink_inactive", "nvlink_errors", "nvlink_errors_since_last"),
         implies=("nvml_ok", "gpu_visible", "health_read")),
    Fact("gpu.fabric", "enum", "GPU fabric registration (NVSwitch systems: Fabric Manager, NVLink subnet manager)",
         _NV, _judged(node_health.fabric), per_gpu=True,
         values=("completed", "not_started", "in_progress", "failed", "not_supported"),
         details=("gpu_name", "gpu_index", "pci_bus_id", "fabric_state", "fabric_status"),
         implies=("nvml_ok", "gpu_visible")),
    Fact("gpu.retired_pages", "enum", "pages retired for ECC errors against DCGM's limit and the last check",
         _NVH, _judged(node_health.retired_pages), per_gpu=True,
         values=("ok", "growing", "over_limit", "not_supported"),
         details=("gpu_name", "gpu_index", "pci_bus_id", "retired_total", "retired_single_bit", "retired_double_bit",
                  "retired_limit", "retired_previous"),
         implies=("nvml_ok", "gpu_visible", "health_read")),
    Fact("gpu.temperature.state", "enum", "the GPU temperature against its slowdown threshold", _NVH,
         _judged(node_health.temperature), per_gpu=True, values=("ok", "at_slowdown", "not_supported"),
         details=("gpu_name", "gpu_index", "pci_bus_id", "temperature", "slowdown_temperature",
                  "shutdown_temperature"),
         implies=("nvml_ok", "gpu_visible", "health_read")),
    Fact("gpu.power.limit", "enum", "the enforced power limit against the GPU's default", _NVH,
         _judged(node_health.power_limit), per_gpu=True, values=("default", "capped", "not_supported"),
         details=("gpu_name", "gpu_index", "pci_bus_id", "power_limit_w", "default_power_limit_w", "power_draw_w",
                  "default_power_limit_watts"),
         implies=("nvml_ok", "gpu_visible", "health_read")),
    Fact("gpu.persistence", "enum", "persistence mode: enabled, disabled or not supported (Windows)", _NV,
         _simple(node_health.persistence), per_gpu=True, values=("enabled", "disabled", "not_supported"),
         details=("gpu_name", "gpu_index", "pci_bus_id"), implies=("nvml_ok", "gpu_visible")),
    Fact("gpu.inforom", "enum", "the InfoROM checksum (nvmlDeviceValidateInforom)", _NVH,
         _simple(node_health.inforom), per_gpu=True, values=("valid", "corrupted", "not_supported"),
         details=("gpu_name", "gpu_index", "pci_bus_id"), implies=("nvml_ok", "gpu_visible", "health_read")),
    Fact("xid.node_faults", "list", "Xid events since boot that need an operator (kernel log; NVIDIA's Xid catalog)",
         ("kernel_log", "nvml"), _xid("node"),
         details=("kernel_log_source", "application_xids", "xid_truncated"), implies=("kernel_log_readable",)),
    Fact("xid.warnings", "list", "Xid events since boot that warn of failing memory (row remapping, ECC rates)",
         ("kernel_log", "nvml"), _xid("watch"),
         details=("kernel_log_source", "application_xids", "xid_truncated"), implies=("kernel_log_readable",)),
    # host
    Fact("host.cpu.count", "number", "CPUs this process may use (affinity and cgroup quota applied)", ("host",),
         _system("host", "cpu", "count")),
    Fact("host.memory.total", "bytes", "RAM this process may use (cgroup limit applied)", ("host",),
         _system("host", "memory", "total")),
    Fact("host.memory.available", "bytes", "RAM available now (cgroup limit applied)", ("host",),
         _system("host", "memory", "available")),
    Fact("host.shm.total", "bytes", "size of /dev/shm", ("host",), _system("host", "shm", "total")),
    Fact("host.container", "bool", "running inside a container", ("host",), _system("host", "container", "detected")),
    Fact("host.os", "string", "operating system (Linux, ...)", ("host",), _system("host", "os", "system")),
    # Python environment
    Fact("python.version", "version", "interpreter version", ("python",), _system("python", "version")),
    Fact("python.executable", "string", "interpreter path", ("python",), _system("python", "executable")),
    Fact("python.venv", "bool", "running in a virtual environment", ("python",), _system("python", "venv")),
    Fact("python.conda.active", "bool", "conda in use (a conda interpreter or an activated environment)",
         ("python",), _system("python", "conda", "active")),
    Fact("python.conda.env_name", "string", "the conda environment in use ('base' for the root one)", ("python",),
         lambda facts, gpu: (_path("conda", "env_name")(facts.section("python")),
                             {"conda_prefix": _path("conda", "prefix")(facts.section("python")) or "?"}),
         details=("conda_prefix",), implies=("conda_active",)),
    Fact("python.packages", "packages", "installed version and importability of the packages a rule lists",
         ("python", "host"), lambda facts, gpu: (facts.section("python").get("packages") or {},
                                                 _python_details(facts)),
         details=PYTHON_DETAILS),
    # NVML too: the fix's wheel index follows the driver's CUDA version.
    Fact("torch.build", "enum", "which torch is installed: cuda, cpu, rocm or missing", ("python", "nvml", "host"),
         _torch_build,
         values=("cuda", "cpu", "rocm", "missing"),
         details=("torch_version", "torch_cuda") + PYTHON_DETAILS + WHEEL_DETAILS),
    Fact("torch.version", "version", "installed torch version", ("python",),
         lambda facts, gpu: facts.torch().get("version")),
    Fact("torch.cuda_version", "version", "CUDA version torch was built for (torch.version.cuda)", ("python",),
         lambda facts, gpu: facts.torch().get("cuda")),
    Fact("cuda.compat", "enum", "whether the driver runs torch's CUDA build", ("nvml", "python", "host"), _cuda_compat,
         values=("ok", "minor_version_compat", "driver_too_old"),
         details=("torch_cuda", "driver_cuda", "driver_version", "required_driver", "compat_driver",
                  "torch_version") + PYTHON_DETAILS + WHEEL_DETAILS,
         implies=("nvml_ok", "torch_cuda")),
    # container
    Fact("container.require.unsatisfied", "list", "NVIDIA_REQUIRE_* variables the host does not satisfy",
         ("container", "nvml"), _unsatisfied, details=("host_cuda", "host_driver"),
         implies=("container_require", "nvml_ok")),
    Fact("container.capabilities.missing", "list", "driver capabilities (compute, utility) the container lacks",
         ("container",), _missing_capabilities, details=("driver_capabilities",),
         implies=("container_capabilities",)),
]}

for _fact in REGISTRY.values():
    assert _fact.kind in KINDS, _fact.path
    if "nvml" in _fact.probes and _fact.path not in ("gpu.count.expected", "xid.node_faults", "xid.warnings"):
        # Every GPU fact is moot on a node that is not meant to have GPUs (--expect-gpus 0, a CPU-only Slurm node).
        REGISTRY[_fact.path] = _fact._replace(implies=("gpu_node",) + _fact.implies)


# --- conditions -----------------------------------------------------------------

def _gpu_node(facts: SnapshotView) -> Optional[str]:
    expected = facts.snapshot.get("expected_gpus")
    if expected and expected.get("count") == 0:
        return "not a GPU node (%s): GPU checks do not apply" % expected.get("source")
    return None


def _gpus_expected(facts: SnapshotView) -> Optional[str]:
    expected = facts.snapshot.get("expected_gpus")
    return None if expected else "no GPU count is expected (--expect-gpus N|auto; preflight slurm reads the Gres)"


def _nvml_ok(facts: SnapshotView) -> Optional[str]:
    status = facts.section("nvml").get("init", {}).get("status")
    return None if status == "ok" else "NVML is not available (nvml.init: %s)" % status


def _gpu_visible(facts: SnapshotView) -> Optional[str]:
    if _nvml_ok(facts):
        return _nvml_ok(facts)
    return None if facts.visible_indices() else "no GPU is visible to CUDA (see gpu.count)"


def _conda_active(facts: SnapshotView) -> Optional[str]:
    return None if _path("conda", "active")(facts.section("python")) else "conda is not in use"


def _torch_cuda(facts: SnapshotView) -> Optional[str]:
    build = derived.torch_build(facts.torch())
    return None if build == "cuda" else "torch is not a CUDA build (torch.build: %s; see torch.cuda)" % build


def _container_require(facts: SnapshotView) -> Optional[str]:
    return derived.requirements_apply(facts.section("container"))


def _container_capabilities(facts: SnapshotView) -> Optional[str]:
    value = facts.section("container").get("NVIDIA_DRIVER_CAPABILITIES")
    return None if value is not None else "NVIDIA_DRIVER_CAPABILITIES is not set"


def _health_read(facts: SnapshotView) -> Optional[str]:
    if facts.section("nvml").get("health_read"):
        return None
    return "this snapshot has no node-health values (they are read when a node-health rule is selected)"


def _kernel_log_readable(facts: SnapshotView) -> Optional[str]:
    try:
        log = facts.section("kernel_log")
    except Unknown as unknown:
        # Not read (a snapshot saved without it), or not within the deadline: a slow log is no node fault.
        return "the kernel log was not read (%s): Xid events are not checked" % unknown
    if log.get("readable"):
        return None
    return "the kernel log cannot be read here (%s): Xid events are not checked" % (log.get("reason") or "unknown")


def _workload_requested(facts: SnapshotView) -> Optional[str]:
    return None if facts.snapshot.get("workload") else "no workload was given (check --workload ID)"


CONDITIONS: Dict[str, Condition] = {c.name: c for c in [
    Condition("workload_requested", "a workload was given (--workload)", (), _workload_requested),
    Condition("gpu_node", "this node is meant to have GPUs", (), _gpu_node),
    Condition("gpus_expected", "a GPU count is expected", (), _gpus_expected),
    Condition("nvml_ok", "NVML initialised", ("nvml",), _nvml_ok),
    Condition("gpu_visible", "at least one GPU is visible to CUDA", ("nvml",), _gpu_visible),
    Condition("health_read", "the node-health NVML values were read", ("nvml", "nvml_health"), _health_read),
    Condition("kernel_log_readable", "the kernel log can be read", ("kernel_log",), _kernel_log_readable),
    Condition("conda_active", "conda is in use", ("python",), _conda_active),
    Condition("torch_cuda", "torch is installed as a CUDA build", ("python",), _torch_cuda),
    Condition("container_require", "the environment states NVIDIA_REQUIRE_* or CUDA_VERSION",
              ("container",), _container_require),
    Condition("container_capabilities", "NVIDIA_DRIVER_CAPABILITIES is set", ("container",), _container_capabilities),
]}
