"""Every default rule, passing and failing, through the real command line."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import (
    FIXTURES,
    driver_install_command,
    nvml_fixture,
    ok,
    run_cli,
    run_json,
    status_of,
    write_fixture,
)

from preflight.knowledge import torch_wheels

H200 = nvml_fixture("h200-driver580.json")
A100X2 = nvml_fixture("2x-a100-40g-driver550-ecc.json")
RTX3060 = nvml_fixture("rtx3060-12g-driver525.json")
NO_LIBRARY = nvml_fixture("no-library.json")
NOT_LOADED = nvml_fixture("driver-not-loaded.json")
MIB = 2**20


def check(*args, env=None, fixture=H200):
    return run_json("check", "--nvml-fixture", fixture, *args, env=env)


def one(report, rule_id, subject=None):
    found = [r for r in report["results"] if r["id"] == rule_id and (subject is None or r["subject"] == subject)]
    assert len(found) == 1, found
    return found[0]


def gpu_fixture(tmp_path, name="NVIDIA GeForce RTX 3060", cc=(8, 6), memory=12 * 2**30):
    """The RTX 3060 recording with another GPU's name, compute capability and memory."""
    def change(data):
        device = data["devices"][0]
        device["nvmlDeviceGetName"] = ok(name)
        device["nvmlDeviceGetCudaComputeCapability"] = ok(list(cc))
        for key in ("nvmlDeviceGetMemoryInfo", "nvmlDeviceGetMemoryInfo(v2)"):
            device[key]["ok"].update(total=memory, free=memory - 300 * MIB)
    return write_fixture(tmp_path, "rtx3060-12g-driver525.json", change)


# --- nvml.init --------------------------------------------------------------------

def test_nvml_init_passes_on_h200():
    report = check("--select", "nvml")
    assert status_of(report, "nvml.init") == "pass"


@pytest.mark.parametrize("fixture, label, command", [
    (NO_LIBRARY, "NVML library not found", "docker run --rm --gpus all"),
    (NOT_LOADED, "driver not loaded", "sudo modprobe nvidia"),
])
def test_nvml_init_fails_with_the_fix_for_the_error(fixture, label, command):
    report = check(fixture=fixture)
    result = one(report, "nvml.init")
    assert result["status"] == "fail" and result["severity"] == "error"
    assert label in result["message"]
    assert any(command in c for c in result["fix"]["commands"])
    # GPU rules do not pile up on top of the one real problem.
    assert status_of(report, "driver.version") == "skip"
    assert status_of(report, "gpu.memory") == "skip"
    assert report["ok"] is False


@pytest.mark.parametrize("error, code, fix_word", [
    ("NVMLError_LibRmVersionMismatch", 18, "sudo reboot"),
    ("NVMLError_NoPermission", 4, "ls -l /dev/nvidia*"),
    ("NVMLError_Unknown", 999, "nvidia-smi"),
])
def test_nvml_init_other_errors_have_their_own_fix(tmp_path, error, code, fix_word):
    fixture = write_fixture(tmp_path, "no-library.json", lambda d: d.update(init={"err": error, "code": code}))
    result = one(check("--select", "nvml", fixture=fixture), "nvml.init")
    assert result["status"] == "fail"
    assert fix_word in result["fix"]["commands"]


def test_live_nvml_on_this_machine_reports_a_real_outcome():
    """No driver here: the real library answers LibraryNotFound, with the right fix and exit 1."""
    completed = run_cli("check")
    report_text = completed.stdout
    status = json.loads(run_cli("facts").stdout)["nvml"]["init"]["status"]
    if status == "ok":
        pytest.skip("this machine has a working NVIDIA driver")
    assert completed.returncode == 1
    assert "FAIL   nvml.init" in report_text
    if status == "library_not_found":
        assert "NVML library not found" in report_text
        assert driver_install_command() in report_text


# --- gpu.count --------------------------------------------------------------------

def test_gpu_count_passes_and_counts_visible_gpus():
    report = check("--select", "gpu.count", fixture=A100X2)
    assert status_of(report, "gpu.count") == "pass"
    assert one(report, "gpu.count")["observed"] == 2


def test_gpu_count_fails_when_cuda_visible_devices_hides_every_gpu():
    report = check("--select", "gpu.count", env={"CUDA_VISIBLE_DEVICES": ""})
    result = one(report, "gpu.count")
    assert result["status"] == "fail" and result["observed"] == 0
    assert "CUDA_VISIBLE_DEVICES=''" in result["message"]


def test_gpu_count_threshold_can_be_raised():
    assert status_of(check("--select", "gpu.count", "--set", "gpu.count.min=2"), "gpu.count") == "fail"
    assert status_of(check("--select", "gpu.count", "--set", "gpu.count.min=2", fixture=A100X2), "gpu.count") == "pass"


def test_gpu_rules_apply_only_to_visible_gpus():
    report = check("--select", "gpu.health", fixture=A100X2, env={"CUDA_VISIBLE_DEVICES": "0"})
    assert [r["subject"] for r in report["results"]] == ["gpu0"]
    assert report["ok"] is True  # the broken GPU 1 is not this job's


