"""preflight diagnose: real messages to causes and fixes, robust to whatever a log holds."""

from __future__ import annotations

import gzip
import io
import json
import re
import subprocess
import sys
import time

import pytest
from conftest import FIXTURES, REPO, nvml_fixture, ok, run_cli, write_fixture

from preflight.diagnose import diagnosis
from preflight.diagnose.scan import Scanner, search_key
from preflight.engine import loader
from preflight.knowledge import torch_wheels

RULESET = loader.load(failures=True)
FAILURES = list(RULESET.failures.values())


def found_ids(text, chunk_size=1 << 22):
    # what `preflight diagnose` scans for: the failures, the families and the clues an only_with may name
    stream = io.BytesIO(text.encode("utf-8") if isinstance(text, str) else text)
    result = Scanner(RULESET.log_entries(), list(RULESET.clues.values())).scan(stream, chunk_size)
    return [f.failure.id for f in diagnosis.findings(result)], result


def diagnose_json(text, *args, env=None):
    completed = run_cli("diagnose", "-", "--format", "json", *args, stdin=text, env=env)
    assert completed.returncode in (0, 1), completed.stderr
    return completed.returncode, json.loads(completed.stdout)


# --- the catalog against real messages ------------------------------------------------------

@pytest.mark.parametrize("failure", FAILURES, ids=[f.id for f in FAILURES])
def test_every_catalog_entry_recognises_its_examples(failure):
    assert failure.examples, "%s has no real example message" % failure.id
    for example in failure.examples:
        ids, _ = found_ids(example + "\n")
        assert ids and ids[0] == failure.id, (example, ids)


ERRORS = json.loads((FIXTURES / "h200-errors.json").read_text())
# What PyTorch 2.11 really printed on the H200 node, and the problem each one is.
ERRORS_EXPECTED = {
    "cuda_oom": "cuda.oom",
    "half_float_conv": "dtype.half_float",
    "half_float_linear": "dtype.half_float",
    "invalid_ordinal": "cuda.invalid_device",
    "no_visible_gpu": "cuda.no_gpu_visible",
    "device_mismatch": "device.mismatch",
    "missing_thop": "module.missing",
    "nccl_no_init": "ddp.not_initialized",
    "dataloader_worker_killed": "dataloader.shm_bus_error",
    "pynvml_deprecated_import": None,  # nvidia-ml-py was installed: nothing printed, nothing to find
}


def test_every_recorded_error_is_covered():
    assert set(ERRORS) == set(ERRORS_EXPECTED)


@pytest.mark.parametrize("name", sorted(ERRORS_EXPECTED))
def test_real_pytorch_211_errors(name):
    ids, _ = found_ids(ERRORS[name]["stderr"])
    expected = ERRORS_EXPECTED[name]
    assert ids == ([expected] if expected else []), ids


def test_a_bus_error_and_its_exited_unexpectedly_are_one_problem():
    code, report = diagnose_json(ERRORS["dataloader_worker_killed"]["stderr"], "--no-facts")
    assert code == 1
    [match] = report["matches"]
    assert match["id"] == "dataloader.shm_bus_error" and match["line"] == 1
    assert [e["id"] for e in match["explains"]] == ["dataloader.worker_exited"]
    assert any("--ipc=host" in step for step in match["fix"]["steps"])


# KNOWLEDGE.md section 6 and the seed guide's troubleshooting table, as printed.
MESSAGES = [
    ("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 11.76 GiB of which 1.02 GiB is free.", "cuda.oom"),
    ("DataLoader worker (pid 2817) is killed by signal: Bus error.", "dataloader.shm_bus_error"),
    ("ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).", "dataloader.shm_bus_error"),
    ("RuntimeError: DataLoader worker (pid(s) 2817, 2818) exited unexpectedly", "dataloader.worker_exited"),
    ("RuntimeError: DataLoader worker (pid 2817) is killed by signal: Killed.", "dataloader.worker_killed"),
    ("RuntimeError: CUDA driver version is insufficient for CUDA runtime version", "cuda.driver_too_old"),
    ("The NVIDIA driver on your system is too old (found version 11040).", "cuda.driver_too_old"),
    ("RuntimeError: CUDA error: no kernel image is available for execution on the device", "torch.no_kernel_image"),
    ("sm_120 is not compatible with the current PyTorch installation", "torch.no_kernel_image"),
    ("RuntimeError: Input type (c10::Half) and bias type (float) should be the same", "dtype.half_float"),
    ("RuntimeError: expected scalar type Half but found Float", "dtype.half_float"),
    ("RuntimeError: expected scalar type Half", "dtype.half_float"),  # the seed's shortened form
    ("RuntimeError: mat1 and mat2 must have the same dtype, but got Half and Float", "dtype.half_float"),
    ("ModuleNotFoundError: No module named 'thop'", "module.missing"),
    ("ModuleNotFoundError: No module named 'pkg_resources'", "module.pkg_resources"),
    ("AssertionError: Torch not compiled with CUDA enabled", "torch.cpu_build"),
    ("RuntimeError: No CUDA GPUs are available", "cuda.no_gpu_visible"),
    ("RuntimeError: CUDA error: invalid device ordinal", "cuda.invalid_device"),
    ("AssertionError: Invalid CUDA '--device 1' requested, use '--device cpu' or pass valid CUDA device(s)", "cuda.invalid_device"),
    ("Failed to initialize NVML: Driver/library version mismatch", "nvml.driver_library_mismatch"),
    ("RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:825, unhandled system error, NCCL version 2.7.8", "nccl.system_error"),
    ("CommandNotFoundError: Your shell has not been properly configured to use 'conda activate'.", "conda.not_initialized"),
    ("ImportError: libGL.so.1: cannot open shared object file: No such file or directory", "opencv.libgl"),
    ("AttributeError: 'list' object has no attribute 'view'", "yolov9.train_py_on_dual_model"),
    ("train.py 'list' object has no attribute 'view;", "yolov9.train_py_on_dual_model"),
    ("nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.8, please update your driver to a newer version, or use an earlier cuda container: unknown.", "container.requirement_unsatisfied"),
    ("FutureWarning: The pynvml package is deprecated. Please install nvidia-ml-py instead.", "pynvml.deprecated"),
]


@pytest.mark.parametrize("message, expected", MESSAGES, ids=[m[1] + ":" + m[0][:30] for m in MESSAGES])
def test_messages_from_the_knowledge_base_and_the_seed(message, expected):
    ids, _ = found_ids(message + "\n")
    assert ids[:1] == [expected], ids


@pytest.mark.parametrize("innocent", [
    "    raise RuntimeError(f'DataLoader worker (pid(s) {pids_str}) exited unexpectedly') from e",
    "RuntimeError: expected scalar type Long but found Int",
    "  exitcode  : 1 (pid: 2211)",
    "Epoch 3: no module named in the config was skipped",
    "      all       5000      36335      0.702      0.616      0.671      0.497",
])
def test_look_alikes_are_not_failures(innocent):
    assert found_ids(innocent + "\n")[0] == []


@pytest.mark.parametrize("text, expected", [
    # A terminal or a forum wrapped the message over two lines.
    ("ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).\n"
     "RuntimeError: DataLoader worker (pid 4211) is killed by signal: Bus\nerror. It is possible that dataloader's "
     "workers are out of shared memory.\n", "dataloader.shm_bus_error"),
    ("docker: Error response from daemon: failed to create task for container: nvidia-container-cli: requirement "
     "error: unsatisfied condi\ntion: cuda>=12.8, please update your driver to a newer version\n",
     "container.requirement_unsatisfied"),
    ("RuntimeError: CUDA driver version is insufficient for CUDA\nruntime version\n", "cuda.driver_too_old"),
    # Typographic quotes from a forum, and markdown emphasis around a pasted line.
    ("ModuleNotFoundError: No module named \u2018IPython\u2019\n", "module.missing"),
    ("**RuntimeError: CUDA out of memory. Tried to allocate `20.00 MiB` (GPU 0; 11.17 GiB total capacity)**\n",
     "cuda.oom"),
    # Case as another tool prints it.
    ("nvidia-container-cli: initialization error: nvml error: driver/library version mismatch: unknown\n",
     "nvml.driver_library_mismatch"),
    # Prefixes: ranks, glog, timestamps.
    ("[rank3]: RuntimeError: CUDA error: out of memory\n", "cuda.oom"),
    ("E1130 10:02:11.123456 140211 ProcessGroupNCCL.cpp:825] NCCL error: unhandled system error, NCCL version 2.21.5\n",
     "nccl.system_error"),
    ("2026-11-30T10:02:11.123Z ERROR RuntimeError: Found no NVIDIA driver on your system. Please check that you have "
     "an NVIDIA GPU and installed a driver from http://www.nvidia.com/Download/index.aspx\n", "nvidia.no_driver"),
])
def test_real_text_varies(text, expected):
    ids, report = found_ids(text)
    assert ids[:1] == [expected], ids


def test_a_wrapped_message_keeps_its_line_number_and_values():
    text = "epoch 1\nepoch 2\nRuntimeError: The NVIDIA driver on your system is too old (found version 11\n040).\n"
    _, report = diagnose_json(text, "--no-facts")
    match = report["matches"][0]
    assert match["id"] == "cuda.driver_too_old" and match["line"] == 3
    assert "the failed run's driver supports CUDA 11.4 at most" in match["context"]


def test_a_pinned_torch_that_never_existed_names_its_requirement():
    code, report = diagnose_json("ERROR: No matching distribution found for torch==1.10.0+cu121\n", "--no-facts")
    match = report["matches"][0]
    assert match["id"] == "pip.no_matching_distribution"
    assert "torch==1.10.0+cu121" in match["fix"]["steps"][0]


def test_missing_module_fix_installs_the_right_distribution():
    _, report = diagnose_json("ModuleNotFoundError: No module named 'cv2'\n", "--no-facts")
    assert report["matches"][0]["fix"]["commands"] == ["python -m pip install opencv-python-headless"]
    _, report = diagnose_json("ModuleNotFoundError: No module named 'thop'\n", "--no-facts")
    assert report["matches"][0]["fix"]["commands"] == ["python -m pip install --no-deps thop"]
    _, report = diagnose_json("ModuleNotFoundError: No module named 'pkg_resources'\n", "--no-facts")
    assert report["matches"][0]["fix"]["commands"] == ["python -m pip install 'setuptools<82'"]


# --- several problems, none, and order ---------------------------------------------------------

def test_several_problems_root_cause_first_each_once():
    log = "\n".join([
        "Epoch 1/10 ...",
        "ModuleNotFoundError: No module named 'thop'",
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 11.17 GiB total capacity)",
        "RuntimeError: CUDA out of memory. Tried to allocate 40.00 MiB (GPU 0; 11.17 GiB total capacity)",
        "Failed to initialize NVML: Driver/library version mismatch",
    ]) + "\n"
    code, report = diagnose_json(log, "--no-facts")
    assert code == 1
    assert [m["id"] for m in report["matches"]] == ["nvml.driver_library_mismatch", "cuda.oom", "module.missing"]
    oom = report["matches"][1]
    assert oom["line"] == 3 and oom["count"] == 2
    assert "the failed run asked for 20.00 MiB more on CUDA device 0" in oom["context"]


def test_a_clean_log_says_so_and_shows_the_last_errorish_lines():
    log = "epoch 1 loss 0.5\nWARNING: something odd\nValueError: bad value in my own code\nepoch 2 loss 0.4\n"
    completed = run_cli("diagnose", "-", stdin=log)
    assert completed.returncode == 0
    assert "no known problem recognised" in completed.stdout
    assert "3 | ValueError: bad value in my own code" in completed.stdout
    code, report = diagnose_json(log)
    assert code == 0 and report["matches"] == [] and report["recognised"] is False
    assert report["last_error_lines"] == [{"line": 3, "text": "ValueError: bad value in my own code"}]
    empty = run_cli("diagnose", "-", stdin="")
    assert empty.returncode == 0 and "Nothing in it looks like an error" in empty.stdout


# --- hostile input ------------------------------------------------------------------------------

def test_ansi_colour_and_carriage_return_progress_bars():
    bar = "".join("\r  3/499  14.1G  1.23: %3d%%|####| %d/7330" % (p, p * 73) for p in range(0, 100, 5))
    log = ("\x1b[34m\x1b[1mtrain: \x1b[0mScanning...\n" + bar + "\rRuntimeError: \x1b[31mCUDA out of memory.\x1b[0m"
           " Tried to allocate 1.00 GiB (GPU 0; 7.79 GiB total capacity)\n")
    ids, result = found_ids(log)
    assert ids == ["cuda.oom"]
    hit = result.hits["cuda.oom"]
    assert hit.line == 2 and hit.excerpt.startswith("RuntimeError: CUDA out of memory.") and "\x1b" not in hit.excerpt


def test_a_message_split_across_lines_is_quoted_as_its_lines_with_spaces_between():
    log = ("Collecting pkg\n  Building wheel for pkg (setup.py) ... error\n  running build_ext\nRuntimeError:\n"
           "      The detected CUDA version (12.3) mismatches the version that was used to compile\n"
           "      PyTorch (11.8). Please make sure to use the same CUDA versions.\n")
    ids, result = found_ids(log)
    hit = result.hits["extension.cuda_version_mismatch"]
    assert hit.line == 5 and hit.excerpt == (
        "RuntimeError: The detected CUDA version (12.3) mismatches the version that was used to compile "
        "PyTorch (11.8). Please make sure to use the same CUDA versions.")


def test_binary_garbage_and_invalid_utf8(tmp_path):
    garbage = bytes(range(256)) * 4000 + b"\xff\xfe\x00\x00\xc3(\n"
    data = garbage + b"ModuleNotFoundError: No module named 'thop'\n" + garbage
    ids, result = found_ids(data)
    assert ids == ["module.missing"] and result.hits["module.missing"].line == data[:data.index(b"Module")].count(b"\n") + 1
    path = tmp_path / "garbage.bin"
    path.write_bytes(garbage * 3)
    completed = run_cli("diagnose", str(path))  # no text at its start: said at once, not scanned
    assert completed.returncode == 2 and "is not a text log" in completed.stderr, completed.stderr


def test_huge_lines_and_anchors_split_across_chunks():
    prefix = b"x" * (5 << 20)  # a 5 MB line without a newline
    data = prefix + b" RuntimeError: No CUDA GPUs are available " + b"y" * (3 << 20) + b"\nok\n"
    for chunk in (1 << 20, 1000, 4099, 7):  # boundaries fall inside the anchor for some of these
        ids, result = found_ids(data, chunk_size=chunk)
        assert ids == ["cuda.no_gpu_visible"], chunk
        assert result.hits["cuda.no_gpu_visible"].line == 1
        assert len(result.hits["cuda.no_gpu_visible"].excerpt) <= 400
        assert result.lines == 2


def test_line_numbers_survive_chunking():
    lines = ["line %d" % i for i in range(1, 5001)]
    lines[3999] = "AssertionError: Torch not compiled with CUDA enabled"
    data = ("\n".join(lines) + "\n").encode()
    for chunk in (64, 1000, 1 << 22):
        ids, result = found_ids(data, chunk_size=chunk)
        assert result.hits["torch.cpu_build"].line == 4000 and result.lines == 5000


def test_gzip_logs_and_bad_inputs(tmp_path):
    path = tmp_path / "train.log.gz"
    with gzip.open(str(path), "wb") as out:
        out.write(b"epoch 1\nRuntimeError: No CUDA GPUs are available\n")
    completed = run_cli("diagnose", str(path), "--no-facts", "--format", "json")
    assert completed.returncode == 1 and json.loads(completed.stdout)["matches"][0]["line"] == 2
    broken = tmp_path / "broken.log.gz"
    broken.write_bytes(b"this is not gzip")
    header_only = tmp_path / "header.log.gz"
    header_only.write_bytes(gzip.compress(b"RuntimeError: No CUDA GPUs are available\n")[:12])  # EOFError in gzip
    garbled = tmp_path / "garbled.log.gz"
    good = bytearray(gzip.compress(b"x" * 100000))
    good[20:40] = b"\xff" * 20  # zlib.error: invalid deflate data
    garbled.write_bytes(bytes(good))
    completed = run_cli("diagnose", str(broken), "--no-facts")
    assert completed.returncode == 0 and "not gzip, though named .gz: read as it is" in completed.stdout
    for bad, problem in ((str(header_only), "not a complete gzip file"),
                         (str(garbled), "not a complete gzip file"),
                         (str(tmp_path / "missing.log"), "no such file"), (str(tmp_path), "is a folder")):
        completed = run_cli("diagnose", bad)
        assert completed.returncode == 2 and problem in completed.stderr and "Traceback" not in completed.stderr
    truncated = tmp_path / "truncated.log.gz"
    import random

    noisy = "".join("epoch %d loss %.6f\n" % (i, random.random()) for i in range(50000)).encode()
    truncated.write_bytes(gzip.compress(noisy)[:20000])
    completed = run_cli("diagnose", str(truncated))
    assert completed.returncode == 2 and "not a complete gzip file" in completed.stderr
    assert "zcat" in completed.stderr and "interrupted" not in completed.stderr


def test_stdin_must_be_a_pipe_or_a_file():
    completed = subprocess.run([sys.executable, "-m", "preflight", "diagnose"], stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, cwd=str(REPO / "tests"))
    assert completed.returncode == 0  # /dev/null is not a terminal: an empty log


# --- facts make fixes concrete ---------------------------------------------------------------------

