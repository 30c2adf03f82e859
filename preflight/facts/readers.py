"""How each fact is read from a snapshot (and its context): pure functions of the snapshot, returning the value
or (value, details), the details being the values a rule's message and fix may name. Raise ``Unknown`` for what
cannot be known. The table of facts (``registry.REGISTRY``) names these."""

from __future__ import annotations

import shlex

import math
from typing import Any, Callable, Dict, List, Optional, Tuple

from preflight import units
from preflight.facts import derived, node_health
from preflight.facts.view import SnapshotView, Unknown
from preflight.knowledge import gpus, nvidia, torch_wheels

Compute = Callable[[SnapshotView, Optional[Dict[str, Any]]], Any]


def path(*keys: str) -> Callable[[Dict[str, Any]], Any]:
    def read(data: Dict[str, Any]) -> Any:
        for key in keys:
            if not isinstance(data, dict):
                return None
            data = data.get(key)
        return data
    return read


def system(section: str, *keys: str) -> Compute:
    read = path(*keys)
    return lambda facts, gpu: read(facts.section(section))


def per_gpu(*keys: str) -> Compute:
    read = path(*keys)

    def compute(facts: SnapshotView, gpu: Optional[Dict[str, Any]]) -> Any:
        value = read(gpu or {})
        for field in keys[:1]:
            if field in (gpu or {}).get("errors", {}):
                raise Unknown("NVML could not read %s of GPU %s: %s" % (field, gpu.get("index"), gpu["errors"][field]))
        return value
    return compute


def nvml_system(field: str) -> Compute:
    """A system-wide NVML value; a query that failed is unknown, not missing."""
    def compute(facts: SnapshotView, gpu) -> Any:
        nvml = facts.section("nvml")
        error = (nvml.get("errors") or {}).get(field)
        if error:
            raise Unknown("NVML could not read %s: %s" % (field, error))
        return nvml.get(field)
    return compute


def driver_version(facts: SnapshotView, gpu) -> Tuple[Any, Dict[str, Any]]:
    ccs = [g.get("compute_capability") for g in facts.machine_gpus()]
    return nvml_system("driver_version")(facts, gpu), {"branch_advice": nvidia.driver_branch_advice(ccs)}


def gpu_details(gpu: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """The GPU's name (its index when NVML gave none), its index, and a label with both that never says one
    twice: "NVIDIA H100 80GB HBM3 (GPU 7)", or "GPU 7"."""
    gpu = gpu or {}
    index = "GPU %s" % gpu.get("index")
    return {"gpu_name": gpu.get("name") or index, "gpu_index": gpu.get("index"),
            "gpu_label": "%s (%s)" % (gpu["name"], index) if gpu.get("name") else index}


def nvml_status(facts: SnapshotView, gpu) -> Tuple[str, Dict[str, Any]]:
    init = facts.section("nvml").get("init") or {}
    error = "%s (%s)" % (init.get("error"), init.get("code")) if init.get("error") else "none"
    binding = init.get("python")  # the interpreter that could not import the binding (preflight's own)
    return init.get("status"), {"nvml_error": error, "nvml_message": init.get("message") or "",
                                "nvml_python": shlex.quote(binding) if isinstance(binding, str) and binding else None}


def visible_count(facts: SnapshotView, gpu) -> Tuple[int, Dict[str, Any]]:
    visibility = facts.section("visibility")
    shown = visibility.get("cuda_visible_devices")
    return visibility.get("count", len(visibility.get("visible") or [])), {
        "cuda_visible_devices": "(unset)" if shown is None else repr(shown),
        "visibility_notes": "; ".join(visibility.get("notes") or []) or "none",
        "machine_gpu_count": len(facts.machine_gpus()),
    }


def expected_count(facts: SnapshotView, gpu) -> Tuple[str, Dict[str, Any]]:
    """The GPUs found against the GPUs expected (--expect-gpus, Slurm's Gres): as_expected, fewer or more."""
    expected = facts.context.expected_gpus or {}
    if expected.get("scope") == "machine":  # a node's Gres counts the whole machine, whatever CUDA_VISIBLE_DEVICES says
        found, counted = len(facts.machine_gpus()), "on this machine"
    else:
        found, counted = visible_count(facts, gpu)[0], "visible to CUDA"
    want = expected.get("count", 0)
    state = "as_expected" if found == want else ("fewer" if found < want else "more")
    unlisted = node_health.unlisted_pci(facts.section("nvml")) if state == "fewer" else []
    return state, {"expected_gpus": want, "expected_source": expected.get("source") or "?", "found_gpus": found,
                   "counted": counted, "unlisted_pci": "; on the PCI bus but not in NVML: %s" % ", ".join(unlisted)
                   if unlisted else ""}


def python_executable(facts: SnapshotView) -> str:
    """The job's interpreter as a command word (quoted for the shell where its path needs it)."""
    try:
        return shlex.quote(facts.section("python").get("executable") or "python")
    except Unknown:
        return "python"


# What a printed install command is judged for: the job's interpreter, its Python version and its platform.
PYTHON_DETAILS = ("python_executable", "python_version", "platform")


def python_details(facts: SnapshotView) -> Dict[str, Optional[str]]:
    try:
        version = facts.section("python").get("version")
    except Unknown:
        version = None
    return {"python_executable": python_executable(facts), "python_version": version, "platform": platform(facts)}


def platform(facts: SnapshotView) -> Optional[str]:
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
                 "no_wheel", "archived_torch", "wheel_basis")