# --- gpu.expected_count and nodes without GPUs --------------------------------------

def test_expect_gpus_fails_on_fewer_and_warns_on_more():
    fewer = one(check("--expect-gpus", "2"), "gpu.expected_count")
    assert fewer["status"] == "fail"
    assert fewer["message"] == "expected 2 GPUs (--expect-gpus 2), found 1"
    assert fewer["fix"]["commands"][0] == "nvidia-smi -L"
    exact = one(check("--expect-gpus", "2", fixture=A100X2, env={"CUDA_VISIBLE_DEVICES": "0,1"}), "gpu.expected_count")
    assert exact["status"] == "pass" and exact["message"] == "2 GPU(s) visible to CUDA, as expected (--expect-gpus 2)"
    warned = check("--expect-gpus", "1", "--select", "gpu.expected_count", fixture=A100X2)
    assert status_of(warned, "gpu.expected_count") == "warn" and warned["ok"] is True
    # Outside Slurm a job counts what CUDA will see.
    hidden = one(check("--expect-gpus", "2", fixture=A100X2, env={"CUDA_VISIBLE_DEVICES": "1"}), "gpu.expected_count")
    assert hidden["status"] == "fail" and "found 1" in hidden["message"]
    # Without an expectation the rule does not run.
    assert status_of(check("--select", "gpu.expected_count"), "gpu.expected_count") == "skip"


def test_expect_gpus_auto_reads_the_jobs_slurm_allocation():
    allocated = check("--expect-gpus", "auto", env={"SLURM_GPUS_ON_NODE": "4"})
    assert one(allocated, "gpu.expected_count")["message"] == "expected 4 GPUs (SLURM_GPUS_ON_NODE), found 1"
    assert status_of(check("--expect-gpus", "auto"), "gpu.expected_count") == "skip"


@pytest.mark.parametrize("fixture", [NO_LIBRARY, NOT_LOADED])
def test_expect_gpus_zero_is_not_a_gpu_node(fixture):
    completed = run_cli("check", "--profile", "node", "--nvml-fixture", fixture, "--expect-gpus", "0")
    assert completed.returncode == 0, completed.stdout
    report = check("--profile", "node", "--expect-gpus", "0", fixture=fixture)
    assert status_of(report, "nvml.init") == "skip"
    assert "not a GPU node (--expect-gpus 0)" in one(report, "nvml.init")["message"]
    # A GPU where none is expected warns and the GPU rules stay skipped.
    report = check("--profile", "node", "--expect-gpus", "0")
    assert status_of(report, "gpu.expected_count") == "warn" and status_of(report, "gpu.health") == "skip"


@pytest.mark.parametrize("value", ["-1", "two", "1025", "1.5", ""])
def test_expect_gpus_bad_value_is_a_usage_error(value):
    completed = run_cli("check", "--nvml-fixture", H200, "--expect-gpus", value)
    assert completed.returncode == 2
    assert "--expect-gpus must be a GPU count" in completed.stderr and "Traceback" not in completed.stderr


# --- gpu.health -------------------------------------------------------------------

def test_gpu_health_flags_ecc_errors_and_pending_remap_on_the_right_gpu():
    report = check("--select", "gpu.health", fixture=A100X2)
    assert status_of(report, "gpu.health", "gpu0") == "pass"
    bad = one(report, "gpu.health", "gpu1")
    assert bad["status"] == "fail"
    assert "2 uncorrected ECC" in bad["message"] and "row remapping is pending" in bad["message"]
    assert "sudo nvidia-smi --gpu-reset -i 1" in bad["fix"]["commands"]


def test_gpu_health_flags_a_lost_gpu(tmp_path):
    fixture = write_fixture(tmp_path, "h200-driver580.json", lambda d: d["devices"][0].update(
        nvmlDeviceGetHandleByIndex={"err": "NVMLError_GpuIsLost", "code": 15}))
    report = check(fixture=fixture)
    assert "lost" in one(report, "gpu.health")["message"]
    assert status_of(report, "gpu.health") == "fail"
    assert status_of(report, "gpu.memory") == "error"  # nothing can be read from it


def test_gpu_health_flags_pending_retired_pages(tmp_path):
    fixture = write_fixture(tmp_path, "rtx3060-12g-driver525.json", lambda d: d["devices"][0].update(
        nvmlDeviceGetRetiredPagesPendingStatus=ok(1)))
    assert "retired pages are pending" in one(check("--select", "gpu.health", fixture=fixture), "gpu.health")["message"]


# --- gpu.mig ------------------------------------------------------------------------

def _mig_on(data):
    data["devices"][0]["nvmlDeviceGetMigMode"] = ok([1, 1])


MIG_UUID = "MIG-4a9b1c2d-0000-5555-8888-123456789abc"


