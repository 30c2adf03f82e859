"""Where two facts meet: torch and its companions as a binary pair, fixes that fit the user's Python, driver, GPUs
and operating system, and one machine per finding."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FakeEnvironment, nvml_fixture, run_cli

H200 = nvml_fixture("h200-driver580.json")
PYTHON = "%d.%d" % sys.version_info[:2]


def _torch_has_a_wheel_here(minor):
    """Whether torch ``minor`` (2, 11) has a Linux wheel for the interpreter the fake environments are made with:
    on one it has none (torch 2.11 on Python 3.8), no pin can be printed and the fix says why instead."""
    from preflight.knowledge import torch_wheels

    return sys.version_info[:2] in torch_wheels.catalog().releases[minor].pythons


def _companion_env(tmp_path, torch_version, torch_cuda, companions):
    env = FakeEnvironment(tmp_path / "venv")
    env.add_yolov9_packages(skip=("torchvision",))
    env.add_torch(version=torch_version, cuda=torch_cuda)
    for name, version, requires in companions:
        env.add_companion(name, version, requires)
    return env


def _results(*args):
    completed = run_cli("check", "--format", "json", *args)
    return {result["id"]: result for result in json.loads(completed.stdout)["results"]}


# --- torch's companions, checked as a binary pair without importing them ------------------------------------

def test_a_cuda_torchvision_beside_a_cpu_torch_fails_though_every_package_is_present(tmp_path):
    env = _companion_env(tmp_path, "2.13.0+cpu", None, [("torchvision", "0.28.0+cu130", "==2.13.0")])
    found = _results("--python", env.python, "--nvml-fixture", H200)
    pair = found["torch.companions"]
    assert found["python.packages"]["status"] == "pass"  # present: find_spec finds it
    assert pair["status"] == "fail" and "torchvision 0.28.0+cu130 is a CUDA 13.0 build beside torch 2.13.0+cpu" \
        in pair["message"] and "operator torchvision::nms does not exist" in pair["message"]
    steps = " ".join(pair["fix"]["steps"])
    # The torch itself is replaced (torch.cuda fails: a CPU build on a GPU machine), with its torchvision.
    assert found["torch.cuda"]["status"] == "fail" and "fix of torch.cuda replaces it with a matching pair" in steps
    assert not pair["fix"]["commands"], pair["fix"]["commands"]


def test_a_torchvision_built_for_another_torch_release_is_pinned_to_the_installed_one(tmp_path):
    env = _companion_env(tmp_path, "2.11.0+cu130", "13.0", [("torchvision", "0.25.0+cu130", "==2.10.0"),
                                                            ("torchaudio", "2.10.0+cu130", ">=2.10")])
    pair = _results("--python", env.python, "--nvml-fixture", H200)["torch.companions"]
    assert pair["status"] == "fail" and "torchvision 0.25.0+cu130 requires torch ==2.10.0" in pair["message"]
    assert "torchaudio" not in pair["message"]  # a pure-Python torchaudio that accepts torch 2.11
    if not _torch_has_a_wheel_here((2, 11)):
        assert pair["fix"]["commands"] == [] and "with a wheel for Python %s" % PYTHON in " ".join(
            pair["fix"]["steps"]), pair["fix"]
        return
    assert pair["fix"]["commands"] == ["%s -m pip install 'torch==2.11.*' 'torchaudio==2.11.*' 'torchvision==0.26.*' "
                                       "--index-url https://download.pytorch.org/whl/cu130" % env.python], pair["fix"]


def test_a_matching_pair_passes_and_no_companion_is_nothing_to_check(tmp_path):
    env = _companion_env(tmp_path, "2.11.0+cu130", "13.0", [("torchvision", "0.26.0+cu130", "==2.11.0")])
    pair = _results("--python", env.python, "--nvml-fixture", H200)["torch.companions"]
    assert pair["status"] == "pass" and pair["message"] == "torchvision built for the installed torch"
    alone = _companion_env(tmp_path / "alone", "2.11.0+cu130", "13.0", [])
    pair = _results("--python", alone.python, "--nvml-fixture", H200)["torch.companions"]
    assert pair["status"] == "pass" and pair["message"] == "none built for the installed torch"


def test_cuda_majors_must_match_and_a_cpu_torchvision_beside_a_cuda_torch_cannot_run_on_the_gpu(tmp_path):
    env = _companion_env(tmp_path, "2.9.1+cu126", "12.6", [("torchvision", "0.24.1+cu130", "==2.9.1")])
    pair = _results("--python", env.python, "--nvml-fixture", H200)["torch.companions"]
    assert pair["status"] == "fail" and "built for CUDA 13.0 and torch 2.9.1+cu126 (CUDA 12.6) for CUDA 12.6" \
        in pair["message"]
    env = _companion_env(tmp_path / "cpu", "2.9.1+cu126", "12.6", [("torchvision", "0.24.1+cpu", "==2.9.1")])
    pair = _results("--python", env.python, "--nvml-fixture", H200)["torch.companions"]
    assert pair["status"] == "fail" and "is a CPU build beside torch 2.9.1+cu126" in pair["message"]


def test_diagnose_names_the_check_that_catches_the_mismatch_before_a_run():
    completed = run_cli("diagnose", "-", "--no-facts", "--format", "json",
                        stdin="RuntimeError: operator torchvision::nms does not exist\n")
    match = json.loads(completed.stdout)["matches"][0]
    assert match["id"] == "torchvision.torch_mismatch" and match["rules"] == ["torch.companions"]


def _local_wheels():
    torch = Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
    vision = Path("/opt/pypi-more/files/torchvision-0.28.0-cp311-cp311-manylinux_2_28_x86_64.whl")
    return (torch, vision) if torch.is_file() and vision.is_file() and sys.version_info[:2] == (3, 11) else None


@pytest.mark.slow
@pytest.mark.skipif(_local_wheels() is None, reason="SKIPPED LOUDLY: the wheels of torch 2.13.0+cpu and PyPI's "
                    "torchvision 0.28.0 are not on this machine's disk (or this is not Python 3.11)")
def test_real_wheels_that_cannot_import_fail_the_check(tmp_path):
    """The real pair, installed without its dependencies: import torchvision fails, and the check says so first."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index"] + [str(w) for w in _local_wheels()],
                   check=True, timeout=600)
    imported = subprocess.run([python, "-c", "import torchvision"], capture_output=True, text=True, timeout=300)
    assert imported.returncode != 0 and "operator torchvision::nms does not exist" in imported.stderr
    pair = _results("--python", python, "--nvml-fixture", H200, "--select", "torch.companions")["torch.companions"]
    assert pair["status"] == "fail" and "0.28.0+cu130 is a CUDA 13.0 build beside torch 2.13.0+cpu" in pair["message"]


