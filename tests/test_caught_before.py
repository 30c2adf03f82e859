"""Every "caught before a run by" claim of diagnose's catalog, held to a constructed machine: for each known failure
and each rule its entry names, a change to the reference machine that has the failure's cause, where that rule
fails (or warns). A new claim without its environment here is a failing test that names it."""

from __future__ import annotations

import pytest
from test_rule_examples import context, machine

from preflight.engine import loader
from preflight.engine.evaluate import evaluate

RULESET = loader.load(failures=True, capacity=True)
LOW_MEMORY = {"nvml.gpus.0.memory.total": 4 << 30, "nvml.gpus.0.memory.free": 3 << 30}
ECC = {"nvml.gpus.0.ecc_uncorrected_volatile": 2}
OLD_DRIVER = {"nvml.driver_version": "525.147.05", "nvml.cuda_driver_version": "12.0"}
CPU_TORCH = {"python.torch.version": "2.11.0+cpu", "python.torch.cuda": ""}
NO_GPU = {"visibility.count": 0, "visibility.visible": [], "visibility.cuda_visible_devices": ""}
SMALL_SHM = {"host.shm.total": 64 << 20, "host.shm.free": 64 << 20}
NO_LIBRARY = {"nvml.init.status": "library_not_found"}
NOT_LOADED = {"nvml.init.status": "driver_not_loaded"}
OLD_SM = {"torch_arch.flags": ["sm_50", "sm_60", "sm_70"]}


def _missing(package):
    return {"python.packages.%s.importable" % package: False, "python.packages.%s.version" % package: None}