def _mig_slices(*uuids):
    """MIG on with these MIG devices, as NVML lists them (slot i holds uuids[i]; the rest are empty)."""
    def change(data):
        device = data["devices"][0]
        device["nvmlDeviceGetMigMode"] = ok([1, 1])
        device["nvmlDeviceGetMaxMigDeviceCount"] = ok(7)
        for slot in range(7):
            device["nvmlDeviceGetMigDeviceHandleByIndex(%d)" % slot] = (
                ok(1000 + slot) if slot < len(uuids) else {"err": "NVMLError_NotFound", "code": 6})
    return change


def test_gpu_mig_fails_only_when_no_instance_exists(tmp_path):
    fixture = write_fixture(tmp_path, "h200-driver580.json", _mig_slices())
    result = one(check("--select", "gpu.mig", fixture=fixture), "gpu.mig")
    assert result["status"] == "fail" and "no GPU instance or compute instance exists" in result["message"]
    assert "sudo nvidia-smi mig -i 0 -cgi <profile name or id> -C" in result["fix"]["commands"]
    assert "nvidia-smi mig -lgip -i 0" in result["fix"]["commands"]


def test_gpu_mig_passes_with_a_mig_instance_selected(tmp_path):
    fixture = write_fixture(tmp_path, "h200-driver580.json", _mig_on)
    report = check("--select", "gpu.mig", fixture=fixture, env={"CUDA_VISIBLE_DEVICES": MIG_UUID})
    assert status_of(report, "gpu.mig") == "pass"


def test_gpu_mig_passes_for_a_slice_handed_over_or_enumerated(tmp_path, monkeypatch):
    # NVML lists the MIG devices; the MIG device handles answer their UUIDs through the replay's handle calls.
    from preflight.probes import nvml_replay

    fixture = write_fixture(tmp_path, "h200-driver580.json", _mig_slices(MIG_UUID))
    real_call = nvml_replay.ReplayBinding._call

    def call(self, name, args, kwargs):
        if name == "nvmlDeviceGetUUID" and args and args[0] == 1000:
            return MIG_UUID
        return real_call(self, name, args, kwargs)

    monkeypatch.setattr(nvml_replay.ReplayBinding, "_call", call)
    for env in ({}, {"NVIDIA_VISIBLE_DEVICES": MIG_UUID}):  # bare metal, nothing selected; a container's slice
        result = one(check("--select", "gpu.mig", fixture=fixture, env=env), "gpu.mig")
        assert result["status"] == "pass", result
        assert MIG_UUID in result["message"]


def test_gpu_mig_listing_failure_is_unknown_not_a_failure(tmp_path):
    def change(data):
        _mig_slices()(data)
        data["devices"][0]["nvmlDeviceGetMigDeviceHandleByIndex(0)"] = {"err": "NVMLError_NoPermission", "code": 4}
    fixture = write_fixture(tmp_path, "h200-driver580.json", change)
    result = one(check("--select", "gpu.mig", fixture=fixture), "gpu.mig")
    assert result["status"] == "error" and "NVMLError_NoPermission" in result["message"]


def test_gpu_mig_passes_without_mig():
    assert status_of(check("--select", "gpu.mig"), "gpu.mig") == "pass"
    assert status_of(check("--select", "gpu.mig", fixture=RTX3060), "gpu.mig") == "pass"


# --- driver.version -------------------------------------------------------------------

def test_driver_version_pass_warn_fail(tmp_path):
    assert status_of(check("--select", "driver"), "driver.version") == "pass"
    failed = one(check("--select", "driver", fixture=RTX3060), "driver.version")
    assert failed["status"] == "fail" and failed["observed"] == "525.60.13"
    assert ">= 530" in failed["expected"]
    warn_fixture = write_fixture(tmp_path, "h200-driver580.json",
                                 lambda d: d["system"].update(nvmlSystemGetDriverVersion=ok("535.104.05")))
    warned = one(check("--select", "driver", fixture=warn_fixture), "driver.version")
    assert warned["status"] == "warn" and warned["severity"] == "warning"


@pytest.mark.parametrize("torch_cuda, status", [("11.8", "warn"), ("12.1", "warn"), ("13.0", "fail")])
def test_driver_below_the_site_minimum_only_warns_when_the_jobs_torch_runs_on_it(fake_env, torch_cuda, status):
    env = fake_env()
    env.add_torch(version="2.5.0+cu%s" % torch_cuda.replace(".", ""), cuda=torch_cuda)
    report = check("--select", "driver,cuda.compat", "--python", env.python, fixture=RTX3060)
    driver = one(report, "driver.version")
    assert driver["status"] == status, driver
    if status == "warn":
        assert driver["message"].startswith("driver 525.60.13 is below the site minimum 530, but torch 2.5.0+cu")
        assert "the job can start" in driver["message"]
        # One story: cuda.compat agrees that this torch runs here.
        assert one(report, "cuda.compat")["status"] in ("pass", "warn")
    else:
        assert one(report, "cuda.compat")["status"] == "fail"
    # The fix installs a supported branch, never an end-of-life one.
    commands = " ".join(driver["fix"]["commands"])
    # The install command follows this host's distribution (ubuntu-drivers only on Ubuntu).
    assert driver_install_command() in commands
    if driver_install_command() == "sudo ubuntu-drivers install":
        assert "nvidia-driver-580" in commands
    assert not any(old in commands for old in ("nvidia-driver-535", "nvidia-driver-550", "nvidia-driver-570"))
    # The node profile keeps the minimum as site policy.
    node = one(check("--profile", "node", "--select", "driver", fixture=RTX3060), "driver.version")
    assert node["status"] == "fail"