def wheel(facts: SnapshotView, gpu: Optional[Dict[str, Any]] = None) -> Dict[str, Optional[str]]:
    """The torch to install here (torch_wheels.fix_values) for this driver, Python and these GPUs (or ``gpu``)."""

    driver_version = driver_cuda = python = None
    ccs: List[Optional[str]] = []
    try:
        nvml = facts.section("nvml")
        driver_version, driver_cuda = nvml.get("driver_version"), nvml.get("cuda_driver_version")
        gpus = [gpu] if gpu else facts.visible_gpus()
        ccs = [g.get("compute_capability") for g in gpus]
    except Unknown:
        pass
    installed: Tuple[torch_wheels.Installed, ...] = ()
    try:
        python = facts.section("python").get("version")
        installed = derived.installed_builds(facts.torch(), companions(facts), platform(facts))
    except Unknown:
        pass
    return torch_wheels.fix_values(driver_version, driver_cuda, ccs, python, platform(facts), installed=installed)


def torch_build(facts: SnapshotView, gpu) -> Tuple[str, Dict[str, Any]]:
    torch = facts.torch()
    build = derived.torch_build(torch)
    # Which torch to install is only told when this one is not a CUDA build.
    details = dict(wheel(facts) if build != "cuda" else {})
    details.update(python_details(facts), torch_version=torch.get("version") or "(not installed)",
                   torch_cuda=torch.get("cuda") or "none")
    return build, details


def cuda_compat(facts: SnapshotView, gpu) -> Tuple[str, Dict[str, Any]]:
    nvml = facts.section("nvml")
    torch = facts.torch()
    value, details = derived.cuda_compat(nvml.get("driver_version"), nvml.get("cuda_driver_version"), torch.get("cuda"))
    if value == "unknown":
        raise Unknown("cannot read the driver's CUDA version (%r) or torch's (%r)"
                      % (nvml.get("cuda_driver_version"), torch.get("cuda")))
    details.update(python_details(facts))
    details["torch_version"] = torch.get("version") or "(not installed)"
    if value != "ok":
        details.update(wheel(facts))
    return value, details