# --- steps for the operating system the run was on -----------------------------------------------------------

def _catalog_examples():
    from preflight.engine import loader

    ruleset = loader.load(failures=True)
    return [(entry.id, example) for entry in list(ruleset.failures.values()) + list(ruleset.families.values())
            for example in entry.examples]


WSL = "Linux DESKTOP 5.15.153.1-microsoft-standard-WSL2 #1 SMP Fri Mar 29 23:14:13 UTC 2024 x86_64 GNU/Linux\n"
ROCKY = 'NAME="Rocky Linux"\nVERSION="9.3 (Blue Onyx)"\n'
UBUNTU = "OS: Ubuntu 22.04.4 LTS (x86_64)\n"
NOT_ON = {"wsl": ("rmmod", "modprobe", "/dev/nvidia", "update-initramfs", "dracut", "apt-get install -y cuda-drivers",
                  "dnf install -y cuda-drivers", "ubuntu-drivers"),
          "rocky": ("apt-get", "apt ", "dpkg", "update-initramfs", "ubuntu-drivers"),
          "ubuntu": ("dnf ", "yum ", "dracut", "/etc/yum.repos.d")}


@pytest.mark.parametrize("system, banner", [("wsl", WSL), ("rocky", ROCKY), ("ubuntu", UBUNTU)])
def test_no_failure_of_the_catalog_gets_a_step_that_cannot_work_on_the_runs_os(system, banner):
    wrong = []
    for failure, example in _catalog_examples():
        completed = run_cli("diagnose", "-", "--no-facts", "--format", "json", stdin=banner + example + "\n")
        for match in json.loads(completed.stdout)["matches"]:
            for line in match["fix"]["commands"] + match["fix"]["steps"]:
                if any(word in line for word in NOT_ON[system]):
                    wrong.append((failure, line))
    assert not wrong, wrong