def test_a_failed_driver_query_is_an_error_not_a_failure(tmp_path):
    fixture = write_fixture(tmp_path, "h200-driver580.json", lambda d: d["system"].update(
        nvmlSystemGetDriverVersion={"err": "NVMLError_Unknown", "code": 999}))
    result = one(check("--select", "driver", fixture=fixture), "driver.version")
    assert result["status"] == "error" and "NVMLError_Unknown (999)" in result["message"]


def test_driver_version_set_overrides_threshold():
    assert status_of(check("--select", "driver", "--set", "driver.version.min=590"), "driver.version") == "fail"
    assert status_of(check("--select", "driver", "--set", "driver.version.min=520", fixture=RTX3060),
                     "driver.version") == "warn"


# --- gpu.compute_capability -------------------------------------------------------------

@pytest.mark.parametrize("name, cc, status", [
    ("Tesla V100-SXM2-32GB", (7, 0), "fail"),
    ("Tesla T4", (7, 5), "warn"),
    ("NVIDIA A100-SXM4-80GB", (8, 0), "pass"),
    ("NVIDIA GeForce RTX 5090", (12, 0), "pass"),
])
def test_compute_capability(tmp_path, name, cc, status):
    fixture = gpu_fixture(tmp_path, name=name, cc=cc)
    result = one(check("--select", "gpu.compute_capability", fixture=fixture), "gpu.compute_capability")
    assert result["status"] == status
    assert name in result["message"]


# --- gpu.memory -------------------------------------------------------------------------

@pytest.mark.parametrize("name, mib, profile, status", [
    ("NVIDIA GeForce RTX 3070", 8192, "train", "fail"),      # 8 GB card cannot train
    ("NVIDIA GeForce RTX 3070", 8192, "inference", "pass"),  # but serves
    ("NVIDIA GeForce RTX 3060", 12288, "train", "warn"),     # 12 GB trains, 16 GB recommended
    ("Tesla T4", 15360, "train", "pass"),                    # sold as 16 GB, reports 15360 MiB
    ("NVIDIA RTX A4000", 16376, "train", "pass"),            # sold as 16 GB, reports 16376 MiB
    ("NVIDIA GeForce GTX 1650", 4096, "inference", "fail"),
    ("NVIDIA GeForce RTX 3070", 8192, "node", "warn"),
])
def test_gpu_memory_uses_vendor_gigabytes(tmp_path, name, mib, profile, status):
    fixture = gpu_fixture(tmp_path, name=name, memory=mib * MIB)
    report = check("--profile", profile, "--select", "gpu.memory", fixture=fixture)
    assert status_of(report, "gpu.memory") == status


def test_gpu_memory_threshold_in_gib_can_be_set(tmp_path):
    fixture = gpu_fixture(tmp_path, name="Tesla T4", memory=15360 * MIB)
    report = check("--select", "gpu.memory", "--set", "gpu.memory.min=16GiB", fixture=fixture)
    result = one(report, "gpu.memory")
    assert result["status"] == "fail" and "GiB" in result["message"]


# --- gpu.throttle ------------------------------------------------------------------------

def test_gpu_throttle_warns_on_thermal_slowdown(tmp_path):
    fixture = write_fixture(tmp_path, "h200-driver580.json", lambda d: d["devices"][0].update(
        nvmlDeviceGetCurrentClocksEventReasons=ok(0x40 | 0x1)))
    result = one(check("--select", "gpu.throttle", fixture=fixture), "gpu.throttle")
    assert result["status"] == "warn" and "hw_thermal_slowdown" in result["message"]
    assert status_of(check("--select", "gpu.throttle"), "gpu.throttle") == "pass"


# --- torch.cuda, cuda.compat, torch.arch -----------------------------------------------------

def test_torch_missing_cpu_rocm_and_cuda_builds(fake_env):
    missing = fake_env("missing")
    assert status_of(check("--select", "torch.cuda", "--python", missing.python), "torch.cuda") == "fail"

    cpu = fake_env("cpu")
    cpu.add_torch(version="2.11.0+cpu", cuda=None)
    result = one(check("--select", "torch.cuda", "--python", cpu.python), "torch.cuda")
    assert result["status"] == "fail" and "CPU-only" in result["message"]
    wanted = torch_wheels.choose("580.159.04", "13.0", ["9.0"], "%d.%d" % sys.version_info[:2])
    assert any("%s --index-url %s" % (wanted.pins(), wanted.index_url) in c for c in result["fix"]["commands"])
    assert not any("uninstall" in c for c in result["fix"]["commands"])  # one transaction: a failed download keeps torch

    rocm = fake_env("rocm")
    rocm.add_torch(version="2.11.0+rocm6.4", cuda=None, hip="6.4")
    assert "ROCm" in one(check("--select", "torch.cuda", "--python", rocm.python), "torch.cuda")["message"]

    cuda = fake_env("cuda")
    cuda.add_torch()
    assert status_of(check("--select", "torch.cuda", "--python", cuda.python), "torch.cuda") == "pass"


