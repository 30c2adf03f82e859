"""Probes: NVML replay fidelity, host limits, the Python environment, torch's architectures."""

from __future__ import annotations

import filecmp
import json
import os
from pathlib import Path

import pytest
from conftest import NVML_FIXTURES, SHARED_NVML, nvml_fixture, run_cli, write_fixture

from preflight.errors import FixtureError
from preflight.probes import host, interpreter_script, nvml, nvml_replay, torch_arch
from preflight.probes.python_env import ProbeError

# --- NVML -------------------------------------------------------------------------------

@pytest.mark.skipif(not SHARED_NVML.is_dir(), reason="../shared is not next to this checkout")
def test_fixture_copies_match_the_shared_recordings():
    for shared in SHARED_NVML.glob("*.json"):
        assert filecmp.cmp(str(shared), str(NVML_FIXTURES / shared.name), shallow=False), shared.name


def test_replay_answers_as_the_recorded_h200():
    facts = nvml.probe(fixture_path=nvml_fixture("h200-driver580.json"))
    assert facts["init"]["status"] == "ok"
    assert facts["driver_version"] == "580.159.04" and facts["cuda_driver_version"] == "13.0"
    gpu = facts["gpus"][0]
    assert gpu["name"] == "NVIDIA H200" and gpu["compute_capability"] == "9.0"
    assert gpu["architecture"] == "hopper" and gpu["brand"] == "nvidia"
    assert gpu["memory"] == {"total": 150754820096, "free": 150109880320, "used": 0, "reserved": 644939776, "source": "v2"}
    assert gpu["ecc_uncorrected_volatile"] == 0 and gpu["retired_pages_pending"] is None
    assert "retired_pages_pending" in gpu["unsupported"]  # "not supported" is a value
    assert gpu["clock_event_reasons"] == {"mask": 1, "active": ["gpu_idle"]}
    assert gpu["pci_bus_id"] == "00000000:00:06.0" and gpu["uuid"].startswith("GPU-7c9e8d8e")


def test_replay_raises_the_real_pynvml_errors():
    pynvml = nvml.import_pynvml()
    binding = nvml_replay.ReplayBinding.from_file(pynvml, nvml_fixture("no-library.json"))
    with pytest.raises(pynvml.NVMLError_LibraryNotFound) as raised:
        binding.nvmlInit()
    assert raised.value.value == 12
    with pytest.raises(pynvml.NVMLError_Uninitialized):  # every call after a failed init
        binding.nvmlSystemGetDriverVersion()
    good = nvml_replay.ReplayBinding.from_file(pynvml, nvml_fixture("h200-driver580.json"))
    good.nvmlInit()
    handle = good.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_NotSupported):  # a call the recording does not list
        good.nvmlDeviceGetFanSpeed(handle)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        good.nvmlDeviceGetHandleByIndex(5)
    assert good.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU) == 32
    assert good.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2).reserved == 644939776


def test_processes_are_reported_with_their_memory(tmp_path):
    fixture = write_fixture(tmp_path, "rtx3060-12g-driver525.json", lambda d: d["devices"][0].update(
        nvmlDeviceGetComputeRunningProcesses={"ok": [{"pid": 4242, "usedGpuMemory": 3 * 2**30, "name": "python3"}]}))
    gpu = nvml.probe(fixture_path=fixture)["gpus"][0]
    assert gpu["processes"] == [{"pid": 4242, "used_memory": 3 * 2**30, "name": "python3"}]


@pytest.mark.parametrize("content, problem", [
    ("{", "not valid JSON"),
    ('{"format": "other", "init": {"ok": null}}', "'format' must be 'nvml-fixture/1'"),
    ('{"format": "nvml-fixture/1", "init": 3}', "'init' must be"),
    ('{"format": "nvml-fixture/1", "init": {"ok": null}, "devices": [{"nvmlDeviceGetName": "H200"}]}',
     "devices[0].nvmlDeviceGetName: an outcome must be"),
    ("[]", "the top level must be a JSON object"),
])
def test_bad_fixture_files_are_user_errors(tmp_path, content, problem):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(FixtureError, match=problem.replace("[", r"\[").replace("(", r"\(")):
        nvml_replay.load_fixture(str(path))
    completed = run_cli("check", "--nvml-fixture", str(path))
    assert completed.returncode == 2 and problem in completed.stderr and "Traceback" not in completed.stderr


