"""The seams, across machines: check and diagnose rendered over Pythons 3.8-3.14, torch builds (CPU, CUDA 11.8 to
13.0), GPUs from sm_60 to sm_120, drivers 470 to 580 and 1, 2 or 8 GPUs. Whatever a fix prints, for that machine:
no uninstall without the install that follows it, no pin without a wheel for its Python in the knowledge, no
torchrun over more GPUs than there are (and none on one), no CUDA build the driver cannot run."""

from __future__ import annotations

import copy
import itertools
import json
import re
import shlex

import pytest
from conftest import FIXTURES, run_cli
from test_printed_commands import problems

from preflight.knowledge import nvidia, torch_wheels

REFERENCE = json.loads((FIXTURES / "reference-facts.json").read_text())
PYTHONS = ["3.8.18", "3.9.19", "3.10.14", "3.11.7", "3.12.4", "3.13.1", "3.14.0"]
TORCHES = [("2.4.1+cpu", None, []), ("2.7.1+cu118", "11.8", ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]),
           ("2.5.1+cu121", "12.1", ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]),
           ("2.6.0+cu124", "12.4", ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]),
           ("2.9.1+cu126", "12.6", ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]),
           ("2.9.1+cu128", "12.8", ["sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]),
           ("2.11.0+cu130", "13.0", ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"])]
GPUS = [("Tesla P100-PCIE-16GB", "6.0"), ("Tesla V100-SXM2-32GB", "7.0"), ("Tesla T4", "7.5"),
        ("NVIDIA GeForce RTX 3090", "8.6"), ("NVIDIA H100 80GB HBM3", "9.0"), ("NVIDIA GeForce RTX 5090", "12.0")]
DRIVERS = [("470.256.02", "11.4"), ("525.147.05", "12.0"), ("535.104.05", "12.2"), ("550.54.15", "12.4"),
           ("570.195.03", "12.8"), ("580.65.06", "13.0")]
COUNTS = [1, 2, 8]


def machine(python, torch, gpu, driver, count):
    snapshot = copy.deepcopy(REFERENCE)
    snapshot["python"]["version"] = python
    version, cuda, flags = torch
    snapshot["python"]["torch"].update(version=version, cuda=cuda)
    snapshot["python"]["packages"]["torch"]["version"] = version.split("+")[0]
    snapshot["python"]["torch_companions"] = {}
    snapshot["torch_arch"] = {"flags": flags, "source": "probe"} if cuda else None
    snapshot["nvml"]["driver_version"], snapshot["nvml"]["cuda_driver_version"] = driver
    first = snapshot["nvml"]["gpus"][0]
    first.update(name=gpu[0], compute_capability=gpu[1])
    snapshot["nvml"]["gpus"] = [dict(copy.deepcopy(first), index=i, uuid="GPU-%d" % i,
                                     pci_bus_id="00000000:%02X:00.0" % (i + 1)) for i in range(count)]
    snapshot["nvml"]["device_count"] = count
    snapshot["visibility"].update(visible=list(range(count)), count=count)
    return snapshot


# Every value of each dimension meets every value of Python and torch; the rest rotate.
CASES = [(python, torch, GPUS[n % len(GPUS)], DRIVERS[(n // 2) % len(DRIVERS)], COUNTS[n % len(COUNTS)])
         for n, (python, torch) in enumerate(itertools.product(PYTHONS, TORCHES))]
FAILURES = ["RuntimeError: CUDA error: no kernel image is available for execution on the device",
            "RuntimeError: The NVIDIA driver on your system is too old (found version 11040).",
            "AssertionError: Torch not compiled with CUDA enabled",
            "RuntimeError: operator torchvision::nms does not exist",
            "ValueError: Default process group has not been initialized, please make sure to call init_process_group.",
            "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error",
            "ModuleNotFoundError: No module named 'thop'",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of "
            "15.73 GiB of which 3.12 MiB is free."]


def _fixes(report):
    for item in report.get("results", []) + report.get("matches", []):
        if item.get("fix"):
            yield item["id"], item["fix"]


def _wrong(fix, python, driver, count):
    wrong = []
    commands = fix["commands"]
    for command in commands:
        if "pip uninstall" in command:  # replacing is one pip install: a failed download must leave the old one
            wrong.append("uninstalls (a failed install after it would leave nothing): %s" % command)
        wrong += ["%s (Python %s)" % (p, python) for p in problems(command, python)]
        nproc = re.search(r"--nproc_per_node (\d+)", command)
        if nproc and (int(nproc.group(1)) > count or count == 1):
            wrong.append("torchrun over %s GPUs on a machine with %d: %s" % (nproc.group(1), count, command))
        index = re.search(r"download\.pytorch\.org/whl/cu(\d+)(\d)\b", command)
        if index and torch_wheels.driver_runs(
                next(v for v in torch_wheels.catalog().variants if v.tag == "cu%s%s" % index.groups()),
                driver[0], nvidia.parse_major_minor(driver[1])) is None:
            wrong.append("a CUDA %s.%s build on driver %s (CUDA %s): %s" % (index.groups() + driver + (command,)))
    return wrong


@pytest.mark.slow
@pytest.mark.parametrize("python, torch, gpu, driver, count", CASES,
                         ids=["py%s-%s-%s-%s-x%d" % (c[0][:4], c[1][0], c[2][1], c[3][0][:3], c[4]) for c in CASES])
def test_no_fix_for_this_machine_prints_what_cannot_work_on_it(python, torch, gpu, driver, count):
    snapshot = json.dumps(machine(python, torch, gpu, driver, count))
    short = ".".join(python.split(".")[:2])
    wrong = []
    for extra in (["--profile", "train", "--workload", "yolov9-e", "--batch", "1024"], ["--profile", "node"]):
        report = json.loads(run_cli("check", "--facts", "-", "--format", "json", *extra, stdin=snapshot).stdout)
        for rule, fix in _fixes(report):
            wrong += ["%s: %s" % (rule, w) for w in _wrong(fix, short, driver, count)]
    assert not wrong, "\n".join(wrong)


@pytest.mark.slow
@pytest.mark.parametrize("python, torch, gpu, driver, count", CASES[::3],
                         ids=["py%s-%s-%s-%s-x%d" % (c[0][:4], c[1][0], c[2][1], c[3][0][:3], c[4]) for c in CASES[::3]])
def test_no_diagnose_fix_prints_what_cannot_work_on_the_machine_it_reads(tmp_path, python, torch, gpu, driver, count):
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps(machine(python, torch, gpu, driver, count)))
    short = ".".join(python.split(".")[:2])
    wrong = []
    for text in FAILURES:
        report = json.loads(run_cli("diagnose", "-", "--facts", str(facts), "--facts-from", "machine", "--format",
                                    "json", stdin=text + "\n").stdout)
        for failure, fix in _fixes(report):
            wrong += ["%s: %s" % (failure, w) for w in _wrong(fix, short, driver, count)]
    assert not wrong, "\n".join(wrong)