@pytest.mark.parametrize("torch_cuda, fixture, status", [
    ("13.0", H200, "pass"),
    ("12.1", RTX3060, "warn"),          # driver 525 = CUDA 12.0: minor-version compatibility
    ("13.0", RTX3060, "fail"),          # CUDA 13 on a CUDA 12.0 driver
    ("11.8", RTX3060, "pass"),
    ("12.8", A100X2, "warn"),           # driver 550 = CUDA 12.4
])
def test_cuda_compat(fake_env, torch_cuda, fixture, status):
    env = fake_env()
    env.add_torch(version="2.5.0+cu%s" % torch_cuda.replace(".", ""), cuda=torch_cuda)
    result = one(check("--select", "cuda.compat", "--python", env.python, fixture=fixture), "cuda.compat")
    assert result["status"] == status, result
    if status == "fail":
        assert "525.60.13 supports CUDA 12.0" in result["message"]
        assert "580.65.06" in " ".join(result["fix"]["steps"])       # the minimum driver for CUDA 13.0
        # The newest torch this 12.0 driver runs for this GPU and this Python (2.14 from cu126 under
        # minor-version compatibility on Python 3.10+; tests/test_torch_wheels.py has the table), pinned.
        wanted = torch_wheels.choose("525.60.13", "12.0", ["8.6"], "%d.%d" % sys.version_info[:2])
        assert any("%s --index-url %s" % (wanted.pins(), wanted.index_url) in c for c in result["fix"]["commands"]), \
            result["fix"]


@pytest.mark.parametrize("name, cc, flags, status", [
    ("NVIDIA H200", (9, 0), "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120", "pass"),
    ("NVIDIA GeForce RTX 5090", (12, 0), "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90", "fail"),  # cu124 wheel
    ("NVIDIA GeForce RTX 4090", (8, 9), "sm_37 sm_50 sm_60 sm_70 sm_75 sm_80 sm_86", "pass"),    # 1.10+cu113
    ("NVIDIA H100 80GB HBM3", (9, 0), "sm_37 sm_50 sm_60 sm_70 sm_75 sm_80 sm_86", "fail"),      # 1.10+cu113
    ("NVIDIA GeForce RTX 5090", (12, 0), "sm_80 sm_90 compute_90", "pass"),                      # PTX JIT
])
def test_torch_arch(tmp_path, fake_env, name, cc, flags, status):
    env = fake_env()
    env.add_torch(version="2.5.0+cu124", cuda="12.4", arch_flags=flags)
    fixture = write_fixture(tmp_path, "h200-driver580.json", lambda d: d["devices"][0].update(
        nvmlDeviceGetName=ok(name), nvmlDeviceGetCudaComputeCapability=ok(list(cc))))
    result = one(check("--select", "torch.arch", "--python", env.python, fixture=fixture), "torch.arch")
    assert result["status"] == status, result
    if status == "fail":
        assert "sm_%d%d" % cc in result["message"]
        assert result["fix"]["title"].startswith("Install a torch build with kernels for sm_")


def test_torch_arch_fails_when_only_ptx_and_driver_in_minor_compat(tmp_path, fake_env):
    env = fake_env()
    env.add_torch(version="2.3.0+cu121", cuda="12.1", arch_flags="sm_80 compute_80")
    fixture = write_fixture(tmp_path, "rtx3060-12g-driver525.json", lambda d: None)  # cc 8.6, driver CUDA 12.0
    result = one(check("--select", "torch.arch", "--python", env.python, fixture=fixture), "torch.arch")
    assert result["status"] == "pass"  # sm_80 code runs on 8.6
    env2 = fake_env("ptx-only")
    env2.add_torch(version="2.3.0+cu121", cuda="12.1", arch_flags="sm_70 compute_70")
    result = one(check("--select", "torch.arch", "--python", env2.python, fixture=fixture), "torch.arch")
    assert result["status"] == "fail" and "PTX" in result["message"]


# --- python.conda_env ---------------------------------------------------------------------

def test_conda_env_skipped_without_conda(fake_env):
    env = fake_env()
    assert status_of(check("--select", "python.conda_env", "--python", env.python), "python.conda_env") == "skip"