# failure -> rule -> (the change to the reference machine that has the failure's cause, the run's context)
ENVIRONMENTS = {
    "slurm.gres_count_low": {"gpu.health": {"nvml.gpus.0.lost": True},
                             "gpu.expected_count": ({}, {"count": 8, "source": "Slurm Gres", "scope": "machine"})},
    "slurm.gres_conf": {"nvml.init": NOT_LOADED, "gpu.count": NO_GPU},
    "container.proc_driver_mount": {"nvml.init": {"nvml.init.status": "driver_library_mismatch"}},
    "container.device_plugin_nvml": {"nvml.init": NO_LIBRARY},
    "cuda.oom": {"gpu.memory": LOW_MEMORY},
    "cudnn.no_algorithm": {"gpu.memory": LOW_MEMORY},
    "yolov9.amp_check_failed": {"gpu.memory": LOW_MEMORY, "gpu.health": ECC},
    "torch.no_kernel_image": {"torch.arch": OLD_SM},
    "cuda.driver_too_old": {"cuda.compat": {"nvml.driver_version": "535.104.05", "nvml.cuda_driver_version": "12.2"}},
    "cuda.compat_libraries": {"cuda.compat": {"nvml.driver_version": "535.104.05",
                                              "nvml.cuda_driver_version": "12.2"}},
    "torch.cpu_build": {"torch.cuda": CPU_TORCH},
    "torch.cpu_only_run": {"torch.cuda": CPU_TORCH},
    "torch.cuda_on_macos": {"torch.cuda": CPU_TORCH},
    "nvidia.no_driver": {"nvml.init": NO_LIBRARY},
    "nvml.driver_library_mismatch": {"nvml.init": {"nvml.init.status": "driver_library_mismatch"}},
    "nvml.unknown_error": {"nvml.init": {"nvml.init.status": "other", "nvml.init.error": "Unknown",
                                         "nvml.init.message": "Unknown Error"}},
    "gpu.uncorrectable_ecc": {"gpu.health": ECC},
    "cuda.no_gpu_visible": {"gpu.count": NO_GPU},
    "cuda.invalid_device": {"gpu.count": NO_GPU},
    "dataloader.shm_bus_error": {"host.shm": SMALL_SHM},
    "dataloader.worker_exited": {"host.shm": SMALL_SHM},
    "nccl.system_error": {"host.shm": SMALL_SHM},
    "module.pkg_resources": {"python.packages": _missing("pkg_resources")},
    "module.torch_missing": {"torch.cuda": {"python.torch": {"installed": False}},
                             "python.conda_env": {"python.conda.env_name": "base", "python.conda.is_base": True}},
    "module.torch_companion_missing": {"python.packages": _missing("torchvision")},
    "module.missing": {"python.packages": _missing("pandas"),
                       "python.conda_env": {"python.conda.env_name": "base", "python.conda.is_base": True}},
    "conda.not_initialized": {"python.conda_env": {"python.conda.env_name": "base", "python.conda.is_base": True}},
    "conda.env_missing": {"python.conda_env": {"python.conda.env_name": "base", "python.conda.is_base": True}},
    "container.requirement_unsatisfied": {"container.require": {
        "container.requirements": {"NVIDIA_REQUIRE_CUDA": "cuda>=13.1"}}},
    "container.driver_not_loaded": {"nvml.init": NOT_LOADED},
    "container.no_host_driver": {"nvml.init": NO_LIBRARY},
    "cuda.fabric_manager": {"gpu.fabric": {"nvml.gpus.0.fabric": {"state": "not_started", "status": 0}}},
    "cuda.unknown_error": {"nvml.init": NOT_LOADED, "gpu.count": NO_GPU},
    "nvidia.smi_no_driver": {"nvml.init": NOT_LOADED},
    "nvidia.smi_missing": {"nvml.init": NO_LIBRARY,
                           "container.capabilities": {"container.NVIDIA_DRIVER_CAPABILITIES": "compute"}},
    "nvml.no_permission": {"nvml.init": {"nvml.init.status": "no_permission"}},
    "gpu.fell_off_bus": {"gpu.health": {"nvml.gpus.0.lost": True},
                         "gpu.expected_count": ({}, {"count": 8, "source": "Slurm Gres", "scope": "machine"})},
    "gpu.init_failed": {"gpu.expected_count": ({}, {"count": 8, "source": "Slurm Gres", "scope": "machine"})},
    "cudnn.status_error": {"cuda.compat": OLD_DRIVER, "gpu.memory": LOW_MEMORY},
    "cuda.illegal_address": {"gpu.health": ECC},
    "dtype.half_on_cpu": {"torch.cuda": CPU_TORCH, "gpu.count": NO_GPU},
    "nccl.unhandled_cuda_error": {"cuda.compat": OLD_DRIVER, "torch.arch": OLD_SM, "gpu.health": ECC},
    "nvidia.nouveau": {"nvml.init": NOT_LOADED},
    "torch.gpu_too_old": {"torch.arch": dict(OLD_SM, **{"torch_arch.flags": ["sm_80", "sm_86", "sm_90"],
                                                        "nvml.gpus.0.compute_capability": "7.0",
                                                        "nvml.gpus.0.name": "Tesla V100-SXM2-32GB"}),
                          "gpu.compute_capability": {"nvml.gpus.0.compute_capability": "7.0",
                                                     "nvml.gpus.0.name": "Tesla V100-SXM2-32GB"}},
    "pillow.getsize": {"python.packages": {"python.packages.Pillow.version": "10.4.0"}},
    "numpy.trapz_removed": {"python.packages": {"python.packages.numpy.version": "2.4.1"}},
    "container.image_needs_newer_driver": {"cuda.compat": OLD_DRIVER, "driver.version": OLD_DRIVER},
    "torchvision.torch_mismatch": {"torch.companions": {
        "python.torch_companions.torchvision": {"version": "0.25.0+cu130", "requires_torch": "==2.10.0"}}},
    "torch.cuda_checkpoint_on_cpu": {"torch.cuda": CPU_TORCH, "nvml.init": NO_LIBRARY},
    "torch.cuda_model_without_driver": {"nvml.init": NO_LIBRARY},
    "torch.cuda_unavailable": {"torch.cuda": CPU_TORCH, "cuda.compat": OLD_DRIVER, "nvml.init": NO_LIBRARY,
                               "gpu.count": NO_GPU},
}
CLAIMS = [(failure.id, rule) for failure in RULESET.failures.values() for rule in failure.rules]


def test_every_claim_has_a_constructed_environment():
    missing = [claim for claim in CLAIMS if claim[1] not in ENVIRONMENTS.get(claim[0], {})]
    assert not missing, "claims with no environment here (failure, rule): %s" % missing
    stale = [(failure, rule) for failure, rules in ENVIRONMENTS.items() for rule in rules
             if (failure, rule) not in CLAIMS]
    assert not stale, "environments for claims the catalog no longer makes: %s" % stale


@pytest.mark.parametrize("failure_id, rule_id", CLAIMS, ids=["%s:%s" % claim for claim in CLAIMS])
def test_the_named_rule_fails_where_the_failure_has_its_cause(failure_id, rule_id):
    entry = ENVIRONMENTS.get(failure_id, {}).get(rule_id)
    if entry is None:
        pytest.fail("no environment for %s caught by %s" % (failure_id, rule_id))
    facts, expected = entry if isinstance(entry, tuple) else (entry, None)
    example = {"facts": facts, "expected_gpus": expected}
    snapshot = machine(example)
    rule = RULESET.rules[rule_id]
    results = evaluate([rule.resolve(rule.profiles[0])], snapshot, context(example, snapshot))
    assert {r.status for r in results} & {"fail", "warn"}, (failure_id, rule_id, [(r.status, r.message)
                                                                                     for r in results])