# --- fixes that do what the failure asks, for that interpreter, with reasons ----------------------------------

def test_a_log_missing_one_module_gets_one_install_into_the_logs_interpreter():
    log = ('Traceback (most recent call last):\n  File "/home/u/miniconda3/envs/y9/lib/python3.10/site-packages/'
           'ultralytics/utils/torch_utils.py", line 1\nModuleNotFoundError: No module named \'thop\'\n')
    fix = json.loads(run_cli("diagnose", "-", "--format", "json", stdin=log).stdout)["matches"][0]["fix"]
    assert fix["commands"] == ["/home/u/miniconda3/envs/y9/bin/python -m pip install --no-deps thop"], fix
    # No interpreter in the log: this one's is a guess, and the fix says so; still one package.
    fix = json.loads(run_cli("diagnose", "-", "--format", "json",
                             stdin="ModuleNotFoundError: No module named 'thop'\n").stdout)["matches"][0]["fix"]
    assert [c.split(" -m pip install ")[1] for c in fix["commands"]] == ["--no-deps thop"], fix
    assert any("the interpreter preflight runs in" in step for step in fix["steps"]), fix


def test_every_pin_in_the_packages_fix_says_why(tmp_path):
    env = FakeEnvironment(tmp_path / "venv")
    env.add_yolov9_packages(skip=("numpy", "setuptools", "Pillow"))
    env.add_torch()
    env.add_package("setuptools", "84.2.1", "setuptools")
    result = _results("--python", env.python, "--nvml-fixture", H200, "--select", "python.packages")["python.packages"]
    assert "setuptools 84.2.1" not in result["message"] or "pkg_resources" in result["message"]
    assert "pkg_resources 84.2.1" not in result["message"]
    steps = " ".join(result["fix"]["steps"])
    from preflight.knowledge import package_index

    python = "%d.%d" % sys.version_info[:2]
    for pin, why in (("numpy<2.4", "np.trapz"), ("setuptools<82", "pkg_resources"), ("Pillow<10", "getsize")):
        if not package_index.installable(pin, python):  # Pillow<10 has no wheel from Python 3.12 on: not pinned
            assert "%s: " % pin not in steps, (pin, steps)
            continue
        assert "%s: " % pin in steps and why in steps.split("%s: " % pin)[1].split(";")[0], (pin, steps)


# --- one machine per finding ---------------------------------------------------------------------------------

def test_a_logs_gpu_or_driver_that_is_not_this_machines_keeps_this_machine_out_of_the_finding(tmp_path):
    log = ("UserWarning: NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current "
           "PyTorch installation.\nRuntimeError: CUDA error: no kernel image is available for execution on the device\n")
    report = json.loads(run_cli("diagnose", "-", "--format", "json", "--nvml-fixture",
                                nvml_fixture("8x-h100-hgx.json"), stdin=log).stdout)
    assert report["facts"]["whose"] == "log" and "the log's GPU is NVIDIA GeForce RTX 5090" in " ".join(report["notes"])
    assert "H100" not in json.dumps(report["matches"])
    log = "RuntimeError: The NVIDIA driver on your system is too old (found version 12020).\n"
    report = json.loads(run_cli("diagnose", "-", "--format", "json", "--nvml-fixture", H200, stdin=log).stdout)
    assert report["facts"]["whose"] == "log" and "the log's driver runs CUDA 12.2, this machine's CUDA 13.0" in \
        " ".join(report["notes"])
    assert "580.159" not in json.dumps(report["matches"])


# --- check --requirements FILE ----------------------------------------------------------------------------------