def test_conda_env_any_but_base_unless_a_name_is_set(fake_env):
    good = fake_env("yolov9", conda="yolov9")
    assert status_of(check("--select", "python.conda_env", "--python", good.python), "python.conda_env") == "pass"

    # Environments are named by whoever made them: with no expected name set, another one passes.
    other = fake_env("detectron", conda="detectron")
    assert status_of(check("--select", "python.conda_env", "--python", other.python), "python.conda_env") == "pass"

    base = fake_env("miniconda3", conda="base")
    result = one(check("--select", "python.conda_env", "--python", base.python), "python.conda_env")
    assert result["status"] == "warn" and "'base'" in result["message"]
    assert result["fix"]["commands"][0] == "conda env list"  # no 'conda activate <a name nobody set>'
    assert not any(c.startswith("conda activate") for c in result["fix"]["commands"])

    # A site or user names the environment its jobs use: then a mismatch fails, with the command that fixes it.
    result = one(check("--select", "python.conda_env", "--set", "python.conda_env.expected=yolov9",
                       "--python", other.python), "python.conda_env")
    assert result["status"] == "fail" and "expected yolov9" in result["message"]
    assert "conda activate yolov9" in result["fix"]["commands"]
    assert status_of(check("--select", "python.conda_env", "--set", "python.conda_env.expected=detectron",
                           "--python", other.python), "python.conda_env") == "pass"


def test_conda_env_from_activated_environment_variables(fake_env, tmp_path):
    """A non-conda interpreter inside an activated conda shell: the variables name the environment."""
    env = fake_env()
    report = check("--select", "python.conda_env", "--python", env.python,
                   env={"CONDA_PREFIX": str(tmp_path / "miniconda3"), "CONDA_DEFAULT_ENV": "base"})
    assert status_of(report, "python.conda_env") == "warn"


# --- python.packages -------------------------------------------------------------------------

def _packages_without(fake_env, *skip):
    """python.packages' result for an environment with torch and YOLOv9's packages but ``skip``; and its python."""
    env = fake_env()
    env.add_torch()
    env.add_yolov9_packages(skip=skip)
    return one(check("--select", "python.packages", "--python", env.python), "python.packages"), env


def test_packages_missing_required_fails_and_names_them(fake_env):
    result, env = _packages_without(fake_env, "pandas", "pkg_resources")
    assert result["status"] == "fail"
    assert "pandas is missing" in result["message"] and "pkg_resources is missing" in result["message"]
    assert result["fix"]["commands"] == ["%s -m pip install pandas 'setuptools<82'" % env.python]


def test_a_package_both_required_and_recommended_is_told_missing_once(fake_env):
    result, env = _packages_without(fake_env, "Pillow")
    assert result["status"] == "fail" and result["message"] == "Pillow is missing"
    assert "(optional)" not in result["message"] and not any("Optional" in step for step in result["fix"]["steps"])
    # One requirement for the package, with the recommended pin where a release meeting it has a wheel for this
    # Python (Pillow 9.5 up to 3.11), else the bare name: pip is never given a package twice.
    pillow = "'Pillow<10'" if sys.version_info < (3, 12) else "Pillow"
    assert result["fix"]["commands"] == ["%s -m pip install %s" % (env.python, pillow)]


def test_packages_missing_thop_only_warns(fake_env):
    result, env = _packages_without(fake_env, "thop")
    assert result["status"] == "warn" and result["severity"] == "warning"
    # torch is thop's one requirement: --no-deps, so that a missing torch is never pulled from PyPI for it.
    assert result["fix"]["commands"] == ["%s -m pip install --no-deps thop" % env.python]
    # What the optional package adds is told for that package alone (the rule file's why_optional).
    optional = [step for step in result["fix"]["steps"] if step.startswith("Optional")]
    assert optional == ["Optional, so only a warning (YOLOv9 trains without them): thop (it only adds the GFLOPs "
                        "figure to the model summary)."], result["fix"]["steps"]


def test_packages_all_present_pass_and_profiles_differ(fake_env):
    env = fake_env()
    env.add_torch()
    env.add_yolov9_packages(skip=("tensorboard",))
    assert status_of(check("--select", "python.packages", "--python", env.python), "python.packages") == "fail"
    assert status_of(check("--profile", "inference", "--select", "python.packages", "--python", env.python),
                     "python.packages") == "pass"


def test_packages_version_requirement(fake_env):
    env = fake_env()
    env.add_torch()
    env.add_yolov9_packages()
    report = check("--select", "python.packages", "--set", "python.packages.required=numpy>=3,torch",
                   "--python", env.python)
    result = one(report, "python.packages")
    assert result["status"] == "fail" and "numpy 2.3.5 does not satisfy >=3" in result["message"]


def test_yolov9_numpy_pillow_and_ipython_pins(fake_env):
    env = fake_env()
    env.add_torch()
    env.add_yolov9_packages(skip=("numpy", "Pillow", "IPython"))
    env.add_package("numpy", "2.4.1")
    env.add_package("Pillow", "11.0.0", "PIL")
    result = one(check("--select", "python.packages", "--python", env.python), "python.packages")
    assert result["status"] == "fail"
    assert "numpy 2.4.1 does not satisfy <2.4" in result["message"] and "IPython is missing" in result["message"]
    assert "Pillow 11.0.0 does not satisfy <10 (optional)" in result["message"]
    assert any("Pillow (older than 10 only for the plots" in step and "thop" not in step
               for step in result["fix"]["steps"]), result["fix"]["steps"]
    # The pins are in the fix: the installed version is shown, the command installs what YOLOv9 can run with; the
    # optional Pillow<10 only where a release below 10 has a wheel for this Python (none from 3.12 on).
    from preflight.knowledge import package_index

    python = "%d.%d" % sys.version_info[:2]
    pillow = " 'Pillow<10'" if package_index.installable("Pillow<10", python) else ""
    assert result["fix"]["commands"] == ["%s -m pip install 'numpy<2.4' ipython%s" % (env.python, pillow)]


