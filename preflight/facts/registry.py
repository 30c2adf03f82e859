"""Every fact a rule can name: the table.

A fact has a dotted path (``nvml.driver_version``, ``gpu.memory.total``), a
kind that decides which comparisons apply, the probes that must run for it,
and a pure function that reads it from a snapshot (``readers``). ``gpu.*``
facts are read once per visible GPU. Some facts imply conditions
(``conditions``): a rule on ``nvml.driver_version`` is skipped, not failed,
when NVML itself is unavailable (``nvml.init`` reports that once), and every
GPU fact is moot on a node that is not meant to have GPUs (``gpu_node``).

Adding a fact here is all it takes for rule files to use it.
"""

from __future__ import annotations

from typing import Any, Dict, NamedTuple, Optional, Tuple

from preflight.facts import derived, node_health, smoke
from preflight.facts import readers as read
from preflight.facts.readers import PYTHON_DETAILS, WHEEL_DETAILS, Compute
from preflight.facts.view import SnapshotView, Unknown

KINDS = ("version", "number", "bytes", "bool", "string", "enum", "list", "packages")


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
    reads_lost_gpus: bool = False  # a per-GPU fact that has something to say about a GPU NVML has lost
    context: Tuple[str, ...] = ()  # what it reads of the run's context (facts.view.Context): "workload", ...

    def read(self, facts: SnapshotView, gpu: Optional[Dict[str, Any]] = None) -> Tuple[Any, Dict[str, Any]]:
        """(value, details); raises Unknown."""
        if self.per_gpu and gpu is not None and gpu.get("lost") and not self.reads_lost_gpus:
            raise Unknown("GPU %s is lost; NVML cannot read it" % gpu.get("index"))
        result = self.compute(facts, gpu)
        if isinstance(result, tuple):
            return result
        return result, {}


_NV = ("nvml",)
_NVH = ("nvml", "nvml_health")  # the NVML values only node-health rules read
_GPU_DETAILS = ("gpu_name", "gpu_index", "gpu_label")


def _nvml_fact(path: str, kind: str, description: str, compute: Compute, probes: Tuple[str, ...] = _NV,
               implies: Tuple[str, ...] = ("nvml_ok",), **more) -> Fact:
    """A fact NVML answers: moot on a node that is not meant to have GPUs (--expect-gpus 0, a CPU-only Slurm node)."""
    return Fact(path, kind, description, probes, compute, implies=("gpu_node",) + implies, **more)


def _gpu_fact(path: str, kind: str, description: str, compute: Compute, probes: Tuple[str, ...] = _NV,
              details: Tuple[str, ...] = (), implies: Tuple[str, ...] = ("nvml_ok", "gpu_visible"), **more) -> Fact:
    """A fact read once per visible GPU, naming the GPU (its name and index) in its details."""
    return _nvml_fact(path, kind, description, compute, probes, implies, per_gpu=True,
                      details=_GPU_DETAILS + tuple(d for d in details if d not in _GPU_DETAILS), **more)


def _gpu_field(path: str, kind: str, description: str, *keys: str) -> Fact:
    """A per-GPU value NVML reads directly (``keys`` into the GPU's facts)."""
    return _gpu_fact(path, kind, description, read.with_gpu_details(read.per_gpu(*keys)))


def _judged(path: str, description: str, judge, values: Tuple[str, ...], details: Tuple[str, ...] = (),
            probes: Tuple[str, ...] = _NVH, compute: Optional[Compute] = None) -> Fact:
    """A node-health judgement of one GPU (``node_health``), naming its PCI address; NVML's node-health values are
    read only for rules that need them."""
    implies = ("nvml_ok", "gpu_visible") + (("health_read",) if "nvml_health" in probes else ())
    return _gpu_fact(path, "enum", description, compute or read.judged(judge), probes, ("pci_bus_id",) + details,
                     implies, values=values)