def test_missing_fixture_file(tmp_path):
    completed = run_cli("check", "--nvml-fixture", str(tmp_path / "none.json"))
    assert completed.returncode == 2 and "no such file" in completed.stderr
    completed = run_cli("check", env={"PREFLIGHT_NVML_FIXTURE": str(tmp_path / "none.json")})
    assert completed.returncode == 2 and "none.json" in completed.stderr


# --- host ---------------------------------------------------------------------------------

def fake_root(tmp_path: Path, files: dict) -> str:
    for name, text in files.items():
        path = tmp_path / name.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return str(tmp_path)


MEMINFO = "MemTotal:       131072000 kB\nMemFree:        1000 kB\nMemAvailable:   120000000 kB\n"


def test_cgroup_v2_limits_count(tmp_path):
    root = fake_root(tmp_path, {
        "/proc/self/cgroup": "0::/job/42\n", "/proc/meminfo": MEMINFO,
        "/sys/fs/cgroup/job/42/memory.max": str(16 * 2**30), "/sys/fs/cgroup/job/42/memory.current": str(4 * 2**30),
        "/sys/fs/cgroup/job/42/cpu.max": "400000 100000\n", "/.dockerenv": "",
        "/etc/os-release": 'PRETTY_NAME="Ubuntu 24.04.3 LTS"\n',
    })
    facts = host.probe(root=root, environ={})
    assert facts["memory"]["total"] == 16 * 2**30
    assert facts["memory"]["available"] == 12 * 2**30
    assert facts["memory"]["physical_total"] == 131072000 * 1024
    assert facts["cpu"]["cgroup_quota"] == 4.0
    assert facts["cpu"]["count"] == min(4, os.cpu_count())
    assert facts["container"]["kind"] == "docker"
    assert facts["os"]["distribution"] == "Ubuntu 24.04.3 LTS"


def test_cgroup_v1_and_no_limit(tmp_path):
    root = fake_root(tmp_path, {
        "/proc/self/cgroup": "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n", "/proc/meminfo": MEMINFO,
        "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": str(8 * 2**30),
        "/sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes": str(2**30),
        "/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "-1",
        "/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000",
        "/proc/1/cgroup": "12:pids:/kubepods/burstable/pod1\n",
    })
    facts = host.probe(root=root, environ={"KUBERNETES_SERVICE_HOST": "10.0.0.1"})
    assert facts["memory"]["total"] == 8 * 2**30 and facts["memory"]["available"] == 7 * 2**30
    assert facts["cpu"]["cgroup_quota"] is None
    assert facts["container"]["kind"] == "kubernetes"


def test_unlimited_and_garbage_cgroup_files(tmp_path):
    root = fake_root(tmp_path, {"/proc/self/cgroup": "0::/\n", "/proc/meminfo": MEMINFO,
                                "/sys/fs/cgroup/memory.max": "max\n", "/sys/fs/cgroup/cpu.max": "garbage\n"})
    facts = host.probe(root=root, environ={})
    assert facts["memory"]["cgroup_limit"] is None and facts["memory"]["total"] == 131072000 * 1024
    assert facts["cpu"]["cgroup_quota"] is None
    assert facts["container"]["detected"] is False


def test_shm_here_is_read():
    facts = host.probe()
    assert facts["shm"]["total"] and facts["shm"]["total"] > 0
    assert facts["cpu"]["count"] >= 1 and facts["memory"]["total"] > 0


# --- Python environment -------------------------------------------------------------------------

def test_torch_version_file_is_parsed_never_run(tmp_path):
    marker = tmp_path / "ran"
    source = ("import os\nopen(%r, 'w').write('x')\n__version__ = '2.1.0+cu121'\n"
              "cuda: 'Optional[str]' = '12.1'\nhip = None\nfrom typing import Optional\n" % str(marker))
    values = interpreter_script._literal_assignments(source)
    assert values == {"__version__": "2.1.0+cu121", "cuda": "12.1", "hip": None}
    assert not marker.exists()


