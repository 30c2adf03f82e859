"""The conditions a rule can require (``when = [...]``, and those its fact implies): each says why a rule does
not apply here (the rule is skipped), or None when it does."""

from __future__ import annotations

from typing import Callable, Dict, NamedTuple, Optional, Tuple

from preflight.facts import derived, smoke
from preflight.facts.view import SnapshotView, Unknown


class Condition(NamedTuple):
    """A named precondition of a rule; ``check`` returns None when it holds, else the reason."""

    name: str
    description: str
    probes: Tuple[str, ...]
    check: Callable[[SnapshotView], Optional[str]]


def _gpu_node(facts: SnapshotView) -> Optional[str]:
    expected = facts.context.expected_gpus
    if expected and expected.get("count") == 0:
        return "not a GPU node (%s): GPU checks do not apply" % expected.get("source")
    return None


def _gpus_expected(facts: SnapshotView) -> Optional[str]:
    return None if facts.context.expected_gpus else "no GPU count is expected (--expect-gpus N|auto; preflight slurm reads the Gres)"


def _nvml_ok(facts: SnapshotView) -> Optional[str]:
    status = facts.section("nvml").get("init", {}).get("status")
    return None if status == "ok" else "NVML is not available (nvml.init: %s)" % status


def _gpu_visible(facts: SnapshotView) -> Optional[str]:
    if _nvml_ok(facts):
        return _nvml_ok(facts)
    return None if facts.visible_indices() else "no GPU is visible to CUDA (see gpu.count)"


def _conda_active(facts: SnapshotView) -> Optional[str]:
    return None if (facts.section("python").get("conda") or {}).get("active") else "conda is not in use"


def _torch_cuda(facts: SnapshotView) -> Optional[str]:
    build = derived.torch_build(facts.torch())
    return None if build == "cuda" else "torch is not a CUDA build (torch.build: %s; see torch.cuda)" % build


def _container_require(facts: SnapshotView) -> Optional[str]:
    return derived.requirements_apply(facts.section("container"))


def _container_capabilities(facts: SnapshotView) -> Optional[str]:
    value = facts.section("container").get("NVIDIA_DRIVER_CAPABILITIES")
    return None if value is not None else "NVIDIA_DRIVER_CAPABILITIES is not set"


def _container_compute(facts: SnapshotView) -> Optional[str]:
    if not (facts.section("host").get("container") or {}).get("detected"):
        return "not in a container: the driver creates /dev/nvidia-uvm on the first CUDA call (nvidia-modprobe)"
    capabilities = facts.section("container").get("NVIDIA_DRIVER_CAPABILITIES")
    if not derived.gives_compute_devices(capabilities):
        return "the container was not given the compute capability (NVIDIA_DRIVER_CAPABILITIES=%s): " \
               "the toolkit passes the compute device nodes only with it (see container.capabilities)" % capabilities
    return None


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
    return None if facts.context.workload else "no workload was given (check --workload ID)"


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
    Condition("container_compute", "in a container given the compute capability (or the default)",
              ("host", "container"), _container_compute),
    Condition("smoke_ran", "the active test (preflight smoke) ran", ("smoke",), smoke.ran),
    Condition("smoke_peers", "two tested GPUs are of one model", ("smoke",), smoke.has_peers),
    Condition("smoke_datasheet", "a tested GPU's model is in NVIDIA's datasheets (rules/knowledge/gpus.toml)",
              ("smoke",), smoke.has_datasheet),
    Condition("smoke_collective", "the all-reduce had ranks to reduce across (two or more devices)", ("smoke",),
              smoke.collective_ran),
    Condition("smoke_links", "an NCCL all-reduce ran over GPUs whose links (NVLink or PCIe) NVML reports",
              ("smoke", "nvml", "nvml_health"), smoke.has_links),
    Condition("smoke_fit", "a workload was measured (smoke --workload --repo)", ("smoke",), smoke.fit_asked),
    Condition("smoke_fit_gpu", "the measured fit ran on a GPU (on the CPU it measures time only)", ("smoke",),
              smoke.fit_measured_memory),
] + [Condition("smoke_" + precision, "a tested device runs %s matrix products" % precision, ("smoke",),
               smoke.supports(precision)) for precision in smoke.PRECISIONS]}