REGISTRY: Dict[str, Fact] = {fact.path: fact for fact in [
    # NVML and driver
    Fact("nvml.init.status", "enum", "outcome of nvmlInit", _NV, read.nvml_status,
         values=("ok", "library_not_found", "driver_not_loaded", "driver_library_mismatch", "no_permission",
                 "gpu_is_lost", "binding_missing", "other"),
         details=("nvml_error", "nvml_message", "nvml_python"), implies=("gpu_node",)),
    _nvml_fact("nvml.driver_version", "version", "NVIDIA driver version (nvmlSystemGetDriverVersion)",
               read.driver_version, details=("branch_advice",)),
    _nvml_fact("nvml.cuda_driver_version", "version",
               "newest CUDA the driver supports (nvmlSystemGetCudaDriverVersion)",
               read.nvml_system("cuda_driver_version")),
    _nvml_fact("visibility.count", "number", "GPUs a CUDA program will see (CUDA_VISIBLE_DEVICES applied)",
               read.visible_count, details=("cuda_visible_devices", "visibility_notes", "machine_gpu_count")),
    # Judged on every node, GPU node or not: a node that should have none and has some is news too.
    Fact("gpu.count.expected", "enum", "GPUs found against the count expected (--expect-gpus, Slurm's Gres)",
         _NV, read.expected_count, values=("as_expected", "fewer", "more"),
         details=("expected_gpus", "expected_source", "found_gpus", "counted", "unlisted_pci"),
         implies=("gpus_expected", "nvml_ok"), context=("expected_gpus",)),
    # per GPU
    _gpu_field("gpu.name", "string", "product name", "name"),
    _gpu_field("gpu.uuid", "string", "GPU UUID", "uuid"),
    _gpu_field("gpu.architecture", "string", "architecture name (ampere, hopper, ...)", "architecture"),
    _gpu_fact("gpu.compute_capability", "version", "CUDA compute capability (major.minor)", read.compute_capability,
              details=("architectures_above",)),
    _gpu_fact("gpu.memory.total", "bytes", "total GPU memory", read.gpu_memory("total"), details=("gpu_processes",)),
    _gpu_fact("gpu.memory.free", "bytes", "free GPU memory", read.gpu_memory("free"), details=("gpu_processes",)),
    _gpu_fact("gpu.memory.used", "bytes", "GPU memory in use", read.gpu_memory("used"), details=("gpu_processes",)),
    _gpu_fact("gpu.health.problems", "list",
              "what makes the GPU unfit: lost, uncorrected ECC, row remapping, retired pages", read.health,
              reads_lost_gpus=True),
    _gpu_fact("gpu.mig.state", "enum", "MIG mode of the GPU and whether a MIG instance exists or is selected",
              read.mig, details=("mig_devices",),
              values=("not_supported", "disabled", "instance_selected", "instances", "no_instance")),
    _gpu_field("gpu.temperature_c", "number", "GPU temperature in degrees Celsius", "temperature_c"),
    _gpu_field("gpu.clock_event_reasons", "list", "active clock event (throttle) reasons",
               "clock_event_reasons", "active"),
    _gpu_field("gpu.persistence_mode", "bool", "persistence mode enabled", "persistence_mode"),
    _gpu_field("gpu.ecc_enabled", "bool", "ECC mode currently enabled", "ecc_mode", "current"),
    _gpu_fact("gpu.torch_kernels", "enum",
              "how torch runs on the GPU: compiled kernels (sass), PTX JIT (ptx), or not at all (none)",
              read.torch_kernels, ("nvml", "python", "torch_arch", "host"),
              details=("torch_archs", "gpu_sm", "torch_version", "arch_index_url", "torch_wait", "torch_pins",
                       "no_wheel", "wheel_note") + PYTHON_DETAILS,
              implies=("nvml_ok", "gpu_visible", "torch_cuda"),
              values=("sass", "ptx", "ptx_needs_newer_driver", "none", "unconfirmed")),
    _gpu_fact("gpu.workload.fit", "enum",
              "whether the requested workload (check --workload) fits in the GPU's free memory (fits, tight: only the "
              "training steps' own need does, or too big)", read.workload_fit,
              details=("gpu_processes", "workload", "task", "precision_text", "batch", "train_script", "val_script",
                       "max_batch_spread", "per_gpu_batch", "gpus", "imgsz", "required", "free", "max_batch",
                       "max_batch_total", "smaller_img", "smaller_img_batch1", "gpus_needed", "device_list", "single_gpu", "ddp_gpus",
                       "ddp_devices", "node_max_batch", "node_max_total",
                       "bigger_gpus", "margin_text", "measured_on", "estimate_notes", "steps_need",
                       "max_tight_batch", "rank", "machine_gpus"),
              implies=("workload_requested", "nvml_ok", "gpu_visible"), context=("workload",),
              values=("fits", "tight", "train_too_big", "train_too_big_at_batch_1", "inference_too_big",
                      "inference_too_big_at_batch_1")),
    # node health: NVML values read only for rules that need them (nvml_health), and the kernel log
    _judged("gpu.pcie", "the PCIe link: width and generation against the most the GPU and slot allow, replays",
            node_health.pcie,
            ("ok", "idle_downshift", "replays_rising", "generation_degraded", "width_degraded", "not_supported"),
            ("pcie_width", "pcie_max_width", "pcie_generation", "pcie_max_generation", "utilization", "replays",
             "replay_rate", "replay_limit")),
    _judged("gpu.nvlink", "NVLink: active links against the node's other GPUs of the same model, error counters",
            None, ("ok", "no_active_links", "errors_rising", "links_down", "not_supported"),
            ("nvlink_active", "nvlink_links", "nvlink_peer_active", "nvlink_inactive", "nvlink_errors",
             "nvlink_errors_since_last"), compute=read.nvlink),
    _judged("gpu.fabric", "GPU fabric registration (NVSwitch systems: Fabric Manager, NVLink subnet manager)",
            node_health.fabric, ("completed", "not_started", "in_progress", "failed", "not_supported"),
            ("fabric_state", "fabric_status"), probes=_NV),
    _judged("gpu.retired_pages", "pages retired for ECC errors against DCGM's limit and the last check",
            node_health.retired_pages, ("ok", "growing", "over_limit", "not_supported"),
            ("retired_total", "retired_single_bit", "retired_double_bit", "retired_limit", "retired_previous")),
    _judged("gpu.temperature.state", "the GPU temperature against its slowdown threshold", node_health.temperature,
            ("ok", "at_slowdown", "not_supported"), ("temperature", "slowdown_temperature", "shutdown_temperature")),
    _judged("gpu.power.limit", "the enforced power limit against the GPU's default", node_health.power_limit,
            ("default", "capped", "not_supported"),
            ("power_limit_w", "default_power_limit_w", "power_draw_w", "default_power_limit_watts")),
    _judged("gpu.persistence", "persistence mode: enabled, disabled or not supported (Windows)", None,
            ("enabled", "disabled", "not_supported"), probes=_NV, compute=read.simple(node_health.persistence)),
    _judged("gpu.inforom", "the InfoROM checksum (nvmlDeviceValidateInforom)", None,
            ("valid", "corrupted", "not_supported"), compute=read.simple(node_health.inforom)),
    # The kernel log is read on every node: an Xid names its GPU by PCI address even when NVML cannot answer.
    Fact("xid.node_faults", "list", "Xid events since boot that need an operator (kernel log; NVIDIA's Xid catalog)",
         ("kernel_log", "nvml"), read.xid("node"),
         details=("kernel_log_source", "application_xids", "xid_truncated"), implies=("kernel_log_readable",)),
    Fact("xid.warnings", "list", "Xid events since boot that warn of failing memory (row remapping, ECC rates)",
         ("kernel_log", "nvml"), read.xid("watch"),
         details=("kernel_log_source", "application_xids", "xid_truncated"), implies=("kernel_log_readable",)),
    # host
    Fact("host.cpu.count", "number", "CPUs this process may use (affinity and cgroup quota applied)", ("host",),
         read.system("host", "cpu", "count")),
    Fact("host.memory.total", "bytes", "RAM this process may use (cgroup limit applied)", ("host",),
         read.system("host", "memory", "total")),
    Fact("host.memory.available", "bytes", "RAM available now (cgroup limit applied)", ("host",),
         read.system("host", "memory", "available")),
    Fact("host.shm.total", "bytes", "size of /dev/shm", ("host",), read.system("host", "shm", "total")),
    Fact("host.container", "bool", "running inside a container", ("host",),
         read.system("host", "container", "detected")),
    Fact("host.os", "string", "operating system (Linux, ...)", ("host",), read.system("host", "os", "system")),
    # Python environment
    Fact("python.version", "version", "interpreter version", ("python",), read.system("python", "version")),
    Fact("python.executable", "string", "interpreter path", ("python",), read.system("python", "executable")),
    Fact("python.venv", "bool", "running in a virtual environment", ("python",), read.system("python", "venv")),
    Fact("python.conda.active", "bool", "conda in use (a conda interpreter or an activated environment)",
         ("python",), read.system("python", "conda", "active")),
    Fact("python.conda.env_name", "string", "the conda environment in use ('base' for the root one)", ("python",),
         read.conda_env_name, details=("conda_prefix",), implies=("conda_active",)),
    Fact("python.packages", "packages", "installed version and importability of the packages a rule lists",
         ("python", "host"), read.packages, details=PYTHON_DETAILS + read.COMPANION_DETAILS),
    Fact("torch.companions", "list", "what keeps torchvision or torchaudio, as installed, from loading beside the "
         "installed torch (built for another torch release or build)", ("python", "nvml", "host"),
         read.torch_companions, details=("companion_names",) + PYTHON_DETAILS + read.COMPANION_DETAILS),
    # NVML too: the fix's wheel index follows the driver's CUDA version.
    _nvml_fact("torch.build", "enum", "which torch is installed: cuda, cpu, rocm or missing",
               read.torch_build, ("python", "nvml", "host"), implies=(), values=("cuda", "cpu", "rocm", "missing"),
               details=("torch_version", "torch_cuda") + PYTHON_DETAILS + WHEEL_DETAILS),
    Fact("torch.version", "version", "installed torch version", ("python",), read.torch_field("version")),
    Fact("torch.cuda_version", "version", "CUDA version torch was built for (torch.version.cuda)", ("python",),
         read.torch_field("cuda")),
    _nvml_fact("cuda.compat", "enum", "whether the driver runs torch's CUDA build", read.cuda_compat,
               ("nvml", "python", "host"), implies=("nvml_ok", "torch_cuda"),
               values=("ok", "minor_version_compat", "driver_too_old"),
               details=("torch_cuda", "driver_cuda", "driver_version", "required_driver", "compat_driver",
                        "torch_version") + PYTHON_DETAILS + WHEEL_DETAILS),
    # container
    _nvml_fact("container.require.unsatisfied", "list", "NVIDIA_REQUIRE_* variables the host does not satisfy",
               read.unsatisfied, ("container", "nvml"), implies=("container_require", "nvml_ok"),
               details=("host_cuda", "host_driver")),
    Fact("container.capabilities.missing", "list", "driver capabilities (compute, utility) the container lacks",
         ("container",), read.missing_capabilities, details=("driver_capabilities",),
         implies=("container_capabilities",)),
    _nvml_fact("container.devices.missing", "list", "device nodes every CUDA program opens (/dev/nvidiactl, "
               "/dev/nvidia-uvm) that this container lacks", read.missing_device_nodes(*derived.CUDA_DEVICE_NODES),
               ("nvml", "host", "container"), implies=("nvml_ok", "container_compute"), details=("device_files",)),
    # the active test (preflight smoke, check --smoke): measured by the job's interpreter on each device
    Fact("smoke.problems", "list", "what kept the active test from testing (torch not importable, CUDA not "
         "available)", ("smoke",), smoke.problems, details=("smoke_python", "smoke_torch")),
    Fact("smoke.memory.errors", "number", "bytes read back different from what was written, over every tested "
         "device", ("smoke",), smoke.memory_errors, details=("smoke_device", "smoke_identity", "smoke_tested"),
         implies=("smoke_ran",)),
] + [Fact("smoke.matmul." + precision, "number", "the worst relative error of a %s matrix product against a "
          "float64 reference, over the tested devices" % precision, ("smoke",), smoke.matmul(precision),
          details=("smoke_device", "smoke_identity", "smoke_precision", "smoke_errors"), implies=("smoke_ran", "smoke_" + precision))
     for precision in smoke.PRECISIONS] + [
    Fact("smoke.throughput.peer_ratio", "number", "the slowest GPU's matrix-multiply throughput over the median "
         "of its model's GPUs on this node", ("smoke",), smoke.peer_ratio,
         details=("smoke_device", "smoke_median_tflops", "smoke_throughput"), implies=("smoke_ran", "smoke_peers")),
    Fact("smoke.throughput.datasheet_share", "number", "the lowest share of its datasheet's FP16 tensor-core peak a "
         "tested GPU's matrix product reached", ("smoke",), smoke.datasheet_ratio("tflops"),
         details=("smoke_device", "smoke_measured", "smoke_datasheet", "smoke_shares"),
         implies=("smoke_ran", "smoke_datasheet")),
    Fact("smoke.bandwidth.datasheet_share", "number", "the lowest share of its datasheet's memory bandwidth a tested "
         "GPU's device-to-device copy reached", ("smoke",), smoke.datasheet_ratio("bandwidth"),
         details=("smoke_device", "smoke_measured", "smoke_datasheet", "smoke_shares"),
         implies=("smoke_ran", "smoke_datasheet")),
    Fact("smoke.train_step", "enum", "a small network's training steps (convolutions, AMP, backward, SGD)",
         ("smoke",), smoke.train_step, values=("ok", "failed"), details=("smoke_failures", "smoke_amp"),
         implies=("smoke_ran",)),
    Fact("smoke.allreduce", "enum", "an all-reduce over the local GPUs (NCCL; gloo over two CPU ranks with "
         "--device cpu), and peer access between GPU pairs", ("smoke",), smoke.allreduce,
         values=("ok", "wrong", "failed"),
         details=("smoke_backend", "smoke_bus_gbs", "smoke_world", "smoke_peers", "smoke_detail"),
         implies=("smoke_ran", "smoke_collective")),
    Fact("smoke.allreduce.link_share", "number", "the NCCL all-reduce's bus bandwidth over what the tested GPUs' "
         "NVLink (or else PCIe) links carry in one direction", ("smoke", "nvml", "nvml_health"), smoke.link_share,
         details=("smoke_bus_gbs", "smoke_expected"), implies=("smoke_ran", "smoke_collective", "smoke_links")),
    Fact("smoke.fit", "enum", "the workload's training steps measured in the user's checkout", ("smoke",),
         smoke.fit, values=("measured", "failed"), details=("smoke_detail", "smoke_points", "smoke_largest", "smoke_estimate",
                                                            "smoke_requirements", "smoke_python", "smoke_repo",
                                                            "smoke_ended"),
         implies=("smoke_ran", "smoke_fit", "smoke_fit_gpu"), context=("workload",)),
    _nvml_fact("container.devices.tools_missing", "list", "/dev/nvidia-uvm-tools when this container lacks it",
               read.missing_device_nodes(*derived.TOOLS_DEVICE_NODES), ("nvml", "host", "container"),
               implies=("nvml_ok", "container_compute"), details=("device_files",)),
]}

for _fact in REGISTRY.values():
    assert _fact.kind in KINDS, _fact.path