def torch_kernels(facts: SnapshotView, gpu) -> Tuple[str, Dict[str, Any]]:
    status = (facts.snapshot.get("probes") or {}).get("torch_arch") or {}
    if status.get("status") == "timeout":
        # A cold 'import torch' slower than the deadline says nothing about the kernels: not a failure.
        waited = status.get("seconds") or facts.snapshot.get("seconds") or 0
        sm = nvidia.parse_major_minor((gpu or {}).get("compute_capability")) if gpu else None
        details = dict(gpu_details(gpu), torch_wait="%.0f" % waited, torch_version=facts.torch().get("version") or "?",
                       python_executable=python_executable(facts), torch_archs="(not known yet)",
                       gpu_sm="sm_%d%d" % sm if sm else "?")
        return "unconfirmed", details
    flags = facts.section("torch_arch").get("flags") or []
    compat, _ = cuda_compat(facts, None)
    value, details = derived.torch_kernels(flags, (gpu or {}).get("compute_capability"),
                                           compat == "minor_version_compat")
    if value == "unknown":
        raise Unknown("NVML gave no compute capability for GPU %s" % (gpu or {}).get("index"))
    chosen = wheel(facts, gpu) if value not in ("sass", "ptx") else {}
    details.update(gpu_details(gpu), torch_version=facts.torch().get("version") or "?",
                   arch_index_url=chosen.get("index_url"), torch_pins=chosen.get("torch_pins"),
                   no_wheel=chosen.get("no_wheel"), wheel_note=chosen.get("wheel_note"), **python_details(facts))
    return value, details


def health(facts: SnapshotView, gpu) -> Tuple[List[str], Dict[str, Any]]:
    problems = derived.health_problems(gpu or {})
    if (gpu or {}).get("lost"):
        where = (gpu or {}).get("pci_bus_id")
        unlisted = node_health.unlisted_pci(facts.section("nvml"))
        if where:
            problems.append("PCI bus id %s" % where)
        elif unlisted:
            problems.append("NVIDIA devices on the PCI bus that NVML cannot read: %s" % ", ".join(unlisted))
    return problems, gpu_details(gpu)


def mig(facts: SnapshotView, gpu) -> Tuple[str, Dict[str, Any]]:
    selected = facts.section("visibility").get("mig_selected") or []
    error = ((gpu or {}).get("errors") or {}).get("mig_devices") or ((gpu or {}).get("errors") or {}).get(
        "mig_device_count")
    if error:
        raise Unknown("NVML could not list the MIG devices of GPU %s: %s" % ((gpu or {}).get("index"), error))
    details = gpu_details(gpu)
    details["mig_devices"] = ", ".join((gpu or {}).get("mig_devices") or []) or "none listed"
    return derived.mig_state(gpu or {}, selected), details


def requirements_hosts(facts: SnapshotView) -> List[Dict[str, Optional[str]]]:
    """Every GPU given to the container (NVML inside one lists exactly those), as its requirements see it."""
    nvml = facts.section("nvml")
    system = {"cuda": nvml.get("cuda_driver_version"), "driver": nvml.get("driver_version")}
    gpus = facts.machine_gpus() or [{}]
    return [dict(system, arch=gpu.get("compute_capability"), brand=gpu.get("brand"),
                 name="GPU %s (%s)" % (gpu.get("index"), gpu.get("name")) if gpu else None) for gpu in gpus]


def unsatisfied(facts: SnapshotView, gpu) -> Tuple[List[str], Dict[str, Any]]:
    container = facts.section("container")
    hosts = requirements_hosts(facts)
    return derived.unsatisfied_requirements(container, hosts), {
        "host_cuda": hosts[0]["cuda"] or "unknown", "host_driver": hosts[0]["driver"] or "unknown",
    }


def missing_capabilities(facts: SnapshotView, gpu) -> Tuple[List[str], Dict[str, Any]]:
    capabilities = facts.section("container").get("NVIDIA_DRIVER_CAPABILITIES")
    shown = "(unset)" if capabilities is None else capabilities if capabilities.strip() else \
        "(empty: the default utility,compute)"
    return derived.missing_capabilities(capabilities), {"driver_capabilities": shown}


def missing_device_nodes(*wanted: str) -> Compute:
    def compute(facts: SnapshotView, gpu) -> Tuple[List[str], Dict[str, Any]]:
        present = facts.section("nvml").get("device_files") or []
        return derived.missing_device_nodes(present, wanted), {
            "device_files": ", ".join("/dev/" + name for name in present) or "none"}
    return compute


