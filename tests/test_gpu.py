"""On a machine with a working NVIDIA driver: live facts against nvidia-smi and torch.

Skipped wherever NVML does not initialise (CI has no GPU). Run them alone
with ``pytest -m gpu -v``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from conftest import run_cli

from preflight.probes import nvml

pytestmark = pytest.mark.gpu


def _live_nvml():
    return nvml.probe()


LIVE = _live_nvml()
needs_gpu = pytest.mark.skipif(LIVE["init"]["status"] != "ok",
                               reason="NVML does not initialise here (%s)" % LIVE["init"]["status"])


def _smi(*fields):
    if not shutil.which("nvidia-smi"):
        pytest.skip("nvidia-smi is not installed")
    out = subprocess.run(["nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    return [[cell.strip() for cell in line.split(",")] for line in out.strip().splitlines()]


@needs_gpu
def test_live_facts_agree_with_nvidia_smi():
    facts = json.loads(run_cli("facts").stdout)
    gpus = facts["nvml"]["gpus"]
    rows = _smi("index", "name", "uuid", "memory.total", "compute_cap", "driver_version", "pci.bus_id")
    assert len(rows) == len(gpus)
    for row, gpu in zip(rows, gpus):
        index, name, uuid, memory_mib, cc, driver, bus = row
        assert gpu["index"] == int(index) and gpu["name"] == name and gpu["uuid"] == uuid
        assert gpu["memory"]["total"] // 2**20 == int(memory_mib)
        assert gpu["compute_capability"] == cc
        assert gpu["pci_bus_id"].lower() == bus.lower()
        assert facts["nvml"]["driver_version"] == driver


@needs_gpu
def test_live_node_check_passes_on_a_healthy_gpu_node():
    completed = run_cli("check", "--profile", "node", "--format", "json")
    report = json.loads(completed.stdout)
    statuses = {(r["id"], r["subject"]): r["status"] for r in report["results"]}
    assert statuses[("nvml.init", "system")] == "pass"
    assert statuses[("gpu.count", "system")] == "pass"
    assert all(status in ("pass", "warn", "fail") for status in statuses.values()), statuses


@needs_gpu
def test_cuda_visible_devices_limits_the_gpus_checked():
    first = LIVE["gpus"][0]
    report = json.loads(run_cli("check", "--profile", "node", "--select", "gpu.memory", "--format", "json",
                                env={"CUDA_VISIBLE_DEVICES": first["uuid"]}).stdout)
    assert [r["subject"] for r in report["results"]] == ["gpu%d" % first["index"]]


@needs_gpu
def test_torch_architectures_agree_with_torch_itself():
    probe = subprocess.run([sys.executable, "-c", "import torch; print(torch._C._cuda_getArchFlags())"],
                           capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        pytest.skip("no CUDA torch in this environment")
    facts = json.loads(run_cli("facts", "--no-cache").stdout)
    assert facts["torch_arch"]["flags"] == probe.stdout.split()
    report = json.loads(run_cli("check", "--select", "torch.arch,cuda.compat,torch.cuda", "--format", "json").stdout)
    assert {r["status"] for r in report["results"]} <= {"pass", "warn"}, report["results"]


@needs_gpu
def test_the_active_test_passes_on_a_healthy_gpu():
    """preflight smoke on the real GPUs, with the interpreter .ci/run or the device script gives
    (PREFLIGHT_TEST_TORCH_PYTHON: a CUDA build of torch there)."""
    import os

    python = os.environ.get("PREFLIGHT_TEST_TORCH_PYTHON")
    if not python:
        pytest.skip("PREFLIGHT_TEST_TORCH_PYTHON is not set: no interpreter with a CUDA torch to run the test in")
    completed = run_cli("smoke", "--python", python, "--timeout", "240", "--format", "json")
    report = json.loads(completed.stdout)
    found = {r["id"]: r for r in report["results"]}
    assert found["smoke.torch"]["status"] == "pass", found["smoke.torch"]
    for rule_id in ("smoke.memory", "smoke.matmul.fp32", "smoke.matmul.fp16", "smoke.train_step"):
        assert found[rule_id]["status"] == "pass", found[rule_id]
    # A healthy GPU whose model the datasheets list is near its figures; another model is not judged.
    for rule_id in ("smoke.throughput.datasheet", "smoke.bandwidth.datasheet"):
        assert found[rule_id]["status"] in ("pass", "skip"), found[rule_id]
    assert completed.returncode == 0, completed.stdout