def test_oom_names_the_gpu_its_memory_and_the_processes(tmp_path):
    fixture = write_fixture(tmp_path, "rtx3060-12g-driver525.json", lambda d: d["devices"][0].update(
        nvmlDeviceGetComputeRunningProcesses=ok([{"pid": 4242, "usedGpuMemory": 9 * 2**30, "name": "python3"}])))
    _, report = diagnose_json(ERRORS["cuda_oom"]["stderr"], "--nvml-fixture", fixture)
    match = report["matches"][0]
    assert match["id"] == "cuda.oom"
    assert ("NVIDIA GeForce RTX 3060 (GPU 0): 12.0 GiB (12288 MiB) total, 11.9 GiB (12225 MiB) free now; "
            "processes holding memory: python3 (pid 4242, 9216 MiB)") in match["context"]
    assert [c["id"] for c in match["checks"]] == ["gpu.memory"]


@pytest.mark.parametrize("log, framework_step, absent", [
    ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 7406166528 "
     "bytes.\n", "XLA_PYTHON_CLIENT_PREALLOCATE=false", "PYTORCH_CUDA_ALLOC_CONF"),
    ("W0928 15:25:03.815069 17204 gpu_resources.cc:61] Please NOTE: device: 0, GPU Compute Capability: 8.6\n"
     "ResourceExhaustedError: Out of memory error on GPU 0. Cannot allocate 1.2GB memory on GPU 0\n",
     None, "PYTORCH_CUDA_ALLOC_CONF"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of "
     "23.69 GiB of which 9.81 MiB is free.\n", "PYTORCH_CUDA_ALLOC_CONF", "XLA_PYTHON_CLIENT_PREALLOCATE"),
])
def test_the_oom_fix_speaks_of_the_framework_the_log_shows(log, framework_step, absent):
    """One OOM entry for torch, Paddle and JAX: the allocator step is the one of the framework the log shows."""
    _, report = diagnose_json(log)
    match = report["matches"][0]
    assert match["id"] == "cuda.oom"
    steps = " ".join(match["fix"]["steps"])
    if framework_step:
        assert framework_step in steps, steps
    assert absent not in steps, steps


def test_no_kernel_image_names_compute_capability_and_torch_architectures(tmp_path, fake_env):
    env = fake_env()
    env.add_torch(version="2.5.1+cu124", cuda="12.4", arch_flags="sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90")
    fixture = write_fixture(tmp_path, "h200-driver580.json", lambda d: d["devices"][0].update(
        nvmlDeviceGetName=ok("NVIDIA GeForce RTX 5090"), nvmlDeviceGetCudaComputeCapability=ok([12, 0])))
    _, report = diagnose_json("RuntimeError: CUDA error: no kernel image is available for execution on the device\n",
                              "--nvml-fixture", fixture, "--python", env.python)
    match = report["matches"][0]
    assert ("NVIDIA GeForce RTX 5090 (GPU 0): compute capability 12.0 (sm_120); torch 2.5.1+cu124 has "
            "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90") in match["context"]
    wanted = torch_wheels.choose("580.159.04", "13.0", ["12.0"], "%d.%d" % sys.version_info[:2])  # cu130 on 3.10+
    if isinstance(wanted, torch_wheels.Choice):
        # One pip install, never an uninstall first: pip resolves and downloads before it replaces the old torch.
        assert match["fix"]["commands"][-1] == "%s -m pip install %s --index-url %s" % (
            env.python, wanted.pins(), wanted.index_url)
    else:  # Python 3.8 or 3.9: no torch for them has sm_120 kernels; the way out instead of an index
        assert not any("--index-url" in c for c in match["fix"]["commands"])
        assert any("use Python 3.10" in step for step in match["fix"]["steps"]), match["fix"]
    assert match["checks"][0]["status"] == "fail"


def test_driver_mismatch_names_both_versions_and_the_wheel(fake_env):
    env = fake_env()
    env.add_torch(version="2.9.0+cu130", cuda="13.0")
    _, report = diagnose_json("RuntimeError: CUDA driver version is insufficient for CUDA runtime version\n",
                              "--nvml-fixture", nvml_fixture("rtx3060-12g-driver525.json"), "--python", env.python)
    match = report["matches"][0]
    wanted = torch_wheels.choose("525.60.13", "12.0", ["8.6"], "%d.%d" % sys.version_info[:2])  # cu126 2.14 on 3.10+
    assert ("torch 2.9.0+cu130 is built for CUDA 13.0; the driver 525.60.13 supports CUDA 12.0; torch %s for CUDA "
            "%d.%d runs on it: %s" % ((wanted.torch_text,) + wanted.variant.cuda + (wanted.index_url,))) \
        in match["context"]
    steps = match["fix"]["steps"]
    assert ("Upgrade the driver to 580.65.06 or newer (the minimum for CUDA 13.0); the 580 branch runs every current "
            "torch.") in steps
    assert any("which the driver runs" in step for step in steps), steps
    assert match["fix"]["commands"][-1].endswith(
        "-m pip install %s --index-url %s" % (wanted.pins(), wanted.index_url))


def test_driver_too_old_keeps_its_main_step_without_facts():
    # Nothing known about the machine: the fix still says to upgrade the driver, in generic words, and names
    # no index it cannot vouch for.
    _, report = diagnose_json("RuntimeError: CUDA driver version is insufficient for CUDA runtime version\n",
                              "--no-facts")
    fix = report["matches"][0]["fix"]
    assert any(step.startswith("Upgrade the NVIDIA driver: the 580 branch or newer") for step in fix["steps"]), fix
    assert not any("--index-url" in c for c in fix["commands"])
    # The log says which CUDA the driver supports (11.4): the fix names the newest torch that runs on it.
    _, report = diagnose_json("RuntimeError: The NVIDIA driver on your system is too old (found version 11040).\n",
                              "--no-facts")
    fix = report["matches"][0]["fix"]
    assert any("'torch==2.7.*' 'torchvision==0.22.*' --index-url https://download.pytorch.org/whl/cu118" in c
               for c in fix["commands"]), fix
    # A driver older than any wheel: no index at all, and the way out.
    _, report = diagnose_json("RuntimeError: The NVIDIA driver on your system is too old (found version 9000).\n",
                              "--no-facts")
    fix = report["matches"][0]["fix"]
    assert not any("--index-url" in c for c in fix["commands"]), fix
    assert any("supports CUDA 9.0 at most" in step and "upgrade the NVIDIA driver" in step for step in fix["steps"])


def test_facts_file_and_no_facts(tmp_path):
    facts = run_cli("facts", "--nvml-fixture", nvml_fixture("h200-driver580.json"))
    path = tmp_path / "facts.json"
    path.write_text(facts.stdout)
    _, with_file = diagnose_json(ERRORS["cuda_oom"]["stderr"], "--facts", str(path))
    assert any(line.startswith("NVIDIA H200 (GPU 0)") for line in with_file["matches"][0]["context"])
    _, without = diagnose_json(ERRORS["cuda_oom"]["stderr"], "--no-facts")
    assert without["facts_source"] is None and not any("H200" in c for c in without["matches"][0]["context"])
    both = run_cli("diagnose", "-", "--facts", str(path), "--no-facts", stdin="x\n")
    assert both.returncode == 2 and "contradict" in both.stderr


# --- output contract and documentation -----------------------------------------------------------

def test_json_contract():
    code, report = diagnose_json(ERRORS["half_float_conv"]["stderr"], "--no-facts")
    assert report["schema"] == "preflight.diagnosis/1" and report["source"] == "stdin"
    match = report["matches"][0]
    assert {"id", "line", "excerpt", "cause", "fix"} <= set(match)
    assert set(match["fix"]) == {"title", "steps", "commands"}
    assert match["excerpt"] == "RuntimeError: Input type (c10::Half) and bias type (float) should be the same"


def test_explain_and_list_the_catalog():
    explained = run_cli("explain", "cuda.oom")
    assert explained.returncode == 0
    assert "caught beforehand by: gpu.memory" in explained.stdout and "--batch-size -1" in explained.stdout
    listed = run_cli("diagnose", "--list").stdout
    assert all(f.id in listed for f in FAILURES)
    assert run_cli("explain", "cuda.omm").returncode == 2


def test_fixes_are_written_once_and_shared():
    """A failure that a check rule catches uses a fix from the same file, and diagnose shows that rule."""
    for failure in FAILURES:
        assert failure.fix.id in RULESET.fixes or "." in failure.fix.id
        for rule_id in failure.rules:
            assert rule_id in RULESET.rules
    shared = {f.fix.id for f in FAILURES} & {fix.id for rule in RULESET.rules.values()
                                              for fix in [rule.fix, *rule.fixes_by_value.values()] if fix}
    assert {"torch-arch-missing", "cuda-driver-too-old", "host-shm", "torch-cpu-build", "python-packages"} <= shared


def test_a_user_can_add_a_failure(tmp_path):
    path = tmp_path / "site.toml"
    path.write_text(
        '[[failure]]\nid = "site.quota"\ntitle = "Disk quota exceeded"\npatterns = ["Disk quota exceeded"]\n'
        'cause = "The home directory is full."\nfix = { title = "Write runs to scratch", commands = ["df -h ."] }\n'
        'examples = ["OSError: [Errno 122] Disk quota exceeded"]\n')
    completed = run_cli("diagnose", "-", "--rules", str(path), "--format", "json", "--no-facts",
                        stdin="OSError: [Errno 122] Disk quota exceeded: 'runs/exp3/weights/last.pt'\n")
    assert json.loads(completed.stdout)["matches"][0]["id"] == "site.quota"


@pytest.mark.parametrize("entry, problem", [
    ('patterns = []', "'patterns' must be a non-empty list"),
    ('patterns = [{ regex = "x" }]', "needs 'anchor'"),
    ('patterns = [{ anchor = "x", regex = "(" }]', "is not a valid regular expression"),
    ('patterns = ["x"]\nrules = ["gpu.memroy"]', "'rules' names 'gpu.memroy', which is not a rule (did you mean gpu.memory"),
    ('patterns = ["x"]\nsupersedes = ["nope"]', "'supersedes' names 'nope'"),
    ('patterns = ["x"]\ncontext = ["{nonsense}"]', "unknown placeholder(s) {nonsense}"),
    ('patterns = ["x"]\nfacts = ["gpu.mem"]', "'facts' names 'gpu.mem'"),
    ('patterns = [" NCCL WARN"]', "starts with whitespace, which slows every scan"),
    ('patterns = [{ anchor = "\\tError", regex = "Error" }]', "starts with whitespace"),
])
def test_bad_failure_entries_exit_2(tmp_path, entry, problem):
    path = tmp_path / "bad.toml"
    path.write_text('[[failure]]\nid = "site.x"\ntitle = "t"\ncause = "c"\nfix = "host-shm"\n' + entry + "\n")
    completed = run_cli("diagnose", "-", "--rules", str(path), stdin="x\n")
    assert completed.returncode == 2
    assert "failure 'site.x'" in completed.stderr and problem in completed.stderr, completed.stderr


@pytest.mark.parametrize("anchor, key", [
    (b": CUDA error: ", b"CUDA error: "),          # punctuation that is on every line is not searched for
    (b"vs. 0)", b"vs. 0)"),                          # 'v' is not among the commonest letters
    (b"error=", b"error="),                          # all common letters: from the first one, whole
    (b"/libcuda.so", b"bcuda.so"),                   # the first less common letter, with 5 bytes after it
    (b"@", b"@"),                                    # no letter at all: the anchor itself
    (b"\\x1b", b"\\x1b"),
    (b".el8", b"el8"),                               # common letters only: from the first, 3 bytes are enough
    (b".e", b".e"),                                  # fewer than 3 bytes from the first letter: all of it
])
def test_the_search_key_is_the_selective_tail_of_an_anchor(anchor, key):
    assert search_key(anchor) == key and key in anchor


def test_an_anchor_after_punctuation_is_still_found_on_its_line():
    # Caffe's check: '(46 vs. 0)' is found from 'vs. 0)', then the whole pattern is checked on the line (its
    # out-of-memory, '(2 vs. 0)', is cuda.oom's own pattern)
    code, report = diagnose_json("F1201 10:02:03.123 45 math.cu:66] Check failed: error == cudaSuccess (46 vs. 0)"
                                 "  all CUDA-capable devices are busy or unavailable\n", "--no-facts")
    assert code == 1 and report["matches"][0]["key"] == "cuda.runtime_error/cudaErrorDevicesUnavailable", report


def test_the_docs_document_diagnose_with_a_worked_example():
    page = (REPO / "docs" / "workstation.md").read_text()
    assert "$ preflight diagnose docs/examples/" in page and "## Diagnose a failed run" in page


# --- no log can make diagnose slow --------------------------------------------------------------

