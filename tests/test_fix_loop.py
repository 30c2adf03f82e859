"""The fix loop, followed as a new user would: broken environments built in real venvs of Python 3.8, 3.11, 3.12
and 3.13, checked on the recorded H200, every command of the plan ("Fix first") run exactly as printed, through a
shell, against a stand-in of PyPI and PyTorch's indexes at their real host names (tests/package_standin.py), and
the check run again, until it passes. It must pass within two rounds, no printed command may fail, and nothing
that imported before a round may stop importing. ``preflight fix`` is followed the same way.

The rounds each environment took are printed (pytest -s shows them).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest
from conftest import FIXTURES, clean_env

from preflight.knowledge import package_index, torch_wheels

pytestmark = pytest.mark.slow

PYTHONS = ("3.8", "3.11", "3.12", "3.13")
H200 = "h200-driver580.json"  # driver 580.159.04 (CUDA 13.0), one H200 (sm_90)
YOLOV9_REQUIREMENTS = FIXTURES / "yolov9-requirements.txt"
MAX_ROUNDS = 2


def _interpreter(version: str) -> Optional[str]:
    """A CPython ``version`` on this machine (pyenv's, else python3.X on PATH)."""
    try:
        found = subprocess.run(["pyenv", "which", "python"], env=dict(os.environ, PYENV_VERSION=_pyenv(version)),
                               capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        found = ""
    return found or shutil.which("python%s" % version)


def _pyenv(version: str) -> str:
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = sorted(p.name for p in root.glob("%s.*" % version)) if root.is_dir() else []
    return candidates[-1] if candidates else version


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    pytest.importorskip("trustme", reason="the stand-in index's certificate needs trustme (pip install '.[test]')")
    import package_standin

    index = package_standin.Index(tmp_path_factory.mktemp("standin"), PYTHONS)
    yield index
    index.close()


@pytest.fixture(scope="module")
def base_venvs(tmp_path_factory):
    """One venv per Python, made once; each test works on a copy."""
    made = {}
    folder = tmp_path_factory.mktemp("venvs")
    for version in PYTHONS:
        python = _interpreter(version)
        if python is None:
            continue
        target = folder / ("py" + version)
        subprocess.run([python, "-m", "venv", str(target)], check=True, timeout=300, capture_output=True)
        made[version] = target
    return made


def fresh_venv(base_venvs, version: str, folder: Path) -> str:
    if version not in base_venvs:
        pytest.skip("Python %s is not on this machine (pyenv install %s): its fix loop is NOT TESTED here"
                    % (version, version))
    target = folder / "venv"
    shutil.copytree(str(base_venvs[version]), str(target), symlinks=True)
    return str(target / "bin" / "python")


def pip(python: str, env: Dict[str, str], *args: str) -> None:
    completed = subprocess.run([python, "-m", "pip", "install", *args], env=env, capture_output=True, text=True,
                               timeout=600)
    assert completed.returncode == 0, (args, completed.stdout[-2000:], completed.stderr[-2000:])


# --- the broken environments ------------------------------------------------------------------------------------

def _py(version: str) -> Tuple[int, int]:
    return tuple(int(part) for part in version.split("."))


def newest_release(name: str, line: Tuple[int, int], python: str) -> str:
    """The newest release of ``name`` in release line ``line`` with a Linux x86_64 wheel for ``python``."""
    found = [v for v, record in package_index.releases(name).items()
             if tuple(int(p) for p in v.split(".")[:2]) == line and package_index.has_wheel(record, python)]
    assert found, (name, line, python)
    return found[-1]


def companion_of(torch: str, python: str) -> str:
    """The newest torchvision release built for torch release ``torch`` with a wheel for ``python``."""
    found = [v for v, record in package_index.releases("torchvision").items()
             if record.get("requires_torch") and package_index.satisfies(record["requires_torch"], torch)
             and package_index.has_wheel(record, python)]
    assert found, (torch, python)
    return found[-1]


def newest_line_with_pair(python: str, oldest: Tuple[int, int] = (0, 0)) -> Tuple[int, int]:
    data = torch_wheels.catalog()
    lines = sorted(line for line, release in data.releases.items()
                   if line >= oldest and _py(python) in release.pythons
                   and torch_wheels.companion_release("torchvision", line, _py(python)))
    return lines[-1] if oldest == (0, 0) else lines[0]


def build_cpu_torch_beside_pypi_torchvision(python: str, venv: str, env: Dict[str, str]) -> List[str]:
    line = newest_line_with_pair(python)
    torch = newest_release("torch", line, python)
    pip(venv, env, "torch==%s+cpu" % torch, "--index-url", "https://download.pytorch.org/whl/cpu")
    pip(venv, env, "--no-deps", "torchvision==%s" % companion_of(torch, python))  # PyPI's: a CUDA build
    return []


def build_torch_without_torchvision(python: str, venv: str, env: Dict[str, str]) -> List[str]:
    wanted = torch_wheels.choose("580.159.04", "13.0", ["9.0"], python)
    torch = newest_release("torch", wanted.torch, python)
    pip(venv, env, "torch==%s+%s" % (torch, wanted.variant.tag), "--index-url", wanted.index_url)
    return []


def build_new_numpy_beside_an_old_torch(python: str, venv: str, env: Dict[str, str]) -> List[str]:
    line = newest_line_with_pair(python, oldest=(2, 2))  # 2.2, or the oldest with wheels for this Python
    variant = next(v for v in torch_wheels.catalog().variants
                   if line in v.releases and v.covers(line, [(9, 0)]) and v.cuda < (13, 0))
    torch = newest_release("torch", line, python)
    pip(venv, env, "torch==%s+%s" % (torch, variant.tag), "torchvision==%s+%s" % (companion_of(torch, python),
                                                                                 variant.tag),
        "--index-url", variant.index_url)
    pip(venv, env, "--upgrade", "numpy")  # the newest for this Python: 2.4 where it has wheels
    return []


def build_nothing(python: str, venv: str, env: Dict[str, str]) -> List[str]:
    return []


def build_yolov9_requirements_with_headless_opencv(python: str, venv: str, env: Dict[str, str]) -> List[str]:
    pip(venv, env, "opencv-python-headless")
    return ["--requirements", str(YOLOV9_REQUIREMENTS)]


ENVIRONMENTS = {
    "cpu-torch-beside-pypi-torchvision": build_cpu_torch_beside_pypi_torchvision,
    "torch-without-torchvision": build_torch_without_torchvision,
    "new-numpy-beside-an-old-torch": build_new_numpy_beside_an_old_torch,
    "nothing-installed": build_nothing,
    "yolov9-requirements-with-headless-opencv": build_yolov9_requirements_with_headless_opencv,
}


# --- following the plan -----------------------------------------------------------------------------------------

def check(venv: str, extra: List[str]) -> dict:
    completed = subprocess.run(
        [sys.executable, "-m", "preflight", "check", "--python", venv, "--nvml-fixture", H200, "--format", "json",
         *extra], capture_output=True, text=True, timeout=300, env=clean_env(), cwd=str(FIXTURES))
    assert completed.returncode in (0, 1), completed.stderr
    return json.loads(completed.stdout)


_IMPORTS = r"""
import importlib, json, os, sys, sysconfig
site = sysconfig.get_paths()["purelib"]
names = sorted({entry[:-3] if entry.endswith(".py") else entry for entry in os.listdir(site)
                if not entry.endswith((".dist-info", ".pth", ".egg-info")) and not entry.startswith("_")
                and entry not in ("pip", "setuptools", "__pycache__", "distutils-precedence.pth")})
ok = []
for name in names:
    try:
        importlib.import_module(name)
        ok.append(name)
    except Exception:
        pass
print(json.dumps(ok))
"""


def importable(venv: str) -> set:
    completed = subprocess.run([venv, "-c", _IMPORTS], capture_output=True, text=True, timeout=120)
    return set(json.loads(completed.stdout.strip().splitlines()[-1]))


def failing(report: dict) -> List[str]:
    return ["%s %s: %s" % (r["id"], r["status"], r["message"]) for r in report["results"]
            if r["status"] in ("fail", "error")]


def follow_the_plan(venv: str, env: Dict[str, str], extra: List[str]) -> Tuple[int, List[str]]:
    """(rounds until the check passed, every command run), running the plan's commands as printed."""
    ran: List[str] = []
    for round_number in range(MAX_ROUNDS + 1):
        report = check(venv, extra)
        if report["ok"]:
            return round_number, ran
        commands = [command for step in report["plan"]["steps"] for command in step["run"]]
        assert commands, "the check fails and the plan runs nothing: %s" % failing(report)
        if round_number == MAX_ROUNDS:
            break
        before = importable(venv)
        for command in commands:
            assert "uninstall" not in command, command
            completed = subprocess.run(command, shell=True, env=env, capture_output=True, text=True, timeout=900)
            assert completed.returncode == 0, "a printed command failed: %s\n%s\n%s" % (
                command, completed.stdout[-2000:], completed.stderr[-3000:])
            ran.append(command)
        stopped = before - importable(venv)
        assert not stopped, "stopped importing after round %d: %s" % (round_number + 1, sorted(stopped))
    pytest.fail("the check still fails after %d rounds: %s; ran: %s" % (MAX_ROUNDS, failing(report), ran))


@pytest.mark.parametrize("name", list(ENVIRONMENTS))
@pytest.mark.parametrize("version", PYTHONS)
def test_following_the_plan_reaches_a_passing_check(standin, base_venvs, tmp_path, version, name):
    venv = fresh_venv(base_venvs, version, tmp_path)
    env = standin.environment(clean_env())
    extra = ENVIRONMENTS[name](version, venv, env)
    rounds, ran = follow_the_plan(venv, env, extra)
    print("fix loop: Python %s, %s: passed after %d round%s (%d commands)"
          % (version, name, rounds, "" if rounds == 1 else "s", len(ran)))
    assert rounds <= MAX_ROUNDS
    installed = __import__("package_standin").installed(venv)
    assert not ({"opencv-python", "opencv-python-headless"} <= set(installed)), \
        "two distributions of cv2 installed: %s" % sorted(installed)
    assert not standin.refused, "pip asked for hosts the plan should not need: %s" % standin.refused


@pytest.mark.parametrize("version", PYTHONS)
def test_with_torch_absent_the_packages_line_pulls_no_torch(standin, base_venvs, tmp_path, version):
    venv = fresh_venv(base_venvs, version, tmp_path)
    env = standin.environment(clean_env())
    report = check(venv, [])
    step = next(s for s in report["plan"]["steps"] if "python.packages" in s["where"])
    pypi = [c for c in step["run"] if "--index-url" not in c and "--no-deps" not in c]
    assert len(pypi) == 1, step
    plan = tmp_path / "would-install.json"
    completed = subprocess.run("%s --dry-run --quiet --report %s" % (pypi[0], plan), shell=True, env=env,
                               capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-2000:]  # pip 22.2 and newer: every venv here has one
    would = {item["metadata"]["name"].lower() for item in json.loads(plan.read_text())["install"]}
    assert "numpy" in would, sorted(would)  # the line installs things: a dry run that saw nothing proves nothing
    assert "torch" not in would and not any(n.startswith(("nvidia-", "cuda-toolkit")) for n in would), sorted(would)


# --- preflight fix ------------------------------------------------------------------------------------------------

def fix(venv: str, env: Dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "preflight", "fix", "--python", venv, "--nvml-fixture", H200, *args],
                          capture_output=True, text=True, timeout=1800, env=env, stdin=subprocess.DEVNULL,
                          cwd=str(FIXTURES))


def test_fix_dry_run_changes_nothing_and_yes_installs_what_the_requirements_file_lacks(standin, base_venvs, tmp_path):
    venv = fresh_venv(base_venvs, "3.11", tmp_path)
    env = standin.environment(clean_env())
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("tqdm>=4.64.0\nPyYAML>=5.3.1\n")
    options = ["--requirements", str(requirements), "--select", "python.requirements"]
    before = __import__("package_standin").installed(venv)
    dry = fix(venv, env, *options, "--dry-run")
    assert dry.returncode == 1, dry.stdout + dry.stderr
    assert "--dry-run: nothing was changed" in dry.stdout and "'tqdm>=4.64.0' 'PyYAML>=5.3.1'" in dry.stdout
    assert __import__("package_standin").installed(venv) == before
    asked = fix(venv, env, *options)  # standard input is not a terminal: it cannot ask, so it changes nothing
    assert asked.returncode == 2 and "--yes" in asked.stderr
    done = fix(venv, env, *options, "--yes", "--format", "json")
    assert done.returncode == 0, done.stdout + done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["applied"] and [r["exit_code"] for r in outcome["ran"]] == [0]
    assert {"rule": "python.requirements", "subject": "system", "before": "fail", "after": "pass"} in \
        outcome["changes"]
    assert Path(outcome["log"]).is_file() and "Successfully installed" in Path(outcome["log"]).read_text()
    assert {"tqdm", "pyyaml"} <= set(__import__("package_standin").installed(venv))


def test_fix_follows_the_plan_on_an_empty_environment(standin, base_venvs, tmp_path):
    venv = fresh_venv(base_venvs, "3.12", tmp_path)
    env = standin.environment(clean_env())
    for attempt in range(1, MAX_ROUNDS + 1):
        done = fix(venv, env, "--yes")
        if done.returncode == 0:
            break
        assert done.returncode == 1 and "stopped" not in done.stdout, done.stdout + done.stderr
    assert done.returncode == 0, done.stdout + done.stderr
    print("fix loop: Python 3.12, nothing installed, preflight fix --yes: passed after %d run%s"
          % (attempt, "" if attempt == 1 else "s"))
    assert "Checked again:" in done.stdout and "python.packages" in done.stdout


def test_a_pip_step_that_fails_stops_the_plan_and_says_so(standin, base_venvs, tmp_path):
    venv = fresh_venv(base_venvs, "3.11", tmp_path)
    env = standin.environment(clean_env())
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("no-such-distribution-anywhere>=1\n")
    log = tmp_path / "pip.log"
    done = fix(venv, env, "--requirements", str(requirements), "--select", "python.requirements", "--yes",
               "--log", str(log))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "stopped" in done.stdout and "pip failed (exit 1)" in done.stdout and str(log) in done.stdout
    assert "No matching distribution found for no-such-distribution-anywhere" in log.read_text()
    again = fix(venv, env, "--requirements", str(requirements), "--select", "python.requirements", "--yes",
                "--log", str(log))
    assert again.returncode == 2 and "exists" in again.stderr  # a new log, never over a file