# --- host.shm ------------------------------------------------------------------------------

def _facts_with(tmp_path, change):
    completed = run_cli("facts", "--nvml-fixture", H200)
    assert completed.returncode == 0, completed.stderr
    facts = json.loads(completed.stdout)
    change(facts)
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(facts))
    return str(path)


def test_host_shm_warns_on_docker_default(tmp_path):
    path = _facts_with(tmp_path, lambda f: f["host"]["shm"].update(total=64 * MIB))
    completed = run_cli("check", "--facts", path, "--select", "host.shm", "--format", "json")
    report = json.loads(completed.stdout)
    result = one(report, "host.shm")
    assert result["status"] == "fail" and result["severity"] == "warning"
    assert any("--ipc=host" in step for step in result["fix"]["steps"])
    assert completed.returncode == 0  # a warning-severity rule does not fail the run...
    strict = run_cli("check", "--facts", path, "--select", "host.shm", "--strict")
    assert strict.returncode == 1     # ...unless --strict


def test_host_shm_passes_here_and_only_applies_to_training():
    assert status_of(check("--select", "host.shm"), "host.shm") == "pass"
    report = check("--profile", "inference")
    assert "host.shm" not in [r["id"] for r in report["results"]]


# --- container.require, container.capabilities ----------------------------------------------------

# The real NVIDIA_REQUIRE_CUDA of the CUDA 13 image on the recorded H200 node.
H200_IMAGE_REQUIRE = json.loads((FIXTURES / "h200-host.json").read_text())["env"]["NVIDIA_REQUIRE_CUDA"]


@pytest.mark.parametrize("fixture, status", [
    (H200, "pass"),      # driver CUDA 13.0 meets cuda>=13.0
    (A100X2, "pass"),    # a Tesla on the 550 branch: brand=tesla,driver>=550,driver<551
    (RTX3060, "fail"),   # GeForce, CUDA 12.0: no alternative holds
])
def test_container_require_with_a_real_cuda13_image(fixture, status):
    report = check("--select", "container.require", fixture=fixture,
                   env={"NVIDIA_REQUIRE_CUDA": H200_IMAGE_REQUIRE, "CUDA_VERSION": "13.0.2"})
    assert status_of(report, "container.require") == status


def test_container_require_from_cuda_version_and_disable():
    env = {"CUDA_VERSION": "12.8.1"}
    assert status_of(check("--select", "container.require", fixture=RTX3060, env=env), "container.require") == "fail"
    assert status_of(check("--select", "container.require", env=env), "container.require") == "pass"
    env["NVIDIA_DISABLE_REQUIRE"] = "true"
    assert status_of(check("--select", "container.require", fixture=RTX3060, env=env), "container.require") == "skip"
    assert status_of(check("--select", "container.require"), "container.require") == "skip"
    # "yes" is not a Go boolean: the toolkit keeps checking, and so does preflight.
    env["NVIDIA_DISABLE_REQUIRE"] = "yes"
    assert status_of(check("--select", "container.require", fixture=RTX3060, env=env), "container.require") == "fail"


def test_container_require_skips_every_jetpack_variable_and_checks_every_gpu(tmp_path):
    jetpack = {"NVIDIA_REQUIRE_JETPACK": "csv-mounts=all", "NVIDIA_REQUIRE_JETPACK_HOST_MOUNTS": "x>=1"}
    assert status_of(check("--select", "container.require", env=jetpack), "container.require") == "skip"
    # Two GPUs of different architectures given to the container: each must meet arch>=8.0.
    def mixed(data):
        data["devices"][1]["nvmlDeviceGetCudaComputeCapability"] = ok([7, 5])
        data["devices"][1]["nvmlDeviceGetName"] = ok("Tesla T4")
    fixture = write_fixture(tmp_path, "2x-a100-40g-driver550-ecc.json", mixed)
    result = one(check("--select", "container.require", fixture=fixture, env={"NVIDIA_REQUIRE_ARCH": "ARCH>=8.0"}),
                 "container.require")
    assert result["status"] == "fail" and "1 of 2 GPUs: GPU 1 (Tesla T4)" in result["message"], result


@pytest.mark.parametrize("value, status", [
    ("compute,utility", "pass"), ("all", "pass"), ("utility", "fail"), ("compute,video", "fail"), (None, "skip"),
    ("", "pass"),  # empty: the default utility,compute
])
def test_container_capabilities(value, status):
    env = {"NVIDIA_DRIVER_CAPABILITIES": value} if value is not None else {}
    assert status_of(check("--select", "container.capabilities", env=env), "container.capabilities") == status