def _adversarial_inputs(pattern, size=1 << 20):
    """1 MB strings built to make a backtracking regex slow: the anchor repeated, alone and with the text
    each part of the regex accepts; the regex's literal prefix repeated; a long run after one anchor."""
    anchor = pattern.anchor
    prefix = re.match(r"[A-Za-z0-9 _'<-]*", pattern.regex.pattern if pattern.regex else anchor).group(0) or anchor
    fills = ["a", "1", " ", "1.", "sm_1 ", "x" * 50 + " ", ", 1", "'", "_"]
    yield (anchor * (size // len(anchor) + 1))[:size]
    yield (prefix * (size // max(1, len(prefix)) + 1))[:size]
    for fill in fills:
        yield anchor + fill * (size // len(fill))
        unit = anchor + fill * 20
        yield (unit * (size // len(unit) + 1))[:size]


# every pattern a log is scanned with: the known failures', the families' and the clues'
PATTERNS = [(entry.id, p) for entry in RULESET.log_entries() + list(RULESET.clues.values()) for p in entry.patterns]


def _fastest(function, texts, runs=3) -> list:
    """The least CPU time of a few runs of each text: what the work costs. Process time, not the wall clock: on a
    loaded machine the wall clock counts the time other processes had the CPU, which says nothing about this
    work's growth. The texts take turns in every round, so a stretch of load (anything else the machine runs, its
    caches and memory bandwidth shared) falls on all of them alike rather than on one."""
    best = [float("inf")] * len(texts)
    for _ in range(runs):
        for index, text in enumerate(texts):
            started = time.process_time()
            function(text)
            best[index] = min(best[index], time.process_time() - started)
    return best


@pytest.mark.parametrize("failure_id, pattern", PATTERNS, ids=["%s:%d" % (i, n) for n, (i, _) in enumerate(PATTERNS)])
def test_every_catalog_pattern_runs_in_linear_time_on_adversarial_input(failure_id, pattern):
    # Work that grows with the input's length: eight times the text costs about eight times as much for a linear
    # pattern and sixty-four times for a quadratic one. Compared within one run, so a slow machine slows both.
    # 8 KB and 64 KB: far past every bounded repetition of the catalog (at most a few hundred bytes), so the
    # growth seen is the pattern's own.
    small = dict(enumerate(_adversarial_inputs(pattern, 1 << 13)))
    for index, text in enumerate(_adversarial_inputs(pattern, 1 << 16)):
        small_cost, large_cost = _fastest(pattern.match, [small[index], text])
        assert large_cost < 30 * max(small_cost, 2e-4), (failure_id, pattern.regex.pattern if pattern.regex else "",
                                                          text[:80], small_cost, large_cost)


def test_a_long_line_with_a_repeated_anchor_and_error_words_is_scanned_in_linear_work():
    line = ("No labels in " * 80000) + "".join("x" * 255 + "Error " for _ in range(1000))
    text = line + "\n" + "A" * (256 << 10) + "\n"
    ids, result = found_ids(text)
    assert result.lines == 2
    assert result.examined <= 8 * len(text) + 600000, result.examined


def test_unsafe_regexes_in_rule_files_are_refused(tmp_path):
    rules = tmp_path / "x.toml"
    rules.write_text('[[failure]]\nid = "site.slow"\ntitle = "slow"\npatterns = [{ anchor = "boom", regex = "boom (a+)+$" }]\n'
                     'cause = "x"\nfix = { title = "y" }\n')
    completed = run_cli("diagnose", "--list", "--rules", str(rules))
    assert completed.returncode == 2 and "nested repetition" in completed.stderr
    rules.write_text('[[rule]]\nid = "site.driver"\ntitle = "driver"\nfact = "nvml.driver_version"\n'
                     'compare = "pattern"\npattern = "^(\\\\d+\\\\.?)+$"\nprofiles = ["node"]\n')
    completed = run_cli("check", "--rules", str(rules), "--profile", "node", "--nvml-fixture",
                        nvml_fixture("h200-driver580.json"))
    assert completed.returncode == 2 and "can take exponential time" in completed.stderr, completed.stderr


# --- values from the log itself, follow-ups, and out-of-memory advice ------------------------------------

BANNER_5090 = "YOLO \U0001F680 v0.1-104-g5b1ea9a Python-3.10.12 torch-2.5.1+cu124 CUDA:0 (NVIDIA GeForce RTX 5090, 32607MiB)\n"
ARGS = ("train_dual: weights=, cfg=models/detect/yolov9-c.yaml, data=data/coco.yaml, hyp=hyp.scratch-high.yaml, "
        "epochs=500, batch_size=%s, imgsz=640, rect=False, device=%s, workers=8\n")


def test_the_logs_own_run_fills_the_fix_when_this_machine_is_another():
    log = BANNER_5090 + ARGS % (16, 0) + "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
    _, report = diagnose_json(log, "--nvml-fixture", nvml_fixture("h200-driver580.json"))
    assert report["from_log"]["gpu_name"] == "NVIDIA GeForce RTX 5090" and report["from_log"]["python"] == "3.10"
    assert report["facts"]["whose"] == "log" and report["facts"]["header"] == "facts: from the log"
    assert any("is not where the log ran" in note and "the log's GPU is NVIDIA GeForce RTX 5090, this machine has "
               "NVIDIA H200" in note for note in report["notes"])
    fix = report["matches"][0]["fix"]
    # The log's Python 3.10 and sm_120; no driver in the log: the CUDA its own torch was built for (12.4) stands
    # in for it, and the fix names the driver each build needs.
    wanted = torch_wheels.fix_values(None, None, ["12.0"], "3.10", run_cuda="12.4")
    assert wanted["wheel_tag"] == "cu128" and "cu128 needs driver 570.26 or newer" in wanted["wheel_note"]
    assert fix["commands"][-1] == "python -m pip install %s --index-url %s" % (wanted["torch_pins"], wanted["index_url"])
    assert any("cu128 needs driver 570.26 or newer" in step for step in fix["steps"])
    # The action comes first (which CUDA each generation needs), then the log's own torch and GPU
    assert fix["steps"][0].startswith("Install a torch built with a CUDA release that knows this GPU's generation")
    assert fix["steps"][1].startswith("torch 2.5.1+cu124 has no kernels for NVIDIA GeForce RTX 5090 (compute capability 12.0)")


def test_nvidia_smi_in_the_log_gives_the_driver():
    log = ("| NVIDIA-SMI 535.104.05             Driver Version: 535.104.05   CUDA Version: 12.2     |\n"
           "RuntimeError: CUDA driver version is insufficient for CUDA runtime version\n")
    _, report = diagnose_json(log, "--no-facts")
    fix = report["matches"][0]["fix"]
    wanted = torch_wheels.choose("535.104.05", "12.2", [], None)
    assert any("%s --index-url %s" % (wanted.pins(), wanted.index_url) in c for c in fix["commands"]), fix
    assert "driver 535.104.05 (CUDA 12.2)" in report["notes"][0]


@pytest.mark.parametrize("log, first, explained", [
    ("Successfully installed torch-2.1.0+cpu torchvision-0.16.0+cpu\n"
     "AssertionError: Invalid CUDA '--device 0' requested, use '--device cpu' or pass valid CUDA device(s)\n",
     "torch.cpu_only_run", "cuda.invalid_device"),
    ("UserWarning: CUDA initialization: The NVIDIA driver on your system is too old (found version 11040).\n"
     "AssertionError: Invalid CUDA '--device 0' requested, use '--device cpu' or pass valid CUDA device(s)\n",
     "cuda.driver_too_old", "cuda.invalid_device"),
    ("AssertionError: Torch not compiled with CUDA enabled\nRuntimeError: No CUDA GPUs are available\n",
     "torch.cpu_build", "cuda.no_gpu_visible"),
])
def test_follow_ups_are_explained_by_their_root_cause(log, first, explained):
    ids, _ = found_ids(log)
    assert ids == [first], ids
    _, report = diagnose_json(log, "--no-facts")
    assert [e["id"] for e in report["matches"][0]["explains"]] == [explained]


def test_a_cpu_torch_alone_is_not_a_problem():
    assert found_ids("torch version: 2.1.0+cpu\nEpoch 1/10 done\n")[0] == []


@pytest.mark.parametrize("command, problem", [
    ("python train.py --device 0", True), ("yolo detect train model=yolov8n.pt device=0,1", True),
    ("python detect.py --device cpu", False), ("yolo detect train model=yolov8n.pt device=cpu", False),
])
def test_a_cpu_torch_is_a_problem_beside_the_runs_own_request_for_a_gpu(command, problem):
    # only_with may name a clue: the run's command line asking for a CUDA device
    _, report = diagnose_json(command + "\nUltralytics YOLOv8.0.88  Python-3.9.16 torch-2.0.0+cpu CPU\n", "--no-facts")
    ids = [match["id"] for match in report["matches"]]
    assert ids == (["torch.cpu_only_run"] if problem else []), ids


def test_only_with_may_name_a_clue_but_nothing_unknown(tmp_path):
    (tmp_path / "extra.toml").write_text(
        '[[failure]]\nid = "site.cpu_note"\ntitle = "t"\npriority = 10\npatterns = ["zzz-site-marker"]\n'
        'cause = "c"\nfix = { title = "f", steps = ["s"] }\nonly_with = ["run.gpu_requsted"]\n'
        'source = "https://example.org"\nexamples = ["zzz-site-marker"]\n')
    completed = run_cli("diagnose", "-", "--rules", str(tmp_path / "extra.toml"), stdin="zzz-site-marker\n")
    assert completed.returncode == 2 and "'only_with' names 'run.gpu_requsted', which is not a failure or clue" \
        in completed.stderr and "run.gpu_requested" in completed.stderr, completed.stderr


def test_out_of_memory_advice_uses_the_capacity_model():
    banner = "YOLO v0.1 Python-3.10.12 torch-2.5.1+cu124 CUDA:0 (NVIDIA GeForce RTX 3060, 12042MiB)\n"
    oom = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 11.76 GiB total capacity)\n"
    _, report = diagnose_json(banner + ARGS % (32, 0) + oom, "--no-facts")
    fix = report["matches"][0]["fix"]
    assert fix["steps"][0].startswith("At --img 640, yolov9-c fits about ") and "in the 12042 MiB a process can use" in fix["steps"][0]
    fit = int(fix["steps"][0].split("fits about ")[1].split()[0])
    assert 1 <= fit < 32
    assert not any("torchrun" in c for c in fix["commands"])  # one GPU: never spread over N
    assert "preflight plan --workload yolov9-c --img 640" in fix["commands"]
    # A run over two GPUs may be told to spread the batch.
    _, report = diagnose_json(banner + ARGS % (32, "0,1") + oom, "--no-facts")
    assert any(c.startswith("torchrun --nproc_per_node 2 ") and "--device 0,1" in c
               for c in report["matches"][0]["fix"]["commands"])
    # Nothing known about the run: the generic advice, and still no torchrun.
    _, report = diagnose_json(oom, "--no-facts")
    fix = report["matches"][0]["fix"]
    assert fix["steps"][0].startswith("Lower the batch size") and not any("torchrun" in c for c in fix["commands"])


def test_out_of_memory_advice_sizes_the_run_for_this_machine_when_the_log_has_no_banner():
    oom = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 11.76 GiB total capacity)\n"
    _, report = diagnose_json(ARGS % (32, 0) + oom, "--nvml-fixture", nvml_fixture("rtx3060-12g-driver525.json"))
    step = report["matches"][0]["fix"]["steps"][0]
    assert step.startswith("At --img 640, yolov9-c fits about ") and "in the 11919 MiB a process can use" in step, step  # 97% of NVML total


# --- fixes aimed at the process and the size that failed ------------------------------------------------------

def _diagnosis(text):
    return diagnose_json(text, "--no-facts")[1]


def test_one_allocation_larger_than_the_gpu_gets_no_cache_or_free_memory_advice():
    huge = ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 37.25 GiB. GPU 0 has a total "
            "capacity of 7.79 GiB of which 6.91 GiB is free.\n")
    fix = _diagnosis(huge)["matches"][0]["fix"]
    assert fix["steps"][0].startswith("One allocation of 37.25 GiB is more than the GPU's whole 7.79 GiB: freeing "
                                      "memory or a cache setting cannot make it fit"), fix
    # A tensor that grows with the batch shrinks with it (tests/corpus-heldout/95-...: a smaller batch solved a
    # 12.93 GiB request on a 5 GiB GPU); one that does not needs a smaller input. No "half of what failed".
    assert "If that tensor grows with the batch" in fix["steps"][0] and "smaller input" in fix["steps"][0], fix
    assert not any("half of what failed" in step or "--batch-size" in step or "expandable_segments" in step
                   for step in fix["steps"]), fix
    old_format = ("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 11.17 GiB total capacity; "
                  "10.56 GiB already allocated; 9.81 MiB free; 10.71 GiB reserved in total by PyTorch)\n")
    fix = _diagnosis(old_format)["matches"][0]["fix"]
    assert "Lower the batch size" in fix["steps"][0] and any("expandable_segments" in s for s in fix["steps"]), fix


def test_a_launcher_child_killed_by_sigkill_gets_host_memory_advice_for_its_ranks():
    text = ("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 (pid: 1322) of "
            "binary: /root/miniconda3/bin/python\n")
    match = _diagnosis(text)["matches"][0]
    assert match["id"] == "host.oom_killed"
    assert "DataLoader" not in match["fix"]["title"] and "torchrun rank" in match["fix"]["steps"][1], match["fix"]


def test_torch_240s_fbgemm_dll_is_named_with_the_library_it_needs():
    wrapped = ('02:54:18 ERROR    Could not load torch: [WinError 126] Das angegebene Modul wurde nicht gefunden. '
               'Error loading\n                         "P:\\AI\\venv\\lib\\site-packages\\torch\\lib\\fbgemm.dll" or '
               'one of its dependencies.\n')
    match = _diagnosis(wrapped)["matches"][0]
    assert match["id"] == "windows.torch_dll" and "libomp140.x86_64.dll" in match["fix"]["steps"][0], match
    other = ('OSError: [WinError 126] The specified module could not be found. Error loading "C:\\Python310\\lib\\'
             'site-packages\\torch\\lib\\caffe2_nvrtc.dll" or one of its dependencies.\n')
    steps = _diagnosis(other)["matches"][0]["fix"]["steps"]
    assert "libomp140" not in " ".join(steps) and "Visual C++ Redistributable" in steps[0], steps


def test_a_class_written_as_a_float_is_a_label_problem_named_with_its_class():
    text = "AssertionError: Label class 2.0 exceeds nc=2 in ./data/custom_data.yaml. Possible class labels are 0-1\n"
    match = _diagnosis(text)["matches"][0]
    assert match["id"] == "yolov9.label_class_exceeds_nc"
    assert match["fix"]["steps"][0].startswith("Find the label files that use class 2.0: nc=2 allows"), match["fix"]


def test_slurm_refusals_are_a_family_read_from_slurms_own_error_strings():
    for line, row in (("sbatch: error: Batch job submission failed: Invalid generic resource (gres) specification",
                       "Invalid generic resource (gres) specification"),
                      ("srun: error: Unable to allocate resources: Requested node configuration is not available",
                       "Requested node configuration is not available")):
        match = _diagnosis(line + "\n")["matches"][0]
        assert match["key"] == "slurm.error/" + row and match["confidence"] == "family", match
    # A Slurm error the table does not explain is no finding: a lookup table lists only what it can explain.
    assert not _diagnosis("srun: error: cn125: task 0: Segmentation fault (core dumped)\n")["matches"]


def test_the_image_of_a_docker_run_line_or_a_pod_event_names_what_to_rebuild():
    failure = ("nvidia-container-cli: mount error: file creation failed: /var/lib/docker/overlay2/36b6/merged/usr/lib/"
               "x86_64-linux-gnu/libnvidia-ml.so.1: file exists: unknown.\n")
    # Ports and volumes (8080:80, ./data:/data, /srv:/srv) come before the image and are not it.
    run = ("$ docker run --rm -it --gpus all -p 8080:80 -v ./data:/data -v /srv:/srv -e A=b "
           "nvcr.io/nvidia/pytorch:24.01-py3 python train.py\n")
    step = _diagnosis(run + failure)["matches"][0]["fix"]["steps"][0]
    assert step.startswith("Rebuild nvcr.io/nvidia/pytorch:24.01-py3 without NVIDIA driver packages"), step
    event = '  Normal  Pulled  12s  kubelet  Container image "registry.example.com/train/yolov9:2.1" already present\n'
    step = _diagnosis(event + failure)["matches"][0]["fix"]["steps"][0]
    assert step.startswith("Rebuild registry.example.com/train/yolov9:2.1 without"), step
    # An untagged image cannot be told from the command's words: the step stays general.
    step = _diagnosis("$ docker run --rm --gpus all -p 8080:80 myimage python train.py\n" + failure)[
        "matches"][0]["fix"]["steps"][0]
    assert step.startswith("Rebuild the image without"), step


# --- unseen wording and the platform the log shows (issue 49) ------------------------------------------------

def _fix_of(log, *args):
    _, report = diagnose_json(log, "--no-facts", *args)
    assert report["matches"], report
    first = report["matches"][0]
    return first["id"], first["fix"], report


def test_full_width_punctuation_reads_as_ascii():
    """An IDE's console in a Chinese locale: full-width parentheses and colon around the same words."""
    ids, _ = found_ids("训练开始\n进程已结束，退出代码 137\nProcess finished with exit code 137（interrupted by signal 9：SIGKILL）\n")
    assert ids == ["host.oom_killed"], ids


@pytest.mark.parametrize("prefix", ["", "trainer-1  | ", "2024-05-01T10:00:00.123456789Z stderr F ", "[pod/train-0/main] ",
                                    "0: ", "[rank0]: ", "2024-05-01T10:00:00Z ", "web_1 | 2024-05-01T10:00:00+02:00 "])
def test_a_log_collectors_prefix_does_not_hide_a_line_anchored_message(prefix):
    """docker compose, containerd's CRI log files, kubectl --prefix, srun --label and torchrun put their own words
    before each line: a bare 'Killed' (the kernel's OOM killer, as the shell reports it) is still the message."""
    ids, _ = found_ids("epoch 3/100\n" + prefix + "Killed\n")
    assert ids == ["host.oom_killed"], (prefix, ids)


def test_a_prefix_is_only_a_prefix():
    ids, _ = found_ids("RuntimeError: boom 0: Killed\nsomething else: Killed\n")
    assert "host.oom_killed" not in ids, ids


def test_yolov9_commands_only_for_a_log_that_shows_yolov9():
    nccl = "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1275, unhandled system error, NCCL version 2.14.3\n"
    _, fix, _ = _fix_of(nccl)
    assert not any("train_dual" in line or "yolov9" in line for line in fix["steps"] + fix["commands"]), fix
    bus = "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).\n"
    _, fix, _ = _fix_of(bus)
    assert "num_workers" in fix["steps"][0] and "train_dual" not in fix["steps"][0], fix
    _, fix, _ = _fix_of("python train_dual.py --workers 8 --device 0\n" + bus)
    assert "train_dual.py --workers 2" in fix["steps"][0], fix
    # conda: the hook first, and the environment the log activated, never a guessed one.
    _, fix, _ = _fix_of("CommandNotFoundError: Your shell has not been properly configured to use 'conda activate'.\n")
    assert fix["commands"][0] == 'eval "$(conda shell.bash hook)"' and not any("activate" in c for c in fix["commands"])
    _, fix, _ = _fix_of("$ conda activate detectron2\nCommandNotFoundError: Your shell has not been properly "
                        "configured to use 'conda activate'.\n")
    assert fix["commands"][:2] == ['eval "$(conda shell.bash hook)"', "conda activate detectron2"], fix


def test_a_jetson_log_gets_nvidias_jetpack_builds_not_pytorchs_indexes():
    log = ("# R35 (release), REVISION: 4.1, GCID: 33958178, BOARD: t186ref, EABI: aarch64\n"
           "torch version: 2.1.0+cpu\nAssertionError: Torch not compiled with CUDA enabled\n")
    _, fix, _ = _fix_of(log)
    assert any("JetPack" in step for step in fix["steps"]), fix
    assert not any("download.pytorch.org" in command for command in fix["commands"]), fix


def test_the_driver_fix_follows_who_owns_the_driver():
    old = "RuntimeError: The NVIDIA driver on your system is too old (found version 11040).\n"
    _, fix, _ = _fix_of(old)
    assert "sudo ubuntu-drivers install" in fix["commands"] or any("Upgrade" in s for s in fix["steps"]), fix
    _, fix, _ = _fix_of("gpu-operator   nvidia-driver-daemonset-5hm8k   0/1   Running   0   40m\n" + old)
    assert not any("ubuntu-drivers" in command or "reboot" in command for command in fix["commands"]), fix
    # The log gave the CUDA version alone: no text names a driver version the log did not show.
    _, fix, _ = _fix_of("RuntimeError: The NVIDIA driver on your system is too old (found version 10010).\n")
    said = json.dumps(fix)
    assert "418.39" not in said and "No current PyTorch wheel runs on a driver that supports CUDA 10.1 at most" in said


def test_a_centos_7_log_gets_yum_not_apt():
    log = ("CentOS Linux release 7.9.2009 (Core)\n"
           "ImportError: libGL.so.1: cannot open shared object file: No such file or directory\n")
    _, fix, _ = _fix_of(log)
    assert any(command.startswith("sudo yum install") for command in fix["commands"]), fix
    assert not any("apt-get" in command for command in fix["commands"]), fix


def test_the_resolution_of_the_platform_comes_first():
    # A Slurm job's GPUs: what Slurm does with the environment, first.
    _, fix, _ = _fix_of("srun: error: gpu-a017: task 0: Exited with exit code 1\nRuntimeError: No CUDA GPUs are available\n")
    assert fix["steps"][0].startswith("Under Slurm a job sees only the GPUs it asked for"), fix["steps"]
    # NCCL in Docker's bridge network across nodes: host networking, first.
    log = ("a1b2c3:412:412 [0] NCCL INFO Bootstrap : Using eth0:172.17.0.3<0>\n"
           "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
           "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3\n")
    _, fix, _ = _fix_of(log)
    assert "--network=host" in fix["steps"][0], fix["steps"]


def test_messages_read_from_their_emitters():
    cases = {
        "AttributeError: `np.NaN` was removed in the NumPy 2.0 release. Use `np.nan` instead.": "numpy.removed_release",
        "NotImplementedError: Could not run 'torchvision::nms' with arguments from the 'CUDA' backend.": "torchvision.torch_mismatch",
        "Warning  FailedCreatePodSandBox  kubelet  Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get sandbox runtime: no runtime for \"nvidia\" is configured": "container.runtime_handler_missing",
        "error: resolution-too-deep": "pip.resolution_too_deep",
        "AssertionError: MMCV==1.7.1 is used but incompatible. Please install mmcv>=2.0.0rc4, <2.1.0.": "package.version_assertion",
    }
    for text, wanted in cases.items():
        ids, _ = found_ids(text + "\n")
        assert ids[:1] == [wanted], (text, ids)
    _, fix, report = _fix_of("AttributeError: `np.float_` was removed in the NumPy 2.0 release. Use `np.float64` instead.\n")
    assert fix["steps"][0] == "Change the code as NumPy's message says: np.float_: Use np.float64 instead."
    # The font YOLO downloads: only when the download failed.
    download = "Downloading https://ultralytics.com/assets/Arial.ttf to /root/.config/Ultralytics/Arial.ttf...\n"
    assert found_ids(download + "Epoch 1/300\n")[0] == []
    ids, _ = found_ids(download + "urllib.error.URLError: <urlopen error [Errno -3] Temporary failure in name resolution>\n")
    assert ids == ["yolo.font_offline"], ids


def test_a_heading_is_not_the_last_error_and_a_finding_does_not_explain_its_own_line():
    completed = run_cli("diagnose", "-", "--no-facts", stdin="## 报错信息 Error\n训练脚本 train.py\nValueError: 数据集路径不存在\n")
    assert completed.returncode == 0 and "ValueError: 数据集路径不存在" in completed.stdout
    assert "报错信息 Error" not in completed.stdout.split("last error-looking")[-1], completed.stdout
    both = ("RuntimeError: DataLoader worker (pid 31422) is killed by signal: Bus error. It is possible that "
            "dataloader's workers are out of shared memory. Please try to raise your shared memory limit.\n")
    text = run_cli("diagnose", "-", "--no-facts", stdin=both).stdout
    assert "also explains line 1:" not in text, text


# --- code written for a newer torch -----------------------------------------------------------------------------

@pytest.mark.parametrize("line", [
    "AttributeError: module 'torch.nn' has no attribute 'Hardswish'",
    "AttributeError: module 'torch' has no attribute 'compile'",
    "AttributeError: Can't get attribute 'NonDynamicallyQuantizableLinear' on <module 'torch.nn.modules.linear' from "
    "'/opt/conda/lib/python3.8/site-packages/torch/nn/modules/linear.py'>",
])
def test_a_part_of_torch_the_installed_torch_lacks_asks_for_the_torch_the_code_names(line):
    _, report = diagnose_json(line + "\n", "--no-facts")
    first = report["matches"][0]
    assert first["id"] == "torch.older_than_code", report["matches"]
    assert "previous-versions" in " ".join(first["fix"]["steps"]), first["fix"]
    assert first["fix"]["commands"][0].endswith(' -c "import torch; print(torch.__version__, torch.__file__)"')


@pytest.mark.parametrize("line", [
    "AttributeError: module 'torch' has no attribute 'cuda'",        # every torch has it: another torch hides it
    "AttributeError: module 'torch' has no attribute '__version__'",  # a folder named torch, not a release
    "AttributeError: module 'torchvision' has no attribute 'disable_beta_transforms_warning'",
    "AttributeError: 'Tensor' object has no attribute 'astype'",     # numpy's method called on a tensor
    "AttributeError: Can't get attribute 'DetectionModel' on <module 'models.yolo' from '/content/yolov5/models/yolo.py'>",
])
def test_what_is_not_a_newer_torchs_api_is_not_called_one(line):
    ids, _ = found_ids(line + "\n")
    assert "torch.older_than_code" not in ids, ids


def test_an_undefined_symbol_the_table_does_not_know_asks_for_a_clean_rebuild():
    line = ("ImportError: /home/u/YOLOF/cvpods/_C.cpython-37m-x86_64-linux-gnu.so: undefined symbol: "
            "_Z39tree_filter_refine_backward_edge_weightRKN2at6TensorES2_S2_")
    _, report = diagnose_json(line + "\n", "--no-facts")
    first = report["matches"][0]
    assert first["key"].startswith("extension.undefined_symbol/_Z39tree_filter"), first["key"]
    assert "clean build folder" in first["fix"]["steps"][0], first["fix"]


def test_torch_04s_warning_about_a_0_dim_index_is_not_a_failure_and_later_torchs_error_is():
    warned = ("main.py:48: UserWarning: invalid index of a 0-dim tensor. This will be an error in PyTorch 0.5. Use "
              "tensor.item() to convert a 0-dim tensor to a Python number\n")
    assert "torch.zero_dim_index" not in found_ids(warned)[0]
    refused = "IndexError: invalid index of a 0-dim tensor. Use tensor.item() to convert a 0-dim tensor to a Python number\n"
    _, report = diagnose_json(refused, "--no-facts")
    assert report["matches"][0]["id"] == "torch.zero_dim_index"
    assert "loss.item()" in report["matches"][0]["fix"]["steps"][0]


def test_yoloxs_occupy_step_comes_first_only_where_the_run_used_it():
    oom = ("RuntimeError: CUDA out of memory. Tried to allocate 4.53 GiB (GPU 0; 6.00 GiB total capacity; 39.04 MiB "
           "already allocated; 4.45 GiB free; 64.00 MiB reserved in total by PyTorch)\n")
    with_o = "python tools/train.py -f exps/example/custom/yolox_s.py -d 1 -b 1 --fp16 -o -c yolox_s.pth\n" + oom
    without = "python tools/train.py -f exps/example/custom/yolox_s.py -d 1 -b 1 --fp16 -c yolox_s.pth\n" + oom
    steps = diagnose_json(with_o, "--no-facts")[1]["matches"][0]["fix"]["steps"]
    assert steps[0].startswith("YOLOX's -o (--occupy) ran") and "Drop -o" in steps[0], steps
    steps = diagnose_json(without, "--no-facts")[1]["matches"][0]["fix"]["steps"]
    assert not any("occupy" in step for step in steps), steps


def test_a_placeholder_in_a_known_failures_title_is_refused_where_it_is_written(tmp_path):
    # A known failure's title is shown as written: a {name} there would reach the user as braces.
    rules = tmp_path / "x.toml"
    rules.write_text('[[failure]]\nid = "site.boom"\ntitle = "Boom {name}"\n'
                     'patterns = [{ anchor = "boom ", regex = \'boom (?P<name>\\w{1,9})\' }]\ncause = "x"\nfix = { title = "y" }\n')
    completed = run_cli("diagnose", "--list", "--rules", str(rules))
    assert completed.returncode == 2 and "x.toml:1" in completed.stderr and "{name}" in completed.stderr, completed.stderr
    assert "Traceback" not in completed.stderr


def test_paddles_older_cudnn_warning_alone_is_not_a_failure_and_beside_a_failed_call_is_the_cause():
    # Paddle prints the warning at every start where the cuDNN found is an older minor release; such runs often
    # work (this log is paddle.utils.run_check() passing), so the warning counts only beside a failed cuDNN call.
    warning = ("W1114 22:57:33.949204    32 device_context.h:397] WARNING: device: 0. The installed Paddle is compiled "
               "with CUDNN 8.1, but CUDNN version in your machine is 8.0, which may cause serious incompatible bug. "
               "Please recompile or reinstall Paddle with compatible CUDNN version.\n")
    ids, _ = found_ids(warning + "PaddlePaddle works well on 1 GPU.\n")
    assert ids == []
    ids, _ = found_ids(warning + "RuntimeError: cuDNN error: CUDNN_STATUS_INTERNAL_ERROR\n")
    assert ids[0] == "cudnn.runtime_older" and "cudnn.status_error" not in ids


def test_windows_missing_cudnn_entry_point_is_read_in_chinese_across_lines():
    # Chinese Windows' loader dialog, as a PaddleOCR user typed it: the DLL on the next line
    ids, _ = found_ids("python.exe- 无法找到入口\n无法定位程序输入点 于动态接库\n"
                       "D: PaddlePaddleDeepLerning/Anaconda3/envs/paddle/Librany/bin/cudnn_adv_infer64_8.dll 上\n")
    assert ids[:1] == ["cudnn.version_mismatch"]


def test_an_infiniband_call_refused_for_pinned_memory_starts_with_the_locked_memory_limit():
    # NCCL's wordings of every release (src/misc/ibvwrap.cc): with the error text from 2.13/2.14, without before,
    # and NCCL 2.1's WARN without its name in front.
    for line in ("misc/ibvwrap.cc:278 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory",
                 "node08:6561:6561 [0] misc/ibvwrap.cc:280 NCCL WARN Call to ibv_create_qp failed",
                 "machine [0] misc/ibvwrap.cu:269 WARN Call to ibv_create_qp failed"):
        found, fix, _ = _fix_of(line + "\nFailed, NCCL error test_nccl.c:99 'unhandled system error'\n")
        assert found == "nccl.infiniband", (line, found)
        assert "ulimit -l" in fix["steps"][0] and "--ulimit memlock=-1" in fix["steps"][0], fix
    # A call that failed for another reason keeps the path first: the limit is not named.
    _, fix, _ = _fix_of("ai-worker01:5771:5790 [0] ibvwrap.c:160 NCCL WARN Call to ibv_modify_qp failed with error "
                        "Connection timed out\n")
    assert not any("memlock" in step for step in fix["steps"]) and fix["steps"][0].startswith("Status 12"), fix
    found, _, _ = _fix_of("Distributed model training with nccl error：NCCL WARN NET/IB Got completion error 12\n")
    assert found == "nccl.infiniband", found


def test_a_missing_cuda_runtime_names_where_each_platform_gets_it():
    conda = ('ImportError: libcudart.so.9.0: cannot open shared object file: No such file or directory\n'
             '> conda install pytorch cuda90 -c pytorch\n')
    _, fix, _ = _fix_of(conda)
    assert "cudatoolkit" in fix["steps"][0] and "JetPack" not in fix["steps"][0], fix
    jetson = "Jetson Nano B01\nImportError: libcudart.so.10.2: cannot open shared object file: No such file or directory\n"
    _, fix, _ = _fix_of(jetson)
    assert "JetPack" in fix["steps"][0] and "cudatoolkit" not in fix["steps"][0], fix


def test_onnxruntime_s_linux_provider_error_is_its_own_failure_and_names_the_library_it_lacks():
    log = ("[E:onnxruntime:Default, provider_bridge_ort.cc:1548 TryGetProviderInfo_CUDA] [ONNXRuntimeError] : 1 : FAIL : "
           "Failed to load library libonnxruntime_providers_cuda.so with error: libcublasLt.so.11: cannot open shared "
           "object file: No such file or directory\n")
    ids, _ = found_ids(log)
    assert ids == ["onnxruntime.cuda_provider_failed"], ids  # not the shared-library family on the same line
    _, report = diagnose_json(log, "--no-facts")
    assert any("libcublasLt.so.11" in line for line in report["matches"][0]["context"]), report["matches"][0]


def _step_only_where_the_log_shows_it(log, failure, words, log_without, step=0):
    """A fix step that follows what the log shows: ``words`` in step ``step`` of ``failure``'s fix for ``log``,
    and in no step for ``log_without``, the same failure without that sign."""
    found, fix, _ = _fix_of(log)
    assert found == failure and words in fix["steps"][step], (found, fix)
    found, plain, _ = _fix_of(log_without)
    assert found == failure and not any(words in line for line in plain["steps"]), (found, plain)
    return fix


def test_a_certificate_failure_of_yolo_s_font_download_says_to_place_the_font():
    log = ("Downloading https://ultralytics.com/assets/Arial.ttf to /root/.config/Ultralytics/Arial.ttf...\n"
           "urllib.error.URLError: <urlopen error [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
           "certificate has expired (_ssl.c:1006)>\n")
    _step_only_where_the_log_shows_it(log, "network.certificate", "Arial.ttf",
                                      log.split("\n", 1)[1])


def test_a_windows_conda_path_in_lower_case_is_windows():
    log = ("RuntimeError: Distributed package doesn't have NCCL built in\nERROR:torch.distributed.elastic.multiprocessing"
           ".api:failed (exitcode: 1) local_rank: 0 (pid: 27316) of binary: C:\\anaconda\\envs\\clip\\python.exe\n")
    _, fix, _ = _fix_of(log)
    assert "gloo" in fix["steps"][0] and not any(step.startswith("On Linux") for step in fix["steps"]), fix


def test_a_cuda_requirement_error_names_the_log_s_driver_and_the_platform_s_way_to_update_it():
    log = ("nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.8, please update your driver to a "
           "newer version, or use an earlier cuda container\n(base) PS C:\\projects\\PETRIC2> nvidia-smi.exe\n"
           "| NVIDIA-SMI 551.78                 Driver Version: 551.78         CUDA Version: 12.4     |\n")
    fix = _step_only_where_the_log_shows_it(log, "container.requirement_unsatisfied", "Docker Desktop",
                                            log.splitlines()[0] + "\n", step=1)
    assert "551.78" in fix["steps"][0] and "12.4" in fix["steps"][0], fix


def test_slurm_s_node_configuration_refusal_is_read_where_it_is_quoted():
    found, _, _ = _fix_of("Cannot submit GPU job - Slurm reports Requested node configuration is not available\n")
    assert found.startswith("slurm.error"), found


def test_apex_s_cuda_check_and_old_bitsandbytes_setups_are_read_in_their_own_words():
    apex = ("RuntimeError: Cuda extensions are being compiled with a version of Cuda that does not match the version "
            "used to compile Pytorch binaries.  Pytorch binaries were compiled with Cuda 12.1.\n")
    _step_only_where_the_log_shows_it(apex, "extension.cuda_version_mismatch", "apex",
                                      "RuntimeError: The detected CUDA version (12.2) mismatches the version that was "
                                      "used to compile PyTorch (11.8). Please make sure to use the same CUDA versions.\n")
    for log in ("CUDA SETUP: Required library version not found: libbitsandbytes_cuda118.so. Maybe you need to "
                "compile it from source?\nCUDA SETUP: Defaulting to libbitsandbytes_cpu.so...\n",
                "bin E:\\Miniconda3\\envs\\AI002\\lib\\site-packages\\bitsandbytes\\libbitsandbytes_cpu.so\n"):
        found, _, _ = _fix_of(log)
        assert found == "bitsandbytes.cuda_setup_failed", (log, found)
    # On Linux the CPU library alone is what a machine without a GPU is meant to load: no finding.
    ids, _ = found_ids("bin /opt/venv/lib/python3.10/site-packages/bitsandbytes/libbitsandbytes_cpu.so\n")
    assert ids == [], ids


def test_torch_compile_s_too_old_gpu_is_read_when_the_message_is_cut_before_the_capability():
    found, _, _ = _fix_of("RuntimeError: Found Tesla P100-SXM2-16GB which is too old to be supported by the triton GPU "
                          "compiler, which is used as the backend. Triton only supports devices of CUDA Capability "
                          ">= 7.0, but y\n")
    assert found == "torch.compile_gpu_too_old", found


def test_cuda_asked_for_on_a_mac_says_to_use_mps_or_cpu_not_a_cuda_wheel():
    """PyTorch builds no CUDA torch for macOS: there the fix is the Mac's own device, never a CUDA index."""
    error = "    raise AssertionError(\"Torch not compiled with CUDA enabled\")\nAssertionError: Torch not compiled with CUDA enabled\n"
    mac = '  File "/Users/ana/ComfyUI/.venv/lib/python3.12/site-packages/torch/cuda/__init__.py", line 403, in _lazy_init\n'
    found, fix, _ = _fix_of(mac + error)
    assert found == "torch.cuda_on_macos" and "mps" in fix["steps"][0], (found, fix)
    assert not any("index-url" in command or "download.pytorch.org" in command for command in fix["commands"]), fix
    # The same home folder on Windows (a drive letter before it) is not a Mac: there a CUDA build is the fix.
    windows = '  File "C:/Users/ana/ComfyUI/venv/lib/site-packages/torch/cuda/__init__.py", line 403, in _lazy_init\n'
    found, fix, _ = _fix_of(windows + error)
    assert found == "torch.cpu_build" and fix["steps"][0].startswith("Reinstall torch"), (found, fix)


@pytest.mark.parametrize("line", [
    "RuntimeError: CUDA error: no kernel image is available for execution on the driver, when use pytorch 1.7",
    "报错 cuda runtime error（209）:no kernel image is available foe execution on the device.",
])
def test_no_kernel_image_is_read_when_the_thread_retypes_its_end(line):
    found, _, _ = _fix_of(line + "\n")
    assert found == "torch.no_kernel_image", found


def test_a_notebook_s_out_of_memory_header_is_the_out_of_memory():
    """IPython prints the exception's class alone above the frames; the message may be cut off below them."""
    found, _, _ = _fix_of("OutOfMemoryError                          Traceback (most recent call last)\n"
                          "Cell In[7], line 8\n----> 8 model.train(data='data.yaml', epochs=100, batch=1)\n")
    assert found == "cuda.oom", found


def test_yolov7_s_out_of_memory_starts_with_its_ota_loss():
    """YOLOv7's default loss holds memory that grows with the labels; its author's advice is loss_ota: 0."""
    log = ("python train_aux.py --device 0 --batch-size 6 --cfg cfg/training/yolov7-w6.yaml --hyp data/hyp.scratch.p6.yaml\n"
           "RuntimeError: CUDA out of memory. Tried to allocate 3.23 GiB (GPU 1; 39.44 GiB total capacity; 33.79 GiB "
           "already allocated; 1.01 GiB free; 36.79 GiB reserved in total by PyTorch)\n")
    _step_only_where_the_log_shows_it(log, "cuda.oom", "loss_ota: 0", log.split("\n", 1)[1])


def test_insufficient_driver_without_a_driver_in_sight_names_the_no_driver_cases():
    """CUDA's runtime says 'driver version is insufficient' also where it finds no driver at all (no NVIDIA GPU, a
    container started without the GPU runtime); said only where neither the log nor the machine shows a driver."""
    error = "RuntimeError: CUDA driver version is insufficient for CUDA runtime version\n"
    found, fix, _ = _fix_of(error)
    assert found == "cuda.driver_too_old" and any("--gpus all" in step for step in fix["steps"]), fix
    shown = ("| NVIDIA-SMI 418.39       Driver Version: 418.39       CUDA Version: 10.1     |\n" + error)
    found, fix, _ = _fix_of(shown)
    assert found == "cuda.driver_too_old" and not any("--gpus all" in step for step in fix["steps"]), fix


def test_an_akmods_driver_on_fedora_is_rebuilt_with_akmods_not_dkms():
    log = ("nvidia-smi fails on Fedora 43 despite akmod-nvidia and CUDA driver packages being installed\n"
           "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
           "NVIDIA driver is installed and running.\n")
    fix = _step_only_where_the_log_shows_it(log, "nvidia.smi_no_driver", "akmods --force", log.split("\n", 1)[1])
    assert not any("dkms" in line for line in fix["steps"] + fix["commands"]), fix


def test_a_fedora_kernel_tag_is_a_dnf_system():
    found, fix, _ = _fix_of("Kernel: Linux 6.17.10-300.fc43.x86_64\n"
                            "ImportError: libGL.so.1: cannot open shared object file: No such file or directory\n")
    assert found == "opencv.libgl" and any(c.startswith("sudo yum") for c in fix["commands"]), fix
    assert not any("apt-get" in c for c in fix["commands"]), fix


@pytest.mark.parametrize("name, instead", [("warnings", "import warnings"), ("typeDict", "np.sctypeDict")])
def test_numpy_1_24_s_removals_beyond_the_aliases_are_read(name, instead):
    """NumPy 1.24 deleted np.warnings ('del sys, warnings') and the deprecated np.typeDict (numpy/__init__.py)."""
    found, fix, _ = _fix_of("AttributeError: module 'numpy' has no attribute '%s'\n" % name)
    assert found == "python.api_removed" and name in fix["title"] and instead in fix["steps"][0], (found, fix)
    assert any("numpy<1.24" in command for command in fix["commands"]), fix


def test_pip_s_list_of_releases_skipped_for_their_python_is_the_python_requirement():
    found, fix, _ = _fix_of("ERROR: Ignored the following versions that require a different python version: 1.22.0 "
                            "Requires-Python >=3.8; 1.22.1 Requires-Python >=3.8\n"
                            "ERROR: Could not find a version that satisfies the requirement numpy==1.22.0\n")
    assert found == "pip.requires_python" and ">=3.8" in fix["steps"][0], (found, fix)


def test_yolo_s_requirement_autoupdate_failure_says_to_use_the_job_s_own_pip():
    found, fix, report = _fix_of("requirements: YOLOv5 requirements \"gitpython>=3.1.30\" not found, attempting "
                                 "AutoUpdate...\n'pip' is not recognized as an internal or external command,\n"
                                 "requirements:  Command 'pip install \"gitpython>=3.1.30\"  ' returned non-zero exit "
                                 "status 1.\n")
    assert found == "yolo.requirements_autoupdate_failed" and "python -m pip install" in fix["steps"][0], fix
    assert "gitpython>=3.1.30" in fix["steps"][0], fix


@pytest.mark.parametrize("line", [
    "torch.cuda.is_available() returns false",
    "print(torch.cuda.is_available()) returned False on the server",
    "import torch正常，torch.cuda.is_available()返回False怎么办",
    "torch.cuda.is_available()=false",
    "after installing, torch.cuda.is_available() and I get False",
])
def test_a_thread_saying_cuda_is_not_available_is_read(line):
    ids, _ = found_ids(line + "\n")
    assert ids == ["torch.cuda_unavailable"], (line, ids)


@pytest.mark.parametrize("line", [
    "if torch.cuda.is_available() == False:",
    "When torch.cuda.is_available() returns False the script falls back to the CPU.",
    "assert torch.cuda.is_available() is not False",
])
def test_code_or_a_condition_about_cuda_is_not_a_report_of_it(line):
    ids, _ = found_ids(line + "\n")
    assert ids == [], (line, ids)


def test_torch_s_own_checkpoint_message_is_not_read_as_a_cuda_report():
    ids, _ = found_ids("RuntimeError: Attempting to deserialize object on a CUDA device but torch.cuda.is_available() "
                       "is False. If you are running on a CPU-only machine, please use torch.load with "
                       "map_location=torch.device('cpu') to map your storages to the CPU.\n")
    assert ids == ["torch.cuda_checkpoint_on_cpu"], ids


def test_a_platform_written_in_lower_case_still_shapes_the_fix():
    """Clues are read case-blind in the forgiving pass: 'jetson nano', 'Jetpack 4.4' as threads write them."""
    found, fix, _ = _fix_of("I installed torch on my jetson nano(Jetpack 4.4), but cuda.is_available() returns false\n")
    assert found == "torch.cuda_unavailable" and "JetPack" in fix["steps"][0], fix
    assert not any(command.startswith("nvidia-smi") for command in fix["commands"]), fix


def test_collect_env_s_cpu_build_is_the_cause_only_where_a_gpu_was_wanted():
    report = "PyTorch version: 1.12.1\nCUDA used to build PyTorch: Could not collect\n"
    ids, _ = found_ids(report)
    assert ids == [], ids
    found, _, _ = _fix_of(report + "torch.cuda.is_available() returns False\n")
    assert found == "torch.cpu_only_run", found


_NAN_EPOCH = "        1/100      2.51G        nan        nan        nan         24        640: 100%|##########| 8/8\n"


def test_nan_losses_on_a_gpu_whose_mixed_precision_breaks_say_to_train_in_fp32():
    """Ultralytics turns AMP off by name for the GTX 16 series (checks.py check_amp); YOLOv9 keeps it on."""
    banner = "YOLO 🚀 v0.1-104 Python-3.10.12 torch-2.1.2+cu121 CUDA:0 (NVIDIA GeForce GTX 1650, 3912MiB)\n"
    found, fix, _ = _fix_of(banner + _NAN_EPOCH)
    assert found == "training.nan_loss" and "check_amp" in fix["steps"][0] and "amp=False" in fix["steps"][0], fix


def test_nan_losses_elsewhere_are_the_training_s_own():
    ids, _ = found_ids("YOLO 🚀 v0.1-104 Python-3.10.12 torch-2.1.2+cu121 CUDA:0 (NVIDIA GeForce RTX 3090, 24260MiB)\n"
                       + _NAN_EPOCH)
    assert ids == [], ids
    # Ultralytics' own warning names NaN losses as what it prevents: that is the AMP check, not NaN losses.
    found, _, _ = _fix_of("AMP: checks failed ❌. AMP training on NVIDIA GeForce GTX 1650 GPU may cause NaN losses or "
                          "zero-mAP results, so AMP will be disabled during training.\n")
    assert found == "yolov9.amp_check_failed", found


def test_an_indented_continuation_and_caffe_s_check_are_read():
    """A wrapped message whose second line is indented (a RuntimeError's text), and Caffe's glog CUDA_CHECK."""
    found, _, _ = _fix_of("RuntimeError:\n      The detected CUDA version (11.8) mismatches the version that was used to compile\n"
                          "      PyTorch (12.4). Please make sure to use the same CUDA versions.\n")
    assert found == "extension.cuda_version_mismatch", found
    found, _, _ = _fix_of("Check failed: error == cudaSuccess (2 vs. 0) out of memory.How to deal with it?\n")
    assert found == "cuda.oom", found


def test_cudnn_8_s_missing_zlibwapi_says_where_it_goes_and_is_a_windows_log():
    """cuDNN 8.3 to 8.9 on Windows load zlibwapi.dll; the loader's message alone says the run was on Windows."""
    found, fix, _ = _fix_of("Could not locate zlibwapi.dll. Please make sure it is in your library path!\n")
    assert found == "cudnn.version_mismatch" and "zlibwapi.dll" in fix["steps"][0] and "64-bit" in fix["steps"][0], fix
    assert any(command.startswith("where.exe") for command in fix["commands"]), fix
    assert not any("ldconfig" in command for command in fix["commands"]), fix
    _, fix, _ = _fix_of("Could not load library zlibwapi.dll. Error code 193. Please verify that the library is built "
                        "correctly for your processor architecture (32-bit, 64-bit)\n")
    assert any("193 is a 32-bit DLL" in step for step in fix["steps"]), fix


@pytest.mark.parametrize("line", [
    "error: (-217) all CUDA-capable devices are busy or unavailable in function setDevice",
    "it is cancelled with an \"Error selecting compatible GPU all CUDA-capable devices are busy or unavailable\"",
])
def test_busy_or_unavailable_gpus_are_read_in_opencv_s_words_and_alone(line):
    _, _, report = _fix_of(line + "\n")
    assert report["matches"][0]["key"] == "cuda.runtime_error/cudaErrorDevicesUnavailable", report["matches"][0]


def test_a_binding_s_bare_cuda_error_unknown_is_cuda_s_failed_start():
    found, fix, _ = _fix_of("panic: CUDA_ERROR_UNKNOWN\n\ngoroutine 1 [running, locked to thread]:\n")
    assert found == "cuda.unknown_error" and "nvidia_uvm" in fix["commands"][0], (found, fix)


def test_pip_s_missing_requirements_file_says_to_run_in_the_repository():
    found, fix, _ = _fix_of("ERROR: Could not open requirements file: [Errno 2] No such file or directory: "
                            "'requirements.txt'\n")
    assert found == "pip.requirements_file_missing" and "folder" in fix["steps"][0], (found, fix)


@pytest.mark.parametrize("log, expected", [
    ("AssertionError: CUDA unavailable, invalid device 0 requested\n", "torch.cuda_unavailable"),
    ("    assert torch.cuda.is_available() and torch.cuda.device_count() >= len(device.replace(',', '')), \\\n",
     "cuda.invalid_device"),
    ("_But while running the detection, I check the output of torch.cuda.is_available() which is returning false_\n",
     "torch.cuda_unavailable"),
])
def test_yolo_s_device_checks_are_read_in_each_release_s_words(log, expected):
    found, _, _ = _fix_of(log)
    assert found == expected, (log, found)


def test_docker_desktop_on_windows_gets_its_own_gpu_step_not_the_linux_toolkit():
    log = ("PS C:\\Users\\me> docker run --gpus all nvidia/cuda:12.2.0-base-ubuntu22.04 nvidia-smi\n"
           "docker: Error response from daemon: could not select device driver \"\" with capabilities: [[gpu]].\n")
    found, fix, _ = _fix_of(log)
    assert found == "docker.no_gpu_runtime" and "Docker Desktop" in fix["steps"][1], fix
    assert not any("systemctl" in c or "apt-get" in c for c in fix["commands"]), fix
    found, fix, _ = _fix_of(log.split("\n", 1)[1])
    assert "nvidia-container-toolkit" in fix["steps"][1] and any("systemctl" in c for c in fix["commands"]), fix


def test_a_gelan_model_in_train_dual_is_told_from_any_other_reshape_error():
    """utils/loss_tal_dual.py reshapes feats[0].shape[0] images; a single-head model hands it one image's maps, so
    the batch becomes the head's outputs and both numbers are equal. Only then, and only in YOLOv9's code."""
    frame = '  File "/content/yolov9/utils/loss_tal_dual.py", line 175, in __call__\n'
    ids, _ = found_ids(frame + "RuntimeError: shape '[70, 70, -1]' is invalid for input of size 1792000\n")
    assert ids == ["yolov9.train_dual_on_gelan_model"], ids
    _, fix, _ = _fix_of(frame + "RuntimeError: shape '[70, 70, -1]' is invalid for input of size 1792000\n")
    assert fix["commands"][0].split()[1:2] == ["train.py"] and "gelan-c.yaml" in fix["commands"][0], fix
    # Unequal numbers are some other reshape; equal ones outside YOLOv9 are not this trainer's scripts.
    ids, _ = found_ids(frame + "RuntimeError: shape '[16, 70, -1]' is invalid for input of size 1792000\n")
    assert "yolov9.train_dual_on_gelan_model" not in ids, ids
    ids, _ = found_ids("RuntimeError: shape '[70, 70, -1]' is invalid for input of size 1792000\n")
    assert "yolov9.train_dual_on_gelan_model" not in ids, ids



def test_yolov9_segmentation_errors_are_told_apart_by_the_frame_that_raised_them():
    """One message, 'list' object has no attribute 'shape', from three places: segment/predict.py's process_mask
    (the script keeps the head's whole output tuple), the segmentation loss unpacking a dual head's prototypes (a
    yolov9-c-dseg model in segment/train.py), or anywhere else, where it says nothing about YOLOv9."""
    error = "AttributeError: 'list' object has no attribute 'shape'\n"
    predict = '  File "/content/yolov9/utils/segment/general.py", line 54, in process_mask\n    c, mh, mw = protos.shape  # CHW\n'
    ids, _ = found_ids(predict + error)
    assert ids == ["yolov9.segment_predict_proto"], ids
    _, fix, _ = _fix_of(predict + error)
    assert "proto = proto[-1]" in fix["steps"][0], fix
    loss = '  File "/mnt/data/yolov9/utils/segment/loss_tal.py", line 173, in __call__\n    batch_size, _, mask_h, mask_w = proto.shape\n'
    ids, _ = found_ids(loss + error)
    assert ids == ["yolov9.segment_train_on_dual_model"], ids
    ids, _ = found_ids('  File "app.py", line 9, in run\n    h, w = img.shape\n' + error)
    assert not any(i.startswith("yolov9.") for i in ids), ids


def test_a_segmentation_model_in_the_detection_loss_is_read_by_its_32_mask_coefficients():
    """YOLOv9's Segment head returns (maps, mask coefficients, prototypes) in training; the detection loss takes the
    coefficients as maps and reshapes their 32 rows as the batch. Other batches, and other trainers, are not this."""
    frame = '  File "E:\\study\\yolov9-main\\utils\\loss_tal.py", line 178, in <listcomp>\n'
    ids, _ = found_ids(frame + "RuntimeError: shape '[32, 65, -1]' is invalid for input of size 131712\n")
    assert ids == ["yolov9.detect_train_on_segment_model"], ids
    ids, _ = found_ids(frame + "RuntimeError: shape '[16, 65, -1]' is invalid for input of size 131712\n")
    assert "yolov9.detect_train_on_segment_model" not in ids, ids
    ids, _ = found_ids('[rank0]:   File "/home/x/yoloe/ultralytics/utils/loss.py", line 211, in <listcomp>\n'
                       "[rank0]: RuntimeError: shape '[32, 65, -1]' is invalid for input of size 268800\n")
    assert "yolov9.detect_train_on_segment_model" not in ids, ids

def test_a_ddp_launcher_with_more_ranks_than_devices_gets_the_nproc_step_first():
    """YOLOv5's train.py (and YOLOv7's copy) asserts one visible GPU per local rank; select_device has already made
    only --device's GPUs visible. YOLOX's -d N assertion is the same kind without a launcher: no launcher step."""
    _, fix, _ = _fix_of("  File \"train.py\", line 543, in <module>\n"
                        "    assert torch.cuda.device_count() > opt.local_rank\nAssertionError\n")
    assert fix["steps"][0].startswith("torch.distributed.launch and torchrun start --nproc_per_node"), fix
    _, fix, _ = _fix_of("AssertionError: insufficient CUDA devices for DDP command\n")
    assert "--nproc_per_node 2 with --device 0,1" in fix["steps"][0], fix
    _, fix, _ = _fix_of("    assert num_gpu <= get_num_devices()\nAssertionError\n")
    assert not any("nproc_per_node" in step for step in fix["steps"]), fix


def test_nvidia_smis_mig_column_explains_an_invalid_device():
    table = ("|   0  NVIDIA A100 80GB PCIe          Off |   00000000:31:00.0 Off |                   On |\n"
             "| N/A   34C    P0             43W /  300W |      53MiB /  81920MiB |     N/A      Default |\n"
             "|                                         |                        |              {} |\n")
    error = "RuntimeError: device >= 0 && device < num_gpus INTERNAL ASSERT FAILED\n"
    ids, _ = found_ids(error + table.format("Enabled"))
    assert ids[0] == "cuda.mig_one_instance", ids
    ids, _ = found_ids(error + table.format("Disabled"))
    assert ids[0] == "cuda.invalid_device", ids
    ids, _ = found_ids(table.format("Enabled"))  # MIG alone is no failure
    assert ids == [], ids


def test_yolov5s_loss_columns_named_nan_on_a_gtx_16_retyped_as_rtx():
    ids, _ = found_ids("when use gpu, datas(box, obj, cls) are nan, while the Labels, P, R, mAP are all zero.\n"
                       "my gpu is RTX 1650, CUDA 11.4\n")
    assert ids == ["training.nan_loss"], ids
    ids, _ = found_ids("when use gpu, datas(box, obj, cls) are nan\nmy gpu is RTX 3060\n")
    assert ids == [], ids


def test_a_labelled_torch_build_missing_from_pypi_is_not_blamed_on_the_python():
    """pip's 'Ignored the following versions' lists what it skipped for every package it read; when the release
    asked for is in pip's list and only its +cuXYZ build is not, the index is the cause."""
    ignored = "ERROR: Ignored the following versions that require a different python version: 1.25.0 Requires-Python >=3.9\n"
    found = ("ERROR: Could not find a version that satisfies the requirement torch==1.8.1+cu111 "
             "(from versions: 1.7.1, 1.8.0, 1.8.1, 1.9.0)\n")
    ids, _ = found_ids(ignored + found)
    assert ids[0] == "pip.pytorch_build_not_on_index" and "pip.requires_python" not in ids, ids
    _, fix, _ = _fix_of(ignored + found)
    assert "torch==1.8.1+cu111 with --index-url https://download.pytorch.org/whl/cu111" in fix["steps"][0], fix
    # The release itself missing from the list is another matter: this Python has no torch 1.9.1 at all.
    ids, _ = found_ids("ERROR: Could not find a version that satisfies the requirement torch==1.9.1+cu102 "
                       "(from versions: 1.11.0, 1.11.0+cpu, 1.11.0+cu113)\n")
    assert ids == ["pip.no_matching_distribution"], ids
    ids, _ = found_ids(ignored + "ERROR: Could not find a version that satisfies the requirement numpy==1.25.0 "
                       "(from versions: 1.24.3, 1.24.4)\n")
    assert ids[0] == "pip.requires_python", ids


def test_torch_extension_build_without_cl_on_path_gets_the_developer_prompt_first():
    log = ("C:\\env\\lib\\site-packages\\torch\\utils\\cpp_extension.py:381: UserWarning: Error checking compiler "
           "version for cl: [WinError 2] The system cannot find the file specified\n")
    _, fix, _ = _fix_of(log)
    assert fix["steps"][0].startswith("torch compiles extensions with the cl.exe it finds on PATH"), fix
    _, fix, _ = _fix_of("error: Microsoft Visual C++ 14.0 or greater is required.\n")
    assert not any("developer prompt" in step for step in fix["steps"]), fix


def test_flash_attn_builds_and_imports_are_read_from_its_setup_and_yolov12():
    """flash-attn's setup.py warns when nvcc is missing and refuses a toolkit older than its minimum; YOLOv12
    (February 2025) asserted on any failed import of it."""
    ids, _ = found_ids("  UserWarning: flash_attn was requested, but nvcc was not found.  Are you sure your environment "
                       "has nvcc available?\n")
    assert ids == ["extension.cuda_home_missing"], ids
    log = ("RuntimeError: FlashAttention is only supported on CUDA 11.6 and above.  Note: make sure nvcc has a "
           "supported version by running nvcc -V.\n")
    _, fix, _ = _fix_of(log)
    assert fix["steps"][0].startswith("flash-attn compiles with the nvcc") and "11.6" in fix["steps"][0], fix
    _, fix, _ = _fix_of("RuntimeError: The detected CUDA version (12.2) mismatches the version that was used to "
                        "compile PyTorch (11.8). Please make sure to use the same CUDA versions.\n")
    assert not any("flash-attn" in step for step in fix["steps"]), fix
    ids, _ = found_ids('AssertionError: import FlashAttention error! Please install FlashAttention first.\n')
    assert ids == ["flash_attn.import_failed"], ids
    # Later YOLOv12 and YOLOv13 fall back to torch's attention: a warning, not a failure.
    ids, _ = found_ids("FlashAttention is not available on this device. Using scaled_dot_product_attention instead.\n")
    assert ids == [], ids


def test_nccl_lines_from_a_container_named_by_its_id_get_host_networking_first():
    """Docker names a container by its ID unless it shares the host's network: a socket failure there is the
    container's own network. A real host name gets the interface steps only; shared memory failures keep theirs."""
    socket = "include/socket.h:311 WARN Socket creation failed : Address family not supported by protocol\n"
    _, fix, _ = _fix_of("e66aa18dc444:3171:3171 [0] " + socket)
    assert fix["steps"][0].startswith("The ranks ran in a container with a network of its own"), fix
    _, fix, _ = _fix_of("gpu-node-07:3171:3171 [0] " + socket)
    assert not any("container with a network of its own" in step for step in fix["steps"]), fix
    _, fix, _ = _fix_of("e66aa18dc444:3171:3171 [0] NCCL INFO Channel 00/02\n"
                        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:825, unhandled system error, NCCL version 2.7.8\n")
    assert "bridge network" not in fix["steps"][0], fix


def test_tensorrts_cuda_start_names_the_runtime_error_by_number():
    _, report = diagnose_json("[TRT] [W] CUDA initialization failure with error: 35. Please check your CUDA installation\n",
                              "--no-facts")
    assert [m["key"] for m in report["matches"]] == ["cuda.runtime_error/cudaErrorInsufficientDriver"], report


def test_a_missing_torchvision_by_its_metadata_and_a_jetsons_own_step():
    ids, _ = found_ids("importlib.metadata.PackageNotFoundError: torchvision\n")
    assert ids == ["module.torch_companion_missing"], ids
    ids, _ = found_ids("pkg_resources.DistributionNotFound: The 'torchvision>=0.9.0' distribution was not found and is "
                       "required by ultralytics\n")
    assert ids == ["module.torch_companion_missing"], ids
    _, fix, _ = _fix_of("nvidia-jetpack is already installed!\nimportlib.metadata.PackageNotFoundError: torchvision\n")
    assert fix["steps"][0].startswith("On a Jetson, torch is NVIDIA's JetPack build"), fix
    _, fix, _ = _fix_of("importlib.metadata.PackageNotFoundError: torchvision\n")
    assert not any("Jetson" in step for step in fix["steps"]), fix


def test_an_interactive_sessions_false_from_is_available():
    for session in (">>> import torch\n>>> torch.cuda.is_available()\nFalse\n>>> exit()\n",
                    "In [14]: torch.cuda.is_available()\nOut[14]: False\n"):
        ids, _ = found_ids(session)
        assert ids == ["torch.cuda_unavailable"], (session, ids)
    ids, _ = found_ids(">>> torch.cuda.is_available()\nTrue\n")
    assert ids == [], ids


def test_ultralytics_8_0_package_moves_are_read_from_its_released_wheels():
    """8.0.136 took ultralytics.yolo apart (aliases until 8.0.186, gone in 8.0.187); 8.0.0-8.0.6 had DEFAULT_CONFIG."""
    for log in ("ModuleNotFoundError: No module named 'ultralytics.yolo'\n",
                "ModuleNotFoundError: No module named 'ultralytics.yolo.data.dataloaders'\n"):
        _, report = diagnose_json(log, "--no-facts")
        assert [m["key"] for m in report["matches"]] == ["module.removed/ultralytics.yolo"], report
        assert "8.0.135 and older" in report["matches"][0]["fix"]["steps"][0]
    _, report = diagnose_json("ImportError: cannot import name 'DEFAULT_CONFIG' from 'ultralytics.yolo.utils'\n", "--no-facts")
    assert [m["key"] for m in report["matches"]] == ["python.api_removed/DEFAULT_CONFIG"], report
    # The ultralytics package itself missing is an ordinary missing package.
    _, report = diagnose_json("ModuleNotFoundError: No module named 'ultralytics'\n", "--no-facts")
    assert [m["id"] for m in report["matches"]] == ["module.missing"], report


def test_weights_of_a_newer_ultralytics_yolo_name_the_release_that_has_the_class():
    log = ("AttributeError: Can't get attribute 'C3k2' on <module 'ultralytics.nn.modules.block' from "
           "'/opt/conda/lib/python3.10/site-packages/ultralytics/nn/modules/block.py'>\n")
    _, fix, _ = _fix_of(log)
    assert fix["steps"][0].startswith("The installed ultralytics has no C3k2") and "C2PSA in 8.3.0" in fix["steps"][0], fix
    assert "ultralytics.__version__" in fix["commands"][0], fix
    ids, _ = found_ids("Can't get attribute 'C3k2'\n")
    assert ids == ["yolo.weights_code_mismatch"], ids
    # A YOLOv5 checkpoint in another checkout keeps the repository steps only.
    _, fix, _ = _fix_of("AttributeError: Can't get attribute 'C3' on <module 'models.common' from './yolov5/models/common.py'>\n")
    assert not any("ultralytics" in step for step in fix["steps"]) and not fix.get("commands"), fix


def test_a_checkpoints_ultralytics_module_is_the_weights_not_a_package_to_install():
    for log in ("ModuleNotFoundError: No module named 'ultralytics.nn.modules.block'; 'ultralytics.nn.modules' is not a package\n",
                "ModuleNotFoundError: No module named 'ultralytics.nn.extra_modules'\n"):
        ids, _ = found_ids(log)
        assert ids == ["yolo.weights_code_mismatch"], (log, ids)
    _, fix, _ = _fix_of("ModuleNotFoundError: No module named 'cv2'\n")
    assert "YOLOv9" not in fix["title"], fix


@pytest.mark.parametrize("extension", ["torch_scatter", "torch_sparse", "torch_cluster", "torch_spline_conv"])
def test_pyg_extensions_built_for_another_cuda(extension):
    """Each of PyG's four extensions carries the same import-time check (pytorch_scatter's __init__.py)."""
    message = ("RuntimeError: Detected that PyTorch and {0} were compiled with different CUDA versions. PyTorch has "
               "CUDA version 10.2 and {0} has CUDA version 11.0. Please reinstall the {0} that matches your PyTorch "
               "install.\n".format(extension))
    found, fix, report = _fix_of(message)
    assert found == "pyg.extension_cuda_mismatch" and "data.pyg.org/whl" in fix["steps"][0], fix
    assert report["matches"][0]["context"] == [
        "torch is built for CUDA 10.2; %s was compiled with CUDA 11.0" % extension], report


def test_a_build_without_a_compiler_is_told_from_one_without_nvcc():
    for log in ("    unable to execute 'gcc': No such file or directory\n",
                "error: command 'x86_64-linux-gnu-gcc' failed: No such file or directory\n",
                "FileNotFoundError: [Errno 2] No such file or directory: 'g++'\n"):
        ids, _ = found_ids(log)
        assert ids == ["build.compiler_missing"], (log, ids)
    for log in ("error: command '/usr/local/cuda/bin/nvcc' failed: No such file or directory\n",
                "FileNotFoundError: [Errno 2] No such file or directory: '/usr/local/cuda/bin/nvcc'\n"):
        ids, _ = found_ids(log)
        assert ids == ["extension.cuda_home_missing"], (log, ids)


def test_removed_apis_read_from_python_pip_setuptools_and_protobuf_releases():
    _, report = diagnose_json("AttributeError: module 'pkgutil' has no attribute 'ImpImporter'. Did you mean: 'zipimporter'?\n",
                              "--no-facts")
    assert [m["key"] for m in report["matches"]] == ["python.api_removed/ImpImporter"], report
    assert "pip 23.1.2 and setuptools 66.1" in report["matches"][0]["fix"]["steps"][0]
    _, report = diagnose_json("AttributeError: 'MessageFactory' object has no attribute 'GetPrototype'\n", "--no-facts")
    assert [m["key"] for m in report["matches"]] == ["python.api_removed/GetPrototype"], report
    # Another object's GetPrototype is not protobuf's.
    _, report = diagnose_json("AttributeError: 'Registry' object has no attribute 'GetPrototype'\n", "--no-facts")
    assert not any(m["key"] == "python.api_removed/GetPrototype" for m in report["matches"]), report



def test_pytorch_lightning_1_7_with_torchmetrics_1_is_read_even_from_a_cut_title():
    """pytorch_lightning 1.7's progress bar imports torchmetrics' private _compare_version, which torchmetrics 1.0
    moved away (both read in the released wheels); an issue title often drops the closing quote."""
    for log in ("ImportError: cannot import name '_compare_version' from 'torchmetrics.utilities.imports' "
                "(/usr/local/lib/python3.10/dist-packages/torchmetrics/utilities/imports.py)\n",
                "cannot import name '_compare_version' from 'torchmetrics.utilities.imports\n"):
        _, report = diagnose_json(log, "--no-facts")
        assert [m["key"] for m in report["matches"]] == ["python.api_removed/_compare_version"], report
        fix = report["matches"][0]["fix"]
        assert "pytorch_lightning to 1.8" in fix["steps"][0] and "'torchmetrics<1'" in fix["commands"][0], fix
    # Another module's _compare_version is not this change: the generic explanation stays.
    _, report = diagnose_json("ImportError: cannot import name '_compare_version' from 'mylib.utils'\n", "--no-facts")
    assert [m["key"] for m in report["matches"]] == ["python.import_name_missing"], report


def test_a_kernel_assertion_explains_the_cudnn_error_after_it():
    """Labels outside the classes fail a kernel's assertion; the CUDA context is then unusable and cuDNN's next call
    reports NOT_INITIALIZED. The assertion is the finding, not cuDNN."""
    log = ("/pytorch/aten/src/THCUNN/SpatialClassNLLCriterion.cu:106: cunn_SpatialClassNLLCriterion_updateOutput_kernel: "
           "block: [3,0,0], thread: [911,0,0] Assertion `t >= 0 && t < n_classes` failed.\n"
           "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED\n")
    ids, _ = found_ids(log)
    assert ids[0] == "cuda.device_assert" and "cudnn.status_error" not in ids, ids
    assert found_ids("RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED\n")[0] == ["cudnn.status_error"]


def test_an_extension_without_kernels_for_the_gpu_is_not_blamed_on_torch():
    """The no-kernel-image error from an extension's own source (glog's CHECK in its .cu file, or the launcher's
    printf after cudaGetLastError) is the extension's build; from torch's own sources it stays torch's."""
    for log in ("[F unbatched_triangle_distance_cuda.cu:441] Check failed: error == cudaSuccess (209 vs. 0)  "
                "no kernel image is available for execution on the device\n",
                "error in ms_deformable_im2col_cuda: no kernel image is available for execution on the device\n"):
        ids, _ = found_ids(log)
        assert ids == ["extension.no_kernel_image"], (log, ids)
        _, fix, _ = _fix_of(log)
        assert "TORCH_CUDA_ARCH_LIST" in fix["steps"][0], fix
    # Caffe and OpenPose print the CHECK without its file; error 48 is the same error in CUDA 10.0 and older
    log = "Check failed: error == cudaSuccess (48 vs. 0) no kernel image is available for execution on the device.\n"
    assert found_ids(log)[0] == ["extension.no_kernel_image"]
    _, fix, _ = _fix_of(log)
    assert fix["steps"][0].startswith("Error 48 is this error's number in CUDA 10.0 and older"), fix
    assert "-DCUDA_ARCH=Auto" in fix["steps"][1], fix
    log = ("F1205 10:41:07.123456  4242 im2col.cu:61] Check failed: error == cudaSuccess (48 vs. 0)  "
           "no kernel image is available for execution on the device\n")
    assert found_ids(log)[0] == ["extension.no_kernel_image"]
    assert "-DCUDA_ARCH=Auto" in _fix_of(log)[1]["steps"][1]
    log = "Check failed: error == cudaSuccess (209 vs. 0) no kernel image is available for execution on the device\n"
    _, fix, _ = _fix_of(log)
    assert "-DCUDA_ARCH=Auto" in fix["steps"][0] and not any("Error 48" in step for step in fix["steps"]), fix
    for log in ("RuntimeError: cuda runtime error (209) : no kernel image is available for execution on the device "
                "at /pytorch/aten/src/THC/generic/THCTensorMath.cu:35\n",
                "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"):
        ids, _ = found_ids(log)
        assert ids[0] == "torch.no_kernel_image" and "extension.no_kernel_image" not in ids, (log, ids)



def test_an_empty_arch_list_and_flash_attn_undefined_symbols_are_read_by_their_own_entries():
    """torch's builder with no GPU seen and no TORCH_CUDA_ARCH_LIST fails on its +PTX line. flash-attn's compiled part
    lies in site-packages itself: its undefined symbol is flash_attn.import_failed, which replaces the undefined-symbol
    family on that line and keeps YOLOv12's step for YOLOv12's message; another extension's stays the family's."""
    for log in ("    arch_list[-1] += '+PTX'\nIndexError: list index out of range\n",
                "-> 1606         arch_list[-1] += '+PTX'\n"):
        assert found_ids(log)[0] == ["extension.arch_list_empty"], log
    assert "TORCH_CUDA_ARCH_LIST" in _fix_of("arch_list[-1] += '+PTX'\n")[1]["steps"][0]
    flash = ("ImportError: /env/lib/python3.10/site-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: "
             "undefined symbol: _ZN3c105ErrorC2ENS_14SourceLocationE\n")
    assert found_ids(flash)[0] == ["flash_attn.import_failed"]
    _, fix, _ = _fix_of(flash)
    assert any("--no-cache-dir" in step for step in fix["steps"]), fix
    assert not any("YOLOv12" in step for step in fix["steps"]), fix
    _, fix, _ = _fix_of("import FlashAttention error! Please install FlashAttention first.\n")
    assert any("YOLOv12" in step for step in fix["steps"]), fix
    mmcv = ("ImportError: /env/lib/python3.7/site-packages/mmcv/_ext.cpython-37m-x86_64-linux-gnu.so: "
            "undefined symbol: _ZN3c105ErrorC1ENS_14SourceLocationERKSs\n")
    assert found_ids(mmcv)[0] == ["extension.undefined_symbol"]


def test_deepspeed_ops_collect_env_cpu_builds_and_onnxruntime_cpu_packages_are_read():
    """CUDA's no-kernel error under a frame of DeepSpeed's ops is DeepSpeed's op, not torch's; torch's environment
    report with no CUDA build and an NVIDIA GPU, or conda's CPU build string beside torch's False, is a CPU-only torch;
    a program's own 'CUDAExecutionProvider not available' is onnxruntime's CPU package; DeepSpeed's launcher with no
    device is torch not seeing CUDA."""
    deepspeed = ('  File "/env/lib/python3.9/site-packages/deepspeed/ops/adam/fused_adam.py", line 169, in step\n'
                 "RuntimeError: CUDA error: no kernel image is available for execution on the device\n")
    assert found_ids(deepspeed)[0] == ["deepspeed.op_no_kernel_image"]
    assert any("DS_BUILD_OPS" in step for step in _fix_of(deepspeed)[1]["steps"])
    # the same error under torch's own frames stays torch's
    torch_only = ('  File "/env/lib/python3.9/site-packages/torch/nn/modules/conv.py", line 443, in forward\n'
                  "RuntimeError: CUDA error: no kernel image is available for execution on the device\n")
    assert found_ids(torch_only)[0] == ["torch.no_kernel_image"]
    report = ("CUDA used to build PyTorch: Could not collect\nIs CUDA available: False\n"
              "GPU models and configuration: GPU 0: NVIDIA GeForce RTX 4080 Laptop GPU\nNvidia driver version: 551.86\n")
    assert found_ids(report)[0] == ["torch.cpu_only_run"]
    # a CPU build on a machine whose report lists no NVIDIA GPU is not a failure
    assert found_ids("CUDA used to build PyTorch: Could not collect\nIs CUDA available: False\n"
                     "GPU models and configuration: Could not collect\nNvidia driver version: Could not collect\n")[0] == []
    conda = "pytorch                   1.4.0               py3.7_cpu_0  [cpuonly]  pytorch\ncuda.is_available()==False\n"
    assert found_ids(conda)[0] == ["torch.cpu_only_run"]
    assert found_ids("pytorch                   1.4.0               py3.7_cpu_0  [cpuonly]  pytorch\n")[0] == []
    # on macOS a CPU-only torch is the only torch: no CUDA index to install from
    mac = ("Python 3.12.3 (main, Apr  9 2024) [Clang 15.0.0 (clang-1500.3.9.4)] on darwin\n"
           "pytorch                   2.4.1           cpu_generic_py312h1234567_0    conda-forge\n"
           "torch.cuda.is_available() returns False\n")
    _, fix, _ = _fix_of(mac)
    assert fix["steps"][0].startswith("On macOS, PyTorch publishes no CUDA build"), fix
    assert not any("--index-url" in command for command in fix["commands"]), fix
    assert any("--index-url" in command for command in _fix_of(report)[1]["commands"])
    ort = "⚠️  CUDAExecutionProvider not available — ONNX will fall back to CPU.\n"
    assert found_ids(ort)[0] == ["onnxruntime.cuda_provider_failed"]
    assert any("install onnxruntime-gpu" in step for step in _fix_of(ort)[1]["steps"])
    assert found_ids("RuntimeError: Unable to proceed, no GPU resources available\n")[0] == ["torch.cuda_unavailable"]


def test_the_container_toolkits_driver_helper_that_broke_off_is_read_in_both_wordings():
    """libnvidia-container's error_set_rpc writes 'failed to process request' when its driver helper (a forked process
    that loads NVML) stops answering; 'driver error' before 1.10, 'driver rpc error' since. WSL's Windows build comes
    first; persistence mode is a Linux host's step, left out where the log shows WSL."""
    old = ("docker: Error response from daemon: OCI runtime create failed: container_linux.go:370: starting container "
           "process caused: process_linux.go:459: container init caused: Running hook #0:: error running hook: exit "
           "status 1, stdout: , stderr: nvidia-container-cli: initialization error: driver error: failed to process "
           "request: unknown.\n")
    new = "nvidia-container-cli: initialization error: driver rpc error: failed to process request: unknown.\n"
    for log in (old, new):
        assert found_ids(log)[0] == ["container.driver_service_failed"], log
    _, fix, _ = _fix_of(old)
    assert fix["steps"][0].startswith("Under WSL 2"), fix
    assert any("persistence mode" in step for step in fix["steps"]), fix
    assert fix["commands"] == ["sudo nvidia-container-cli -k -d /dev/tty info"], fix
    _, fix, _ = _fix_of("Linux DESKTOP-1 5.15.153.1-microsoft-standard-WSL2 #1 SMP x86_64 GNU/Linux\n" + new)
    assert not any("persistence mode" in step for step in fix["steps"]), fix
    # the toolkit's other initialization errors keep their own entries
    assert found_ids("nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown.\n")[0] == [
        "container.driver_not_loaded"]
    assert found_ids("nvidia-container-cli: initialization error: WSL environment detected but no adapters were found: "
                     "unknown\n")[0] == ["container.wsl_no_gpu_adapter"]


def test_set_103s_readings_mamba_modules_pycuda_and_tritons_launcher():
    """Read where written: mamba-ssm leaves causal_conv1d_cuda None (1.2.0-2.2.4) or asserts (2.2.5 on); Environment
    Modules and Lmod name the module they could not find; PyCUDA says '<routine> failed: out of memory'; a
    cuda_utils that Windows cannot load is Triton's launcher, whose step shows for that module only."""
    assert found_ids("AttributeError: 'NoneType' object has no attribute 'causal_conv1d_bwd'\n")[0] == [
        "mamba.causal_conv1d_missing"]
    assert found_ids("pycuda._driver.MemoryError: cuMemAlloc failed: out of memory\n")[0] == ["cuda.oom"]
    # another PyCUDA error is not memory
    assert "cuda.oom" not in found_ids("pycuda._driver.LogicError: cuMemAlloc failed: invalid device context\n")[0]
    for log in ("cuda(4):ERROR:105: Unable to locate a modulefile for 'cuda/6.0'\n",
                'Lmod has detected the following error:  The following module(s) are unknown: "cuda/11.8"\n'):
        _, fix, report = _fix_of(log)
        assert report["matches"][0]["id"] == "hpc.module_unknown", report
        assert fix["commands"] == ["module avail cuda"], fix
    _, fix, _ = _fix_of("ImportError: DLL load failed while importing cuda_utils: The specified module could not be "
                        "found.\n")
    assert fix["steps"][0].startswith("cuda_utils is the module Triton compiles"), fix
    _, fix, _ = _fix_of("ImportError: DLL load failed while importing _ext: The specified module could not be found.\n")
    assert not any("Triton" in step for step in fix["steps"]), fix


def test_set_104s_readings_singularity_peers_cuda_path_and_kepler():
    """Read where written: Singularity and Apptainer's --nv warn when no driver library is in the host's loader cache
    ('NVIDIA' before 3.5, 'nv' since); a Singularity prompt or command puts --nv first among the ways to make torch
    see the GPU; CUDA's peer limit, torch's CUDA_PATH and Kepler's last indexes are said in the steps."""
    for warning in ("WARNING: Could not find any NVIDIA libraries on this host!\n",
                    "WARNING: Could not find any nv libraries on this host!\n"):
        assert found_ids(warning)[0] == ["container.no_host_driver"]
    _, fix, _ = _fix_of("$ singularity exec --nv ./c.sif python main.py\n"
                        "WARNING: Could not find any nv libraries on this host!\n")
    assert "nvliblist.conf" in fix["steps"][0], fix
    _, fix, _ = _fix_of("WARNING: Could not find any nv libraries on this host!\n")
    assert not any("nvliblist.conf" in step for step in fix["steps"]), fix  # no Singularity in the log
    lightning = "MisconfigurationException: You requested GPUs: [0]\n But your machine only has: []\n"
    _, fix, _ = _fix_of("Singularity> python3 train.py\n" + lightning)
    assert "--nv" in fix["steps"][0], fix
    _, fix, _ = _fix_of("$ python3 train.py\n" + lightning)
    assert not any("--nv" in step for step in fix["steps"]), fix
    _, fix, _ = _fix_of("RuntimeError: CUDA error: peer mapping resources exhausted\n")
    assert "at most eight peer connections" in fix["steps"][0], fix
    _, fix, _ = _fix_of("The detected CUDA version (12.3) mismatches the version that was used to compile\n"
                        "      PyTorch (11.8). Please make sure to use the same CUDA versions.\n")
    assert any("CUDA_PATH" in step for step in fix["steps"]), fix
    _, fix, _ = _fix_of("RuntimeError: CUDA error: no kernel image is available for execution on the device\n")
    assert any("TORCH_CUDA_ARCH_LIST=3.5" in step for step in fix["steps"]), fix
    _, fix, _ = _fix_of("RuntimeError: Found no NVIDIA driver on your system. Please check that you\n")
    assert fix["steps"][-1].startswith("On a machine without an NVIDIA GPU, run on the CPU"), fix
    from preflight.facts import platform
    markers = platform.conditions({"container_runtime": "singularity"}, None, from_log=True)
    assert "when_singularity" in markers and "when_containerd_runtime" not in markers, markers


def test_set_105s_readings_jax_on_the_cpu_cupy_not_built_and_what_pips_list_says():
    """Read where written: JAX's three wordings for settling on the CPU; CuPy 1-9's 'not correctly installed'; pip's
    '(from versions: ...)', where the torch 0.1.2 placeholder alone means no wheel for the interpreter and a list of
    only newer releases means a Python newer than the pinned release (or an index that starts later)."""
    for warning in ("UserWarning: No GPU/TPU found, falling back to CPU.\n",
                    "WARNING:absl:No GPU/TPU found, falling back to CPU. (Set TF_CPP_MIN_LOG_LEVEL=0 and rerun for "
                    "more info.)\n",
                    "An NVIDIA GPU may be present on this machine, but a CUDA-enabled jaxlib is not installed. "
                    "Falling back to cpu.\n"):
        assert found_ids(warning)[0] == ["jax.cuda_backend_failed"], warning
        _, fix, _ = _fix_of(warning)
        assert fix["steps"][0].startswith("JAX loaded no GPU backend"), fix
    _, fix, _ = _fix_of("CUDA backend failed to initialize: Unable to load CUDA.\n")
    assert not any("no GPU backend" in step for step in fix["steps"]), fix  # the plugin is there, and failed
    for prompt in ("C:\\Users\\me> python run.py\n", "(jax) D:\\work\\maxim>python run.py\n"):  # a cmd prompt too
        _, fix, _ = _fix_of(prompt + "No GPU/TPU found, falling back to CPU.\n")
        assert fix["steps"][0].startswith("JAX has no NVIDIA GPU support on native Windows"), fix
    assert found_ids("ImportError: CuPy is not correctly installed.\n")[0] == ["module.compiled_part_missing"]
    _, fix, _ = _fix_of("ImportError: CuPy is not correctly installed.\n")
    assert fix["steps"][0].startswith("CuPy's compiled core did not import"), fix
    _, fix, _ = _fix_of("ERROR: Could not find a version that satisfies the requirement torch===1.4.0 (from versions: "
                        "0.1.2, 0.1.2.post1, 0.1.2.post2)\n")
    assert fix["steps"][0].startswith("pip found only torch 0.1.2, the placeholder"), fix
    _, fix, _ = _fix_of("ERROR: Could not find a version that satisfies the requirement torch==2.5.1 (from versions: "
                        "2.6.0+cu124, 2.7.0)\n")
    assert fix["steps"][0].startswith("pip lists only releases newer than torch==2.5.1"), fix
    assert "(the oldest is 2.6.0+cu124)" in fix["steps"][0], fix
    for listed in ("2.4.0, 2.6.0", "none"):  # an older release is there, or nothing at all: no such step
        _, fix, _ = _fix_of("ERROR: Could not find a version that satisfies the requirement torch==2.5.1 (from "
                            "versions: %s)\n" % listed)
        assert not fix["steps"][0].startswith("pip lists only releases newer"), fix
    ids, _ = found_ids("ModuleNotFoundError: No module named 'simple_knn'\n$ pip install submodules\\simple-knn\n"
                       "ERROR: Could not find a version that satisfies the requirement submodulessimple-knn (from "
                       "versions: none)\n")
    assert ids[:2] == ["pip.no_matching_distribution", "module.missing"], ids



def test_set_106s_readings_numba_launches_lightning_flags_open3d_cub_and_thinc():
    """Read where written: Numba names the driver call, and a launch refused as an invalid value is the code's launch
    configuration (no finding); Lightning 2.0's removed Trainer flags in both of Python's wordings; Open3D's fallback
    to a CPU module it lacks; pytorch3d's CUB warning only beside a failed build; thinc's three refusals."""
    assert found_ids("numba.cuda.cudadrv.driver.CudaAPIError: Call to cuLaunchKernel results in "
                     "CUDA_ERROR_INVALID_VALUE\n")[0] == []
    ids, _ = found_ids("numba.cuda.cudadrv.driver.CudaAPIError: Call to cuMemcpyHtoD results in CUDA_ERROR_INVALID_VALUE\n")
    assert ids == ["cuda.runtime_error"], ids  # another call with the same result is still the family's row
    _, report = diagnose_json("numba.cuda.cudadrv.driver.CudaAPIError: [700] Call to cuCtxSynchronize results in "
                              "UNKNOWN_CUDA_ERROR\n", "--no-facts")
    assert report["matches"][0]["key"] == "cuda.runtime_error/cudaErrorIllegalAddress", report
    for said in ("TypeError: Trainer.__init__() got an unexpected keyword argument 'gpus'\n",
                 "TypeError: __init__() got an unexpected keyword argument 'gpus'\n"):
        _, report = diagnose_json(said, "--no-facts")
        assert report["matches"][0]["key"] == "python.api_removed/gpus", report
        _, fix, _ = _fix_of(said)
        assert "devices=N" in fix["steps"][0], fix
    for other in ("TypeError: Accelerator.__init__() got an unexpected keyword argument 'gpus'\n",
                  "TypeError: Trainer.__init__() got an unexpected keyword argument 'max_epoch'\n",
                  "AttributeError: module 'torch' has no attribute 'gpus'\n"):
        assert "python.api_removed" not in found_ids(other)[0], other
    ids, _ = found_ids("ModuleNotFoundError: No module named 'open3d.cpu'\n")
    assert ids == ["open3d.cuda_module_unloaded"], ids
    _, fix, _ = _fix_of("ModuleNotFoundError: No module named 'open3d.cpu'\n")
    assert "reinstall the NVIDIA driver" in fix["steps"][0] and "ImportWarning" in fix["commands"][-1], fix
    warning = ("UserWarning: The environment variable `CUB_HOME` was not found. NVIDIA CUB is required for "
               "compilation and can be downloaded from `https://github.com/NVIDIA/cub/releases`.\n")
    assert found_ids(warning)[0] == []  # a successful build prints it too
    assert found_ids(warning + "  ERROR: Failed building wheel for pytorch3d\n")[0][0] == "extension.cub_missing"
    assert found_ids("pytorch3d/csrc/nearest_neighbor_points/nearest_neighbor_points.cu(231): error: a pointer to a "
                     "bound function may only be used to call the function\n")[0] == ["torch.older_than_code"]
    for refusal in ("ValueError: GPU is not accessible. Was the library installed correctly?\n",
                    "ValueError: No GPU devices detected\n", "ValueError: Cannot use GPU, CuPy is not installed\n"):
        assert found_ids(refusal)[0] == ["thinc.gpu_unusable"], refusal
        _, fix, _ = _fix_of(refusal)
        assert "cupy.zeros" in fix["commands"][0], fix

def test_set_107s_readings_ctranslate2_compute_types_dgl_cpu_build_and_nccl_headers():
    """Read where written: CTranslate2's refusal names the compute type, and the table says where each one runs;
    DGL's CPU build in both device names; NCCL's header missing in Horovod's two wordings and gcc's, but not CMake's
    status line of a build that goes on without NCCL; cuda.h missing is the CUDA toolkit missing."""
    for compute, support in (("float16", "compute capability 7.0"), ("bfloat16", "compute capability 8.0"),
                             ("int8", "6.1"), ("int16", "Intel MKL")):
        said = ("ValueError: Requested %s compute type, but the target device or backend do not support efficient "
                "%s computation.\n" % (compute, compute))
        _, report = diagnose_json(said, "--no-facts")
        assert report["matches"][0]["key"] == "ctranslate2.compute_type_unsupported/" + compute, report
        assert support in report["matches"][0]["cause"], report["matches"][0]["cause"]
    assert found_ids("ValueError: Requested float8 compute type, but the target device or backend do not support "
                     "efficient float8 computation.\n")[0] == []  # a type the table does not know is no finding
    macos = ("  File \"/Library/Frameworks/Python.framework/Versions/3.11/lib/python3.11/site-packages/whisperx/asr.py\", "
             "line 289, in load_model\nValueError: Requested float16 compute type, but the target device or backend do "
             "not support efficient float16 computation.\n")
    _, fix, _ = _fix_of(macos)
    assert "int8" in fix["steps"][0] and len(fix["commands"]) == 1, fix  # no CUDA check on macOS
    for said in ("Check failed: allow_missing: Device API gpu is not enabled. Please install the cuda version of dgl.\n",
                 "DGLError: Check failed: allow_missing: Device API cuda is not enabled. Please install the cuda "
                 "version of dgl.\n"):
        assert found_ids(said)[0] == ["dgl.cpu_build"], said
        _, fix, _ = _fix_of(said)
        assert "Uninstall every DGL package" in fix["steps"][0], fix
    for said in ("horovod/common/ops/nccl_operations.h:22:10: fatal error: nccl.h: No such file or directory\n",
                 "error: NCCL 2.0 library or its later version was not found (see error above).\n",
                 "CMake Error at /usr/share/cmake-3.16/Modules/FindPackageHandleStandardArgs.cmake:146 (message):\n"
                 "  Could NOT find NCCL (missing: NCCL_INCLUDE_DIR NCCL_LIBRARY)\n"):
        assert found_ids(said)[0] == ["build.nccl_missing"], said
    assert found_ids("-- Could NOT find NCCL (missing: NCCL_INCLUDE_DIR NCCL_LIBRARY)\n")[0] == []
    assert found_ids("THCGeneral.h:9:18: fatal error: cuda.h: No such file or directory\n")[0] == [
        "extension.cuda_home_missing"]


def test_set_108s_readings_mps_unavailable_tensorflow_mixed_releases_dlib_without_cudnn_and_stale_jit_builds():
    """Read where written: torch's MPS refusal names a fixed macOS version, so the fix compares it and also names a
    process without a Metal device; Keras's generic_utils lacking its own release's function is two releases mixed;
    dlib's CMake without cuDNN; a JIT-built '_cuda' module lacking a function is another version's build."""
    for said in ("RuntimeError: The MPS backend is supported on MacOS 12.3+.Current OS version can be queried using "
                 "`sw_vers`\n",
                 "RuntimeError: The MPS backend is supported on macOS 14.0+. Current OS version can be queried using "
                 "`sw_vers`\n"):
        _, report = diagnose_json(said, "--no-facts")
        assert report["matches"][0]["key"] == "torch.mps_macos_too_old", report
        _, fix, _ = _fix_of(said)
        assert "no Metal device" in " ".join(fix["steps"]) and "sw_vers -productVersion" in fix["commands"], fix
    for said in ("AttributeError: module 'tensorflow.python.keras.utils.generic_utils' has no attribute "
                 "'populate_dict_with_module_objects'\n",
                 "AttributeError: module 'keras.utils.generic_utils' has no attribute 'populate_dict_with_module_objects'\n"):
        assert found_ids(said)[0] == ["tensorflow.keras_mismatch"], said
    assert found_ids("-- *** cuDNN V5.0 OR GREATER NOT FOUND.   ***\n")[0] == ["dlib.cudnn_not_found"]
    assert found_ids("-- Found cuDNN: /usr/local/cuda/lib64/libcudnn.so\n-- Enabling CUDA support for dlib.  DLIB WILL "
                     "USE CUDA\n")[0] == []
    said = "AttributeError: module 'gsplat_cuda' has no attribute 'fully_fused_projection_fwd'\n"
    _, report = diagnose_json(said, "--no-facts")
    assert report["matches"][0]["key"] == "extension.version_mismatch", report
    assert "gsplat_cuda has no fully_fused_projection_fwd" in report["matches"][0]["context"], report
    assert found_ids("AttributeError: module 'torch._C' has no attribute '_cuda_setDevice'\n")[0] != [
        "extension.version_mismatch"]  # torch's own CPU build is not an extension's stale build


def test_set_109s_readings_gpumd_checks_opencv_dnn_without_cuda_cumm_cpu_builds_nerfacc_and_the_distributions_nvcc():
    """Read where written: GPUMD's CHECK macro spreads a CUDA error over lines of its own; OpenCV's DNN module without
    a CUDA build (its warning, or an OpenCV older than the backend); OpenCV's CMake without cuDNN; cumm's tensorview
    without CUDA; NerfAcc without nvcc; distutils naming /usr/bin/nvcc, the distribution's compiler."""
    gpumd = ("CUDA Error:\n    File:       main_nep/dataset.cu\n    Line:       307\n    Error code: 222\n"
             "    Error text: the provided PTX was compiled with an unsupported toolchain.\n")
    _, report = diagnose_json(gpumd, "--no-facts")
    assert report["matches"][0]["key"] == "cuda.runtime_error/cudaErrorUnsupportedPtxVersion", report
    # the same macro for input errors names no CUDA error
    assert found_ids("Input Error:\n    File:       src/main.cu\n    Line:       42\n"
                     "    Error text: 'foo' is an invalid keyword.\n")[0] == []
    for said in ("[ WARN:0@1.673] global net_impl.cpp:174 setUpNet DNN module was not built with CUDA backend; "
                 "switching to CPU\n",
                 "    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_CUDA)\n"
                 "AttributeError: module 'cv2.dnn' has no attribute 'DNN_BACKEND_CUDA'\n"):
        assert found_ids(said)[0] == ["opencv.dnn_no_cuda_backend"], said
        _, fix, _ = _fix_of(said)
        assert "OPENCV_DNN_CUDA=ON" in fix["steps"][0] and "getBuildInformation" in fix["commands"][0], fix
    cmake = ("CMake Error at modules/dnn/CMakeLists.txt:53 (message):\n  DNN: CUDA backend requires cuDNN. Please "
             "resolve dependency or disable OPENCV_DNN_CUDA=OFF\n")
    assert found_ids(cmake)[0] == ["opencv.cmake_cudnn_missing"]
    assert found_ids("ValueError: /io/include/tensorview/tensor.h(171)\ndon't compiled with cuda\n")[0] == [
        "spconv.cumm_without_cuda"]
    # a CPU-only cumm and a mismatched pair are mended the same way: one fix, so the two cannot drift apart
    _, cpu_only_fix, _ = _fix_of("ValueError: /io/include/tensorview/tensor.h(171)\ndon't compiled with cuda\n")
    _, mismatch_fix, _ = _fix_of("ImportError: arg(): could not convert default argument 'timer: tv::CUDAKernelTimer' "
                                 "in method 'x' into a Python object\n")
    assert cpu_only_fix == mismatch_fix and "importlib.metadata" in cpu_only_fix["commands"][0], cpu_only_fix
    _, fix, _ = _fix_of("NerfAcc: No CUDA toolkit found. NerfAcc will be disabled.\n")
    assert "pre-built NerfAcc wheel" in fix["steps"][0], fix
    for said in ("error: command '/usr/bin/nvcc' failed with exit status 1\n",
                 "error: command '/usr/bin/nvcc' failed with exit code 255\n"):
        assert found_ids(said)[0] == ["extension.nvcc_too_old"], said
    # NVIDIA's own toolkit failing is no distribution nvcc
    assert found_ids("error: command '/usr/local/cuda/bin/nvcc' failed with exit status 1\n")[0] != [
        "extension.nvcc_too_old"]


def test_cutlass_attention_kernels_launched_on_another_architecture_are_read_in_both_wordings():
    """xformers' early kernel_forward.h printed the arch as compiled (750); the generated kernels since print a range
    and the arch over ten. Either way the attention build has no variant for this GPU."""
    for log, kernel_sm, built_sm in (("FATAL: this function is for sm80, but was built for sm750\n", "80", "750"),
                                     ("FATAL: kernel `fmha_cutlassF_f16_aligned_64x64_rf_sm80` is for sm80-sm100, "
                                      "but was built for sm121\n", "80", "121")):
        _, report = diagnose_json(log, "--no-facts")
        match = report["matches"][0]
        assert match["key"] == "attention.cutlass_kernel_for_other_gpu", report
        assert "the kernel is for sm%s; the build running is for sm%s" % (kernel_sm, built_sm) in match["context"], match

def test_a_python_the_system_manages_gets_a_virtual_environment():
    log = ("error: externally-managed-environment\n\n× This environment is externally managed\n"
           "╰─> To install Python packages system-wide, try apt install\n")
    ids, _ = found_ids(log)
    assert ids == ["pip.externally_managed"], ids
    _, fix, _ = _fix_of(log)
    assert fix["commands"][0].startswith("python3 -m venv"), fix


def test_triton_missing_for_torch_compile_and_not_on_pypi_for_windows():
    ids, _ = found_ids("torch._inductor.exc.TritonMissing: Cannot find a working triton installation. Either the package "
                       "is not installed or it is too old.\n")
    assert ids == ["torch.triton_missing"], ids
    _, fix, _ = _fix_of("PS C:\\work> pip install triton\nERROR: Could not find a version that satisfies the requirement "
                        "triton (from versions: none)\nERROR: No matching distribution found for triton\n")
    assert fix["steps"][0].startswith("PyPI's triton has wheels for Linux only"), fix
    _, fix, _ = _fix_of("ERROR: No matching distribution found for torch==1.10.0+cu121\n")
    assert "triton" not in fix["steps"][0], fix
    # xformers' own warning about Triton is no missing package.
    ids, _ = found_ids("A matching Triton is not available, some optimizations will not be enabled.\n"
                       "Error caught was: No module named 'triton'\n")
    assert ids == [], ids


def test_the_cxx_runtime_version_named_without_its_library():
    ids, _ = found_ids("Import Error: version `GLIBCXX_3.4.30' not found\n")
    assert ids == ["library.symbol_version"], ids


def test_the_main_guards_last_sentence_quoted_alone():
    ids, _ = found_ids('The "freeze_support()" line can be omitted if the program\n'
                       "        is not going to be frozen to produce an executable.\n")
    assert ids == ["multiprocessing.main_guard"], ids


def test_a_remote_code_models_import_check_names_the_packages_and_how_to_see_why():
    _, fix, report = _fix_of("ImportError: This modeling file requires the following packages that were not found in "
                             "your environment: flash_attn, einops. Run `pip install flash_attn einops`\n")
    assert report["matches"][0]["id"] == "transformers.remote_code_package_missing", report
    # the command prints the first name only: a captured list with spaces never reaches a shell line
    assert fix["commands"][0].endswith('-c "import flash_attn"'), fix
    assert "the packages it could not import: flash_attn, einops" in report["matches"][0]["context"], report


def test_transformers_wants_accelerate_in_the_interpreter_that_runs():
    log = ("  File \"E:\\ComfyUI-aki-v1.3\\python\\lib\\site-packages\\transformers\\modeling_utils.py\", line 3372, in "
           "from_pretrained\nImportError: Using `low_cpu_mem_usage=True` or a `device_map` requires Accelerate: "
           "`pip install 'accelerate>=0.26.0'`\n")
    _, fix, report = _fix_of(log)
    assert report["matches"][0]["id"] == "transformers.accelerate_missing", report
    assert "this transformers wants accelerate 0.26.0 or newer" in report["matches"][0]["context"], report
    assert fix["commands"][0].startswith("E:\\ComfyUI-aki-v1.3\\python\\python.exe -c"), fix


def test_a_model_type_transformers_does_not_know():
    _, fix, report = _fix_of("ValueError: The checkpoint you are trying to load has model type `qwen3` but Transformers "
                             "does not recognize this architecture.\n")
    assert report["matches"][0]["id"] == "transformers.model_type_unknown", report
    assert "the checkpoint's model type: qwen3" in report["matches"][0]["context"], report
    assert "qwen3 from 4.51.0" in fix["steps"][0], fix
    # An old release fails on the lookup itself, with a KeyError only.
    ids, _ = found_ids('    config_class = CONFIG_MAPPING[config_dict["model_type"]]\nKeyError: \'qwen2\'\n')
    assert ids == ["transformers.model_type_unknown"], ids


# --- torch's weights-only loader: a file that is no pickle is not a weights_only question -------

_WEIGHTS_ONLY_OPERAND = (
    "_pickle.UnpicklingError: Weights only load failed. In PyTorch 2.6, we changed the default value of the "
    "`weights_only` argument in `torch.load` from `False` to `True`. Re-running `torch.load` with `weights_only` set "
    "to `False` will likely succeed, but it can result in arbitrary code execution. Do it only if you got the file "
    "from a trusted source.\nPlease file an issue with the following so that we can make `weights_only=True` "
    "compatible with your use case: WeightsUnpickler error: Unsupported operand %d\n")


def test_an_operand_that_no_pickle_has_is_a_broken_file_and_one_pickle_has_is_weights_only():
    """The entry's list of bytes is Python's own: every byte pickletools has no opcode for reads as a file that is
    no checkpoint (weights_only=False would fail too), every opcode torch's restricted unpickler refuses as
    weights_only."""
    import pickletools

    opcodes = {ord(opcode.code) for opcode in pickletools.opcodes}
    for byte in range(256):
        ids, _ = found_ids(_WEIGHTS_ONLY_OPERAND % byte)
        expected = "torch.weights_only_load" if byte in opcodes else "checkpoint.unreadable"
        assert ids == [expected], (byte, ids)


def test_ultralytics_own_loader_in_the_traceback_gets_the_ultralytics_upgrade_first():
    log = ('  File "/usr/lib/python3.10/site-packages/ultralytics/nn/tasks.py", line 341, in attempt_load_one_weight\n'
           "    ckpt = torch.load(attempt_download(weight), map_location='cpu')  # load\n"
           "_pickle.UnpicklingError: Weights only load failed. This file can still be loaded, to do so you have two "
           "options, do those steps only if you trust the source of the checkpoint.\n")
    found, fix, _ = _fix_of(log)
    assert found == "torch.weights_only_load" and "pip install -U ultralytics" in fix["steps"][0], fix
    found, fix, _ = _fix_of(log.split("\n", 2)[2])
    assert found == "torch.weights_only_load" and not any("ultralytics" in step for step in fix["steps"]), fix


def test_real_torch_refusals_name_the_broken_file_and_the_object_checkpoint(torch_python, tmp_path):
    """torch itself loads a Git LFS pointer, an HTML page and a checkpoint holding an object under its default
    weights_only=True; diagnose reads each message it printed."""
    script = (
        "import argparse, sys, torch\n"
        "torch.save({'args': argparse.Namespace(lr=0.01)}, sys.argv[3])\n"
        "for path in sys.argv[1:4]:\n"
        "    try:\n"
        "        torch.load(path)\n"
        "    except Exception as error:\n"
        "        print('%s: %s' % (type(error).__name__, error))\n"
        "        print('=====')\n")
    pointer, page, checkpoint = tmp_path / "lfs.pt", tmp_path / "page.pt", tmp_path / "object.pt"
    pointer.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize 102400\n" % ("ab" * 32))
    page.write_text("<!DOCTYPE html>\n<html><body>Not Found</body></html>\n")
    completed = subprocess.run([torch_python, "-c", script, str(pointer), str(page), str(checkpoint)],
                               capture_output=True, text=True, timeout=300)
    messages = [part for part in completed.stdout.split("=====\n") if part.strip()]
    assert len(messages) == 3, completed.stdout + completed.stderr
    expected = ["checkpoint.unreadable", "checkpoint.unreadable", "torch.weights_only_load"]
    for message, wanted in zip(messages, expected):
        ids, _ = found_ids(message)
        assert ids == [wanted], (message, ids)


@pytest.mark.parametrize("numpy_type, built, run, expected", [
    ("ndarray", 88, 80, ["numpy.older_than_build"]),   # built with NumPy 1.20-1.22, run on 1.19 or older
    ("ndarray", 96, 88, ["numpy.older_than_build"]),   # built with 1.23 or newer, run on 1.20-1.22
    ("ufunc", 232, 216, ["numpy.older_than_build"]),   # built with 1.23-1.26, run on 1.21 or older
    ("ndarray", 80, 88, []),                            # a newer NumPy at run time: Cython only warns
    ("ufunc", 232, 240, []),
    ("dtype", 96, 88, ["numpy.abi_2x"]),                # built against NumPy 1.x, run on NumPy 2
])
def test_cythons_size_check_says_which_numpy_is_newer(numpy_type, built, run, expected):
    ids, _ = found_ids("ValueError: numpy.%s size changed, may indicate binary incompatibility. Expected %d from C "
                       "header, got %d from PyObject\n" % (numpy_type, built, run))
    assert ids == expected, ids


def _shadowing_case(folder, make, code):
    """Make the module in the way, run the import that trips on it, diagnose the error, and run the printed
    command in the same folder: what it prints."""
    culprit = make(folder)
    failed = subprocess.run([sys.executable, "-c", code], cwd=str(folder), capture_output=True, text=True, timeout=60)
    found, fix, _ = _fix_of(failed.stderr)
    assert found == "python.module_shadowed", (found, failed.stderr)
    ran = folder / "ran"
    if ran.exists():
        ran.unlink()
    command = fix["commands"][0].replace("python ", sys.executable + " ", 1)
    printed = subprocess.run(command, shell=True, cwd=str(folder), capture_output=True, text=True, timeout=60)
    assert not ran.exists(), "the printed command ran the module it looks for"
    return culprit, printed.stdout


def test_a_module_in_the_way_is_found_and_the_printed_command_names_it(tmp_path):
    """Python itself raises both shadowing errors: a utils.py file where the utils package is meant, and a utils/
    folder without __init__.py (a namespace package); diagnose names the shadowing, and its command, run in that
    folder, prints the culprit without running it."""
    def utils_file(folder):
        (folder / "utils.py").write_text("import pathlib\npathlib.Path('ran').touch()\n")
        return str(folder / "utils.py")

    def utils_folder(folder):
        (folder / "utils").mkdir()
        return str(folder / "utils")

    for name, make, code in (("file", utils_file, "import utils.datasets"),
                             ("folder", utils_folder, "from utils import TryExcept")):
        (tmp_path / name).mkdir()
        culprit, printed = _shadowing_case(tmp_path / name, make, code)
        assert culprit in printed, (name, printed)