def test_python_probe_of_another_interpreter(fake_env):
    env = fake_env("yolov9", conda="yolov9")
    env.add_torch(version="2.5.1+cu124", cuda="12.4")
    env.add_package("opencv-python", "4.10.0.84", "cv2")
    completed = run_cli("facts", "--python", env.python, "--nvml-fixture", nvml_fixture("h200-driver580.json"))
    facts = json.loads(completed.stdout)
    python = facts["python"]
    assert python["executable"] == env.python
    assert python["conda"]["env_name"] == "yolov9" and python["conda"]["is_base"] is False
    assert python["torch"]["version"] == "2.5.1+cu124" and python["torch"]["cuda"] == "12.4"
    assert python["packages"]["opencv"] == {"dist": "opencv-python", "version": "4.10.0.84", "import": "cv2",
                                           "importable": True}
    assert python["packages"]["thop"]["importable"] is False


def test_probe_runs_under_old_pythons(tmp_path):
    """The probe script keeps to old syntax: it runs under every interpreter pyenv has here (3.6+)."""
    import subprocess

    ran = 0
    for version in ("3.6.15", "3.7.16", "3.8.18", "3.13.0"):
        python = Path("/root/.pyenv/versions/%s/bin/python" % version)
        if not python.exists():
            continue
        completed = subprocess.run([str(python), interpreter_script.__file__, json.dumps({"packages": [{"name": "pip"}]})],
                                   capture_output=True, text=True, timeout=60)
        assert completed.returncode == 0, completed.stderr
        facts = json.loads(completed.stdout)
        assert facts["version"] == version
        ran += 1
    if not ran:
        pytest.skip("no other interpreters installed")


def test_bad_python_option(tmp_path):
    completed = run_cli("check", "--python", str(tmp_path / "nope"))
    assert completed.returncode == 2 and "no such interpreter" in completed.stderr
    script = tmp_path / "notpython"
    script.write_text("#!/bin/sh\necho hello\n")
    script.chmod(0o755)
    completed = run_cli("check", "--python", str(script), "--select", "python.packages", "--format", "json")
    result = json.loads(completed.stdout)["results"][0]
    assert result["status"] == "error" and "printed something that is not the probe's answer" in result["message"]
    assert completed.returncode == 1


# --- torch architectures ----------------------------------------------------------------------------

def test_arch_flags_are_asked_once_and_cached(fake_env, tmp_path):
    log = tmp_path / "imports.log"
    env = fake_env()
    env.add_torch(import_log=log)
    args = ("check", "--python", env.python, "--select", "torch.arch", "--format", "json",
            "--nvml-fixture", nvml_fixture("h200-driver580.json"))
    first = json.loads(run_cli(*args).stdout)
    second = json.loads(run_cli(*args).stdout)
    assert first["results"][0]["status"] == second["results"][0]["status"] == "pass"
    assert len(log.read_text().split()) == 1  # torch imported once, in a helper process
    run_cli(*args, "--no-cache")
    assert len(log.read_text().split()) == 2


def test_arch_cache_is_keyed_by_the_installation(tmp_path, monkeypatch):
    facts = {"location": str(tmp_path), "version": "2.5.0", "extension": {"size": 1, "mtime_ns": 2}}
    other = dict(facts, version="2.6.0")
    assert torch_arch.cache_key(facts) != torch_arch.cache_key(other)
    (tmp_path / "cache").mkdir()
    monkeypatch.setenv("PREFLIGHT_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "cache" / "torch-arch-flags.json").write_text("{broken")
    with pytest.raises(ProbeError):  # a damaged cache is ignored; the probe itself fails on this fake python
        torch_arch.probe(facts, "/bin/false", timeout=5)


def test_a_binding_that_cannot_be_imported_is_reported_as_nvml_facts(tmp_path):
    """nvidia-ml-py broken or missing: nvml.init says so (live and replayed alike), never a crash."""
    (tmp_path / "pynvml.py").write_text("raise ImportError('simulated: no nvidia-ml-py here')\n")
    for extra in ([], ["--nvml-fixture", nvml_fixture("h200-driver580.json")]):
        completed = run_cli("check", "--select", "nvml.init", "--format", "json", *extra,
                            env={"PYTHONPATH": str(tmp_path)})
        result = json.loads(completed.stdout)["results"][0]
        assert completed.returncode == 1 and result["observed"] == "binding_missing", completed.stderr
        facts = json.loads(run_cli("facts", *extra, env={"PYTHONPATH": str(tmp_path)}).stdout)
        assert "simulated: no nvidia-ml-py here" in facts["nvml"]["init"]["message"]