def gpu_memory(field: str) -> Compute:
    base = per_gpu("memory", field)

    def compute(facts: SnapshotView, gpu) -> Tuple[Any, Dict[str, Any]]:
        value = base(facts, gpu)
        details = gpu_details(gpu)
        processes = (gpu or {}).get("processes") or []
        details["gpu_processes"] = ", ".join(
            "%s (pid %s, %s MiB)" % (p.get("name") or "?", p.get("pid"),
                                     p["used_memory"] // 2**20 if p.get("used_memory") is not None else "?")
            for p in processes
        ) or "none"
        return value, details
    return compute


def workload_fit(facts: SnapshotView, gpu) -> Tuple[str, Dict[str, Any]]:
    """Does the requested workload (check --workload) fit in this GPU's free memory: fits, tight (it should run,
    with no headroom), or too big?"""
    from preflight.capacity import estimate

    request = facts.context.workload
    if not request:
        raise Unknown("no workload was given (--workload)")
    free = ((gpu or {}).get("memory") or {}).get("free")
    if free is None:
        raise Unknown("NVML gave no free memory for GPU %s" % (gpu or {}).get("index"))
    batch = request["per_gpu_batch"]
    rank0 = gpu is None or request["gpus"] == 1 or gpu.get("index") == facts.visible_indices()[0]
    if not rank0:
        request = estimate.without_validation(request)  # under DDP only rank 0 runs the validation pass
    required = estimate.required_bytes(request, batch)
    most, most_tight = estimate.max_batch(request, free), estimate.max_tight_batch(request, free)
    found = estimate.verdict(request, batch, free)
    if found == estimate.DOES_NOT_FIT:
        value = "%s_too_big%s" % (request["task"], "" if most_tight else "_at_batch_1")
    else:
        value = found
    needed = int(math.ceil(request["batch"] / most)) if most else None  # GPUs like this one for the whole batch
    try:
        machine = len(facts.machine_gpus())
    except Unknown:
        machine = request["gpus"]
    if needed is not None and (needed > machine or needed > estimate.MAX_SPREAD):
        needed = None  # never a torchrun over GPUs this machine does not have: the fix leaves the suggestion out
    smaller = estimate.largest_imgsz(request, batch, free)
    smallest_run = estimate.largest_imgsz(request, 1, free)
    several = request["gpus"] > 1
    node_most = _node_max_batch(facts, facts.context.workload) if several else most
    details = gpu_memory("free")(facts, gpu)[1]
    details.update(
        workload=request["id"], task=request["task"], precision_text=estimate.setup_words(request),
        batch=request["batch"], per_gpu_batch=batch, gpus=request["gpus"], imgsz=request["imgsz"],
        required=units.format_bytes(required), free=units.format_bytes(free), max_batch=most,
        steps_need=units.format_bytes(estimate.steps_need_bytes(request, batch)),
        max_tight_batch=most_tight, max_batch_total=most * request["gpus"],
        train_script=request.get("train_script", "train_dual.py"),
        val_script=request.get("train_script", "train_dual.py").replace("train", "val", 1),
        max_batch_spread=(" (--batch-size %d in all over the %d GPUs under torchrun)" % (
            most * request["gpus"], request["gpus"]) if request["gpus"] > 1 else ""),
        single_gpu="0" if not several else None,
        ddp_gpus=request["gpus"] if several else None,
        ddp_devices=",".join(str(i) for i in range(request["gpus"])) if several else None,
        node_max_batch=node_most if several else None,
        node_max_total=node_most * request["gpus"] if several and node_most else None,
        rank=("" if request["gpus"] == 1 else " (rank 0: it also runs the validation pass)" if rank0 else
              " (not rank 0: no validation pass here)"),
        smaller_img=smaller or "none", smaller_img_batch1=smallest_run or "none", gpus_needed=needed,
        machine_gpus=machine,
        device_list=",".join(str(i) for i in range(needed or 1)), bigger_gpus=", ".join(request["catalog_fits"][:3])
        or "none in the catalog", margin_text="%d%%" % round(request["margin"] * 100),
        measured_on=request["measured_on"], estimate_notes="; ".join(request["notes"]) or None,
    )
    return value, details


def _node_max_batch(facts: SnapshotView, request: Dict[str, Any]) -> int:
    """The largest batch per GPU that every visible GPU holds at once under torchrun: each rank takes the same
    share, so the GPU with the least room decides (rank 0, which also validates, often)."""
    from preflight.capacity import estimate

    most = None
    for position, visible in enumerate(facts.visible_gpus()):
        free = (visible.get("memory") or {}).get("free")
        if free is None:
            continue
        share = request if position == 0 else estimate.without_validation(request)
        fits = estimate.max_batch(share, free)
        most = fits if most is None else min(most, fits)
    return most or 0


def compute_capability(facts: SnapshotView, gpu) -> Tuple[Any, Dict[str, Any]]:
    """The GPU's compute capability, with the newer architectures and the catalog's GPUs of each (for the fix)."""
    cc = per_gpu("compute_capability")(facts, gpu)
    return cc, dict(gpu_details(gpu), architectures_above=gpus.architectures_text(above=cc) or "none known")


def with_gpu_details(compute: Compute) -> Compute:
    return lambda facts, gpu: (compute(facts, gpu), gpu_details(gpu))


def judged(judge) -> Compute:
    """A node_health judgement of one GPU, with the GPU's name and index (and its PCI bus id) in the details."""
    def compute(facts: SnapshotView, gpu) -> Tuple[str, Dict[str, Any]]:
        value, details = judge(gpu or {})
        return value, dict(details, **gpu_details(gpu), pci_bus_id=(gpu or {}).get("pci_bus_id") or "unknown")
    return compute


def simple(judge) -> Compute:
    return judged(lambda gpu: (judge(gpu), {}))


def nvlink(facts: SnapshotView, gpu) -> Tuple[str, Dict[str, Any]]:
    peers = facts.machine_gpus()
    return judged(lambda g: node_health.nvlink(g, peers))(facts, gpu)


def xid(kind: str) -> Compute:
    def compute(facts: SnapshotView, gpu) -> Tuple[List[str], Dict[str, Any]]:
        log = facts.section("kernel_log")
        try:
            gpus = facts.machine_gpus()
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



def conda_env_name(facts: SnapshotView, gpu) -> Tuple[Any, Dict[str, Any]]:
    python = facts.section("python")
    return path("conda", "env_name")(python), {"conda_prefix": path("conda", "prefix")(python) or "?"}


# What installs torch's companions (torchvision, torchaudio) built for the installed torch, or why not here.
COMPANION_DETAILS = ("companion_pins", "companion_index_url", "companion_unpaired", "torch_not_running")


def _companion_install(facts: SnapshotView, torch: Dict[str, Any], names: List[str],
                       python: Optional[str]) -> Dict[str, Any]:
    """The companions ``names`` pinned beside the installed CUDA torch, from its index; unless that torch does not
    stay (a CPU or ROCm build where torch.cuda fails, or a build that cannot run here: then the fix that replaces
    torch installs the pair, and a companion pinned to the old torch would undo it)."""
    details: Dict[str, Any] = dict.fromkeys(COMPANION_DETAILS)
    if derived.torch_build(torch) != "cuda":
        details["torch_not_running"] = "the installed torch %s is not a CUDA build, so the fix of torch.cuda " \
                                       "replaces it with a matching pair" % (torch.get("version") or "?")
        return details
    details["torch_not_running"] = _torch_not_running(facts, torch)
    if details["torch_not_running"] is None:
        installed = derived.installed_builds(torch, companions(facts), platform(facts))
        details.update(torch_wheels.companions_for(torch.get("version"), derived.torch_tag(torch), names, python,
                                                   installed))
    return details


def companions(facts: SnapshotView) -> Dict[str, Dict[str, Any]]:
    """torchvision and torchaudio as the files say they were built; {} where the facts do not say."""
    try:
        return facts.section("python").get("torch_companions") or {}
    except Unknown:
        return {}


# The packages fact's entry for the job's interpreter as PEP 508 markers see it (python_version, sys_platform, ...).
ENVIRONMENT = "$environment"


def _marker_environment(facts: SnapshotView) -> Dict[str, str]:
    """The job's interpreter as PEP 508 markers name it, as far as the facts say."""
    python = facts.section("python")
    environment: Dict[str, str] = {}
    version = str(python.get("version") or "")
    if version.count(".") >= 1:
        environment.update(python_version=".".join(version.split(".")[:2]), python_full_version=version)
    if python.get("implementation"):
        environment["implementation_name"] = str(python["implementation"])
    try:
        system = str((facts.section("host").get("os") or {}).get("system") or "")
        machine = str((facts.section("host").get("os") or {}).get("machine") or "")
    except Unknown:
        system = machine = ""
    platforms = {"linux": ("linux", "posix", "Linux"), "windows": ("win32", "nt", "Windows"),
                 "darwin": ("darwin", "posix", "Darwin")}
    if system.lower() in platforms:
        sys_platform, os_name, platform_system = platforms[system.lower()]
        environment.update(sys_platform=sys_platform, os_name=os_name, platform_system=platform_system)
    if machine:
        environment["platform_machine"] = machine
    return environment


def packages(facts: SnapshotView, gpu) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    found = dict(facts.section("python").get("packages") or {})
    found[ENVIRONMENT] = _marker_environment(facts)
    details = python_details(facts)
    details.update(dict.fromkeys(COMPANION_DETAILS))
    torchvision, torch = found.get("torchvision"), facts.torch()
    if torchvision is not None and not torchvision.get("importable") and derived.torch_build(torch) == "cuda":
        # torch.cuda passes, so its fix (torch with its torchvision) is not shown: this one names the torchvision
        # built for the installed torch.
        details.update(_companion_install(facts, torch, ["torchvision"], details.get("python_version")))
    return found, details


def torch_companions(facts: SnapshotView, gpu) -> Tuple[List[str], Dict[str, Any]]:
    """torchvision and torchaudio, as installed, against the installed torch: what keeps them from loading."""
    python = facts.section("python")
    companions = python.get("torch_companions")
    if companions is None:
        raise Unknown("the facts do not say how torchvision and torchaudio were built (saved by an older preflight)")
    torch = facts.torch()
    problems = derived.companion_problems(torch, companions, platform(facts))
    details = dict(python_details(facts), companion_names=" and ".join(sorted(companions)) or "none")
    details.update(dict.fromkeys(COMPANION_DETAILS))
    if problems:
        details.update(_companion_install(facts, torch, sorted(companions), details.get("python_version")))
    return problems, details


def _torch_not_running(facts: SnapshotView, torch: Dict[str, Any]) -> Optional[str]:
    """Why the installed CUDA torch cannot run here, as the facts cuda.compat and gpu.torch_kernels read it (a
    driver older than its CUDA; no kernels a visible GPU runs), naming the rule whose fix replaces it; None when it
    runs, or when that is not known."""
    version = torch.get("version") or "?"
    try:
        if cuda_compat(facts, None)[0] == "driver_too_old":
            return "the installed torch %s is built for a newer CUDA than this driver runs, so the fix of " \
                   "cuda.compat replaces it with a pair that runs" % version
    except Unknown:
        pass
    try:
        for visible in facts.visible_gpus():
            if torch_kernels(facts, visible)[0] in ("none", "ptx_needs_newer_driver"):
                return "the installed torch %s has no kernels that run on %s, so the fix of torch.arch replaces " \
                       "it with a pair that does" % (version, visible.get("name") or "the GPU")
    except Unknown:
        pass
    return None


def torch_field(key: str) -> Compute:
    return lambda facts, gpu: facts.torch().get(key)