def test_the_jobs_interpreter_is_checked_against_the_projects_requirements_file(tmp_path):
    env = FakeEnvironment(tmp_path / "venv")
    env.add_torch(version="2.11.0+cu130", cuda="13.0")
    env.add_package("numpy", "1.17.0")
    env.add_package("opencv-python", "4.10.0.84", "cv2")
    (tmp_path / "extra.txt").write_text("scipy>=1.4.1\n")
    (tmp_path / "requirements.txt").write_text(
        "# the project's own\nnumpy>=1.18.5  # np.x\nopencv-python>=4.1.1\ntorch>=1.7.0,!=1.12.0\ntorchvision>=0.8.1\n"
        "pywin32>=300; sys_platform == 'win32'\n-r extra.txt\n--index-url https://example.org/simple\n")
    found = _results("--python", env.python, "--nvml-fixture", H200, "--requirements",
                     str(tmp_path / "requirements.txt"), "--select", "python.requirements")["python.requirements"]
    assert found["status"] == "fail"
    assert "numpy 1.17.0 does not satisfy >=1.18.5" in found["message"] and "scipy is missing" in found["message"]
    assert "opencv" not in found["message"] and "pywin32" not in found["message"]  # found by its distribution;
    assert "not checked: --index-url" in found["message"]  # an option's value is not shown: it may hold a token
    assert "example.org" not in found["message"]
    commands = found["fix"]["commands"]
    assert commands[0] == "%s -m pip install 'numpy>=1.18.5' 'scipy>=1.4.1'" % env.python, commands
    # torchvision is never a plain install beside a CUDA torch: the one built for it, from its index.
    if not _torch_has_a_wheel_here((2, 11)):
        assert len(commands) == 1 and "with a wheel for Python %s" % PYTHON in " ".join(found["fix"]["steps"]), \
            found["fix"]
        return
    assert commands[1].endswith("'torch==2.11.*' 'torchvision==0.26.*' --index-url https://download.pytorch.org/whl/cu130")


def test_a_bad_requirements_file_is_exit_2_with_its_line_and_never_its_text(tmp_path):
    (tmp_path / "requirements.txt").write_text("numpy>=1.18\nnot a requirement ==\n")
    completed = run_cli("check", "--requirements", str(tmp_path / "requirements.txt"), "--nvml-fixture", H200)
    assert completed.returncode == 2 and "requirements.txt line 2 is not a requirement pip reads" in \
        completed.stderr and "Traceback" not in completed.stderr
    assert "not a requirement ==" not in completed.stderr  # an include can name any file: its text is never shown
    (tmp_path / "loop.txt").write_text("-r loop.txt\n")  # a file that includes itself: read once, names nothing
    completed = run_cli("check", "--requirements", str(tmp_path / "loop.txt"), "--nvml-fixture", H200)
    assert completed.returncode == 2 and "names no package" in completed.stderr


def test_requirement_files_are_read_as_pip_reads_them(tmp_path):
    """What pip takes and the earlier parser refused: an include reached twice, many includes, a remote include,
    a continued line, a byte-order mark; and a long line in linear time."""
    (tmp_path / "c.txt").write_text("tqdm\n")
    (tmp_path / "a.txt").write_text("-r c.txt\nPyYAML\n")
    (tmp_path / "b.txt").write_text("-r c.txt\n")
    for index in range(40):
        (tmp_path / ("x%d.txt" % index)).write_text("-r x%d.txt\n" % (index + 1) if index < 39 else "psutil\n")
    (tmp_path / "requirements.txt").write_bytes(
        b"\xef\xbb\xbfnumpy>=1.18 \\\n  ; python_version > '3.6'\n-r a.txt\n-r b.txt\n-r x0.txt\n"
        b"-r https://example.org/more.txt\n-c c.txt\nrequests" + b" " * 900000 + b"\n")
    from preflight.engine import requirements

    found, skipped = requirements.read(str(tmp_path / "requirements.txt"))
    assert [r.name for r in found] == ["numpy", "requests", "PyYAML", "tqdm", "psutil"], found
    assert found[0].marker == 'python_version > "3.6"'
    assert skipped == ["-r https://example.org/more.txt (a remote file, not fetched)"]


def test_a_pair_is_printed_only_where_its_companion_has_a_wheel_for_the_python():
    from test_rule_examples import REFERENCE
    import copy as _copy

    facts = _copy.deepcopy(REFERENCE)
    facts["python"]["version"] = "3.13.1"
    facts["python"]["torch"].update(version="2.5.1+cu121", cuda="12.1")
    facts["python"]["packages"]["torchvision"].update(importable=False, version=None)
    result = json.loads(run_cli("check", "--facts", "-", "--format", "json", "--select", "python.packages",
                                stdin=json.dumps(facts)).stdout)["results"][0]
    assert not any("torchvision==0.20" in command for command in result["fix"]["commands"]), result["fix"]
    assert any("torchvision 0.20, built for torch 2.5, has wheels for Python 3.9 to 3.12 only" in step
               for step in result["fix"]["steps"]), result["fix"]["steps"]