def test_the_driver_fix_never_sends_a_volta_owner_past_r580(tmp_path):
    fixture = gpu_fixture(tmp_path, name="Tesla V100-SXM2-32GB", cc=(7, 0), memory=32 * 2**30)
    result = one(check("--profile", "node", "--select", "driver", fixture=fixture), "driver.version")
    assert result["status"] == "fail"
    steps = " ".join(result["fix"]["steps"])
    assert "install the 580 branch: it is the last that supports GPUs older than Turing" in steps
    ampere = one(check("--profile", "node", "--select", "driver", fixture=RTX3060), "driver.version")
    assert "580 (long-term support), 595 or 620; 535, 550, 570 are end of life" in " ".join(ampere["fix"]["steps"])


# --- container.devices, container.uvm_tools ---------------------------------------------------------

def _without_uvm(data):
    data["device_files"] = ["nvidia0", "nvidiactl"]


@pytest.mark.parametrize("capabilities, status", [(None, "fail"), ("compute,utility", "fail"), ("all", "fail"),
                                                  ("video,utility", "fail"), ("utility", "skip")])
def test_container_devices_fail_only_where_the_toolkit_should_have_given_them(tmp_path, capabilities, status):
    # A GPU Operator node whose driver had not created /dev/nvidia-uvm when the pod started: NVML (and
    # nvidia-smi) work, CUDA does not. A utility-only container (preflight's own DaemonSet) never gets it.
    env = {"container": "docker"}
    if capabilities is not None:
        env["NVIDIA_DRIVER_CAPABILITIES"] = capabilities
    fixture = write_fixture(tmp_path, "h200-driver580.json", _without_uvm)
    report = check("--select", "container.devices", "--select", "container.uvm_tools", fixture=fixture, env=env)
    result = one(report, "container.devices")
    assert result["status"] == status, result
    if status == "fail":
        assert "/dev/nvidia-uvm" in result["message"] and "present: /dev/nvidia0, /dev/nvidiactl" in result["message"]
        assert "sudo nvidia-modprobe -u -c=0" in result["fix"]["commands"]
        assert report["ok"] is False
    else:
        assert "compute capability" in result["message"]


def test_container_devices_pass_with_a_complete_driver_and_skip_outside_a_container(tmp_path):
    report = check("--select", "container.devices", "--select", "container.uvm_tools", env={"container": "docker"})
    assert status_of(report, "container.devices") == "pass" and status_of(report, "container.uvm_tools") == "pass"
    # Bare metal: the driver creates /dev/nvidia-uvm on the first CUDA call, so its absence is no fault.
    def bare_metal(facts):
        facts["host"]["container"] = {"detected": False, "kind": None, "markers": []}
        facts["nvml"]["device_files"] = ["nvidia0", "nvidiactl"]
    path = _facts_with(tmp_path, bare_metal)
    report = json.loads(run_cli("check", "--facts", path, "--select", "container", "--format", "json").stdout)
    result = one(report, "container.devices")
    assert result["status"] == "skip" and "nvidia-modprobe" in result["message"]


def test_a_missing_uvm_tools_node_warns_and_does_not_block(tmp_path):
    fixture = write_fixture(tmp_path, "h200-driver580.json",
                            lambda data: data.update(device_files=["nvidia-uvm", "nvidia0", "nvidiactl"]))
    report = check("--select", "container.devices", "--select", "container.uvm_tools", fixture=fixture,
                   env={"container": "docker"})
    tools = one(report, "container.uvm_tools")
    assert tools["status"] == "fail" and tools["severity"] == "warning" and "/dev/nvidia-uvm-tools" in tools["message"]
    assert status_of(report, "container.devices") == "pass" and report["ok"] is True


def test_a_gpu_without_a_name_is_named_once_by_its_index(tmp_path):
    """NVML may give no name (a lost or half-initialised GPU): the fix says "GPU 1", never "GPU 1 (GPU 1)"."""
    completed = run_cli("facts", "--nvml-fixture", nvml_fixture("2x-a100-40g-driver550-ecc.json"))
    facts = json.loads(completed.stdout)
    for gpu in facts["nvml"]["gpus"]:
        gpu["name"] = None
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(facts))
    report = json.loads(run_cli("check", "--facts", str(path), "--profile", "node", "--select", "gpu.health",
                                "--format", "json").stdout)
    failed = [r for r in report["results"] if r["status"] == "fail"][0]
    assert failed["fix"]["steps"][0].startswith("GPU 1: "), failed["fix"]["steps"]
    assert "(GPU 1)" not in json.dumps(report)


def test_check_s_driver_fix_never_speaks_of_a_missing_driver(fake_env):
    """check knows the driver it failed: the no-driver cases are diagnose's alone."""
    env = fake_env()
    env.add_torch(version="2.5.0+cu130", cuda="13.0")
    compat = one(check("--select", "cuda.compat", "--python", env.python, fixture=RTX3060), "cuda.compat")
    assert compat["status"] == "fail" and not any("--gpus all" in step for step in compat["fix"]["steps"]), compat

